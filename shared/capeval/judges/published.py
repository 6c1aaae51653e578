"""FLEUR's published per-sample outputs (``Yebin46/FLEUR`` @ b9cd6c9, ``results/*.txt``) as judge-cache records.

The files are read from a folder the user gives (they are never shipped). Each block is ``image file : <path>``,
``caption : <text>``, ``model score : <the generated number>``, ``our score : <FLEUR's smoothed score>``; the
Pascal-50S files group two caption blocks under one image with the ``label`` (index of the caption people
preferred) and end with ``true count`` / ``tie count``; the Composite file has ``<source> dataset`` section lines.
Every record keeps where it came from (``published``: file, line, section, pair, position, label). No image content
is known: ``image.sha256`` is null and the image is the path as written (replays join on its basename).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from capeval.core.errors import InputError
from capeval.judges.cache import canonical_json, inputs_key
from capeval.judges.prompts import GENERATION, prompt_sha256

FLEUR_REPOSITORY, FLEUR_COMMIT = "Yebin46/FLEUR", "b9cd6c9"
PUBLISHED_FILES = ("fleur_flickr8k_expert.txt", "fleur_composite.txt", "fleur_pascal_HC.txt",
                   "fleur_pascal_HI.txt", "fleur_pascal_HM.txt", "fleur_pascal_MM.txt")
# the judge behind the published outputs: the original LLaVA code path (``fleur.py``), which records no commit
PUBLISHED_MODEL = "liuhaotian/llava-v1.5-13b"
_FIELD = re.compile(r"^(image file|caption|model score|our score|label|true count|tie count) :(?: (.*))?$")
_SECTION = re.compile(r"^(\S+) dataset$")


def origin_of(file_name: str) -> str:
    return f"published:{FLEUR_REPOSITORY}@{FLEUR_COMMIT}/results/{file_name}"


@dataclass
class PublishedFile:
    """The records of one published file and its own summary lines (Pascal-50S: ``true count``, ``tie count``)."""

    name: str
    records: List[Dict] = field(default_factory=list)
    pairs: int = 0
    summary: Dict[str, int] = field(default_factory=dict)


class _Reader:
    """A line-by-line state machine over one published file; any line out of place is an error naming it."""

    def __init__(self, path: Path):
        self.path, self.prompt = path, prompt_sha256("fleur")
        self.out = PublishedFile(path.name)
        self.pairwise = path.name.startswith("fleur_pascal_")
        self.section: Optional[str] = path.stem.rsplit("_", 1)[-1] if self.pairwise else None
        self.image: Optional[str] = None
        self.image_line = 0
        self.label: Optional[int] = None
        self.captions_of_image = 0
        self.block: Dict = {}  # the caption block being read: caption, model score

    def fail(self, line: int, problem: str) -> InputError:
        return InputError(f"{self.path}: line {line}: {problem}")

    def read(self) -> PublishedFile:
        lines = self.path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            self.line(number, line)
        self.end_image(len(lines) + 1)
        if not self.out.records:
            raise self.fail(len(lines), "no caption block found (not a FLEUR results file?)")
        return self.out

    def line(self, number: int, line: str) -> None:
        if not line.strip():
            return
        section = _SECTION.match(line)
        if section and not self.pairwise:
            self.end_image(number)
            self.section = section.group(1)
            return
        match = _FIELD.match(line)
        if not match:
            raise self.fail(number, f"unexpected line {line[:80]!r}")
        name, value = match.group(1), match.group(2) or ""
        getattr(self, "on_" + name.replace(" ", "_"))(number, value)

    def number(self, number: int, name: str, value: str) -> float:
        try:
            parsed = float(value)
        except ValueError:
            parsed = float("nan")
        if parsed != parsed or parsed in (float("inf"), float("-inf")):
            raise self.fail(number, f"{name!r} is not a finite number: {value!r}")
        return parsed

    def on_image_file(self, number: int, value: str) -> None:
        self.end_image(number)
        if not value:
            raise self.fail(number, "'image file' is empty")
        self.image, self.image_line, self.label, self.captions_of_image = value, number, None, 0

    def on_label(self, number: int, value: str) -> None:
        if not self.pairwise or self.image is None or self.captions_of_image or self.label is not None:
            raise self.fail(number, "'label' out of place (only once per Pascal-50S image, before its captions)")
        if value not in ("0", "1"):
            raise self.fail(number, f"'label' must be 0 or 1, not {value!r}")
        self.label = int(value)

    def on_caption(self, number: int, value: str) -> None:
        if self.image is None:
            raise self.fail(number, "'caption' before any 'image file'")
        if self.block:
            raise self.fail(number, "'caption' before the previous caption's 'model score' and 'our score'")
        if self.pairwise and (self.label is None or self.captions_of_image == 2):
            raise self.fail(number, "a Pascal-50S image needs a 'label' and exactly two captions")
        self.block = {"caption": value, "line": number}

    def on_model_score(self, number: int, value: str) -> None:
        if "caption" not in self.block or "model score" in self.block:
            raise self.fail(number, "'model score' without a caption before it")
        self.block["model score"] = self.number(number, "model score", value)

    def on_our_score(self, number: int, value: str) -> None:
        if "model score" not in self.block:
            raise self.fail(number, "'our score' without a 'model score' before it")
        self.add(self.block["caption"], self.block["model score"], self.number(number, "our score", value))
        self.block = {}
        self.captions_of_image += 1

    def on_true_count(self, number: int, value: str) -> None:
        self.summary_line(number, "true count", value)

    def on_tie_count(self, number: int, value: str) -> None:
        self.summary_line(number, "tie count", value)

    def summary_line(self, number: int, name: str, value: str) -> None:
        if not self.pairwise or not value.isdigit():
            raise self.fail(number, f"{name!r} must be a whole number at the end of a Pascal-50S file")
        self.end_image(number)
        self.image = None
        self.out.summary[name] = int(value)

    def end_image(self, number: int) -> None:
        """Close the image being read: its last caption block is complete, a Pascal-50S image has two captions."""
        if self.block:
            raise self.fail(self.block["line"], "caption block without 'model score' and 'our score'")
        if self.image is not None and self.pairwise and self.captions_of_image != 2:
            raise self.fail(self.image_line, f"Pascal-50S image with {self.captions_of_image} caption(s), "
                                             f"expected 2 (block ends before line {number})")
        if self.image is not None and self.pairwise:
            self.out.pairs += 1
        self.image = None

    def add(self, caption: str, raw_score: float, score: float) -> None:
        pair = self.out.pairs if self.pairwise else None
        self.out.records.append({
            "inputs": {"judge": "fleur", "model": PUBLISHED_MODEL, "prompt_sha256": self.prompt,
                       "image": {"sha256": None, "file": self.image}, "caption": caption, "references": None,
                       "generation": dict(GENERATION)},
            "outputs": {"text": None, "raw_score": raw_score, "score": score, "digit_probabilities": None,
                        "explanation": None},
            "origin": origin_of(self.path.name),
            "published": {"file": self.path.name, "line": self.image_line, "section": self.section, "pair": pair,
                          "position": self.captions_of_image if self.pairwise else None,
                          "label": self.label if self.pairwise else None}})


def read_published(path) -> PublishedFile:
    """Every caption block of one published FLEUR results file as a cache record; a malformed block is an
    ``InputError`` naming the file and the line."""
    return _Reader(Path(path)).read()


def pairwise_true_count(published: PublishedFile) -> Optional[int]:
    """Pascal-50S: the pairs whose preferred caption has the strictly higher ``score``, recomputed from the blocks
    (the file's own ``true count`` line says what FLEUR counted); ``None`` for other files."""
    by_pair: Dict[int, Dict[int, Dict]] = {}
    for record in published.records:
        where = record["published"]
        if where["pair"] is not None:
            by_pair.setdefault(where["pair"], {})[where["position"]] = record
    if not by_pair:
        return None
    return sum(pair[pair[0]["published"]["label"]]["outputs"]["score"] >
               pair[1 - pair[0]["published"]["label"]]["outputs"]["score"] for pair in by_pair.values())


def _check_consistent(files: List[PublishedFile]) -> int:
    """The number of repeated (image, caption) blocks; a repeat with other scores is an error naming both lines."""
    seen: Dict[tuple, Dict] = {}
    repeats = 0
    for published in files:
        for record in published.records:
            key = (record["inputs"]["image"]["file"], record["inputs"]["caption"])
            first = seen.setdefault(key, record)
            if first is record:
                continue
            repeats += 1
            if first["outputs"] != record["outputs"]:
                a, b = first["published"], record["published"]
                raise InputError(f"{b['file']}: line {b['line']}: caption {key[1]!r} of {key[0]!r} has other scores "
                                 f"than at {a['file']}: line {a['line']}")
    return repeats


def import_fleur(directory, output) -> Dict:
    """Read every published file found in ``directory`` into a new judge cache at ``output``; a summary with the
    records per file (Pascal-50S: pairs, the file's own true/tie counts and the true count recomputed from its
    blocks), the files not found and the repeated blocks."""
    directory, output = Path(directory), Path(output)
    if not directory.is_dir():
        raise InputError(f"published outputs folder not found: {directory}")
    if output.exists():
        raise InputError(f"--output {output} exists; imports write a new cache")
    found = [name for name in PUBLISHED_FILES if (directory / name).is_file()]
    if not found:
        raise InputError(f"{directory} holds none of FLEUR's published files {list(PUBLISHED_FILES)}")
    files = [read_published(directory / name) for name in found]
    repeats = _check_consistent(files)
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "x", encoding="utf-8") as handle:  # one pass; a caption repeated in another pair keeps its line
        for published in files:
            handle.writelines(canonical_json({"key": inputs_key(r["inputs"]), **r}) + "\n" for r in published.records)
    summary = {name: {"records": len(p.records), "pairs": p.pairs or None, **p.summary,
                      "recomputed true count": pairwise_true_count(p)} for name, p in zip(found, files)}
    return {"output": str(output), "records": sum(len(p.records) for p in files), "files": summary,
            "missing": [name for name in PUBLISHED_FILES if name not in found], "repeated_blocks": repeats}
