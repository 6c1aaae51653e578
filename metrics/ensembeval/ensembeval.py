"""EnsembEval (Berger et al., 2025): a learned linear ensemble of caption metrics, as an evaluate metric. Its
description, citation, inputs and examples are the card of the registered scorer ``ensembeval``
(``capeval/ensembeval/registration.py``)."""

# Import the module, not its classes: evaluate picks the first Metric subclass in this file's namespace.
from capeval import evaluate_module


class EnsembEval(evaluate_module.CaptionMetric):
    scorer_name = "ensembeval"
