"""capeval: faithful, fast image-captioning metrics for the Hugging Face `evaluate` ecosystem."""

from capeval.core.errors import InputError, ModelNotAvailableError
from capeval.core.version import __version__

__all__ = ["__version__", "InputError", "ModelNotAvailableError"]
