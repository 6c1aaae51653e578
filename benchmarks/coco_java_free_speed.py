"""The standard COCO table without Java, against pycocoevalcap 1.2 (#35 item 6), on a Karpathy-test-sized input:
5,000 images × 5 references × 3 systems built from ``../shared`` (Flickr8k.token.txt: the first 5,000 images, their
5 captions as references; system ``s`` captions image ``i`` with the first caption of image ``(i + 7 + 11 s) mod
5000``: real captions, of other images).

Every run is a new process, timed from outside: wall seconds (the interpreter's start and imports included) and
the CPU seconds of the process and of every process it waited for (the JVMs pycocoevalcap starts, METEOR's worker
processes), which other jobs on the machine change less than the wall time:

- **the same work**: pycocoevalcap's ``COCOEvalCap`` and capeval's drop-in (``coco_backend="python"``, the default), one
  process per system, BLEU-1..4, METEOR, ROUGE-L, CIDEr-D (pycocoevalcap's SPICE cannot run here without its
  CoreNLP jars: it is taken out of its run); ``.eval`` and ``.imgToEval`` asserted identical;
- **more work**: ``capeval evaluate --metrics coco`` on the three systems in one process, with its 10,000
  resamples, CIs, tests and report (``--output``), against pycocoevalcap's three bare tables.

METEOR's paraphrase index (built once per machine, about 20 s, into capeval's cache: ``$CAPEVAL_CACHE`` or
``~/.cache/capeval``) is opened once before the timed runs, so no run pays for building it.

    python benchmarks/coco_java_free_speed.py [--data-dir ../shared/data] [--images 5000] [--repeats 2]
"""

import argparse
import contextlib
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SYSTEMS = 3
REFERENCES = 5


def build(data_dir: Path, images: int, folder: Path):
    captions = {}
    with open(data_dir / "benchmarks/flickr8k/Flickr8k.token.txt", encoding="utf-8") as handle:
        for line in handle:
            key, text = line.rstrip("\n").split("\t")
            captions.setdefault(key.split("#")[0], []).append(text)
    names = [name for name, texts in captions.items() if len(texts) >= REFERENCES][:images]
    if len(names) < images:
        raise SystemExit(f"Flickr8k.token.txt has {len(names)} images with {REFERENCES} captions, fewer than {images}")
    annotations = {"images": [{"id": i, "file_name": name} for i, name in enumerate(names)], "annotations": []}
    for i, name in enumerate(names):
        for text in captions[name][:REFERENCES]:
            annotations["annotations"].append({"id": len(annotations["annotations"]), "image_id": i, "caption": text})
    (folder / "annotations.json").write_text(json.dumps(annotations))
    results = []
    for s in range(SYSTEMS):
        path = folder / f"system_{s}.json"
        path.write_text(json.dumps([{"image_id": i, "caption": captions[names[(i + 7 + 11 * s) % images]][0]}
                                    for i in range(images)]))
        results.append(path)
    return folder / "annotations.json", results


def child_pycocoevalcap(annotations: str, results: str, out: str) -> None:
    from pycocoevalcap import eval as pycoco_eval
    from pycocotools.coco import COCO

    class NoSpice:  # its CoreNLP jars cannot be downloaded here
        def compute_score(self, gts, res):
            return 0.0, [0.0] * len(gts)

        def method(self):
            return "SPICE"

    pycoco_eval.Spice = NoSpice
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO(annotations)
        evaluation = pycoco_eval.COCOEvalCap(coco, coco.loadRes(results))
        evaluation.evaluate()
    del evaluation.eval["SPICE"]
    for scores in evaluation.imgToEval.values():
        del scores["SPICE"]
    _write(out, evaluation)


def child_capeval(annotations: str, results: str, out: str) -> None:
    from capeval.cocoevalcap import COCOEvalCap

    evaluation = COCOEvalCap(annotations, results, quiet=True)
    evaluation.evaluate()
    _write(out, evaluation)


def _write(out: str, evaluation) -> None:
    with open(out, "w") as handle:
        json.dump({"eval": evaluation.eval, "imgToEval": {str(k): v for k, v in evaluation.imgToEval.items()}},
                  handle)


def timed(command, env=None):
    """Wall seconds and CPU seconds (user + system, of the command and every process it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        tool, annotations, results, out = args.child
        (child_pycocoevalcap if tool == "pycocoevalcap" else child_capeval)(annotations, results, out)
        return
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    me = [sys.executable, str(Path(__file__).resolve())]
    subprocess.run([sys.executable, "-c", "from capeval.text.meteor import Meteor; Meteor().load()"], check=True,
                   env=env)  # the paraphrase index exists (built once per machine), outside the timed runs
    load_at_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="capeval-coco-speed-") as tmp:
        folder = Path(tmp)
        annotations, results = build(args.data_dir, args.images, folder)
        wall = {"pycocoevalcap": [], "capeval": [], "capeval evaluate": []}
        cpu = {name: [] for name in wall}
        for repeat in range(args.repeats):
            for tool in ("pycocoevalcap", "capeval") if repeat % 2 == 0 else ("capeval", "pycocoevalcap"):
                runs = [timed([*me, "--child", tool, str(annotations), str(path), str(folder / f"{tool}_{s}.json")],
                              env) for s, path in enumerate(results)]
                wall[tool].append(sum(w for w, _ in runs))
                cpu[tool].append(sum(c for _, c in runs))
            for s in range(SYSTEMS):
                mine = json.loads((folder / f"capeval_{s}.json").read_text())
                theirs = json.loads((folder / f"pycocoevalcap_{s}.json").read_text())
                assert mine == theirs, f"system {s}: the numbers differ"
            seconds, cpu_seconds = timed(
                ["capeval", "evaluate", "--annotations", str(annotations), "--results", *map(str, results),
                 "--metrics", "coco", "--baseline", "system_0", "--output", str(folder / "report")], env)
            wall["capeval evaluate"].append(seconds)
            cpu["capeval evaluate"].append(cpu_seconds)
        median = {name: statistics.median(values) for name, values in wall.items()}
        median_cpu = {name: statistics.median(values) for name, values in cpu.items()}
    print(json.dumps({"images": args.images, "references": REFERENCES, "systems": SYSTEMS, "repeats": args.repeats,
                      "identical": True, "cores": os.cpu_count(), "load_average_at_start": round(load_at_start, 2),
                      "wall_s": {k: [round(t, 2) for t in v] for k, v in wall.items()},
                      "cpu_s": {k: [round(t, 2) for t in v] for k, v in cpu.items()},
                      "median_wall_s": {k: round(v, 2) for k, v in median.items()},
                      "median_cpu_s": {k: round(v, 2) for k, v in median_cpu.items()},
                      "drop-in speed-up (pycocoevalcap / capeval, one process per system)":
                          round(median["pycocoevalcap"] / median["capeval"], 2),
                      "drop-in CPU ratio (pycocoevalcap / capeval)":
                          round(median_cpu["pycocoevalcap"] / median_cpu["capeval"], 2),
                      "capeval evaluate (3 systems, 10,000 resamples, report) / pycocoevalcap (3 bare tables)":
                          round(median["capeval evaluate"] / median["pycocoevalcap"], 2)}, indent=1))


if __name__ == "__main__":
    main()
