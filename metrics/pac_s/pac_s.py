"""PAC-S and RefPAC-S (Sarto et al., 2023) as an evaluate metric, backed by capeval. Its description, citation, inputs
and examples are the card of the registered scorer ``pac_s`` (``capeval/clip_s/registration.py``)."""

# Import the module, not its classes: evaluate picks the first Metric subclass in this file's namespace.
from capeval import evaluate_module


class PacS(evaluate_module.CaptionMetric):
    scorer_name = "pac_s"
