"""write_report writes its five files as a set (issue 40 item 3): into a staging folder inside the output folder,
then renamed into place, so the folder holds the whole new set or what it held before, never a mix, and no staging
folder is left. The failures are real ones: a folder in the way of a rename, a file system that fills up (a tmpfs,
root only)."""

import os
from pathlib import Path

import pytest
from conftest import large_report, rename_system
from mounts import tmpfs  # noqa: F401  (the fixture)

from capeval.report import write_report
from capeval.report.write import FILES, STAGING_PREFIX


def contents(folder):
    """Every entry of ``folder``: name -> bytes (None for a folder)."""
    return {p.name: None if p.is_dir() else p.read_bytes() for p in sorted(Path(folder).iterdir())}


def test_a_new_set_replaces_an_earlier_one_whole(report, images_root, tmp_path):
    """Every file of the folder is the new set's (equal to the set written alone into an empty folder); a file of
    the user's stays; no staging folder is left."""
    out = tmp_path / "out"
    write_report(report, out, images_root=images_root)
    (out / "notes.txt").write_text("the user's own file")
    earlier = contents(out)
    rename_system(report, "ours_v1", "ours_v3")
    write_report(report, out, images_root=images_root)
    alone = contents(write_report(report, tmp_path / "alone", images_root=images_root)["json"].parent)
    assert contents(out) == {**alone, "notes.txt": b"the user's own file"}
    assert all(alone[name] != earlier[name] for name in FILES.values())  # each file was replaced


def test_a_failed_rename_puts_the_earlier_set_back(report, images_root, tmp_path):
    """report.html is a folder of the user's: the new report.html cannot be renamed onto it, after the four other
    files were; they go back out and the earlier four return, byte for byte."""
    out = tmp_path / "out"
    write_report(report, out, images_root=images_root)
    (out / "report.html").unlink()
    (out / "report.html").mkdir()
    (out / "report.html" / "keep.txt").write_text("kept")
    before = contents(out)
    rename_system(report, "ours_v1", "ours_v3")
    with pytest.raises(OSError):
        write_report(report, out, images_root=images_root)
    assert contents(out) == before
    assert (out / "report.html" / "keep.txt").read_text() == "kept"


def test_a_file_system_filling_up_while_writing_keeps_the_earlier_set(tmpfs, tmp_path):
    """The earlier set fits the file system; the new one does not (ENOSPC while writing it): the earlier set stays
    whole and the file system holds nothing else."""
    reference = tmp_path / "sizes"
    small, large = large_report(20), large_report(3000, seed=12)
    write_report(large, reference)
    large_bytes = sum(p.stat().st_size for p in reference.iterdir())
    out = tmpfs(size=f"{large_bytes // 4096 // 2 * 4}k")  # half the new set: it cannot fit, staged or not
    write_report(small, out)
    before = contents(out)
    assert sorted(before) == sorted(FILES.values())
    with pytest.raises(OSError, match="No space left on device"):
        write_report(large, out)
    assert contents(out) == before
    assert not [name for name in os.listdir(out) if name.startswith(STAGING_PREFIX)]
