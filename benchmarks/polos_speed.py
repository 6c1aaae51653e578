"""Polos throughput on full-size random encoders (CLIP ViT-B/32 + RoBERTa-base), 5 references per sample, and what
image/text de-duplication saves on a Pascal-50S-shaped workload (two candidates per image, judged against the same
5 references), timed against a workload of the same size whose images and references are all distinct.

``--repeats N`` also times, interleaved on the Pascal-50S-shaped workload, an emulation of the official pipeline
(per batch of samples: every sample's image, 77-token CLIP texts and SimCSE batches, nothing de-duplicated) against
capeval's official batch mode and its default per-sentence mode, on the same models, and prints the speed-ups
(target: ≥ 3×) and the largest score difference between the official batch mode and the emulation.

    python benchmarks/polos_speed.py --samples 64 --repeats 3
    python benchmarks/polos_speed.py --samples 256 --device cuda
"""

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image


WORKLOAD_WORDS = "reference of image candidate a person is walking dog in the park man with outside on sunny day".split()


def word_level_tokenizer(out_dir: Path) -> None:
    """A byte-level BPE tokenizer whose merges spell out the workload's words, then join them to their leading space,
    so SimCSE sees 1–2 tokens per word (the real RoBERTa vocabulary: about one) instead of one per character."""
    from transformers import RobertaTokenizer
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    merges, pieces = [], []
    for word in WORKLOAD_WORDS:
        for end in range(2, len(word) + 1):
            merges.append((word[:end - 1], word[end - 1]))
            pieces.append(word[:end])
    for word in WORKLOAD_WORDS:  # then the space joins the word
        merges.append(("\u0120", word))
        pieces.append("\u0120" + word)
    symbols = sorted(set(bytes_to_unicode().values()))
    tokens = list(dict.fromkeys(["<s>", "<pad>", "</s>", "<unk>", *symbols, *pieces, "<mask>"]))
    RobertaTokenizer(vocab={t: i for i, t in enumerate(tokens)},
                     merges=list(dict.fromkeys(merges))).save_pretrained(str(out_dir))
    (out_dir / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}))


def build(tmp: Path, device: str, batch_size: int, dtype: str):
    from transformers import RobertaConfig, RobertaModel

    from capeval.bench import random_clip_dir
    from capeval.polos.checkpoint import head_config, write_head
    from capeval.polos.scorer import PolosScorer, head_from_config
    from capeval.testing import tiny_roberta

    random_clip_dir("ViT-B-32", tmp / "clip")  # open_clip ViT-B-32 (QuickGELU), random weights
    tiny_roberta(tmp / "roberta")  # the file layout; tokenizer and model are replaced below
    word_level_tokenizer(tmp / "roberta")
    vocab = len(json.loads((tmp / "roberta" / "vocab.json").read_text()))
    torch.manual_seed(0)
    RobertaModel(RobertaConfig(vocab_size=vocab, max_position_embeddings=514, pad_token_id=1, bos_token_id=0,
                               eos_token_id=2)).save_pretrained(str(tmp / "roberta"))
    (tmp / "roberta" / "pytorch_model.bin").unlink(missing_ok=True)
    config = head_config(text_dim=768, clip_dim=512, clip_weights=str(tmp / "clip"), text_encoder=str(tmp / "roberta"))
    write_head(tmp / "head", head_from_config(config).state_dict(), config)
    return PolosScorer(str(tmp / "head"), device=device, batch_size=batch_size, dtype=dtype)


def pascal50s_workload(samples: int, *, shared: bool):
    """Pascal-50S shape (``shared``): pairs of candidates for one image, both judged against the same 5 references.
    Unshared: the same sizes with every image and reference distinct, i.e. what must be encoded without
    de-duplication."""
    rng = np.random.default_rng(0)
    owners = samples // 2 if shared else samples
    images = [Image.fromarray(rng.integers(0, 256, (375, 500, 3), dtype=np.uint8)) for _ in range(owners)]
    refs = [[f"reference {j} of image {i}: a person is walking a dog in the park" for j in range(5)]
            for i in range(owners)]
    owner = [i // 2 if shared else i for i in range(samples)]
    preds = [f"candidate {i}: a man with a dog outside on a sunny day" for i in range(samples)]
    return preds, [images[o] for o in owner], [refs[o] for o in owner]


@torch.inference_mode()
def official_emulation(scorer, preds, images, refs):
    """The official Polos predict loop on capeval's models: consecutive batches of ``batch_size`` samples; per batch
    each sample's image, the 77-token CLIP texts of its candidates and of the j-th references, and SimCSE batches
    with batch-wide statistics (candidates; j-th references); features per reference, MLP, max over references."""
    from capeval.core.constants import CLIPSCORE_PREFIX
    from capeval.functional.polos import polos_features, scalar_mix

    clip, encoder, head = scorer.clip, scorer.encoder, scorer.head

    def clip_text(texts):
        return clip.model.encode_text(clip.tokenize([CLIPSCORE_PREFIX + t for t in texts]).to(clip.device)).float()

    def simcse(texts):
        batch = encoder.tokenizer(texts, padding=True, truncation=True, max_length=512, return_tensors="pt")
        states = encoder.model(**batch.to(encoder.device), output_hidden_states=True).hidden_states
        return scalar_mix([h.float() for h in states], batch["attention_mask"], head.scalar_parameters, head.gamma,
                          per_sentence=False)[:, 0]

    scores = []
    for start in range(0, len(preds), scorer.batch_size):
        members = range(start, min(start + scorer.batch_size, len(preds)))
        pixels = torch.stack([clip.preprocess(images[i].convert("RGB")) for i in members]).to(clip.device)
        image, cand_clip = clip.model.encode_image(pixels).float(), clip_text([preds[i] for i in members])
        cand_se = simcse([preds[i] for i in members])
        per_ref = []
        for j in range(5):
            ref_texts = [refs[i][j] for i in members]
            features = polos_features(simcse(ref_texts), cand_se, image, cand_clip, clip_text(ref_texts))
            per_ref.append(head.mlp(features).squeeze(-1).float())
        scores.extend(torch.stack(per_ref).amax(0).cpu().tolist())
    return scores


def compare_official(scorer, samples: int, repeats: int) -> dict:
    """Interleaved repetitions on the Pascal-50S-shaped workload: the official emulation vs capeval's two modes."""
    import statistics

    preds, images, refs = pascal50s_workload(samples, shared=True)
    sync = torch.cuda.synchronize if scorer.device.type == "cuda" else (lambda: None)

    def capeval(mode):
        def run():
            scorer.statistics = mode
            scorer.reset_caches()
            return scorer.score(preds, images, refs)["polos_per_sample"]
        return run

    systems = {"official_emulation": lambda: official_emulation(scorer, preds, images, refs),
               "capeval_batch": capeval("batch"), "capeval_per_sentence": capeval("per_sentence")}
    seconds = {name: [] for name in systems}
    for _ in range(repeats):
        for name, run in systems.items():
            sync()
            start = time.perf_counter()
            run()
            sync()
            seconds[name].append(time.perf_counter() - start)
    median = {name: statistics.median(values) for name, values in seconds.items()}
    difference = np.abs(np.array(systems["capeval_batch"]()) - np.array(systems["official_emulation"]())).max()
    return {"seconds_median": median, "seconds_all": seconds,
            "batch_mode_vs_official": median["official_emulation"] / median["capeval_batch"],
            "per_sentence_vs_official": median["official_emulation"] / median["capeval_per_sentence"],
            "max_abs_score_difference_batch_mode_vs_official": float(difference)}


def timed(scorer, preds, images, refs) -> float:
    sync = torch.cuda.synchronize if scorer.device.type == "cuda" else (lambda: None)
    scorer.reset_caches()
    sync()
    start = time.perf_counter()
    scorer.score(preds, images, refs)
    sync()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--repeats", type=int, default=0, help="interleaved repetitions against the official emulation")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as tmp:
        scorer = build(Path(tmp), args.device, args.batch_size, args.dtype)
        scorer.score(*pascal50s_workload(8, shared=False))  # warm-up
        report = {"device": str(scorer.device), "dtype": args.dtype, "batch_size": args.batch_size,
                  "samples": args.samples, "refs_per_sample": 5}
        for name, shared in (("pascal50s_shaped", True), ("all_distinct", False)):
            preds, images, refs = pascal50s_workload(args.samples, shared=shared)
            seconds = timed(scorer, preds, images, refs)
            report[name] = {"seconds": seconds, "samples_per_s": args.samples / seconds,
                            "images_encoded": len(scorer.clip.image_cache),
                            "clip_texts_encoded": len(scorer.clip.text_cache),
                            "simcse_texts_encoded": len(scorer.encoder.text_cache)}
        report["deduplication_saving"] = 1 - report["pascal50s_shaped"]["seconds"] / report["all_distinct"]["seconds"]
        if args.repeats:
            scorer.statistics = "batch"
            official_emulation(scorer, *pascal50s_workload(4, shared=True))  # warm-up
            report["against_official"] = compare_official(scorer, args.samples, args.repeats)
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
