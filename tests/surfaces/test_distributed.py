"""Two CPU processes (gloo) give the single-process results, in the same order, for two metrics — through the
Python API (torch.distributed gather) and through evaluate's own distributed mode."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from capeval.core.scoring import load_scorer

WORKER = r'''
import json, os, sys
import numpy as np
from PIL import Image
import evaluate
from capeval.distributed import score_distributed
from capeval.core.scoring import load_scorer

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
data = json.load(open(sys.argv[1]))
images = [Image.fromarray(np.array(a, dtype=np.uint8)) for a in data["images"]]
out = {}
for metric in ("clip_s", "pac_s"):
    out[metric] = score_distributed(load_scorer(metric, device="cpu", batch_size=2),
                                    data["predictions"], images, data["references"])
# evaluate's distributed mode: each process adds its contiguous block, process 0 computes
n = len(images)
block = range(rank * n // world, (rank + 1) * n // world)
module = evaluate.load(sys.argv[3], num_process=world, process_id=rank, experiment_id="capeval-test", device="cpu")
module.add_batch(predictions=[data["predictions"][i] for i in block], images=[images[i] for i in block],
                 references=[data["references"][i] for i in block])
result = module.compute()
if rank == 0:
    out["module"] = result
    json.dump(out, open(sys.argv[2], "w"))
'''


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_gloo_processes_equal_single_process(tiny_hub, tmp_path):
    rng = np.random.default_rng(0)
    arrays = [rng.integers(0, 256, (12, 12, 3)).tolist() for _ in range(3)]
    n = 7
    data = {"images": [arrays[i % 3] for i in range(n)], "predictions": [f"caption {i}" for i in range(n)],
            "references": [[f"ref {i}"] + ["extra"] * (i % 2) for i in range(n)]}
    (tmp_path / "data.json").write_text(json.dumps(data))
    (tmp_path / "worker.py").write_text(WORKER)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "HF_HUB_CACHE": str(tiny_hub), "HF_MODULES_CACHE": str(tmp_path / "modules"),
           "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(_free_port()), str(tmp_path / "worker.py"), str(tmp_path / "data.json"),
           str(tmp_path / "out.json"), os.path.join(repo, "metrics", "clip_s")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads((tmp_path / "out.json").read_text())
    images = [Image.fromarray(np.array(a, dtype=np.uint8)) for a in data["images"]]
    for metric in ("clip_s", "pac_s"):
        single = load_scorer(metric, device="cpu").score(data["predictions"], images, data["references"])
        for key in (metric, f"ref{metric}"):
            np.testing.assert_allclose(out[metric][f"{key}_per_sample"], single[f"{key}_per_sample"], atol=1e-5)
            assert out[metric][key] == pytest.approx(single[key], abs=1e-6)
    single = load_scorer("clip_s", device="cpu").score(data["predictions"], images, data["references"])
    np.testing.assert_allclose(out["module"]["refclip_s_per_sample"], single["refclip_s_per_sample"], atol=1e-5)
