"""CLIP-S and RefCLIP-S (Hessel et al., 2021) as an evaluate metric, backed by capeval. Its description, citation,
inputs and examples are the card of the registered scorer ``clip_s`` (``capeval/clip_s/registration.py``)."""

# Import the module, not its classes: evaluate picks the first Metric subclass in this file's namespace.
from capeval import evaluate_module


class ClipS(evaluate_module.CaptionMetric):
    scorer_name = "clip_s"
