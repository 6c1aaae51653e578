"""Base class for capeval's evaluate modules: validation before evaluate's Arrow round trip, optional
references, init options, and scoring through the registered capeval scorer.

A module script subclasses :class:`CaptionMetric` and sets ``scorer_name``: its info (:func:`module_info`) and its
docstring are built from the scorer's registration: its card (:mod:`capeval.core.module_card`), the inputs it needs
and its options.
"""

from __future__ import annotations

import inspect
import io
import os
import textwrap
from typing import Any, Dict, List, Optional, Sequence

import datasets
import evaluate
from PIL import Image

from capeval.core.errors import InputError
from capeval.core.inputs import as_list
from capeval.core.module_card import ModuleCard, has_module_card, module_card
from capeval.core.empty_captions import EmptyCaption, empty_caption_policy, validate_allowing_empty
from capeval.core.scoring import REQUIRED, ScorerSpec, get_scorer_spec

# a lossless format for each 8-bit mode that one stores exactly (mode, pixels and palette); PA, RGBX and HSV go as
# RGBA / RGB (RGBX exactly; PA and HSV as converted before the metric's resizing rather than after)
LOSSLESS_FORMATS = {**dict.fromkeys(("1", "L", "LA", "P", "RGB", "RGBA"), "PNG"), "CMYK": "IM", "YCbCr": "IM",
                    "LAB": "TIFF"}
# evaluate's own init options (``evaluate.load`` passes them, with the caller's other keywords, to the module)
EVALUATE_OPTIONS = tuple(name for name, parameter in inspect.signature(evaluate.EvaluationModule.__init__).parameters
                         .items() if name != "self" and parameter.kind is parameter.POSITIONAL_OR_KEYWORD)


def init_options_description(spec: ScorerSpec) -> str:
    """The init options of the module of scorer ``spec`` (its registry entry) for its ``_KWARGS_DESCRIPTION``: the
    scorer's options, their defaults and help (:meth:`capeval.core.scoring.ScorerSpec.option_list`), and
    ``empty_caption``."""
    lines = [f"    {o.name} ({'required' if o.default is REQUIRED else f'default {o.default!r}'}): {o.help}"
             for o in spec.option_list()]
    return "\n".join(["Init kwargs (`evaluate.load(..., **options)` or `scorer_options={...}`):", *lines,
                      "    empty_caption (default 'error'): 'error', 'skip' or a finite score for empty captions"])


def inputs_description(spec: ScorerSpec) -> str:
    """The ``inputs_description`` of the module of scorer ``spec``: its arguments (from the scorer's needs and the
    card), its init options (:func:`init_options_description`), and the card's ``Returns:`` and ``Examples:``
    blocks."""
    card = _card(spec)
    arguments = ["predictions (`list` of `str`): candidate captions."]
    if spec.images != "unused":
        arguments.append(f"images (`list`{', optional' if spec.images == 'optional' else ''}): one image per caption: "
                         f"PIL image, file path, numpy array, or `datasets.Image` dict.")
    if spec.references != "unused":
        arguments.append(f"references (`list` of `list` of `str`{', optional' if spec.references == 'optional' else ''}"
                         f"): references per caption, at least one each" + (f"; {card.references_note}"
                                                                           if card.references_note else "."))
    lines = ["", "Args:", *(_indented(argument) for argument in (*arguments, *card.arguments)),
             init_options_description(spec), "Returns:", textwrap.indent(card.returns.strip("\n"), "    "),
             "Examples:", textwrap.indent(card.examples.strip("\n"), "    "), ""]
    return "\n".join(lines)


def module_info(spec: ScorerSpec) -> evaluate.MetricInfo:
    """The ``MetricInfo`` of the module of scorer ``spec``: its card's description, citation and links, the
    features of the inputs it needs, and :func:`inputs_description`."""
    card = _card(spec)
    return evaluate.MetricInfo(description=card.description, citation=card.citation,
                               inputs_description=inputs_description(spec),
                               features=caption_features(images=spec.images != "unused",
                                                         references=spec.references != "unused"),
                               codebase_urls=list(card.codebase_urls), reference_urls=list(card.reference_urls))


def _card(spec) -> ModuleCard:
    if spec.card is None or not has_module_card(spec.card, spec.name):
        raise ValueError(f"scorer {spec.name!r} has no module card: register it with register_scorer(..., card=...)")
    return module_card(spec.card, spec.name)


def _indented(argument: str) -> str:
    """One argument of the ``Args:`` block, wrapped at 120 columns, continuation lines indented further."""
    return textwrap.fill(argument, 120, initial_indent="    ", subsequent_indent="        ", break_long_words=False,
                         break_on_hyphens=False)


def caption_features(*, images: bool = True, references: bool = True) -> List[datasets.Features]:
    """Feature sets: references as a list of strings (any length, possibly empty) or a single string; images
    undecoded (``{"bytes", "path"}``): the scorer decodes them with :func:`capeval.core.inputs.load_image`, as
    ``load_scorer`` and the CLI do (``datasets``' own decoder would apply EXIF orientation)."""
    base = {"predictions": datasets.Value("string")}
    if images:
        base["images"] = datasets.Image(decode=False)
    if not references:
        return [datasets.Features(base)]
    return [
        datasets.Features({**base, "references": datasets.Sequence(datasets.Value("string"))}),
        datasets.Features({**base, "references": datasets.Value("string")}),
    ]


def _lossless_bytes(image: Image.Image) -> bytes:
    """A validated 8-bit image as bytes that decode to the same mode and pixels (see ``LOSSLESS_FORMATS``)."""
    if image.mode not in LOSSLESS_FORMATS:
        image = image.convert("RGBA" if image.mode.endswith("A") else "RGB")
    buffer = io.BytesIO()
    image.save(buffer, format=LOSSLESS_FORMATS[image.mode])
    return buffer.getvalue()


def _arrow_image(given: Any, valid: Image.Image) -> Dict[str, Any]:
    """What goes through evaluate's Arrow table for one validated image: a path as a path (the scorer reads it
    again), given bytes as they are, and anything else (PIL images, arrays, tensors) as the validated pixels in
    lossless bytes: never the file a PIL image was once read from (it may have been edited since) nor a lossy
    re-encoding in its original format (``datasets`` would save a JPEG-decoded image as JPEG again)."""
    if isinstance(given, (str, os.PathLike)):
        return {"path": os.fspath(given), "bytes": None}
    if isinstance(given, dict) and given.get("bytes"):
        return {"path": None, "bytes": given["bytes"]}  # no path: datasets would keep the path and drop the bytes
    if isinstance(given, dict):
        return {"path": given["path"], "bytes": None}
    return {"path": None, "bytes": _lossless_bytes(valid)}


class _From:
    """Sample indices ``start, start + 1, ...`` (of a batch added after ``start`` samples)."""

    def __init__(self, start: int):
        self.start = start

    def __getitem__(self, i: int) -> int:
        return self.start + i


class CaptionMetric(evaluate.Metric):
    """An evaluate Metric backed by a registered capeval scorer (``scorer_name``).

    ``evaluate.load(path, **options)`` takes the scorer's options under the names ``load_scorer`` uses
    (``weights=``, ``device=``, ``batch_size=``, ``dtype=``, ``precision=``...; also as ``scorer_options={...}``),
    ``evaluate``'s own (``experiment_id=``, ``keep_in_memory=``...) and ``empty_caption`` (``"error"``, ``"skip"``
    or a finite score: the policy of :mod:`capeval.core.scoring`). Any other keyword is an :class:`InputError`
    listing the valid ones.
    """

    scorer_name: str = ""

    def __init_subclass__(cls, **kwargs):
        """A module's class gets its docstring from the card, as ``add_start_docstrings`` writes it."""
        super().__init_subclass__(**kwargs)
        spec = get_scorer_spec(cls.scorer_name) if cls.scorer_name else None
        if spec is not None and spec.card is not None and has_module_card(spec.card, spec.name):
            evaluate.utils.file_utils.add_start_docstrings(_card(spec).description, inputs_description(spec))(cls)

    def _info(self) -> evaluate.MetricInfo:
        return module_info(self.spec)

    def __init__(self, *, scorer_options: Optional[Dict[str, Any]] = None, empty_caption: EmptyCaption = "error",
                 **kwargs):
        evaluate_options = {k: kwargs.pop(k) for k in list(kwargs) if k in EVALUATE_OPTIONS}
        both = sorted(set(kwargs) & set(scorer_options or {}))
        if both:
            raise InputError(f"{self.scorer_name}: option(s) {both} given both directly and in scorer_options")
        self.scorer_options = {**kwargs, **(scorer_options or {})}  # the others: the factory's defaults
        self.spec = spec = get_scorer_spec(self.scorer_name)  # the door's one registry read
        unknown = sorted(set(self.scorer_options) - set(spec.options))
        if unknown:
            raise InputError(f"{self.scorer_name}: unknown option(s) {unknown}; it accepts {sorted(spec.options)}, "
                             f"empty_caption and evaluate's {sorted(EVALUATE_OPTIONS)}")
        # refused before any model loads (a fixed score for a corpus-level metric)
        self.empty_caption = empty_caption_policy(empty_caption, metric=self.scorer_name,
                                                  corpus_level=spec.is_corpus_level(self.scorer_options))
        self.scorer = None
        self._samples_added = 0
        super().__init__(**evaluate_options)

    def _download_and_prepare(self, dl_manager):
        self.scorer = self.spec.load(**self.scorer_options)

    def _prepare_inputs(self, predictions, references, images):
        """The shared validation step (errors name the sample's index over every batch added so far); then images
        as :func:`_arrow_image` stores them and references as lists (Arrow would split a bare string into
        characters; samples without references get an empty list, read back as "no references"). Empty captions
        pass when the ``empty_caption`` policy allows them."""
        policy = self.scorer or self.spec  # the scorer's own (EnsembEval's: its weights')
        scores_empty = self.spec.scorer_class().scores_empty_text
        valid, _ = validate_allowing_empty(predictions, images, references, images_needed=policy.images,
                                           references_needed=policy.references, metric=policy.name,
                                           indices=_From(self._samples_added), empty_caption=self.empty_caption,
                                           scores_empty=scores_empty)
        self._samples_added += len(valid)
        if valid.images is not None:
            images = [_arrow_image(image, pil) for image, pil in zip(as_list(images, "images"), valid.images)]
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

    def add(self, *, prediction=None, reference=None, images=None, **kwargs):
        """Add one sample (validated first, as a batch of one): ``images`` is its image."""
        return self.add_batch(predictions=None if prediction is None else [prediction],
                              references=None if reference is None else [reference],
                              images=None if images is None else [images], **kwargs)

    def compute(self, *, predictions=None, references=None, images=None, **kwargs):
        """Score ``predictions`` (with ``images`` and optional ``references``) and every batch added before; see
        the module description. The inputs are validated once, here (``evaluate``'s own ``compute`` would pass them
        through :meth:`add_batch` again)."""
        if predictions is not None or references is not None or images is not None:
            self.add_batch(predictions=predictions, references=references, images=images)
        self._samples_added = 0  # the next batch starts a new input
        return super().compute(**kwargs)

    def _compute(self, predictions: Sequence[str], references: Optional[Sequence] = None,
                 images: Optional[Sequence] = None, **options) -> Dict[str, Any]:
        if references is not None:
            references = [[r] if isinstance(r, str) else list(r) for r in references]
            if all(len(r) == 0 for r in references):
                references = None  # reference-free call
        return self.scorer.score(predictions, images=images, references=references, empty_caption=self.empty_caption,
                                 **options)
