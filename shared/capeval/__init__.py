"""capeval: faithful, fast image-captioning metrics for the Hugging Face `evaluate` ecosystem.

    from capeval import load_scorer
    load_scorer("clip_s").score(predictions, images, references)
"""

from capeval.core.errors import ConversionError, InputError, ModelNotAvailableError, TruncationWarning
from capeval.core.version import __version__

__all__ = ["__version__", "ConversionError", "InputError", "ModelNotAvailableError", "TruncationWarning", "iter_records",
           "load_scorer", "scorers"]


def __getattr__(name: str):
    """The public API, imported on first use (``import capeval`` stays light)."""
    if name in ("load_scorer", "scorers"):
        from capeval.core import scoring

        return getattr(scoring, name)
    if name == "iter_records":
        from capeval.core.record_sources import iter_records

        return iter_records
    raise AttributeError(f"module 'capeval' has no attribute {name!r}")
