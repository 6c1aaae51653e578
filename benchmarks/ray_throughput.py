"""Rows/s of CLIP-S through ``capeval.integrations.ray`` with 1 and 2 actors, and each actor's peak memory (RSS) for
growing row counts: bounded memory means the peak does not grow with the rows.

Rows are generated inside Ray (a caption and a 64x48 PNG's bytes each, cycling over 256 distinct images), scored
and consumed as a stream; nothing is collected on the driver. ``--weights tiny`` uses the tiny random test CLIP
(run it with the test hub cache: ``HF_HUB_CACHE=/tmp/tinyhub HF_HUB_OFFLINE=1``); ``--weights vit-b-32`` writes a
full-size random ViT-B/32 (open_clip, speed does not depend on the weights).

    python benchmarks/ray_throughput.py --rows 10000 100000 --actors 1 2 --weights tiny
"""

import argparse
import io
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

DISTINCT_IMAGES = 256
WORDS = np.array("a the dog cat man woman red blue ball runs sits on grass table two small big with near water".split())


def _png(seed: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (48, 64, 3), dtype=np.uint8)).save(buffer, "PNG")
    return buffer.getvalue()


def make_rows(batch):
    """``ray.data.range`` ids → rows {index, caption, image (PNG bytes)}."""
    ids = batch["id"]
    images = [_png(seed) for seed in range(DISTINCT_IMAGES)]
    rng = np.random.default_rng(int(ids[0]))
    captions = [" ".join(rng.choice(WORDS, size=8)) for _ in ids]
    return {"index": ids, "caption": np.array(captions, dtype=object),
            "image": np.array([images[int(i) % DISTINCT_IMAGES] for i in ids], dtype=object)}


def measured_scorer():
    """RayScorer that adds its process id and peak RSS to every batch (the benchmark's probe)."""
    import pyarrow as pa

    from capeval.integrations.ray import RayScorer

    class Probe(RayScorer):
        def __call__(self, batch):
            table = super().__call__(batch)
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
            return pa.table({"clip_s": table.column("clip_s"), "pid": [os.getpid()] * table.num_rows,
                             "peak_rss": [peak] * table.num_rows})

    return Probe


def run(rows: int, actors: int, weights: str, batch_size: int, cpus: int) -> dict:
    import ray

    from capeval.integrations import ray as integration

    source = ray.data.range(rows, override_num_blocks=max(1, rows // 2000)).map_batches(make_rows,
                                                                                       batch_format="numpy")
    integration.RayScorer = measured_scorer()  # score_dataset builds its actors from this class
    scored = integration.score_dataset(source, "clip_s", options={"device": "cpu", "weights": weights,
                                                                  "batch_size": batch_size},
                                       concurrency=actors, batch_size=batch_size,
                                       num_cpus=(cpus - 1) / actors)  # one CPU stays free for generating rows
    start, n, peaks, total = time.perf_counter(), 0, {}, 0.0
    for batch in scored.iter_batches(batch_size=None, batch_format="pyarrow"):
        n += batch.num_rows
        total += sum(batch.column("clip_s").to_pylist())
        for pid, peak in zip(batch.column("pid").to_pylist(), batch.column("peak_rss").to_pylist()):
            peaks[pid] = max(peaks.get(pid, 0), peak)
    seconds = time.perf_counter() - start
    assert n == rows, (n, rows)
    return {"rows": rows, "actors": actors, "seconds": round(seconds, 1), "rows_per_s": round(rows / seconds, 1),
            "hours_per_million_rows": round(1e6 / (rows / seconds) / 3600, 3),
            "peak_rss_mib_per_worker": sorted(round(p / 2**20) for p in peaks.values()),
            "mean_clip_s": total / n}


def main():
    import ray

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--weights", default="tiny", help="tiny | vit-b-32")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--num-cpus", type=int, default=2)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k.startswith(("HF_", "TRANSFORMERS_", "CAPEVAL_"))}
    ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {**env, "OMP_NUM_THREADS": "1"}})
    with tempfile.TemporaryDirectory() as tmp:
        if args.weights == "vit-b-32":
            from capeval.bench import random_clip_dir

            weights = str(random_clip_dir("ViT-B-32", Path(tmp)))
        else:
            weights = "openai-clip-vit-b-32"  # resolved in the tiny hub cache when HF_HUB_CACHE points there
        for actors in args.actors:
            for rows in args.rows:
                result = run(rows, actors, weights, args.batch_size, args.num_cpus)
                print(json.dumps({"weights": args.weights, **result}), flush=True)


if __name__ == "__main__":
    main()
