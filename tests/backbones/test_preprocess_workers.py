"""``ClipBackbone(preprocess_workers=N)``: the official preprocessing in worker processes gives the same pixels and
features as the default in-process path (which stays the default)."""

import numpy as np
import pytest
import torch
from PIL import Image

from capeval.backbones.clip import ClipBackbone


def _images():
    rng = np.random.default_rng(0)
    rgb = [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for h, w in ((48, 64), (300, 200))]
    grey = Image.fromarray(rng.integers(0, 256, (50, 50), dtype=np.uint8))  # "L": converted to RGB after resizing
    rgba = Image.fromarray(rng.integers(0, 256, (40, 90, 4), dtype=np.uint8))
    palette = rgb[0].convert("P")
    return [rgb[0], grey, rgba, rgb[1], palette, rgb[0].copy(), grey.copy()]  # duplicates are encoded once


def test_worker_processes_give_the_official_pixels_and_features(tiny_hub):
    images = _images()
    default = ClipBackbone("openai-clip-vit-b-32", device="cpu", batch_size=2)
    assert default.preprocess_workers == 0
    workers = ClipBackbone("openai-clip-vit-b-32", device="cpu", batch_size=2, preprocess_workers=2)
    batches = list(workers._preprocessed_batches(iter([images[:2], images[2:5], images[5:]])))
    official = [default.preprocess(image) for image in images]
    assert [len(b) for b in batches] == [2, 3, 2]
    assert torch.equal(torch.cat(batches), torch.stack(official))  # bit-identical preprocessing
    expected = default.encode_images(images, show_progress=False)
    np.testing.assert_allclose(workers.encode_images(images, show_progress=False).numpy(), expected.numpy(),
                               atol=1e-6, rtol=0)
    assert len(workers.image_cache) == 5
    with torch.inference_mode():  # independently of both paths: the model on the official pixels
        direct = default.model.encode_image(torch.stack(official)).float()
    np.testing.assert_allclose(expected.numpy(), direct.numpy(), atol=1e-5, rtol=0)


def test_scorers_and_the_cli_take_preprocess_workers_and_score_the_same(tiny_hub, tmp_path, capsys, monkeypatch):
    import json

    from capeval.cli import main
    from capeval.core.errors import InputError
    from capeval.core.scoring import load_scorer

    images = _images()[:4]
    captions = ["a dog", "two cats on a sofa", "a red car", "a bird"]
    refs = [["a dog running"], ["cats"], ["a car parked", "a red car"], ["a small bird"]]
    default = load_scorer("clip_s", device="cpu")
    workers = load_scorer("clip_s", device="cpu", preprocess_workers=2)
    assert workers.backbone.preprocess_workers == 2 and default.backbone.preprocess_workers == 0
    expected, found = default.score(captions, images, refs), workers.score(captions, images, refs)
    assert found["refclip_s_per_sample"] == expected["refclip_s_per_sample"]  # bitwise
    assert found["hashcode"] == expected["hashcode"]  # a neutral option: the same configuration
    ensemble = load_scorer("ensembeval", device="cpu", preprocess_workers=2)
    shared = list(ensemble.clip_backbones.values())
    assert shared and all(b.preprocess_workers == 2 for b in shared)
    borrowers = [getattr(s, "backbone", None) or getattr(s, "clip", None) for s in ensemble.scorers.values()]
    assert any(b is shared[0] for b in borrowers)  # the components use the backbone that runs the workers
    assert load_scorer("polos", device="cpu", preprocess_workers=1).clip.preprocess_workers == 1
    with pytest.raises(InputError, match="preprocess_workers=3 but clip_backbone runs preprocess_workers=2"):
        load_scorer("clip_s", device="cpu", preprocess_workers=3, clip_backbone=workers.backbone)

    for i, image in enumerate(images):
        image.convert("RGB").save(tmp_path / f"{i}.png")
    with open(tmp_path / "in.jsonl", "w") as f:
        for i, (caption, rs) in enumerate(zip(captions, refs)):
            f.write(json.dumps({"caption": caption, "image": f"{i}.png", "references": rs}) + "\n")
    outputs, worker_batches = {}, []
    original = ClipBackbone._preprocessed_batches

    def recording(self, batches):  # the real worker path, counted
        for pixels in original(self, batches):
            worker_batches.append((self.preprocess_workers, len(pixels)))
            yield pixels

    monkeypatch.setattr(ClipBackbone, "_preprocessed_batches", recording)
    for extra in ([], ["--preprocess-workers", "2"]):
        out = tmp_path / f"out{len(extra)}.jsonl"
        assert main(["score", "clip_s", "--input", str(tmp_path / "in.jsonl"), "--images", str(tmp_path),
                     "--output", str(out), "--device", "cpu", *extra]) == 0
        outputs[len(extra)] = out.read_text()
        assert bool(worker_batches) == bool(extra)  # the CLI option reaches the backbone
    assert outputs[0] == outputs[2]
    assert sum(n for _, n in worker_batches) == 4 and {w for w, _ in worker_batches} == {2}
    capsys.readouterr()
    assert main(["score", "bleu", "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "x.jsonl"),
                 "--preprocess-workers", "2"]) == 2
    assert "--preprocess-workers applies to clip_s, ensembeval, pac_s, polos, not bleu" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main(["score", "clip_s", "--input", str(tmp_path / "in.jsonl"), "--preprocess-workers", "-1"])
    assert usage.value.code == 2 and "must be ≥ 0, not -1" in capsys.readouterr().err
