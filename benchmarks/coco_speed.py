"""Speed of the COCO group against pycocoevalcap 1.2's ``COCOEvalCap`` on the same input (#28 item 8): real
Flickr8k-Expert references (5 per image) and, per system, one Expert candidate per image, read from ``../shared`` at
run time; BLEU-1..4, METEOR, ROUGE-L, CIDEr (pycocoevalcap's SPICE cannot run without its CoreNLP jars: it is
taken out of its run, and the group leaves it out). Repeats are interleaved; every repeat asserts that capeval's
``.eval`` and ``.imgToEval`` equal pycocoevalcap's.

Two capeval timings: "cold" starts the METEOR jar in the call, as every pycocoevalcap run does; "warm" finds the jar
a previous call in the same process kept (evaluating again, e.g. every epoch, loads METEOR's paraphrase table once).
``--systems N`` scores N systems: one ``score_coco_group`` call against N ``COCOEvalCap`` runs.

    python benchmarks/coco_speed.py [--data-dir ../shared/data] [--images 1000] [--systems 1] [--repeats 3]
"""

import argparse
import contextlib
import io
import json
import statistics
import time
import warnings
from pathlib import Path

from capeval.cocoevalcap import COCOEvalCap
from capeval.text.coco import score_coco_group
from capeval.text.coco_jars import close_meteor_jar

KEYS = {"Bleu_1": "bleu_1", "Bleu_2": "bleu_2", "Bleu_3": "bleu_3", "Bleu_4": "bleu_4", "METEOR": "meteor",
        "ROUGE_L": "rouge_l", "CIDEr": "cider"}


class _NoSpice:
    """pycocoevalcap's SPICE needs the Stanford CoreNLP jars, which cannot be downloaded here."""

    def compute_score(self, gts, res):
        return 0.0, [0.0] * len(gts)

    def method(self):
        return "SPICE"


def inputs(data_dir: Path, images: int, systems: int):
    data = json.loads((data_dir / "benchmarks/flickr8k/flickr8k_expert_clipscore_format.json").read_text())
    entries = list(data.values())[:images]
    if len(entries) < images:
        raise SystemExit(f"the Expert file has {len(entries)} images, fewer than --images {images}")
    annotations = {"images": [], "annotations": []}
    results = [[] for _ in range(systems)]
    for image_id, entry in enumerate(entries):
        annotations["images"].append({"id": image_id, "file_name": entry["image_path"]})
        for ref in entry["ground_truth"]:
            annotations["annotations"].append({"id": len(annotations["annotations"]), "image_id": image_id,
                                               "caption": ref})
        candidates = [j["caption"] for j in entry["human_judgement"]]
        for s in range(systems):
            results[s].append({"image_id": image_id, "caption": candidates[(3 * s) % len(candidates)]})
    return annotations, results


def pycocoevalcap_runs(annotations, results):
    from pycocoevalcap import eval as pycoco_eval
    from pycocotools.coco import COCO

    evaluations = []
    spice, pycoco_eval.Spice = pycoco_eval.Spice, _NoSpice
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            coco = COCO()
            coco.dataset = annotations
            coco.createIndex()
            for system in results:
                evaluation = pycoco_eval.COCOEvalCap(coco, coco.loadRes(system))
                evaluation.evaluate()
                evaluations.append(evaluation)
    finally:
        pycoco_eval.Spice = spice
    for evaluation in evaluations:
        del evaluation.eval["SPICE"]
        for scores in evaluation.imgToEval.values():
            del scores["SPICE"]
    return evaluations


def capeval_runs(annotations, results):
    if len(results) == 1:
        evaluation = COCOEvalCap(annotations, results[0], quiet=True)
        evaluation.evaluate()
        return [evaluation]
    references = [[a["caption"] for a in annotations["annotations"] if a["image_id"] == i["id"]]
                  for i in annotations["images"]]
    return score_coco_group([[r["caption"] for r in system] for system in results], references)


def check_equal(ours, theirs) -> None:
    for mine, expected in zip(ours, theirs):
        if isinstance(mine, COCOEvalCap):
            assert mine.eval == expected.eval and mine.imgToEval == expected.imgToEval, "numbers differ"
        else:
            for name, key in KEYS.items():
                assert mine[key].corpus == expected.eval[name], f"{name} differs"
                assert mine[key].per_sample == [expected.imgToEval[i][name] for i in expected.imgToEval], name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--systems", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    annotations, results = inputs(args.data_dir, args.images, args.systems)
    names = ["pycocoevalcap", "capeval cold", "capeval warm"]
    times = {name: [] for name in names}
    for repeat in range(args.repeats):
        order = names[-repeat % 3:] + names[:-repeat % 3]  # rotated; "warm" always after some capeval call
        outputs = {}
        for name in order:
            run = pycocoevalcap_runs if name == "pycocoevalcap" else capeval_runs
            if name == "capeval cold":
                close_meteor_jar()
            start = time.perf_counter()
            outputs[name] = run(annotations, results)
            times[name].append(time.perf_counter() - start)
        for name in names[1:]:
            check_equal(outputs[name], outputs["pycocoevalcap"])
    median = {name: statistics.median(values) for name, values in times.items()}
    print(json.dumps({"records": args.images * args.systems, "images": args.images, "systems": args.systems,
                      "repeats": args.repeats, "identical": True,
                      "seconds": {name: [round(t, 2) for t in values] for name, values in times.items()},
                      "median_s": {name: round(t, 2) for name, t in median.items()},
                      "speed_ratio (pycocoevalcap time / capeval time)":
                          {name: round(median["pycocoevalcap"] / median[name], 2) for name in names[1:]}},
                     indent=1))


if __name__ == "__main__":
    main()
