"""CAPTURE (Dong et al. 2024, package ``capture-metric`` 0.1.13) on already-parsed scene graphs.

A text enters as the FACTUAL parser's output, one graph text per sentence (``"( car , is , red ) , ( car , on ,
street )"``: the decoded output through :func:`capeval.functional.factual_graph.graph_text`, as the official parser
returns it), and the lemmatised nouns of the text. WordNet and the sentence encoder are injected:

- ``lemmatize(word, pos)``: NLTK's ``WordNetLemmatizer().lemmatize`` (``pos`` is ``"n"`` or ``"a"``);
- ``synonyms(word)``: the lemma names of every WordNet synset of ``word`` (``wordnet.synsets(word)``, all parts of
  speech; a multi-word phrase arrives joined by ``_``);
- ``encode(texts)``: an ``[n, d]`` array of sentence embeddings (all-mpnet-base-v2 in the paper), normalised here.

The computation is the official one:

1. **Merging** (:func:`capture_elements`): objects are the entity heads lemmatised as nouns; attributes are
   lemmatised as adjectives, those containing ``" of"`` dropped, grouped by their object; relations are
   ``(subject head, relation, object head)`` with both heads lemmatised as nouns.
2. **Filters**: an object is kept when it is not a stop word (:data:`STOP_WORDS`, the official list) and it, or
   each of its space-separated pieces, is a noun of the text; attributes are kept when their object passes the
   noun test; relations when subject and object both pass it (stop words are applied to objects only).
3. **Matching** (:func:`capture_pair`), per kind: exact matches; then synonym matches (two phrases match when one
   contains the other as a substring or their WordNet synonym sets intersect; a relation matches when its three
   parts do); then the soft stage on what is left: cosine similarities of the normalised embeddings, the sum of
   the row maxima added to the caption's matches and the sum of the column maxima to the references'.
4. ``P = matches_caption / (n_caption + eps)``, ``R = matches_reference / (n_reference + eps)``,
   ``F1 = 2PR / (P + R + eps)`` with ``eps = 1e-6``; the score is ``(α F1_obj + β F1_attr + γ F1_rel) /
   (α + β + γ)``; a caption's score is the mean over its references (:func:`capture_sample`).

**Order of the greedy stages.** The exact and synonym stages take, for each caption element in turn, the first
reference element still free. The official code iterates Python sets (objects, the attributes of one object,
relations), so which pairs the synonym stage forms can change with ``PYTHONHASHSEED``. Here the elements are in a
fixed order: objects and relations sorted, attributes in the official order of their objects (the first entity
carrying an attribute first) and sorted within an object. The official value equals this one whenever its own
order forms the same number of synonym pairs.

**An empty or unparsable text** (no sentence, a parse without triplets, nothing left after the filters) has no
elements: every precision, recall and F1 involving it is 0, as in the official code, whose ``eps`` keeps every
division defined; two empty texts score 0, not 1.

**Numerics.** Similarities are computed in float64 from the injected embeddings (the official code keeps the
encoder's float32); P/R/F1 agree with it within 1e-6. The means over references are plain float64 means (under
NumPy 2 the official ``compute_score`` raises a ``TypeError`` when a caption's per-reference values mix float32
and Python floats, and its report rounds percentages to two decimals).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Callable, Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np

EPS = 1e-6
KINDS = ("objects", "attributes", "relations")  # what CAPTURE matches, in the order of its weights α, β, γ
ALPHA, BETA, GAMMA = 0.5, 0.5, 0.2
NOUN, ADJECTIVE = "n", "a"  # WordNet's part-of-speech codes, as ``lemmatize`` receives them
ATTRIBUTE_PREDICATE = "is"

# capture-metric 0.1.13's ``stop_words_list`` (317 words, as written there): objects never counted
STOP_WORDS: FrozenSet[str] = frozenset({
    "background", "scene", "object", "image", "element", "text", "landscape", "setting", "space", "foreground", "life",
    "backdrop", "nature", "design", "atmosphere", "surface", "position", "structure", "hue", "picture", "color",
    "frame", "charm", "area", "attention", "presence", "attire", "surroundings", "world", "distance", "location",
    "ambiance", "gaze", "tone", "figure", "field", "center", "day", "air", "pattern", "tranquility", "view", "photo",
    "story", "activity", "expression", "item", "time", "composition", "viewer", "environment", "horizon", "moment",
    "narrative", "place", "spectator", "architecture", "texture", "anticipation", "content", "detail", "back",
    "cityscape", "motion", "top", "comfort", "display", "journey", "description", "action", "Atmosphäre", "expanse",
    "glow", "adventure", "individual", "joy", "city life", "interior", "character", "night", "angle", "perspective",
    "stance", "history", "shape", "energy", "spirit", "match", "movement", "game", "exterior", "beauty", "event",
    "accent", "focus", "bustle", "touch", "camaraderie", "aesthetic", "vantage point", "excitement", "direction",
    "warmth", "harmony", "border", "right", "terrain", "mid-air", "palette", "message", "interaction", "workspace",
    "spectacle", "base", "name", "theme", "mood", "solitude", "left", "culture", "grandeur", "facade", "boundary",
    "white", "information", "illustration", "row", "balance", "creativity", "layout", "style", "simplicity",
    "body language", "photograph", "celebration", "hustle", "work", "form", "court", "edge", "chaos", "posture",
    "elegance", "handle", "tableau", "short", "clothing", "context", "depth", "uniform", "rhythm", "everyday life",
    "experience", "reflection", "identity", "pleasure", "marvel", "weather", "neighborhood", "track", "urban life",
    "functionality", "silhouette", "aura", "pose", "outdoors", "conversation", "imagination", "surrounding",
    "countertop", "serenity", "side", "scenery", "atmosfere", "peak", "traffic", "arrangement", "mystery", "thrill",
    "essence", "formation", "skill", "outline", "presentation", "community", "darkness", "demeanor", "section", "group",
    "positioning", "scale", "memory", "living space", "front", "emotion", "task", "travel", "freedom", "feature",
    "curiosity", "decor", "performance", "dining experience", "purpose", "resilience", "passion", "Moment", "art",
    "wilderness", "effect", "urban setting", "power", "him", "vibe", "placement", "destination", "wild", "vastness",
    "determination", "layer", "heritage", "contrast", "innocence", "beauté", "decoration", "infrastructure", "urban",
    "ensemble", "page", "countryside", "winter", "material", "intersection", "subject", "stillness", "appeal", "height",
    "play", "tall", "modernity", "connection", "natural", "exploration", "coexistence", "bottom", "tension", "outdoor",
    "Nature", "natural beauté", "technology", "imagery", "reality", "relaxation", "spot", "point", "show",
    "significance", "personality", "her", "snapshot", "viewpoint", "entrance", "rim", "operation", "intensity",
    "nostalgia", "afternoon", "it", "stride", "case", "key", "component", "pant", "collage", "speed", "promise",
    "atmosphère", "vibrancy", "remote", "teamwork", "site", "turn", "end", "network", "love", "flavor", "strap", "era",
    "marking", "music", "confidence", "knowledge", "appearance", "condition", "routine", "team", "role", "unity",
    "bloom", "ecosystem", "topping", "enclosure", "order", "step", "flight", "ingredient", "diversity", "tip",
    "universe", "breakfast", "middle", "treat", "companionship", "essential", "red", "symbolism", "interpretation",
})

Lemmatize = Callable[[str, str], str]
Synonyms = Callable[[str], AbstractSet[str]]
Encode = Callable[[Sequence[str]], np.ndarray]
Relation = Tuple[str, str, str]


@dataclass(frozen=True)
class Entity:
    """An entity of one sentence's graph: its head, its quantity (digits or ``""``) and its attributes."""

    head: str
    quantity: str
    attributes: FrozenSet[str]


@dataclass(frozen=True)
class SentenceGraph:
    """One sentence's graph as FACTUAL's ``graph_string_to_object`` builds it; relations index ``entities``."""

    entities: Tuple[Entity, ...]
    relations: Tuple[Tuple[int, str, int], ...]


def read_sentence_graph(graph_text: str) -> SentenceGraph:
    """The graph object of one parser output, by the official rules.

    The text is split into facts at ``") ,"``. A fact of three comma-separated fields is ``(subject, predicate,
    object)``: predicate ``is`` with an all-digit object sets the quantity, ``is`` otherwise adds an attribute,
    any other predicate a relation. When the text has several facts, the others are skipped; when it has one, its
    first field becomes an entity (so an empty text gives one entity named ``""``).
    """
    index: Dict[str, int] = {}  # head -> entity index, in order of first appearance
    quantities: Dict[str, str] = {}
    attributes: Dict[str, Set[str]] = {}
    relations: List[Tuple[int, str, int]] = []

    def entity(name: str) -> int:
        if name not in index:
            index[name] = len(index)
            attributes[name] = set()
        return index[name]

    facts = graph_text.strip().split(") ,")
    for fact in facts:
        fields = [field.strip() for field in fact.strip().strip("()").split(",")]
        if len(fields) != 3:
            if len(facts) == 1:
                entity(fields[0])
            continue
        subject, predicate, obj = fields
        subject_index = entity(subject)
        if predicate != ATTRIBUTE_PREDICATE:
            relations.append((subject_index, predicate, entity(obj)))
        elif obj.isdigit():
            quantities[subject] = obj
        else:
            attributes[subject].add(obj)
    return SentenceGraph(tuple(Entity(h, quantities.get(h, ""), frozenset(attributes[h])) for h in index),
                         tuple(relations))


def text_nouns(tagged_tokens: Iterable[Tuple[str, str]], lemmatize: Lemmatize) -> FrozenSet[str]:
    """The text's nouns as the official filter sees them: tokens tagged ``NN*``, lemmatised as nouns."""
    return frozenset(lemmatize(token, NOUN) for token, tag in tagged_tokens if tag.startswith("NN"))


@dataclass(frozen=True)
class CaptureElements:
    """What CAPTURE compares of one text, in the fixed order of the greedy stages (see the module docstring)."""

    objects: Tuple[str, ...]
    attributes: Tuple[Tuple[str, str], ...]  # (object, attribute)
    relations: Tuple[Relation, ...]


def _names_nouns(name: str, nouns: AbstractSet[str]) -> bool:
    return name in nouns or all(piece in nouns for piece in name.split(" "))


def capture_elements(sentence_graphs: Sequence[str], nouns: AbstractSet[str], lemmatize: Lemmatize, *,
                     stop_words: AbstractSet[str] = STOP_WORDS) -> CaptureElements:
    """Merge the graphs of a text's sentences and filter them (official steps 1–2).

    ``sentence_graphs``: the parser's output text for each sentence; ``nouns``: :func:`text_nouns` of the whole
    text; ``stop_words``: objects to ignore (``frozenset()`` for the official ``stop_words=False``).
    """
    objects: Set[str] = set()
    attributes: Dict[str, Set[str]] = {}  # insertion order = the official attribute order of objects
    relations: Set[Relation] = set()
    for graph in map(read_sentence_graph, sentence_graphs):
        heads = [lemmatize(entity.head, NOUN) for entity in graph.entities]
        for head, entity in zip(heads, graph.entities):
            objects.add(head)
            for attribute in (lemmatize(a, ADJECTIVE) for a in entity.attributes):
                if " of" not in attribute:
                    attributes.setdefault(head, set()).add(attribute)
        relations.update((heads[subject], relation, heads[obj]) for subject, relation, obj in graph.relations)
    return CaptureElements(
        objects=tuple(sorted(o for o in objects if o not in stop_words and _names_nouns(o, nouns))),
        attributes=tuple((o, a) for o, values in attributes.items() if _names_nouns(o, nouns) for a in sorted(values)),
        relations=tuple(sorted(r for r in relations if _names_nouns(r[0], nouns) and _names_nouns(r[2], nouns))),
    )


def similar_phrases(a: str, b: str, synonyms: Synonyms) -> bool:
    """The official synonym test (score > 0): one phrase contains the other, or their synonym sets intersect."""
    if a in b or b in a:
        return True
    return bool(set(synonyms("_".join(a.split()))) & set(synonyms("_".join(b.split()))))


@dataclass(frozen=True)
class KindResult:
    """Precision, recall, F1 of one kind (objects, attributes or relations) and what was matched.

    ``matched``: ``(caption element, reference element)`` pairs of the exact and synonym stages; ``missed``:
    reference elements left unmatched by them; ``invented``: caption elements left unmatched by them. Elements
    left to the soft stage count there with their best cosine similarity but are listed as missed/invented.
    Attributes are written ``"attribute object"``, relations ``"subject relation object"``.
    """

    precision: float
    recall: float
    f1: float
    matched: Tuple[Tuple[str, str], ...]
    missed: Tuple[str, ...]
    invented: Tuple[str, ...]


@dataclass(frozen=True)
class CaptureResult:
    """A caption's CAPTURE score and its three kinds (one reference, or the mean over references)."""

    score: float
    objects: KindResult
    attributes: KindResult
    relations: KindResult


def _greedy_pairs(caption: Sequence, reference: Sequence, same: Callable[[object, object], bool],
                  pairs: Dict[int, int]) -> None:
    """Pair each free caption element with the first free reference element ``same`` accepts (in place)."""
    taken = set(pairs.values())
    for i, c in enumerate(caption):
        if i in pairs:
            continue
        j = next((j for j, r in enumerate(reference) if j not in taken and same(c, r)), None)
        if j is not None:
            pairs[i] = j
            taken.add(j)


def _soft_matches(caption: Sequence[str], reference: Sequence[str], encode: Encode) -> Tuple[float, float]:
    """Sums of the row and column maxima of the cosine similarities (caption × reference)."""
    features = np.asarray(encode(list(caption) + list(reference)), dtype=np.float64)
    features = features / np.sqrt(np.sum(features ** 2, axis=1, keepdims=True))
    similarity = features[:len(caption)] @ features[len(caption):].T
    return float(similarity.max(axis=1).sum()), float(similarity.max(axis=0).sum())


def _match_kind(caption: Sequence, reference: Sequence, labels: Tuple[Sequence[str], Sequence[str]],
                similar: Callable[[object, object], bool], soft_text: Callable[[object], str], *,
                synonym_matching: bool, encode: Optional[Encode], eps: float) -> KindResult:
    pairs: Dict[int, int] = {}
    _greedy_pairs(caption, reference, lambda c, r: c == r, pairs)
    if synonym_matching:
        _greedy_pairs(caption, reference, similar, pairs)
    caption_match = reference_match = float(len(pairs))
    taken = set(pairs.values())
    free_caption = [i for i in range(len(caption)) if i not in pairs]
    free_reference = [j for j in range(len(reference)) if j not in taken]
    if encode is not None and free_caption and free_reference:
        rows, columns = _soft_matches([soft_text(caption[i]) for i in free_caption],
                                      [soft_text(reference[j]) for j in free_reference], encode)
        caption_match, reference_match = caption_match + rows, reference_match + columns
    precision = caption_match / (len(caption) + eps)
    recall = reference_match / (len(reference) + eps)
    caption_labels, reference_labels = labels
    return KindResult(precision, recall, 2 * precision * recall / (precision + recall + eps),
                      matched=tuple((caption_labels[i], reference_labels[j]) for i, j in sorted(pairs.items())),
                      missed=tuple(reference_labels[j] for j in free_reference),
                      invented=tuple(caption_labels[i] for i in free_caption))


def _attribute_labels(elements: CaptureElements) -> List[str]:
    return [f"{attribute} {obj}" for obj, attribute in elements.attributes]


def capture_pair(caption: CaptureElements, reference: CaptureElements, *, synonyms: Synonyms,
                 encode: Optional[Encode] = None, synonym_matching: bool = True, soft_matching: bool = True,
                 alpha: float = ALPHA, beta: float = BETA, gamma: float = GAMMA, eps: float = EPS) -> CaptureResult:
    """CAPTURE of a caption against one reference (official ``compute_f_score``).

    ``synonym_matching`` / ``soft_matching``: the official options of the same names (the soft stage needs
    ``encode``); ``alpha``, ``beta``, ``gamma``: the weights of the object, attribute and relation F1s.
    """
    if soft_matching and encode is None:
        raise ValueError("soft_matching needs an encode function")
    if alpha + beta + gamma <= 0:
        raise ValueError(f"alpha + beta + gamma must be positive, got {alpha} + {beta} + {gamma}")
    options = dict(synonym_matching=synonym_matching, encode=encode if soft_matching else None, eps=eps)
    objects = _match_kind(caption.objects, reference.objects, (caption.objects, reference.objects),
                          lambda a, b: similar_phrases(a, b, synonyms), str, **options)
    attributes = _match_kind([a for _, a in caption.attributes], [a for _, a in reference.attributes],
                             (_attribute_labels(caption), _attribute_labels(reference)),
                             lambda a, b: similar_phrases(a, b, synonyms), str, **options)
    relation_labels = ([" ".join(r) for r in caption.relations], [" ".join(r) for r in reference.relations])
    relations = _match_kind(caption.relations, reference.relations, relation_labels,
                            lambda a, b: all(similar_phrases(x, y, synonyms) for x, y in zip(a, b)), " ".join,
                            **options)
    score = (alpha * objects.f1 + beta * attributes.f1 + gamma * relations.f1) / (alpha + beta + gamma)
    return CaptureResult(score, objects, attributes, relations)


def _union(groups: Iterable[Sequence]) -> tuple:
    return tuple(dict.fromkeys(item for group in groups for item in group))


def _mean_kind(results: Sequence[KindResult]) -> KindResult:
    n = len(results)
    matched_caption = {c for result in results for c, _ in result.matched}
    return KindResult(
        precision=sum(r.precision for r in results) / n, recall=sum(r.recall for r in results) / n,
        f1=sum(r.f1 for r in results) / n,
        matched=_union(r.matched for r in results),
        missed=_union(r.missed for r in results),
        invented=tuple(dict.fromkeys(c for r in results for c in r.invented if c not in matched_caption)))


def capture_sample(caption: CaptureElements, references: Sequence[CaptureElements], **options) -> CaptureResult:
    """A caption's CAPTURE over its references: score, precisions, recalls and F1s are the means over references
    (the official per-caption values, unrounded); ``matched`` and ``missed`` are the unions over references,
    ``invented`` the caption elements matched in none of them. ``options``: those of :func:`capture_pair`."""
    if not references:
        raise ValueError("a caption needs at least one reference")
    results = [capture_pair(caption, reference, **options) for reference in references]
    return CaptureResult(sum(r.score for r in results) / len(results),
                         *(_mean_kind([getattr(r, kind) for r in results])
                           for kind in KINDS))
