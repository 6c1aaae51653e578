"""Image round-trip (Huang et al., 2024) as an evaluate metric, backed by capeval. Its description, citation, inputs and
examples are the card of the registered scorer ``image_roundtrip`` (``capeval/image_roundtrip/registration.py``)."""

# Import the module, not its classes: evaluate picks the first Metric subclass in this file's namespace.
from capeval import evaluate_module


class ImageRoundtrip(evaluate_module.CaptionMetric):
    scorer_name = "image_roundtrip"
