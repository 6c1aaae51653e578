"""CLIP-S / RefCLIP-S speed: capeval vs torchmetrics' CLIPScore vs a bare open_clip forward of each distinct input.

One process, one full-size random ViT-B/32 (open_clip, QuickGELU; torchmetrics gets a transformers CLIPModel of the
same architecture), interleaved repetitions (each in a rotated order), every system starting from the same JPEG files
and captions:

- capeval: ``ClipScorer`` (validation, content hashing, de-duplication, length-bucketed trimmed text batches, last
  blocks at the pooled token, the prompt's states computed once per backbone), caches emptied before each repetition;
- torchmetrics: ``CLIPScore`` on the decoded images and the candidates and, with references, ``CLIPScore`` text-to-text
  on every (candidate, reference) pair: its only way to a RefCLIP-S;
- bare: the model's own ``encode_image`` on each distinct image once (official preprocessing) and a trimmed text
  forward (open_clip's own blocks) on each distinct text once (sorted by length, padded to the batch's longest), then
  the formulas: the work torchmetrics-style code does without de-duplication waste (capeval does less: see above);
- bare_fixed_shapes: the same, with capeval's text shapes (each text at its own rounded width, forwards of a fixed
  number of rows) that make a text's feature bitwise independent of its batch.

Printed: medians, ``capeval_vs_torchmetrics`` (torchmetrics seconds / capeval seconds; target ≥ 1.5),
``capeval_vs_bare`` (bare seconds / capeval seconds; target ≥ 0.9) and ``capeval_vs_bare_fixed_shapes`` (what
capeval costs beyond its forwards). ``--sizes`` adds capeval's cost for N pairs over N/4 distinct images (``--plot``
draws it; needs the ``plot`` extra).

    pip install capeval[bench,plot]
    python benchmarks/clip_speed.py --repeats 3
    python benchmarks/clip_speed.py --repeats 0 --sizes 64 256 1024 4096 --plot clip_cost.png
"""

import argparse
import gc
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

WORDS = ("a an the man woman child dog cat horse bus car bike red blue green small large old young two three people "
         "sitting standing riding walking running holding next to near on in front of behind street park beach field "
         "table kitchen water snow grass building tree wearing hat shirt playing ball frisbee looking at").split()
PREFIX = "A photo depicts "


def workload(tmp: Path, pairs: int, distinct_images: int, refs_per_pair: int, seed: int = 0):
    """``pairs`` captions over ``distinct_images`` 640×480 JPEG files (written once), captions of 8–18 words."""
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(distinct_images):
        path = tmp / f"image_{seed}_{i}.jpg"
        if not path.exists():
            smooth = rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)  # photo-like: smooth, compressible
            Image.fromarray(smooth).resize((640, 480), Image.BICUBIC).save(path, quality=90)
        paths.append(str(path))

    def caption():
        return " ".join(rng.choice(WORDS, size=int(rng.integers(8, 19))))

    images = [paths[i % distinct_images] for i in range(pairs)]
    captions = [caption() for _ in range(pairs)]
    refs = [[caption() for _ in range(refs_per_pair)] for _ in range(pairs)] if refs_per_pair else None
    return images, captions, refs


def build_capeval(clip_dir: Path):
    from capeval.backbones.clip import ClipBackbone
    from capeval.clip_s.scorer import ClipScorer

    backbone = ClipBackbone(str(clip_dir), device="cpu")
    scorer = ClipScorer(None, clip_backbone=backbone)

    def run(images, captions, refs):
        backbone.reset_caches()
        result = scorer.score(captions, images, refs)
        return np.array(result["refclip_s_per_sample" if refs else "clip_s_per_sample"])

    return run, backbone


def build_bare(backbone, *, rows=None, width_step=None):
    """Each distinct input once on the same open_clip model, written without capeval's code paths: texts sorted by
    length in batches of 64 padded to each batch's longest; or, with ``rows``/``width_step``, the shapes capeval uses
    for bitwise batch independence (each text at its length rounded up to ``width_step``, forwards of ``rows(width)``
    rows, padded)."""
    from open_clip.tokenizer import SimpleTokenizer
    from torchvision import transforms as T

    model, tokenizer = backbone.model, SimpleTokenizer()
    transform = T.Compose([T.Resize(224, interpolation=T.InterpolationMode.BICUBIC), T.CenterCrop(224),
                           lambda im: im.convert("RGB"), T.ToTensor(), T.Normalize(backbone.mean, backbone.std)])

    def text_forward(tokens):
        width = tokens.shape[1]
        x = model.token_embedding(tokens) + model.positional_embedding[:width]
        x = model.ln_final(model.transformer(x, attn_mask=model.attn_mask[:width, :width]))
        return x[torch.arange(len(tokens)), tokens.argmax(-1)] @ model.text_projection

    @torch.inference_mode()
    def run(images, captions, refs):
        distinct_images = list(dict.fromkeys(images))
        pixels = torch.stack([transform(Image.open(path)) for path in distinct_images])
        image_features = torch.cat([model.encode_image(chunk) for chunk in pixels.split(64)])
        texts = list(dict.fromkeys([PREFIX + c for c in captions] + [PREFIX + r for rs in refs or [] for r in rs]))
        ids = sorted((([tokenizer.sot_token_id, *tokenizer.encode(t)][:76] + [tokenizer.eot_token_id], i)
                      for i, t in enumerate(texts)), key=lambda entry: len(entry[0]))
        text_features = torch.empty(len(texts), image_features.shape[1])
        if rows is None:
            forwards = [(chunk, max(len(row) for row, _ in chunk)) for chunk in
                        (ids[start:start + 64] for start in range(0, len(ids), 64))]
        else:
            by_width = {}
            for row, i in ids:
                width = min(-(-len(row) // width_step) * width_step, model.context_length)
                by_width.setdefault(width, []).append((row, i))
            forwards = [(group[start:start + rows(width)], width) for width, group in by_width.items()
                        for start in range(0, len(group), rows(width))]
        for chunk, width in forwards:
            tokens = torch.zeros(rows(width) if rows else len(chunk), width, dtype=torch.long)
            for j, (row, _) in enumerate(chunk):
                tokens[j, :len(row)] = torch.tensor(row)
            text_features[[i for _, i in chunk]] = text_forward(tokens)[:len(chunk)]
        unit = torch.nn.functional.normalize
        image_of = {path: i for i, path in enumerate(distinct_images)}
        text_of = {t: i for i, t in enumerate(texts)}
        img = unit(image_features[[image_of[p] for p in images]], dim=-1)
        cand = unit(text_features[[text_of[PREFIX + c] for c in captions]], dim=-1)
        clip_s = 2.5 * (img * cand).sum(-1).clamp(min=0)
        if not refs:
            return clip_s.numpy()
        ref_sim = torch.stack([(unit(text_features[[text_of[PREFIX + r] for r in rs]], dim=-1) @ cand[i]).max()
                               for i, rs in enumerate(refs)]).clamp(min=0)
        return (2 * clip_s * ref_sim / (clip_s + ref_sim)).numpy()

    return run


def write_hf_clip(out_dir: Path) -> Path:
    """A random transformers ``CLIPModel`` of ViT-B/32's architecture and a ``CLIPProcessor`` whose tokenizer files
    are written from open_clip's BPE vocabulary (OpenAI's), so nothing is downloaded."""
    from open_clip.tokenizer import SimpleTokenizer
    from transformers import (CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, CLIPTokenizer)

    out_dir.mkdir(parents=True, exist_ok=True)
    bpe = SimpleTokenizer()
    rename = {"<start_of_text>": "<|startoftext|>", "<end_of_text>": "<|endoftext|>"}
    (out_dir / "vocab.json").write_text(json.dumps({rename.get(k, k): v for k, v in bpe.encoder.items()}))
    merges = sorted(bpe.bpe_ranks, key=bpe.bpe_ranks.get)
    (out_dir / "merges.txt").write_text("#version: 0.2\n" + "\n".join(" ".join(pair) for pair in merges) + "\n")
    tokenizer = CLIPTokenizer(str(out_dir / "vocab.json"), str(out_dir / "merges.txt"))
    image_processor = CLIPImageProcessor(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224})
    torch.manual_seed(0)
    CLIPModel(CLIPConfig(projection_dim=512)).save_pretrained(str(out_dir))  # defaults: ViT-B/32, quick_gelu
    CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(str(out_dir))
    return out_dir


def build_torchmetrics(hf_dir: Path):
    from torchmetrics.multimodal.clip_score import CLIPScore
    from transformers import CLIPModel, CLIPProcessor

    class FeatureTensors(CLIPModel):
        """transformers 5 returns the projected features as ``pooler_output`` of an output object; torchmetrics (1.9)
        expects the tensor itself."""

        def get_image_features(self, *args, **kwargs):
            return _features(super().get_image_features(*args, **kwargs))

        def get_text_features(self, *args, **kwargs):
            return _features(super().get_text_features(*args, **kwargs))

    model = FeatureTensors.from_pretrained(str(hf_dir)).eval()
    processor = CLIPProcessor.from_pretrained(str(hf_dir))
    image_text = CLIPScore(model_name_or_path=lambda: (model, processor))
    text_text = CLIPScore(model_name_or_path=lambda: (model, processor))

    @torch.inference_mode()
    def run(images, captions, refs):
        image_text.reset()
        tensors = [torch.from_numpy(np.array(Image.open(path).convert("RGB"))).permute(2, 0, 1) for path in images]
        image_text.update(tensors, [PREFIX + c for c in captions])
        score = image_text.compute()
        if refs:
            text_text.reset()
            text_text.update([PREFIX + c for c, rs in zip(captions, refs) for _ in rs],
                             [PREFIX + r for rs in refs for r in rs])
            score = text_text.compute()
        return score

    return run


def _features(output):
    return output if isinstance(output, torch.Tensor) else output.pooler_output


def compare(systems, workloads, repeats: int) -> dict:
    report = {}
    for name, (images, captions, refs) in workloads.items():
        for run in systems.values():
            run(images[:4], captions[:4], refs[:4] if refs else None)  # warm-up
        seconds = {system: [] for system in systems}
        names = list(systems)
        for repeat in range(repeats):  # interleaved: each repetition runs every system once, in a rotated order
            for system in names[repeat % len(names):] + names[:repeat % len(names)]:
                run = systems[system]
                gc.collect()
                start = time.perf_counter()
                run(images, captions, refs)
                seconds[system].append(time.perf_counter() - start)
        median = {system: statistics.median(values) for system, values in seconds.items()}
        capeval_scores = systems["capeval"](images, captions, refs)
        bare_scores = systems["bare"](images, captions, refs)
        report[name] = {
            "pairs": len(captions), "distinct_images": len(set(images)),
            "texts": len(captions) + sum(len(r) for r in refs or []),
            "seconds_median": median, "seconds_all": seconds,
            "capeval_vs_torchmetrics": median["torchmetrics"] / median["capeval"],
            "capeval_vs_bare": median["bare"] / median["capeval"],
            "capeval_vs_bare_fixed_shapes": median["bare_fixed_shapes"] / median["capeval"],
            "max_abs_score_difference_capeval_bare": float(np.abs(capeval_scores - bare_scores).max()),
        }
    return report


def cost(run, tmp: Path, sizes, plot) -> dict:
    rows = {}
    for pairs in sizes:
        images, captions, _ = workload(tmp, pairs, max(pairs // 4, 1), 0, seed=1)
        start = time.perf_counter()
        run(images, captions, None)
        seconds = time.perf_counter() - start
        rows[pairs] = {"distinct_images": len(set(images)), "seconds": seconds, "pairs_per_s": pairs / seconds}
        print(json.dumps({"pairs": pairs, **rows[pairs]}), flush=True)
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        xs = list(rows)
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.loglog(xs, [rows[x]["seconds"] for x in xs], "o-", label="capeval CLIP-S")
        ax.loglog(xs, [rows[xs[0]]["seconds"] * x / xs[0] for x in xs], "--", color="grey", label="linear")
        ax.set_xlabel("pairs (¼ distinct images)")
        ax.set_ylabel("seconds")
        ax.set_title(f"CLIP-S ViT-B/32, CPU, {torch.get_num_threads()} threads")
        ax.legend()
        fig.tight_layout()
        fig.savefig(plot, dpi=120)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repetitions (0: skip the comparison)")
    parser.add_argument("--sizes", type=int, nargs="*", default=[], help="pairs for the cost curve, e.g. 64 256 1024")
    parser.add_argument("--plot", help="write the cost curve to this image file")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.threads:
        torch.set_num_threads(args.threads)
    from capeval.bench import random_clip_dir

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        capeval_run, backbone = build_capeval(random_clip_dir("ViT-B-32", tmp / "clip"))
        report = {"machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                              "processor": platform.processor() or platform.machine(), "torch": torch.__version__}}
        if args.repeats:
            from capeval.core.shapes import TEXT_WIDTH_STEP, text_rows

            def cpu_rows(width):
                return text_rows(torch.device("cpu"), width)

            systems = {"capeval": capeval_run, "torchmetrics": build_torchmetrics(write_hf_clip(tmp / "hf")),
                       "bare": build_bare(backbone),
                       "bare_fixed_shapes": build_bare(backbone, rows=cpu_rows, width_step=TEXT_WIDTH_STEP)}
            workloads = {"no_references": workload(tmp, 64, 16, 0), "five_references": workload(tmp, 32, 8, 5)}
            report.update(compare(systems, workloads, args.repeats))
        print(json.dumps(report, indent=2), flush=True)
        if args.sizes:
            report["cost"] = cost(capeval_run, tmp, args.sizes, args.plot)


if __name__ == "__main__":
    main()
