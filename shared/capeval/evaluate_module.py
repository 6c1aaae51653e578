"""Base class for capeval's evaluate modules: validation before evaluate's Arrow round trip, optional
references, init options, and scoring through the registered capeval scorer.

A module script subclasses :class:`CaptionMetric`, sets ``scorer_name`` and implements ``_info()`` with
:func:`caption_features`.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import datasets
import evaluate

from capeval.core.inputs import as_list, validate_inputs
from capeval.core.scoring import get_scorer_spec, load_scorer


def caption_features(*, images: bool = True, references: bool = True) -> List[datasets.Features]:
    """Feature sets: references as a list of strings (any length, possibly empty) or a single string."""
    base = {"predictions": datasets.Value("string")}
    if images:
        base["images"] = datasets.Image()
    if not references:
        return [datasets.Features(base)]
    return [
        datasets.Features({**base, "references": datasets.Sequence(datasets.Value("string"))}),
        datasets.Features({**base, "references": datasets.Value("string")}),
    ]


class CaptionMetric(evaluate.Metric):
    """An evaluate Metric backed by a registered capeval scorer (``scorer_name``).

    Init options (``evaluate.load(path, weights=..., device=..., batch_size=..., dtype=...)``) and any
    scorer-specific ``scorer_options`` are passed to the scorer factory.
    """

    scorer_name: str = ""

    def __init__(self, *, weights: Optional[str] = None, device: str = "auto", batch_size: int = 64,
                 dtype: Optional[str] = None, scorer_options: Optional[Dict[str, Any]] = None, **kwargs):
        self.scorer_options = {"device": device, "batch_size": batch_size, "dtype": dtype, **(scorer_options or {})}
        if weights is not None:
            self.scorer_options["weights"] = weights
        self.scorer = None
        self._samples_added = 0
        super().__init__(**kwargs)

    def _download_and_prepare(self, dl_manager):
        self.scorer = load_scorer(self.scorer_name, **self.scorer_options)

    def _prepare_inputs(self, predictions, references, images):
        """The shared validation step (errors name the sample's index over every batch added so far); then paths and
        ``datasets.Image`` dicts pass on as they are, other images as the validated 8-bit PIL images, and references
        as lists (Arrow would split a bare string into characters)."""
        if predictions is None:
            return None, None, None
        spec = get_scorer_spec(self.scorer_name)
        start = self._samples_added
        n = len(predictions) if hasattr(predictions, "__len__") else 0
        valid = validate_inputs(predictions, images, references, images_needed=spec.images,
                                references_needed=spec.references, metric=spec.name,
                                indices=range(start, start + n))
        self._samples_added += len(valid)
        if valid.images is not None:
            images = [image if isinstance(image, (str, dict)) else pil
                      for image, pil in zip(as_list(images, "images"), valid.images)]
        references = valid.references
        if references is None and "references" in self._feature_names():
            references = [[] for _ in valid.predictions]
        return valid.predictions, references, images

    def _module_inputs(self, predictions, references, images) -> Dict[str, Any]:
        inputs = {"predictions": predictions}
        if "references" in self._feature_names():
            inputs["references"] = references
        if "images" in self._feature_names():
            inputs["images"] = images
        return inputs

    def add_batch(self, *, predictions=None, references=None, images=None, **kwargs):
        """Add a batch of inputs (validated first); ``compute()`` scores everything added."""
        predictions, references, images = self._prepare_inputs(predictions, references, images)
        return super().add_batch(**self._module_inputs(predictions, references, images), **kwargs)

    def compute(self, *, predictions=None, references=None, images=None, **kwargs):
        """Score ``predictions`` (with ``images`` and optional ``references``); see the module description."""
        predictions, references, images = self._prepare_inputs(predictions, references, images)
        self._samples_added = 0  # the next compute() starts a new input
        if predictions is None:
            return super().compute(**kwargs)
        return super().compute(**self._module_inputs(predictions, references, images), **kwargs)

    def _compute(self, predictions: Sequence[str], references: Optional[Sequence] = None,
                 images: Optional[Sequence] = None, **options) -> Dict[str, Any]:
        if references is not None:
            references = [[r] if isinstance(r, str) else list(r) for r in references]
            if all(len(r) == 0 for r in references):
                references = None  # reference-free call
        return self.scorer.score(predictions, images=images, references=references, **options)
