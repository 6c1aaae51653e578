"""Speed of capeval's pure-Python BLEU-1..4, ROUGE-L and CIDEr-D against pycocoevalcap 1.2's ``Bleu(4)``,
``Rouge()`` and ``Cider()`` on the same tokenized input, in one process (#35): the first ``--images`` images of
``Flickr8k.token.txt`` (read from ``../shared``), their 5 captions as references and, as the candidate of image i,
the first caption of image (i + 7) mod images; tokenized once by pycocoevalcap's PTBTokenizer (Java) before any
timing. Each capeval timing includes its reference side (n-gram codes, document frequencies, match masks), as a
new process per system pays it; "all three" shares the references' n-grams between BLEU and CIDEr-D, as the COCO
group does. Repeats are interleaved; every repeat asserts per-image and corpus values equal (==) to pycocoevalcap's.

    python benchmarks/overlap_speed.py [--data-dir ../shared/data] [--images 5000] [--repeats 3]
"""

import argparse
import contextlib
import io
import statistics
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np

from capeval.text.bleu import BleuReferences, bleu_from_statistics, bleu_scores
from capeval.text.cider import CiderReferences
from capeval.text.coco import OVERLAP_METRICS, OverlapReferences
from capeval.text.rouge import RougeReferences


def inputs(data_dir: Path, images: int):
    captions = OrderedDict()
    with open(data_dir / "benchmarks/flickr8k/Flickr8k.token.txt", encoding="utf-8") as handle:
        for line in handle:
            name, caption = line.rstrip("\n").split("\t", 1)
            captions.setdefault(name.split("#")[0], []).append(caption)
    names = list(captions)[:images]
    if len(names) < images:
        raise SystemExit(f"Flickr8k.token.txt has {len(names)} images, fewer than --images {images}")
    references = [captions[name][:5] for name in names]
    candidates = [captions[names[(i + 7) % images]][0] for i in range(images)]
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    with contextlib.redirect_stdout(io.StringIO()):
        gts = PTBTokenizer().tokenize({i: [{"caption": r} for r in refs] for i, refs in enumerate(references)})
        res = PTBTokenizer().tokenize({i: [{"caption": c}] for i, c in enumerate(candidates)})
    return gts, res


def pycocoevalcap_runs(gts, res):
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    def bleu():
        with contextlib.redirect_stdout(io.StringIO()):
            corpus, per_image = Bleu(4).compute_score(gts, res)
        return list(corpus), [list(column) for column in per_image]

    def rouge():
        corpus, per_image = Rouge().compute_score(gts, res)
        return corpus, list(per_image)

    def cider():
        corpus, per_image = Cider().compute_score(gts, res)
        return corpus, list(per_image)

    return {"bleu": bleu, "rouge_l": rouge, "cider": cider}


def capeval_runs(gts, res):
    references = [gts[i] for i in gts]
    candidates = [res[i][0] for i in gts]

    def bleu():
        stats = BleuReferences(references).statistics(candidates)
        per_image = [bleu_scores(row) for row in stats.tolist()]
        totals = stats.sum(axis=0).tolist()
        return ([bleu_from_statistics(totals, order) for order in range(1, 5)],
                [[scores[k] for scores in per_image] for k in range(4)])

    def rouge():
        scores = RougeReferences(references).scores(candidates)
        return np.mean(scores), list(scores)

    def cider():
        scores = CiderReferences(references).scores(candidates)
        return np.mean(scores), list(scores)

    def together():
        return OverlapReferences(references, OVERLAP_METRICS).values(candidates)

    return {"bleu": bleu, "rouge_l": rouge, "cider": cider, "all three": together}


def timed(run):
    wall, cpu = time.perf_counter(), time.process_time()
    out = run()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data")
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    gts, res = inputs(args.data_dir, args.images)
    theirs, ours = pycocoevalcap_runs(gts, res), capeval_runs(gts, res)
    times = {}
    for _ in range(args.repeats):
        expected = {}
        for name, run in theirs.items():
            expected[name], wall, cpu = timed(run)
            times.setdefault(("pycocoevalcap", name), []).append((wall, cpu))
        for name, run in ours.items():
            out, wall, cpu = timed(run)
            times.setdefault(("capeval", name), []).append((wall, cpu))
            if name == "all three":
                keys = [f"bleu_{n}" for n in range(1, 5)]
                got = ([out[k].corpus for k in keys], [out[k].per_sample for k in keys])
                assert got == expected["bleu"], "BLEU differs"
                for key in ("rouge_l", "cider"):
                    assert (out[key].corpus, out[key].per_sample) == expected[key], f"{key} differs"
            else:
                assert out[0] == expected[name][0] and out[1] == expected[name][1], f"{name} differs"
    print(f"{args.images} images x 5 references, {args.repeats} interleaved repeats, one process, after "
          f"tokenization; values equal (==) to pycocoevalcap in every repeat")
    print(f"{'metric':<10} {'pycocoevalcap wall / cpu (s)':>30} {'capeval wall / cpu (s)':>26} "
          f"{'speed-up wall / cpu':>20}")
    for name in ours:
        mine = times[("capeval", name)]
        base = (times[("pycocoevalcap", name)] if name in theirs else
                [tuple(map(sum, zip(*parts))) for parts in zip(*(times[("pycocoevalcap", n)] for n in theirs))])
        best = [min(t[i] for t in base) for i in (0, 1)], [min(t[i] for t in mine) for i in (0, 1)]
        print(f"{name:<10} {best[0][0]:>17.3f} / {best[0][1]:.3f} {best[1][0]:>16.3f} / {best[1][1]:.3f} "
              f"{best[0][0] / best[1][0]:>12.1f}x / {best[0][1] / best[1][1]:.1f}x")
    median = statistics.median(t[0] for t in times[("capeval", "all three")])
    print(f"(minimum over repeats; capeval 'all three' median wall {median:.3f} s)")


if __name__ == "__main__":
    main()
