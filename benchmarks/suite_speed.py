"""A metric suite in one pass (``capeval.suite.score_suite``) against the same metrics run separately, on full-size
random models: the suite ``coco + clip_s + pac_s + polos`` on N systems × M images (default 5 × 200 = 1,000 records,
5 references per image, 640×480 JPEG files) vs each metric loaded and run on its own over every system
(``load_scorer(name).score(...)`` per system, images given as the same files: what scoring one metric per call does).
Both sides load their models inside the timing; repetitions are interleaved (the order rotates), medians reported,
and every per-image score of the suite is checked equal (==) to the separate runs.

Models: OpenAI-layout CLIP ViT-B/32 (random; also standing for PAC-S' CLIP), RoBERTa-base (random; SimCSE) with a
tokenizer spelling the workload's words in 1–2 tokens, and a Polos head of the official size, written into an offline
Hugging Face cache under the registered names, so both sides load them exactly as the real weights.

    python benchmarks/suite_speed.py --repeats 2
    python benchmarks/suite_speed.py --systems 2 --images 20 --repeats 1   # a quick look
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
from polos_speed import WORKLOAD_WORDS, word_level_tokenizer  # noqa: E402  (the same SimCSE tokenizer)

IMAGE_METRICS = ("clip_s", "pac_s", "polos")


def write_snapshot(cache: Path, name: str, build) -> None:
    """``build(folder)`` filed in the hub cache ``cache`` as registered weight ``name`` (offline layout)."""
    from capeval.core.hub import registered_weights
    from capeval.testing import snapshot_revision

    spec = registered_weights()[name]
    repo = cache / ("models--" + spec.repo_id.replace("/", "--"))
    revision = snapshot_revision(spec)
    build(repo / "snapshots" / revision)
    missing = [f for f in spec.files if not (repo / "snapshots" / revision / f).exists()]
    if missing:
        raise RuntimeError(f"{name}: {missing} not written")
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / ("main" if len(spec.revision) == 40 else spec.revision)).write_text(revision)


def full_size_cache(cache: Path) -> None:
    import torch
    from transformers import RobertaConfig, RobertaModel

    from capeval.bench import random_clip_dir
    from capeval.polos.checkpoint import head_config, write_head
    from capeval.polos.scorer import head_from_config
    from capeval.testing import tiny_roberta

    def roberta(folder: Path) -> None:
        tiny_roberta(folder)  # the repo's file layout; tokenizer and model replaced by full-size ones
        word_level_tokenizer(folder)
        vocab = len(json.loads((folder / "vocab.json").read_text()))
        torch.manual_seed(0)
        model = RobertaModel(RobertaConfig(vocab_size=vocab, max_position_embeddings=514, pad_token_id=1,
                                           bos_token_id=0, eos_token_id=2))
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
        model.config.save_pretrained(str(folder))

    def head(folder: Path) -> None:
        config = head_config(text_dim=768, clip_dim=512)
        torch.manual_seed(1)
        write_head(folder, head_from_config(config).state_dict(), config)

    write_snapshot(cache, "openai-clip-vit-b-32", lambda folder: random_clip_dir("ViT-B-32", folder))
    write_snapshot(cache, "pacs-clip-vit-b-32", lambda folder: random_clip_dir("ViT-B-32", folder))
    write_snapshot(cache, "simcse-roberta-base", roberta)
    write_snapshot(cache, "polos", head)


def workload(root: Path, n_systems: int, n_images: int, seed: int = 0):
    """JPEG files, 5 references per image, one caption per image per system (some repeated across systems)."""
    from capeval.core.evaluation_sets import EvalImage, GroundTruth, SystemCaptions

    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    words = np.array(WORKLOAD_WORDS)

    def sentence(length: int) -> str:
        return " ".join(rng.choice(words, length))

    images = {}
    for i in range(n_images):
        base = rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)  # smooth content: JPEG sizes of photographs
        Image.fromarray(base).resize((640, 480), Image.BICUBIC).save(root / f"{i}.jpg", quality=90)
        images[i] = EvalImage(i, f"{i}.jpg", tuple(sentence(int(rng.integers(8, 14))) for _ in range(5)))
    shared = [sentence(int(rng.integers(7, 12))) for _ in range(n_images)]
    systems = [SystemCaptions(f"system_{s}", {i: shared[i] if rng.random() < 0.3 else sentence(int(rng.integers(7, 12)))
                                             for i in images}, f"system_{s}.json") for s in range(n_systems)]
    return GroundTruth(images, "annotations.json"), systems


def run_suite(truth, systems, root):
    from capeval.suite import score_suite

    scores = score_suite(truth, systems, ["coco", *IMAGE_METRICS], images_root=root, device="cpu",
                         show_progress=False)
    return {s: scores.per_image[s] for s in scores.per_image}, scores.counts


def run_separately(truth, systems, root):
    from capeval.core.scoring import load_scorer
    from capeval.text.coco import coco_group_names

    ids = list(truth.images)
    files = [str(truth.image_path(i, root)) for i in ids]
    refs = [list(truth.images[i].references) for i in ids]
    per_image = {s.name: {} for s in systems}
    for name in [*coco_group_names(), *IMAGE_METRICS]:
        scorer = load_scorer(name, device="cpu")
        for system in systems:
            captions = [system.captions[i] for i in ids]
            result = scorer.score(captions, None if name not in IMAGE_METRICS else files, refs)
            per_image[system.name].update({k[: -len("_per_sample")]: v for k, v in result.items()
                                           if k.endswith("_per_sample")})
    return per_image, None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", type=int, default=5)
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    import warnings

    import torch

    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ["HF_HUB_CACHE"] = str(tmp / "hub")
        os.environ["HF_HUB_OFFLINE"] = os.environ["TRANSFORMERS_OFFLINE"] = "1"
        full_size_cache(tmp / "hub")
        truth, systems = workload(tmp / "images", args.systems, args.images)
        sides = {"suite": run_suite, "separately": run_separately}
        seconds = {name: [] for name in sides}
        cpu_seconds = {name: [] for name in sides}  # this process's CPU time: steadier than wall time on a shared VM
        outputs = {}
        for repeat in range(args.repeats):
            order = list(sides) if repeat % 2 == 0 else list(reversed(sides))
            for name in order:
                start, cpu_start = time.perf_counter(), time.process_time()
                outputs[name], counts = sides[name](truth, systems, tmp / "images")
                seconds[name].append(time.perf_counter() - start)
                cpu_seconds[name].append(time.process_time() - cpu_start)
                if counts:
                    outputs["counts"] = counts
                print(f"repeat {repeat}: {name} {seconds[name][-1]:.1f} s ({cpu_seconds[name][-1]:.1f} CPU s)",
                      flush=True)
        suite, separate = outputs["suite"], outputs["separately"]
        equal = all(suite[s][k] == separate[s][k] for s in suite for k in suite[s])
        medians = {name: statistics.median(values) for name, values in seconds.items()}
        print(json.dumps({
            "workload": f"{args.systems} systems x {args.images} images ({args.systems * args.images} records), "
                        "5 references, 640x480 JPEG files", "metrics": "coco + clip_s + pac_s + polos",
            "machine": f"{os.cpu_count()} cores, {torch.get_num_threads()} torch threads",
            "seconds": seconds, "cpu_seconds": cpu_seconds, "median_suite_s": round(medians["suite"], 1),
            "median_separately_s": round(medians["separately"], 1),
            "suite_over_separately": round(medians["suite"] / medians["separately"], 3),
            "every_per_image_score_equal": equal, "suite_counts": outputs["counts"]}, indent=2))


if __name__ == "__main__":
    main()
