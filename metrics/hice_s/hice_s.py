"""HICE-S / RefHICE-S (Zeng et al., ACM MM 2024) as an evaluate metric, backed by capeval. Its description, citation,
inputs and examples are the card of the registered scorer ``hice_s`` (``capeval/hice_s/registration.py``)."""

# Import the module, not its classes: evaluate picks the first Metric subclass in this file's namespace.
from capeval import evaluate_module


class HiceS(evaluate_module.CaptionMetric):
    scorer_name = "hice_s"
