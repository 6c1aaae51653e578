"""The memo of local weight-file hashes never outlives a rewrite of the file."""

import hashlib
import os

from capeval.core.provenance import describe_weights


def _tree_digest(folder):
    expected = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        content = hashlib.sha256(path.read_bytes()).hexdigest()
        expected.update(f"{path.relative_to(folder).as_posix()}\0{content}\n".encode())
    return expected.hexdigest()


def test_a_same_size_rewrite_with_the_old_mtime_is_hashed_again(tmp_path):
    folder = tmp_path / "weights"
    folder.mkdir()
    weights = folder / "model.safetensors"
    weights.write_bytes(b"\x00" * 4096)
    before = describe_weights(str(folder), folder)["sha256"]
    assert before == _tree_digest(folder)
    stat = weights.stat()
    with open(weights, "r+b") as handle:  # same inode, same size
        handle.write(b"\x01" * 4096)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # as a copy tool preserving times would
    assert weights.stat().st_mtime_ns == stat.st_mtime_ns and weights.stat().st_size == stat.st_size
    after = describe_weights(str(folder), folder)["sha256"]
    assert after == _tree_digest(folder) != before


def test_a_file_replaced_by_a_rename_is_hashed_again(tmp_path):
    folder = tmp_path / "weights"
    folder.mkdir()
    weights = folder / "model.safetensors"
    weights.write_bytes(b"\x00" * 4096)
    stat = weights.stat()
    before = describe_weights(str(folder), folder)["sha256"]
    replacement = tmp_path / "new.safetensors"
    replacement.write_bytes(b"\x02" * 4096)
    os.utime(replacement, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(replacement, weights)
    assert describe_weights(str(folder), folder)["sha256"] == _tree_digest(folder) != before
