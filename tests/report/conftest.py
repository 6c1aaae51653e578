"""A realistic report document, shaped as /work/coord/issue28_interfaces.md agrees (what ``capeval.suite`` and
``capeval.statistics.systems`` build): 3 systems, 8 metrics, 12 images with JPEG files, every pair compared.

The numbers are synthetic but internally consistent (per-image scores drawn per system; a mean metric's value is
the mean of its per-image scores); the report renders them and computes none, so tests derive every expected
text from this document."""

import itertools

import numpy as np
import pytest
from PIL import Image

SYSTEMS = ("ClipCap", "ours_v1", "ours & <v2>")
KEYS = ("bleu_1", "bleu_2", "bleu_3", "bleu_4", "meteor", "rouge_l", "cider", "clip_s")
CORPUS_LEVEL = {"bleu_1", "bleu_2", "bleu_3", "bleu_4", "meteor"}
MEANS = {"bleu_1": 0.78, "bleu_2": 0.62, "bleu_3": 0.48, "bleu_4": 0.36, "meteor": 0.28, "rouge_l": 0.57,
         "cider": 1.20, "clip_s": 0.76}
SHIFT = {"ClipCap": 0.0, "ours_v1": 0.04, "ours & <v2>": 0.02}
# what the document says of each key (the suite copies it from the key's scorer): title and the ×100 of the papers
DISPLAY = {"bleu_1": "BLEU-1", "bleu_2": "BLEU-2", "bleu_3": "BLEU-3", "bleu_4": "BLEU-4", "meteor": "METEOR",
           "rouge_l": "ROUGE-L", "cider": "CIDEr", "clip_s": "CLIP-S"}


def display(key, scale=100.0):
    """The display fields of ``key`` in a document's ``metrics[key]``."""
    return {"title": DISPLAY[key], "scale": scale, "higher_is_better": True}
INJECTION = "<script>alert('caption')</script> a dog"
# (system_a, system_b, metric) -> significant; every other comparison is not significant
SIGNIFICANT = {("ours_v1", "ClipCap", "cider"): True, ("ClipCap", "ours_v1", "bleu_4"): True,
               ("ours_v1", "ClipCap", "clip_s"): True, ("ours & <v2>", "ClipCap", "meteor"): True}


def write_images(root, count):
    """Small synthetic JPEG photos (gradients with a coloured block), different sizes and shapes."""
    rng = np.random.default_rng(7)
    files = []
    for index in range(count):
        height, width = 180 + 20 * index, 320 - 10 * index
        y, x = np.mgrid[0:height, 0:width]
        pixels = np.stack([(x * 255 // width), (y * 255 // height), np.full_like(x, 40 * (index % 6))], -1)
        top, left = rng.integers(0, height // 2), rng.integers(0, width // 2)
        pixels[top:top + height // 3, left:left + width // 3] = rng.integers(0, 256, 3)
        name = f"val2014/COCO_val2014_{index:012d}.jpg"
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels.astype(np.uint8)).save(root / name, quality=90)
        files.append(name)
    return files


def caption_of(system, index):
    if system == "ours & <v2>" and index == 3:
        return INJECTION
    return f"{system} says: a picture number {index} of a {'red' if index % 2 else 'blue'} thing"


def build_report(images_root):
    rng = np.random.default_rng(12345)
    files = write_images(images_root, 12)
    ids = [391895 + 7 * i for i in range(12)]
    per_image = {s: {k: np.clip(MEANS[k] + SHIFT[s] + rng.normal(0, 0.12, 12), 0, None) for k in KEYS}
                 for s in SYSTEMS}
    per_image["ours_v1"]["clip_s"] -= 0.08  # significantly worse than the baseline on CLIP-S
    per_image["ours_v1"]["bleu_4"][5] = np.nan  # an image with no score on one metric (None in the document)
    values = {s: {k: float(np.nanmean(per_image[s][k])) for k in KEYS} for s in SYSTEMS}
    images = []
    for i, (image_id, file) in enumerate(zip(ids, files)):
        images.append({"image_id": image_id, "file": file,
                       "references": [f"reference {r} of image {i} with R&D <b>bold</b>" for r in range(5)],
                       "captions": {s: caption_of(s, i) for s in SYSTEMS},
                       "scores": {s: {k: None if np.isnan(per_image[s][k][i]) else float(per_image[s][k][i])
                                      for k in KEYS} for s in SYSTEMS}})
    comparisons = []
    for first, second in itertools.combinations(SYSTEMS, 2):
        for k in KEYS:
            # the document may list either system first
            a, b = (second, first) if (second, first, k) in SIGNIFICANT else (first, second)
            p = 0.001 if (a, b, k) in SIGNIFICANT else 0.4
            comparisons.append({"system_a": a, "system_b": b, "metric": k, "delta": values[b][k] - values[a][k],
                                "p_bootstrap": p, "p_randomization": p, "p_bootstrap_adjusted": min(1, p * 24),
                                "p_randomization_adjusted": min(1, p * 24),
                                "significant": (a, b, k) in SIGNIFICANT})
    clusters = {k: {s: rank for rank, s in enumerate(sorted(SYSTEMS, key=lambda s: -values[s][k]), 1)} for k in KEYS}
    return {
        "capeval_version": "0.9.test", "created": "2026-11-25T23:59:00Z",
        "coverage": {"scored": 12, "total": 12, "split": "test", "text": "scored 12 of 12 images of split test"},
        "baseline": "ClipCap",
        "metrics": {k: {"scorer": "bleu" if k.startswith("bleu") else k, "hashcode": f"{k}|capeval 0.9|abc{i}",
                        "provenance": {"capeval": "0.9.test", "weights": [{"ref": f"w-{k}", "source": "org/w@1"}]},
                        "corpus_level": k in CORPUS_LEVEL, **display(k)} for i, k in enumerate(KEYS)},
        "keys": list(KEYS),
        "systems": {s: {"source": f"results/{s}.json",
                        "scores": {k: {"value": values[s][k],
                                       "ci": [values[s][k] - 0.011 - 0.001 * j, values[s][k] + 0.013 + 0.001 * j]}
                                   for j, k in enumerate(KEYS)}} for s in SYSTEMS},
        "comparisons": comparisons, "clusters": clusters,
        "significance": {"resamples": 1000, "seed": 12345, "confidence": 0.95, "alpha": 0.05, "correction": "holm",
                         "tests": ["paired-bs", "paired-ar"], "units": "images", "n_units": 12,
                         "family": "every metric × pair of systems, each test adjusted on its own",
                         "significant": "both tests' adjusted p-values at most alpha", "baseline": "ClipCap"},
        "undefined": {},
        "images": images,
    }


def rename_system(report, old, new):
    """The document with system ``old`` called ``new`` everywhere (its comparisons dropped)."""
    report["systems"][new] = report["systems"].pop(old)
    for image in report["images"]:
        image["captions"][new] = image["captions"].pop(old)
        image["scores"][new] = image["scores"].pop(old)
    report["comparisons"] = [c for c in report["comparisons"] if old not in (c["system_a"], c["system_b"])]
    for ranks in report["clusters"].values():
        ranks[new] = ranks.pop(old)


def large_report(images, seed=11):
    """A document of ``images`` images without files (3 systems, CIDEr and CLIP-S), its comparisons as the fixture
    writes them."""
    rng = np.random.default_rng(seed)
    systems, keys = ("base", "a", "b"), ["cider", "clip_s"]
    scores = {s: {k: rng.normal(1.0 if k == "cider" else 0.7, 0.2, images) for k in keys} for s in systems}
    rows = [{"image_id": i, "file": None, "references": ["a reference"], "captions": {s: f"{s} {i}" for s in systems},
             "scores": {s: {k: float(scores[s][k][i]) for k in keys} for s in systems}} for i in range(images)]
    values = {s: {k: float(np.mean(scores[s][k])) for k in keys} for s in systems}
    comparisons = [{"system_a": x, "system_b": y, "metric": k, "delta": values[y][k] - values[x][k],
                    "p_bootstrap": 0.01234567891234, "p_randomization": 0.000012, "p_bootstrap_adjusted": 0.0740740,
                    "p_randomization_adjusted": 1.0, "significant": False}
                   for x, y in (("base", "a"), ("base", "b"), ("a", "b")) for k in keys]
    return {"capeval_version": "t", "created": "now", "baseline": "base", "keys": keys,
            "coverage": {"scored": images, "total": images, "split": None, "text": f"scored {images} of {images}"},
            "metrics": {k: {"scorer": k, "hashcode": k, "provenance": {}, "corpus_level": False, **display(k)}
                        for k in keys},
            "systems": {s: {"source": f"{s}.json", "scores": {k: {"value": values[s][k], "ci": None} for k in keys}}
                        for s in systems},
            "comparisons": comparisons, "clusters": {}, "undefined": {}, "images": rows,
            "significance": {"resamples": 100, "seed": 1, "tests": ["paired-bs"], "correction": "holm"}}


def embedded_images(report, top=10):
    """The images the page should embed, derived from the document: per pair (each system against the baseline,
    then the others) and metric, the ``top`` largest absolute differences."""
    systems, baseline = list(report["systems"]), report["baseline"]
    pairs = [(s, baseline) for s in systems if s != baseline] + [
        (x, y) for i, x in enumerate(systems) for y in systems[i + 1:] if baseline not in (x, y)]
    chosen = set()
    for x, y in pairs:
        for key in report["keys"]:
            deltas = [abs(image["scores"][x][key] - image["scores"][y][key]) for image in report["images"]]
            chosen |= set(sorted(range(len(deltas)), key=lambda i: (-deltas[i], i))[:top])
    return chosen


@pytest.fixture
def images_root(tmp_path):
    root = tmp_path / "images"
    root.mkdir()
    return root


@pytest.fixture
def report(images_root):
    return build_report(images_root)


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Node:
    """An element of a parsed page: tag, attributes, children (Nodes and text)."""

    def __init__(self, tag, attrs):
        self.tag, self.attrs, self.children = tag, dict(attrs), []

    def text(self):
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def find_all(self, tag=None, **attrs):
        found = []
        for child in self.children:
            if isinstance(child, Node):
                if (tag is None or child.tag == tag) and all(
                        (child.attrs.get(k.rstrip("_")) or "").split().count(v) if k == "class_"
                        else child.attrs.get(k) == v for k, v in attrs.items()):
                    found.append(child)
                found += child.find_all(tag, **attrs)
        return found

    def find(self, tag=None, **attrs):
        found = self.find_all(tag, **attrs)
        assert found, f"no <{tag} {attrs}>"
        return found[0]


def parse_html(text):
    """The element tree of ``text`` (stdlib parser; entities decoded as a browser shows them)."""
    from html.parser import HTMLParser

    root = Node("#document", {})
    stack = [root]

    class Builder(HTMLParser):
        def handle_starttag(self, tag, attrs):
            node = Node(tag, attrs)
            stack[-1].children.append(node)
            if tag not in VOID:
                stack.append(node)

        def handle_endtag(self, tag):
            while len(stack) > 1:
                if stack.pop().tag == tag:
                    break

        def handle_data(self, data):
            stack[-1].children.append(data)

    Builder(convert_charrefs=True).feed(text)
    return root
