"""Two CPU processes (gloo, joined through accelerate) give the single-process results, in the same order, for two
metrics — through the Python API and through evaluate's own distributed mode; an input error in one process is
raised in both (none is left waiting)."""

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
import torch.distributed as dist
from capeval import InputError
from capeval.distributed import process_state, score_distributed
from capeval.core.scoring import load_scorer

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
data = json.load(open(sys.argv[1]))
images = [Image.fromarray(np.array(a, dtype=np.uint8)) for a in data["images"]]
state = process_state()
out = {"group": [type(state).__name__, state.num_processes, state.process_index, dist.get_backend()]}
for metric in ("clip_s", "pac_s"):
    out[metric] = score_distributed(load_scorer(metric, device="cpu", batch_size=2),
                                    data["predictions"], images, data["references"])
broken = list(data["references"])
broken[3] = [7]  # sample 3 is process 1's: not a string
try:
    score_distributed(load_scorer("clip_s", device="cpu"), data["predictions"], images, broken)
except InputError as error:
    out["error"] = str(error)
errors = [None] * world
dist.all_gather_object(errors, out.get("error"))
# evaluate's distributed mode: each process adds its contiguous block, process 0 computes
n = len(images)
block = range(rank * n // world, (rank + 1) * n // world)
module = evaluate.load(sys.argv[3], num_process=world, process_id=rank, experiment_id="capeval-test", device="cpu")
module.add_batch(predictions=[data["predictions"][i] for i in block], images=[images[i] for i in block],
                 references=[data["references"][i] for i in block])
result = module.compute()
if rank == 0:
    out["module"] = result
    out["errors"] = errors
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
    offline = {k: "1" for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_EVALUATE_OFFLINE")}
    env = {**os.environ, **offline, "HF_HUB_CACHE": str(tiny_hub), "HF_MODULES_CACHE": str(tmp_path / "modules"),
           "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(_free_port()), str(tmp_path / "worker.py"), str(tmp_path / "data.json"),
           str(tmp_path / "out.json"), os.path.join(repo, "metrics", "clip_s")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["group"] == ["PartialState", 2, 0, "gloo"]
    own, remote = out["errors"][1], out["errors"][0]
    assert own.startswith("references[3][0] is an int")  # named by its index in the whole input
    assert remote.startswith("process 1 failed: InputError: ") and own in remote
    images = [Image.fromarray(np.array(a, dtype=np.uint8)) for a in data["images"]]
    for metric in ("clip_s", "pac_s"):
        single = load_scorer(metric, device="cpu").score(data["predictions"], images, data["references"])
        for key in (metric, f"ref{metric}"):
            np.testing.assert_allclose(out[metric][f"{key}_per_sample"], single[f"{key}_per_sample"], atol=1e-5)
            assert out[metric][key] == pytest.approx(single[key], abs=1e-6)
        assert out[metric]["hashcode"] == single["hashcode"]
    single = load_scorer("clip_s", device="cpu").score(data["predictions"], images, data["references"])
    np.testing.assert_allclose(out["module"]["refclip_s_per_sample"], single["refclip_s_per_sample"], atol=1e-5)
