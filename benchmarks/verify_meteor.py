"""Whole-corpus check of capeval's METEOR 1.5 (``capeval.text.meteor``) against pycocoevalcap's
``meteor-1.5.jar - - -stdio -l en -norm`` (through ``capeval.text.coco_jars.MeteorJar``): every candidate/reference set
of ``../shared/data`` with references (Flickr8k-Expert, Flickr8k-CF, Composite, THumB, Pascal-50S with its 48
references; Polaris has none), PTB-tokenized as production does (``ptb_tokenize_blocks``).

Per set it prints the counts of equal and different segment statistics (the 23 numbers of a ``SCORE`` line) and
segment scores (each distinct segment), whether the corpus score (the jar's ``EVAL`` over every row) equals
``combine`` of the summed statistics, how many bootstrap multisets of rows get the jar's ``EVAL`` score from
``combine(counts @ statistics)``, the first differences, and both implementations' load time and throughput.

    python benchmarks/verify_meteor.py [--data-dir ../shared/data] [--sets thumb composite] [--resamples 100]
    python benchmarks/verify_meteor.py --pow-table    # Java's Math.pow corrections of capeval.text.java_runtime (javac)
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

from capeval.benchmarks import loaders
from capeval.benchmarks.pairwise import pascal50s
from capeval.text.coco_jars import MeteorJar, meteor_score_line, ptb_tokenize_blocks
from capeval.text.java_runtime import correctly_rounded_pow
from capeval.text.meteor import Meteor
from capeval.text.meteor_score import BETA, combine, segment_score

REPO = Path(__file__).resolve().parents[1]
SETS = ("flickr8k_expert", "flickr8k_cf", "composite", "thumb", "pascal50s")


def raw_sets(data_dir: Path, names) -> Dict[str, Tuple[List[str], List[List[str]]]]:
    bench = data_dir / "benchmarks"
    out = {}
    for name in names:
        if name == "pascal50s":
            pairs = pascal50s(bench)
            out[name] = ([*pairs.candidates_a, *pairs.candidates_b], [list(r) for r in pairs.references] * 2)
        else:
            benchmark = loaders.CORRELATION_LOADERS[name](bench)
            out[name] = (list(benchmark.candidates), [list(r) for r in benchmark.references])
    return out


def tokenized(candidates: List[str], references: List[List[str]]) -> List[Tuple[str, Tuple[str, ...]]]:
    """Rows as production scores them: candidates in one tokenizer block, references in another."""
    cands, flat = ptb_tokenize_blocks([candidates, [r for refs in references for r in refs]])
    rows, start = [], 0
    for c, refs in zip(cands, references):
        rows.append((c, tuple(flat[start:start + len(refs)])))
        start += len(refs)
    return rows


def jar_eval(jar: MeteorJar, lines: List[str]) -> List[str]:
    return jar.exchange(["EVAL ||| " + " ||| ".join(lines)], len(lines) + 1)


def verify_set(name: str, rows, jar: MeteorJar, meteor: Meteor, args, rng) -> Dict[str, float]:
    segments = list(dict.fromkeys(rows))
    where = {s: k for k, s in enumerate(segments)}
    row_segment = np.array([where[r] for r in rows])
    start = time.perf_counter()
    jar_lines = jar.exchange([meteor_score_line(c, list(refs)) for c, refs in segments], len(segments))
    jar_seconds = time.perf_counter() - start
    start = time.perf_counter()
    mine = meteor.statistics_batch([c for c, _ in segments], [list(r) for _, r in segments],
                                   processes=args.processes)
    mine_seconds = time.perf_counter() - start
    jar_stats = np.array([[float(v) for v in line.split()] for line in jar_lines])
    stats_differ = np.nonzero(np.any(jar_stats != mine[:, :23], axis=1))[0]
    jar_scores = np.array([float(v) for v in jar_eval(jar, jar_lines)[:-1]])
    scores_differ = np.nonzero(jar_scores != segment_score(mine))[0]
    jar_corpus = float(jar_eval(jar, [jar_lines[k] for k in row_segment])[-1])
    per_row = mine[row_segment]
    corpus = float(combine(per_row.sum(0))[0])
    corpus_equal = jar_corpus == corpus
    resamples_equal = 0
    differing_resamples = []
    for _ in range(args.resamples):
        draw = rng.integers(0, len(rows), size=min(len(rows), args.resample_size))
        jar_value = float(jar_eval(jar, [jar_lines[row_segment[k]] for k in draw])[-1])
        mine_value = float(combine(np.bincount(draw, minlength=len(rows)) @ per_row)[0])
        resamples_equal += jar_value == mine_value
        if jar_value != mine_value:
            differing_resamples.append((jar_value, mine_value))
    print(f"\n{name}: {len(rows)} rows, {len(segments)} distinct segments, "
          f"{sum(len(r) for _, r in segments)} alignments")
    print(f"  segment statistics: {len(segments) - len(stats_differ)} equal, {len(stats_differ)} different")
    print(f"  segment scores:     {len(segments) - len(scores_differ)} equal, {len(scores_differ)} different")
    print(f"  corpus score:       jar {jar_corpus!r}, capeval {corpus!r}: "
          f"{'equal' if corpus_equal else 'DIFFERENT'}")
    print(f"  resamples ({args.resample_size} rows each): {resamples_equal} equal, "
          f"{args.resamples - resamples_equal} different")
    for jar_value, mine_value in differing_resamples[:args.examples]:
        print(f"    resample: jar {jar_value!r} capeval {mine_value!r} "
              f"({abs(jar_value - mine_value) / np.spacing(jar_value):.0f} ulp)")
    for k in list(stats_differ[:args.examples]) + list(scores_differ[:args.examples]):
        print(f"    {segments[k]}\n      jar     {jar_lines[k]}  {jar_scores[k]!r}\n"
              f"      capeval {' '.join(str(v) for v in mine[k, :23])}  {float(segment_score(mine[k])[0])!r}")
    print(f"  throughput: jar {len(segments) / jar_seconds:.0f} segments/s, capeval "
          f"{len(segments) / mine_seconds:.0f} segments/s ({args.processes} process(es))")
    return {"segments": len(segments), "stats_differ": len(stats_differ), "scores_differ": len(scores_differ),
            "corpus_equal": corpus_equal, "resamples_equal": resamples_equal}


POW_SOURCE = """
import java.io.*;
public class CapevalPow {
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        StringBuilder out = new StringBuilder();
        for (String line; (line = in.readLine()) != null; )
            out.append(Double.doubleToRawLongBits(Math.pow(Double.longBitsToDouble(Long.parseLong(line)),
                                                           Double.parseDouble(args[0])))).append('\\n');
        System.out.print(out);
    }
}
"""


def pow_table(max_words: int = 1000) -> None:
    """Java's Math.pow(frag, 0.2) against the correctly rounded power on every frag = c / (m / 2), m <= max_words,
    1 <= c <= m / 2, printed as the reduced fractions where Java is one ulp above / below."""
    fractions = sorted({Fraction(2 * c, m) for m in range(2, max_words + 1) for c in range(1, m // 2 + 1)})
    values = np.array([float(f) for f in fractions])
    with tempfile.TemporaryDirectory(prefix="capeval-pow-") as folder:
        (Path(folder) / "CapevalPow.java").write_text(POW_SOURCE)
        subprocess.run(["javac", "CapevalPow.java"], cwd=folder, check=True)
        run = subprocess.run(["java", "-cp", folder, "CapevalPow", repr(BETA)], check=True, capture_output=True,
                             text=True, input="".join(f"{v}\n" for v in values.view(np.int64)))
    java = np.array([int(v) for v in run.stdout.split()], dtype=np.int64).view(np.float64)
    exact = correctly_rounded_pow(values, BETA)
    up, down = java == np.nextafter(exact, np.inf), java == np.nextafter(exact, -np.inf)
    if np.any((java != exact) & ~up & ~down):
        raise SystemExit("Java's Math.pow is more than one ulp off the correctly rounded power somewhere")
    print(f"{len(values)} fragmentation values, {int(up.sum())} one ulp up, {int(down.sum())} one ulp down "
          f"({subprocess.run(['java', '-version'], capture_output=True, text=True).stderr.splitlines()[0]})")
    for label, mask in (("_POW_ULP_UP", up), ("_POW_ULP_DOWN", down)):
        print(f"{label} = {' '.join(str(f) for f, hit in zip(fractions, mask) if hit)!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    parser.add_argument("--resamples", type=int, default=100)
    parser.add_argument("--resample-size", type=int, default=1000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--examples", type=int, default=5)
    parser.add_argument("--pow-table", action="store_true", help="print Java's Math.pow corrections and stop")
    args = parser.parse_args()
    if shutil.which("java") is None:
        print("java is not on PATH: the jar cannot run", file=sys.stderr)
        return 2
    if args.pow_table:
        pow_table()
        return 0
    start = time.perf_counter()
    meteor = Meteor().load()
    print(f"capeval METEOR loaded in {time.perf_counter() - start:.2f} s")
    start = time.perf_counter()
    jar = MeteorJar()
    jar_eval(jar, ["0 " * 23])  # waits until the jar has loaded its paraphrase table
    print(f"the jar started in {time.perf_counter() - start:.2f} s")
    rng = np.random.default_rng(0)
    results = {}
    try:
        for name, (candidates, references) in raw_sets(args.data_dir, args.sets).items():
            results[name] = verify_set(name, tokenized(candidates, references), jar, meteor, args, rng)
    finally:
        jar.close()
    print("\nset              segments  stats differ  scores differ  corpus  resamples equal")
    for name, r in results.items():
        print(f"{name:16} {r['segments']:9} {r['stats_differ']:13} {r['scores_differ']:14}  "
              f"{'equal' if r['corpus_equal'] else 'DIFF':6}  {r['resamples_equal']}/{args.resamples}")
    clean = all(not r["stats_differ"] and not r["scores_differ"] and r["corpus_equal"] for r in results.values())
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
