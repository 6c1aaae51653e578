"""``write_report``: the report document and its renderings in one folder, written as a set; ``check_writable``: the
output folder proven writable before any model loads; ``save_scores``: a run's per-image scores, saved somewhere
when its report fails."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import tempfile
import threading
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Dict, Iterator, Mapping, Optional

from capeval.core.errors import InputError
from capeval.report.cells import build_table
from capeval.report.html import render_html
from capeval.report.tables import latex_table, write_scores_csv, write_summary_csv

FILES = {"json": "report.json", "csv": "scores.csv", "summary": "summary.csv", "latex": "table.tex",
         "html": "report.html"}
STAGING_PREFIX = ".capeval-report-"  # the set is written into such a folder inside the output folder, then moved


def check_writable(folder, field: str = "output") -> None:
    """Prove that ``folder`` takes files: it is made if missing, a file is written, synced and removed, then the
    folders made for it are removed again (the report makes them when it is written). A read-only, full or
    forbidden folder is an :class:`InputError` naming ``field``, the folder and the reason."""
    out = Path(folder)
    missing = [path for path in (out, *out.parents) if not os.path.lexists(path)]  # deepest first
    try:
        out.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(prefix=".capeval-write-check-", dir=out)
        try:
            os.write(handle, b"capeval write check\n")
            os.fsync(handle)  # a file system that allocates late reports a full disk here at the latest
        finally:
            os.close(handle)
            os.unlink(probe)
    except OSError as exc:
        raise InputError(f"{field} {folder}: cannot write files there ({exc.strerror or exc})") from exc
    finally:
        for made in missing:
            with suppress(OSError):
                os.rmdir(made)


def json_ready(value, where: str = "report"):
    """The document as strict JSON values: NaN/±inf become null (JSON has none), tuples lists, paths strings,
    numpy scalars and arrays Python numbers and lists; anything else unknown is refused, naming where it is."""
    if isinstance(value, Mapping):
        return {str(k): json_ready(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list) and _finite_numbers(value):  # a long column of numbers passes at C speed
        return value
    if isinstance(value, (list, tuple)):
        return [json_ready(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):  # numpy scalar or array
        return json_ready(value.tolist(), where)
    raise InputError(f"report: {where} is a {type(value).__name__}, which JSON cannot hold")


def _finite_numbers(values: list) -> bool:
    """Whether ``values`` holds Python ints and finite floats only (their sum is finite, or overflows)."""
    if not set(map(type, values)) <= {int, float}:
        return False
    try:
        return math.isfinite(math.fsum(values))
    except OverflowError:
        return False


def write_report(report: Mapping, out_dir, *, images_root=None, baseline: Optional[str] = None) -> Dict[str, Path]:
    """Write ``report.json`` (the whole document), ``scores.csv``, ``summary.csv``, ``table.tex`` and the
    self-contained ``report.html`` (thumbnails from ``images_root``, the folder the images' ``file`` paths are
    relative to; None: no thumbnails) into ``out_dir``. Returns ``{"json", "csv", "summary", "latex", "html"}``
    → path. Marks are against ``baseline`` (default: the document's).

    The five files are a set: written into a staging folder inside ``out_dir`` (the same file system), then renamed
    into place, so ``out_dir`` holds all of them or none of this call's. An earlier set's files are moved aside
    first and put back if a rename fails; a Ctrl-C during the renames takes effect after them (the new set is
    whole). On any failure or interrupt ``out_dir`` keeps what it held and the staging folder is removed."""
    table = build_table(report, baseline)  # checks the document before anything is written
    document = json_ready(report)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with _staging_folder(out) as staging:
        written = staging / "new"
        written.mkdir()
        paths = {kind: written / name for kind, name in FILES.items()}
        with open(paths["json"], "w", encoding="utf-8") as handle:  # compact: the C encoder (100k images stay fast)
            json.dump(document, handle, ensure_ascii=False, allow_nan=False)
            handle.write("\n")
        write_scores_csv(report, paths["csv"])
        write_summary_csv(report, paths["summary"], table.baseline)
        paths["latex"].write_text(latex_table(table, report), encoding="utf-8")
        root = None if images_root is None else Path(images_root)
        paths["html"].write_text(render_html(report, table, root), encoding="utf-8")
        with _interrupts_deferred():
            _move_into_place(written, out, staging / "previous")
    return {kind: out / name for kind, name in FILES.items()}


@contextmanager
def _staging_folder(out: Path) -> Iterator[Path]:
    """A new folder inside ``out``, removed with everything in it when the block ends, however it ends."""
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=out))
    try:
        yield staging
    finally:
        with _interrupts_deferred():
            shutil.rmtree(staging, ignore_errors=True)


def _move_into_place(written: Path, out: Path, previous: Path) -> None:
    """Rename every file of ``written`` into ``out``; an earlier file of the same name (not a folder) is renamed into
    ``previous`` first. If a rename fails, the new files go back and the earlier ones return: ``out`` is as before."""
    previous.mkdir()
    set_aside, moved_in = [], []
    try:
        for name in FILES.values():
            if os.path.lexists(out / name) and not (out / name).is_dir():
                os.replace(out / name, previous / name)
                set_aside.append(name)
        for name in FILES.values():
            os.replace(written / name, out / name)
            moved_in.append(name)
    except OSError:
        for name in moved_in:
            os.replace(out / name, written / name)
        for name in set_aside:
            os.replace(previous / name, out / name)
        raise


@contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Hold back SIGINT for the block (a few renames or a removal, so that none is left half done): one that arrives
    meanwhile is handed to the earlier handler when the block ends. Outside the main thread signals are not ours."""
    if threading.current_thread() is not threading.main_thread() or not callable(signal.getsignal(signal.SIGINT)):
        yield
        return
    arrived = []
    handler = signal.signal(signal.SIGINT, lambda signum, frame: arrived.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)
        if arrived:
            handler(signal.SIGINT, arrived[0])


def save_scores(document: Mapping, output: Optional[os.PathLike]) -> str:
    """Write a run's per-image scores (``document``, ``scores.json``: :func:`capeval.suite.run.scores_document`) into
    the first folder that takes it: ``output``, else a new folder in the system's temporary folder, else a new folder in
    capeval's cache (``$CAPEVAL_CACHE`` or ``~/.cache/capeval``, under ``scores/``); the path written. The file is
    whole or absent and a new folder that did not take it is removed; an :class:`OSError` naming each folder tried
    when none does."""
    from capeval.core.hub import default_cache_dir

    text = json.dumps(document, default=str)
    refusals = []
    if output is not None:
        try:
            os.makedirs(output, exist_ok=True)
            return _write_whole(os.path.join(output, "scores.json"), text)
        except OSError as exc:
            refusals.append(f"{output}: {exc.strerror or exc}")
    for parent in (None, default_cache_dir() / "scores"):  # None: the system's temporary folder
        folder = None
        try:
            if parent is not None:
                os.makedirs(parent, exist_ok=True)
            folder = tempfile.mkdtemp(prefix="capeval-scores-", dir=parent)
            return _write_whole(os.path.join(folder, "scores.json"), text)
        except OSError as exc:
            refusals.append(f"{folder or parent or tempfile.gettempdir()}: {exc.strerror or exc}")
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
    raise OSError(f"no folder took scores.json: {'; '.join(refusals)}")


def _write_whole(path: str, text: str) -> str:
    """``text`` into ``path`` under a temporary name, then renamed: the file is whole or absent; the path."""
    partial = f"{path}.{os.getpid()}.partial"
    try:
        with open(partial, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(partial, path)
    except BaseException:
        if os.path.lexists(partial):
            os.remove(partial)
        raise
    return path
