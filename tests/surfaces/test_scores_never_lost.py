"""Scores are never lost (issue 40 item 3), through ``capeval evaluate`` run as a command (a subprocess) and
``evaluate_captions``:
- an output folder on a read-only or full file system is refused in one line (exit 2) before any model loads (the
  weights cache is empty: a model load would fail with another error);
- a file system that fills up while the report is written: no report file is left, every per-image score is saved
  in a new temporary folder (else capeval's cache), named in one line (exit 1);
- Ctrl-C (a real SIGINT) mid-run, while the report is written and during its final renames: one line, exit 130, the
  output folder holds a whole set (the earlier one, or the new one once the renames have begun) or none, no
  staging folder.
File systems are tmpfs mounts (root only, skipped otherwise: tests/mounts.py)."""

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from mounts import fill, tmpfs  # noqa: F401  (the fixture)

from capeval.core.errors import InputError, ScoredThenFailedError
from capeval.core.scoring import load_scorer
from capeval.report.write import FILES, STAGING_PREFIX

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "coco_small"
SYSTEMS = ("baseline", "model_a", "model_b")
IMAGES = 3000  # enough that neither the report nor scores.json fits a 64 KiB file system


def karpathy_args(*extra):
    return ["evaluate", "--karpathy", str(EXAMPLE / "dataset_coco.json"), "--split", "test",
            "--results", *[str(EXAMPLE / f"{name}.json") for name in SYSTEMS], "--images", str(EXAMPLE / "images"),
            *extra]


def capeval(*args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "capeval.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.fixture(scope="module")
def two_systems(tmp_path_factory):
    """Two systems' records (caption and references inline) on IMAGES images, and their captions and references."""
    rng = random.Random(0)
    words = "a the cat dog man woman child red blue small sits runs on under near table grass street ball".split()

    def sentence():
        return " ".join(rng.choice(words) for _ in range(rng.randint(4, 12)))

    folder = tmp_path_factory.mktemp("records")
    references = [[sentence() for _ in range(3)] for _ in range(IMAGES)]
    systems = {}
    for name in ("alpha", "beta"):
        captions = [sentence() for _ in range(IMAGES)]
        path = folder / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"caption": c, "references": r}) + "\n"
                                for c, r in zip(captions, references)))
        systems[name] = (path, captions)
    return systems, references


@pytest.fixture(scope="module")
def rouge_alone(two_systems):
    """Each system's per-image ROUGE-L from the scorer run alone (once for the module)."""
    systems, references = two_systems
    scorer = load_scorer("rouge_l")
    return {name: scorer.score(captions, references=references)["rouge_l_per_sample"]
            for name, (_, captions) in systems.items()}


def assert_saved_scores_equal_rouge_alone(path, rouge_alone):
    """``scores.json`` at ``path`` holds every image's ROUGE-L of each system, equal to the scorer run alone."""
    saved = json.loads(Path(path).read_text())
    for name, expected in rouge_alone.items():
        assert saved["per_image"][name]["rouge_l"] == expected, name


def test_a_read_only_output_is_refused_before_any_model_loads(tmpfs, empty_weights_cache):
    read_only = tmpfs(read_only=True)
    done = capeval(*karpathy_args("--metrics", "clip_s", "--output", str(read_only)))
    assert done.returncode == 2, done.stderr
    assert one_line(done.stderr) == (f"capeval evaluate: error: output {read_only}: cannot write files there "
                                     "(Read-only file system)")


def test_a_full_output_is_refused_before_any_model_loads(tmpfs, empty_weights_cache):
    full = tmpfs()
    fill(full)
    done = capeval(*karpathy_args("--metrics", "clip_s", "--output", str(full / "report")))
    assert done.returncode == 2, done.stderr
    assert one_line(done.stderr) == (f"capeval evaluate: error: output {full / 'report'}: cannot write files there "
                                     "(No space left on device)")


def test_evaluate_captions_refuses_a_read_only_output_before_any_model_loads(tmpfs, empty_weights_cache):
    from capeval.suite.run import evaluate_captions

    read_only = tmpfs(read_only=True)
    with pytest.raises(InputError, match=rf"^output {re.escape(str(read_only))}: .*Read-only file system"):
        evaluate_captions([EXAMPLE / f"{name}.json" for name in SYSTEMS], annotations=EXAMPLE / "dataset_coco.json",
                          split="test", images=EXAMPLE / "images", metrics=["clip_s"], output=read_only)


def test_a_file_system_filling_up_while_the_report_is_written_saves_every_score_elsewhere(tmpfs, two_systems,
                                                                                          rouge_alone, tmp_path):
    """The check's small file fits the 64 KiB file system, the report does not, nor does scores.json: one line
    names the scores.json written in a new folder of the temporary folder; the output holds nothing."""
    systems, _ = two_systems
    out = tmpfs(size="64k") / "report"
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    done = capeval("evaluate", "--records", *[str(path) for path, _ in systems.values()], "--metrics", "rouge_l",
                   "--resamples", "100", "--output", str(out), env={"TMPDIR": str(temporary)})
    assert done.returncode == 1, done.stderr
    line = one_line(done.stderr)
    found = re.fullmatch(r"capeval evaluate: error: the systems were scored, then the report failed \(OSError: "
                         r"\[Errno 28\] No space left on device.*\); every per-image score is saved in (\S+)", line)
    assert found, line
    saved = Path(found[1])
    assert saved.name == "scores.json" and saved.parent.parent == temporary, saved
    assert_saved_scores_equal_rouge_alone(saved, rouge_alone)
    assert os.listdir(out.parent) == ["report"] and os.listdir(out) == []  # no report file, no partial scores.json


def test_without_a_temporary_folder_the_scores_go_to_capevals_cache(tmpfs, two_systems, rouge_alone, tmp_path,
                                                                   monkeypatch):
    from capeval.suite.run import evaluate_captions

    systems, _ = two_systems
    out, read_only = tmpfs(size="64k"), tmpfs(read_only=True)
    monkeypatch.setattr(tempfile, "tempdir", str(read_only))  # the system's temporary folder is read-only
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ScoredThenFailedError, match="every per-image score is saved in") as failure:
        evaluate_captions(records=[str(path) for path, _ in systems.values()], metrics=["rouge_l"], resamples=100,
                          output=out)
    saved = Path(str(failure.value).rsplit(" ", 1)[1])
    assert saved.name == "scores.json" and saved.parent.parent == tmp_path / "cache" / "scores", saved
    assert_saved_scores_equal_rouge_alone(saved, rouge_alone)
    assert os.listdir(out) == [] and os.listdir(read_only) == []

    monkeypatch.setenv("CAPEVAL_CACHE", str(read_only / "cache"))  # and no cache can be written either
    with pytest.raises(ScoredThenFailedError) as failure:
        evaluate_captions(records=[str(path) for path, _ in systems.values()], metrics=["rouge_l"], resamples=100,
                          output=out)
    message = str(failure.value)
    assert "\n" not in message
    assert message.endswith(f"the per-image scores could not be saved either (no folder took scores.json: {out}: "
                            f"No space left on device; {read_only}: Read-only file system; "
                            f"{read_only / 'cache' / 'scores'}: Read-only file system)"), message


def terminal_sigint():
    """In a child process: SIGINT's default disposition, as under a terminal, even where this test process was started
    ignoring SIGINT (a background job of a non-interactive shell), which Python would otherwise keep ignoring."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_mid_run_prints_one_line_exits_130_and_writes_no_report(tmp_path):
    """SIGINT to the process group, as a terminal's Ctrl-C sends it, while the systems are compared (the bootstrap's
    progress is on stderr: scoring is done, the report not yet written)."""
    out = tmp_path / "report"
    process = subprocess.Popen([sys.executable, "-m", "capeval.cli",
                                *karpathy_args("--metrics", "bleu", "rouge_l", "cider", "--resamples", "200000",
                                               "--output", str(out))],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                               preexec_fn=terminal_sigint)
    stderr = bytearray()

    def read_stderr():
        for chunk in iter(lambda: os.read(process.stderr.fileno(), 4096), b""):
            stderr.extend(chunk)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    deadline = time.monotonic() + 300
    while b"bootstrap (systems)" not in stderr:
        assert process.poll() is None, f"ended before the comparison: {bytes(stderr).decode()}"
        assert time.monotonic() < deadline, "no bootstrap progress within 300 s"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)
    process.wait(timeout=120)
    reader.join(timeout=10)
    text = bytes(stderr).decode()
    assert process.returncode == 130, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert re.split(r"[\r\n]+", text.strip())[-1] == "capeval: interrupted", text
    assert text.count("capeval: interrupted") == 1
    assert not out.exists()  # no report file, no staging folder; the check removed the folder it made


# SIGINT sent by the process to itself at a chosen point of the report's writing: a real signal, at a known moment
INTERRUPTING = """
import os, signal, sys
from pathlib import Path
import capeval.report.write as write
from capeval.cli import main

point, out = sys.argv[1], Path(sys.argv[2]).resolve()
if point == "writing":  # after report.json, scores.csv, summary.csv and table.tex, before report.html
    render_html = write.render_html

    def interrupted_render(*args):
        os.kill(os.getpid(), signal.SIGINT)
        return render_html(*args)

    write.render_html = interrupted_render
else:  # "renaming": after the second new file is renamed into the output folder
    replace, moved_in = os.replace, []

    def interrupted_replace(source, target):
        replace(source, target)
        if Path(target).resolve().parent == out:
            moved_in.append(target)
            if len(moved_in) == 2:  # (the earlier set's files were renamed aside into the staging folder)
                os.kill(os.getpid(), signal.SIGINT)

    os.replace = interrupted_replace
sys.exit(main(sys.argv[3:]))
"""


def interrupted_run(point, out, *args):
    return subprocess.run([sys.executable, "-c", INTERRUPTING, point, str(out), *args], capture_output=True,
                          text=True, timeout=600, preexec_fn=terminal_sigint)


def report_set(folder):
    return {path.name: path.read_bytes() for path in sorted(Path(folder).iterdir())}


@pytest.fixture(scope="module")
def earlier_run(tmp_path_factory):
    """A complete report of an earlier run (systems named stale*), written once for the module."""
    out = tmp_path_factory.mktemp("earlier") / "report"
    done = capeval(*karpathy_args("--metrics", "bleu", "rouge_l", "--resamples", "100", "--output", str(out),
                                  "--names", "stale0", "stale1", "stale2"))
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(out)) == sorted(FILES.values())
    return out


@pytest.fixture
def earlier_set(earlier_run, tmp_path):
    """A folder of this test holding the earlier run's complete report, and its bytes."""
    out = tmp_path / "report"
    shutil.copytree(earlier_run, out)
    return out, report_set(out)


def test_ctrl_c_while_the_report_is_written_keeps_the_earlier_set(earlier_set):
    out, before = earlier_set
    done = interrupted_run("writing", out, *karpathy_args("--metrics", "bleu", "rouge_l", "--resamples", "100",
                                                          "--output", str(out), "--names", "fresh0", "fresh1",
                                                          "fresh2"))
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "capeval: interrupted" and "Traceback" not in done.stderr
    assert report_set(out) == before  # the earlier set, whole; no staging folder


def test_ctrl_c_during_the_final_renames_takes_effect_after_them(earlier_set):
    """The renames run to the end (an interrupted rename sequence would mix two sets): the new set is whole."""
    out, before = earlier_set
    done = interrupted_run("renaming", out, *karpathy_args("--metrics", "bleu", "rouge_l", "--resamples", "100",
                                                           "--output", str(out), "--names", "fresh0", "fresh1",
                                                           "fresh2"))
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "capeval: interrupted" and "Traceback" not in done.stderr
    after = report_set(out)
    assert sorted(after) == sorted(FILES.values()) and not any(name.startswith(STAGING_PREFIX) for name in after)
    for name, data in after.items():
        assert b"fresh1" in data and b"stale1" not in data, name  # every file is the new run's
