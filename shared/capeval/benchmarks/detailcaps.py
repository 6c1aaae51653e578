"""DetailCaps-4870 (Dong et al. 2024, "Benchmarking and Improving Detail Image Caption"), read in the authors'
published schema: the hub dataset ``foundation-multimodal-models/DetailCaps-4870``, one parquet file.

One record per image: ``image`` (path, URL or SAM item id, by ``source``), ``source``, ``binary`` (the image bytes),
three references (``GT_Caption_GPT4O``, ``GT_Caption_GPT4V``, ``GT_Caption_Gemini15Pro``), the detailed captions of
three LVLMs (``CogVLM``, ``ShareCaptioner``, ``LLaVA_v15``) and ``GPT4_Eval``: a JSON object, model name → GPT-4's
score of that model's caption (the judgments the authors use for the metric consistency evaluation), or null where
the record has none. Each record becomes 3 rows (one per model, ``category`` = the model); a null ``GPT4_Eval`` or a
null score is a missing judgment (NaN), which ``capeval benchmark`` refuses or, with ``--nan-policy omit``, leaves
out and counts.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Dict, List, Optional

from capeval.benchmarks.loaders import Benchmark, rating, raw_file
from capeval.core.errors import InputError

HUB_REPOSITORY = "foundation-multimodal-models/DetailCaps-4870"
RELEASE_FILE = "DetailCaps-4870.parquet"
# the commit that added the parquet (``initial``); the file is unchanged in every later commit seen
# (fb4e2ea "fix CogVLM score mismatch" changed the README only; ec6ee4b added separate *_refined_*.parquet files)
HUB_REVISION = "b59c7dfdc8ddd2f0abf78e85b80508ffe259330d"
RELEASE_SHA256 = "b253e855958d3087b45856f8959e4f41c2e5b74e381b6dfaf7211779c278fb1a"  # its Git LFS oid
RELEASE_BYTES = 970_877_037
REFERENCE_COLUMNS = ("GT_Caption_GPT4O", "GT_Caption_GPT4V", "GT_Caption_Gemini15Pro")  # lmms-eval's order
SYSTEMS = ("CogVLM", "ShareCaptioner", "LLaVA_v15")
JUDGMENT_COLUMN = "GPT4_Eval"
TEXT_COLUMNS = ("image", "source", *REFERENCE_COLUMNS, *SYSTEMS, JUDGMENT_COLUMN)  # ``binary`` is never read
STATISTIC = "detailcaps"  # PCC, Kendall τ and sample τ together (capeval.benchmarks.detailcaps_protocol)
PROTOCOL = ("DetailCaps-4870: one row per (image, LVLM) caption of CogVLM, ShareCaptioner and LLaVA-1.5, human "
            "score = GPT-4's score of that caption (GPT4_Eval); references GPT-4o, GPT-4V and Gemini-1.5-Pro; "
            "PCC and Kendall tau over all rows, sample tau = Kendall tau among each image's captions, averaged over "
            "the images where it is defined")


def _text(value, file: str, record: int, field: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{file}: record {record}: field {field!r}: {value!r} is not a string")
    return value


def _judgments(value, file: str, record: int) -> Dict[str, float]:
    """Model → GPT-4 score from the record's ``GPT4_Eval`` JSON; every model NaN where the record has none."""
    if value is None:
        return {system: math.nan for system in SYSTEMS}
    try:
        scores = json.loads(value) if isinstance(value, (str, bytes)) else value
    except json.JSONDecodeError as exc:
        raise InputError(f"{file}: record {record}: field {JUDGMENT_COLUMN!r}: not JSON ({exc})") from exc
    if not isinstance(scores, dict):
        raise InputError(f"{file}: record {record}: field {JUDGMENT_COLUMN!r}: {value!r} is not a JSON object")
    missing = [s for s in SYSTEMS if s not in scores]
    if missing:
        raise InputError(f"{file}: record {record}: field {JUDGMENT_COLUMN!r}: no score for {missing} "
                         f"(expected the keys {list(SYSTEMS)})")
    return {s: rating(scores[s], file, record, f"{JUDGMENT_COLUMN}.{s}") for s in SYSTEMS}


def from_release(path: Path, name: str = "detailcaps_4870") -> Benchmark:
    """The benchmark from the authors' parquet file (its text columns only; the image bytes are not read)."""
    import pyarrow.parquet as pq

    file = Path(path).name
    present = pq.read_schema(str(path)).names
    absent = [c for c in TEXT_COLUMNS if c not in present]
    if absent:
        raise InputError(f"{file}: columns {absent} are missing (the published schema has {list(TEXT_COLUMNS)} "
                         f"and binary)")
    columns = pq.read_table(str(path), columns=list(TEXT_COLUMNS)).to_pydict()
    candidates: List[str] = []
    references: List[List[str]] = []
    images: List[str] = []
    human: List[float] = []
    systems: List[str] = []
    for record in range(len(columns["image"])):
        refs = [_text(columns[c][record], file, record, c) for c in REFERENCE_COLUMNS]
        image = _text(columns["image"][record], file, record, "image")
        scores = _judgments(columns[JUDGMENT_COLUMN][record], file, record)
        for system in SYSTEMS:
            candidates.append(_text(columns[system][record], file, record, system))
            references.append(list(refs))
            images.append(image)
            human.append(scores[system])
            systems.append(system)
    return Benchmark(name, candidates, references, images, human, statistic=STATISTIC, protocol=PROTOCOL,
                     categories=systems)


def detailcaps_4870(data_dir: Path) -> Benchmark:
    """``<data_dir>/detailcaps_4870/DetailCaps-4870.parquet``: the authors' file as downloaded."""
    return from_release(raw_file(data_dir, "detailcaps_4870", RELEASE_FILE))


def from_authors_hub(revision: Optional[str] = None) -> Benchmark:
    """The authors' hub file at ``revision`` (default: the pinned commit, whose file's sha256 is checked)."""
    from huggingface_hub import hf_hub_download

    from capeval.core.hashing import file_sha256

    revision = revision or HUB_REVISION
    try:
        path = hf_hub_download(HUB_REPOSITORY, RELEASE_FILE, repo_type="dataset", revision=revision)
    except Exception as exc:  # offline without a cached copy, unknown revision, network errors
        raise InputError(f"could not fetch {RELEASE_FILE} from the hub dataset {HUB_REPOSITORY}@{revision}: {exc}; "
                         f"or pass data_dir, a folder holding detailcaps_4870/{RELEASE_FILE}") from exc
    if revision == HUB_REVISION and file_sha256(path) != RELEASE_SHA256:
        raise InputError(f"{path}: sha256 differs from the pinned {HUB_REPOSITORY}@{HUB_REVISION} file "
                         f"({RELEASE_SHA256}); delete it and fetch again")
    return from_release(Path(path))


DETAILCAPS_LOADERS = {"detailcaps_4870": detailcaps_4870}
AUTHORS_HUB = {"detailcaps_4870": from_authors_hub}  # read from the authors' hub dataset, not capeval/<name>
