"""CAPTURE (Dong et al. 2024) as an evaluate metric, backed by capeval. Its description, citation, inputs and examples
are the card of the registered scorer ``capture`` (``capeval/detail/registration.py``)."""

# Import the module, not its classes: evaluate picks the first Metric subclass in this file's namespace.
from capeval import evaluate_module


class Capture(evaluate_module.CaptionMetric):
    scorer_name = "capture"
