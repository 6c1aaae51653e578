"""``capeval verify``: recompute the numbers the authors published with their real weights and print ours next to
theirs; exit non-zero on any mismatch (or when nothing could be checked). An anchor whose weights are absent is
reported unavailable, not failed. On tiny random test weights it reports the mismatch (and says so).

The example images cannot ship in the wheel: ``--data-dir`` is a folder holding the official examples in their
repositories' layout: ``clipscore/`` and ``pacscore/`` (``image1.jpg``, ``image2.jpg``, ``good_captions.json``,
``bad_captions.json``, ``refs.json``) and ``vcrscore/`` (COCO val2017 image 184384, any name containing
``184384``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from capeval.cli.arguments import add_json, print_result

# VCRScore README example: its inputs and the features it prints
VCRSCORE_CAPTION = "a bluebery cake is on a plate and is topped with butter"
VCRSCORE_REFERENCES = [
    "a large piece of blueberry cake on a plate",
    "a plate of food attractively arranged on a table",
    "a plate of blueberry coffee cake with butter and an orange slice on a table with breakfast foods",
]
VCRSCORE_FEATURES = (70.0, 0.44036316871643066, 0.6823944449424744)


@dataclass(frozen=True)
class Anchor:
    """Published values (result key → value) of one computation, with the tolerance the publication allows."""

    group: str
    title: str
    expected: Dict[str, float]
    tolerance: float
    source: str
    compute: Callable = field(repr=False)  # compute(context) -> result dict
    data: Optional[str] = None  # the --data-dir subfolder it reads


class _Context:
    """Scorers built once per (metric, options), the weights directories they loaded, and the data folder."""

    def __init__(self, data_dir: Optional[Path], device: str):
        self.data_dir, self.device = data_dir, device
        self.scorers: Dict[str, object] = {}
        self.loaded: List[Tuple[str, Path]] = []

    def scorer(self, metric: str):
        from capeval.core.hub import recording_resolutions
        from capeval.core.scoring import load_scorer

        if metric not in self.scorers:
            with recording_resolutions() as loaded:
                self.scorers[metric] = load_scorer(metric, device=self.device)
            self.loaded.extend(loaded)
        return self.scorers[metric]

    def tiny(self) -> List[str]:
        from capeval.core.constants import TINY_MARKER_FILE

        return sorted({ref for ref, directory in self.loaded if (Path(directory) / TINY_MARKER_FILE).exists()})


def _example(metric: str, folder: str, captions: str):
    """Score the official example folder (two images) with ``metric``; the published values are means."""

    def compute(context: _Context) -> dict:
        from PIL import Image

        root = context.data_dir / folder
        candidates = json.loads((root / captions).read_text())
        references = json.loads((root / "refs.json").read_text())
        keys = sorted(candidates)
        images = [Image.open(root / f"{key}.jpg").convert("RGB") for key in keys]
        return context.scorer(metric).score([candidates[k] for k in keys], images, [references[k] for k in keys])

    return compute


def _vcrscore_regressor(context: _Context) -> dict:
    from capeval.core.hub import recording_resolutions
    from capeval.vcrscore.gradient_boosting import predict
    from capeval.vcrscore.regressor import load_regressor

    with recording_resolutions() as loaded:
        model = load_regressor()
    context.loaded.extend(loaded)
    return {"vcrscore": float(predict(model, [list(VCRSCORE_FEATURES)])[0])}


def _vcrscore_example(context: _Context) -> dict:
    from PIL import Image

    found = sorted(p for p in (context.data_dir / "vcrscore").iterdir() if "184384" in p.name)
    if not found:
        raise FileNotFoundError(f"{context.data_dir / 'vcrscore'} holds no COCO val2017 image 184384")
    image = Image.open(found[0]).convert("RGB")
    return context.scorer("vcrscore").score([VCRSCORE_CAPTION], [image], [VCRSCORE_REFERENCES])


CLIPSCORE = "CLIPScore README (github.com/jmhessel/clipscore), CPU fp32"
PACSCORE = "PAC-S README (github.com/aimagelab/pacscore)"
VCRSCORE = "VCRScore README (github.com/ResearchInfoGeo/VCRScore)"
# four published decimals: half a unit of rounding plus numerical noise of another machine
ROUNDED_4 = 1e-4
ANCHORS = (
    Anchor("clip_s", "CLIPScore example, good captions", {"clip_s": 0.8585, "refclip_s": 0.8450}, ROUNDED_4, CLIPSCORE,
           _example("clip_s", "clipscore", "good_captions.json"), data="clipscore"),
    Anchor("clip_s", "CLIPScore example, bad captions", {"clip_s": 0.7153, "refclip_s": 0.7253}, ROUNDED_4, CLIPSCORE,
           _example("clip_s", "clipscore", "bad_captions.json"), data="clipscore"),
    Anchor("pac_s", "PAC-S example, good captions", {"pac_s": 0.8264, "refpac_s": 0.8393}, ROUNDED_4, PACSCORE,
           _example("pac_s", "pacscore", "good_captions.json"), data="pacscore"),
    Anchor("pac_s", "PAC-S example, bad captions", {"pac_s": 0.5772, "refpac_s": 0.6357}, ROUNDED_4, PACSCORE,
           _example("pac_s", "pacscore", "bad_captions.json"), data="pacscore"),
    Anchor("vcrscore_regressor", "VCRScore regressor on the README example's features",
           {"vcrscore": 0.7892486441901005}, 1e-12, VCRSCORE, _vcrscore_regressor),
    # the word-precision feature needs the authors' unpublished Keras YOLOv3: only the two model features are checked
    Anchor("vcrscore_example", "VCRScore README example: ViLT logit and MCIP RefCLIP-S",
           {"vilt_logit": VCRSCORE_FEATURES[1], "mcip_refclip_s": VCRSCORE_FEATURES[2]}, ROUNDED_4, VCRSCORE,
           _vcrscore_example, data="vcrscore"),
)
GROUPS = tuple(dict.fromkeys(anchor.group for anchor in ANCHORS))


def configure(parser) -> None:
    parser.add_argument("--data-dir", help="folder with the official example images (clipscore/, pacscore/, "
                                           "vcrscore/); anchors that need it are skipped without it")
    parser.add_argument("--only", nargs="+", choices=GROUPS, help="check only these anchors")
    parser.add_argument("--device", default="cpu", help="device for the models (default: cpu; the published values "
                                                        "are CPU fp32)")
    add_json(parser, "every anchor's values and the counts (the lines go to stderr)")


def _check(anchor: Anchor, context: _Context) -> Tuple[Dict, List[str]]:
    """(its record, printed lines) of one anchor: ``status`` ok, failed, or unavailable when its weights or data are
    absent (it could not be checked: unavailable, not failed), and per key ours and published."""
    from capeval.core.errors import ModelNotAvailableError

    record = {"group": anchor.group, "title": anchor.title, "source": anchor.source}
    try:
        result = anchor.compute(context)
    except (ModelNotAvailableError, FileNotFoundError) as exc:
        return {**record, "status": "unavailable", "reason": str(exc)}, ["  UNAVAILABLE  " + str(exc).replace("\n",
                                                                                                           "\n  ")]
    lines, values, mismatches = [], {}, 0
    for key, published in anchor.expected.items():
        ours = float(result[key])
        ok = abs(ours - published) <= anchor.tolerance
        mismatches += not ok
        values[key] = {"ours": ours, "published": published, "tolerance": anchor.tolerance, "ok": ok}
        lines.append(f"  {'ok      ' if ok else 'MISMATCH'}  {key:<15} ours {ours:.10g}  published {published:.10g}  "
                     f"(|diff| {abs(ours - published):.2g}, tolerance {anchor.tolerance:g})")
    return {**record, "status": "failed" if mismatches else "ok", "values": values}, lines


def run(args) -> int:
    data_dir = Path(args.data_dir) if args.data_dir else None
    context = _Context(data_dir, args.device)
    records = []
    for anchor in ANCHORS:  # each anchor's lines are printed as it is checked (on stderr with --json)
        if args.only and anchor.group not in args.only:
            continue
        print(f"{anchor.title} [{anchor.source}]")
        if anchor.data and (data_dir is None or not (data_dir / anchor.data).is_dir()):
            records.append({"group": anchor.group, "title": anchor.title, "source": anchor.source,
                            "status": "skipped", "reason": f"needs --data-dir with {anchor.data}/"})
            print(f"  skipped: needs --data-dir with {anchor.data}/")
            continue
        record, lines = _check(anchor, context)
        records.append(record)
        print("\n".join(lines))
    count = {status: sum(r["status"] == status for r in records) for status in ("ok", "failed", "skipped",
                                                                                "unavailable")}
    checked = count["ok"] + count["failed"]
    tiny = context.tiny()
    if tiny:
        print(f"TINY RANDOM TEST WEIGHTS were loaded ({', '.join(tiny)}): these are not the published models")
    absent = (f", {count['unavailable']} unavailable (weights or data absent: fetch them and run again)"
              if count["unavailable"] else "")
    print(f"{checked} anchors checked, {count['failed']} failed, {count['skipped']} skipped{absent}")
    if args.json:
        print_result(args, {"anchors": records, "checked": checked, "failed": count["failed"],
                            "skipped": count["skipped"], "unavailable": count["unavailable"],
                            "tiny_random_weights": tiny})
    return 1 if count["failed"] or not checked else 0
