"""The benchmarks by name; ``load`` (raw release, converted folder, or hub dataset ``capeval/<name>``) and
``convert_to_parquet`` (raw release → a hub-ready dataset folder: parquet in the uniform schema + dataset card)."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Callable, Dict, Optional, Union

from capeval.benchmarks.detailcaps import AUTHORS_HUB, DETAILCAPS_LOADERS
from capeval.benchmarks.loaders import CORRELATION_LOADERS, Benchmark
from capeval.benchmarks.pairwise import PAIRWISE_LOADERS, PairwiseBenchmark
from capeval.benchmarks.schema import from_table, to_table
from capeval.core.errors import InputError

AnyBenchmark = Union[Benchmark, PairwiseBenchmark]
BENCHMARKS: Dict[str, Callable[[Path], AnyBenchmark]] = {**CORRELATION_LOADERS, **PAIRWISE_LOADERS,
                                                           **DETAILCAPS_LOADERS}
HUB_ORG = "capeval"
HUB_REVISION = "main"  # pass a commit hash (``revision=``) to pin a published version
PARQUET_FILE = Path("data") / "test-00000-of-00001.parquet"
CARD_OF = {"foil_one_ref": "foil"}  # benchmarks described by another one's card


def default_data_dir() -> Optional[Path]:
    env = os.environ.get("CAPEVAL_BENCHMARK_DIR")
    return Path(env) if env else None


def cards_dir() -> Path:
    """The dataset cards (``datasets/<name>/README.md``) shipped beside the evaluate modules."""
    from capeval.modules import modules_root

    return modules_root() / "datasets"


def _read_parquet(path: Path) -> AnyBenchmark:
    import pyarrow.parquet as pq

    return from_table(pq.read_table(str(path)))


def _from_hub(name: str, revision: Optional[str]) -> AnyBenchmark:
    from huggingface_hub import hf_hub_download

    repo_id = f"{HUB_ORG}/{name}"
    try:
        path = hf_hub_download(repo_id, PARQUET_FILE.as_posix(), repo_type="dataset",
                               revision=revision or HUB_REVISION)
    except Exception as exc:  # offline without a cached copy, unknown revision, network errors
        raise InputError(f"could not fetch the hub dataset {repo_id}@{revision or HUB_REVISION}: {exc}; "
                         f"or pass data_dir, the folder holding the raw releases") from exc
    return _read_parquet(Path(path))


def with_images(benchmark: AnyBenchmark, images_dir: os.PathLike) -> AnyBenchmark:
    """The benchmark with each image replaced by the absolute path of its file name inside ``images_dir``."""
    root = Path(images_dir).resolve()
    return replace(benchmark, images=[str(root / Path(image).name) for image in benchmark.images])


def load(name: str, data_dir: Optional[os.PathLike] = None, *, revision: Optional[str] = None,
         images_dir: Optional[os.PathLike] = None) -> AnyBenchmark:
    """A benchmark in the uniform schema with its literature protocol.

    ``data_dir`` (default $CAPEVAL_BENCHMARK_DIR) holds raw releases (``<data_dir>/<name>/...`` as in the
    original distribution) or converted folders (``<data_dir>/<name>/data/test-00000-of-00001.parquet``);
    without one, the hub dataset ``capeval/<name>`` is read at ``revision`` (for the benchmarks in ``AUTHORS_HUB``,
    the authors' own hub dataset, at the pinned commit unless ``revision`` names another). Images stay path
    strings; with ``images_dir`` they become absolute paths of the same file names inside it.
    """
    if name not in BENCHMARKS:
        raise InputError(f"unknown benchmark {name!r}; available: {sorted(BENCHMARKS)}")
    data_dir = Path(data_dir) if data_dir else default_data_dir()
    if data_dir is None:
        benchmark = AUTHORS_HUB[name](revision) if name in AUTHORS_HUB else _from_hub(name, revision)
    elif (data_dir / name / PARQUET_FILE).is_file():
        benchmark = _read_parquet(data_dir / name / PARQUET_FILE)
    else:
        benchmark = BENCHMARKS[name](data_dir)
    return with_images(benchmark, images_dir) if images_dir else benchmark


def convert_to_parquet(name: str, data_dir: os.PathLike, out_dir: os.PathLike) -> Path:
    """Write ``<out_dir>/<name>/data/test-00000-of-00001.parquet`` (uniform schema) and its ``README.md``
    dataset card, ready for ``huggingface_hub.upload_folder(repo_type="dataset")``; returns the folder."""
    import pyarrow.parquet as pq

    if name not in BENCHMARKS:
        raise InputError(f"unknown benchmark {name!r}; available: {sorted(BENCHMARKS)}")
    card = cards_dir() / CARD_OF.get(name, name) / "README.md"
    if not card.is_file():
        raise InputError(f"no dataset card for {name!r} at {card}")
    folder = Path(out_dir) / name
    (folder / PARQUET_FILE).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(to_table(BENCHMARKS[name](Path(data_dir))), str(folder / PARQUET_FILE))
    shutil.copyfile(card, folder / "README.md")
    return folder
