"""capeval: faithful, fast image-captioning metrics for the Hugging Face `evaluate` ecosystem."""

__version__ = "0.1.0"

from capeval.errors import InputError, ModelNotAvailableError  # noqa: E402

__all__ = ["__version__", "InputError", "ModelNotAvailableError"]
