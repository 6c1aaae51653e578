"""EXPERT (Kim et al., Findings of ACL 2025) as an evaluate metric, backed by capeval. Its description, citation, inputs
and examples are the card of the registered scorer ``expert`` (``capeval/judges/registration.py``)."""

# Import the module, not its classes: evaluate picks the first Metric subclass in this file's namespace.
from capeval import evaluate_module


class Expert(evaluate_module.CaptionMetric):
    scorer_name = "expert"
