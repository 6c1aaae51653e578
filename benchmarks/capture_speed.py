"""CAPTURE speed (#41): capeval against the official ``capture-metric`` 0.1.13 on the same detailed captions, with
full-size random flan-t5-base (the FACTUAL parser) and all-mpnet-base-v2 (the cost depends on the shapes, not on the
weights: :mod:`capeval.testing.full_size_detail`), the same NLTK data (Punkt and the tagger of
:mod:`capeval.testing.tiny_nltk`, WordNet 3.0 from Debian) and ``--threads`` torch threads.

Inputs, generated from a seeded vocabulary (:func:`build_inputs`): ``--captions`` images, each with one reference
and one caption from each of two systems, every text about 100 words in 5-7 sentences; the systems share the scene
with the reference, not their sentences.

- **capeval**, as a user runs it: ``capeval.load_scorer("capture", device="cpu")``, then ``score_systems`` on system 1
  alone, then on systems 1 and 2 (a run that adds the second system). Each distinct sentence is generated once per
  process, so the second call generates system 2's sentences only (counted at the model's ``generate``).
- **official**: ``CAPTURE().compute_score(gts, res)`` once per system, as its API scores a system: every caption
  and every reference parsed sentence by sentence (``parse(sent_tokenize(text))``, one generation batch per text),
  the references again for each system, each parsing step loading the parser. Redirected to the CPU in this script
  only (never in capeval): ``torch.cuda.set_device`` is a no-op, ``torch.cuda.device_count`` answers 1, its
  ``multiprocessing.Pool`` is a thread pool of this process with the same torch threads (no process start, no
  pickling: in the official code's favour), its encoder is a ``SentenceTransformer`` of the same all-mpnet-base-v2
  folder on the CPU (its constructor would move it to ``cuda:0``), and the tokenizer's ``as_target_tokenizer``, which
  transformers 5 removed, is a no-op context (for T5 it only set a flag). Generations are counted at
  ``model.generate``; the output ids of each distinct input are compared between the two sides.

Every per-caption value of both systems must agree within 1e-6 (asserted; the largest difference is printed).
Random weights rarely emit the end token, so every generation runs to 128 tokens (slower than the real parser,
alike for both sides), and their graphs rarely hold a noun of the text, so most values are 0: the value check is
weak here, the output-id comparison is not. The totals include loading (capeval: once; the official code: the
encoder once, the parser in each parsing step, as its API does). Wall seconds are printed with the process CPU
seconds (all threads), which other jobs on a shared machine disturb less.

    python benchmarks/capture_speed.py [--captions 100] [--threads 2] [--work-dir /tmp/capeval-capture-speed]
        [--skip-official] [--reduced-models]

The models and data are built once into ``--work-dir`` (a few minutes; reused while ``built.json`` matches).
"""

import argparse
import contextlib
import io
import json
import os
import random
import sys
import time
from pathlib import Path

SEED = 41
WORDS_PER_TEXT = 100

OBJECTS = (
    "dog", "cat", "man", "woman", "child", "car", "bicycle", "bench", "tree", "building", "table", "chair", "window",
    "door", "lamp", "umbrella", "bag", "hat", "jacket", "shirt", "fence", "flower", "boat", "bridge", "horse", "bird",
    "cup", "plate", "book", "sign", "truck", "bus", "mountain", "wall", "roof", "house", "shop", "bottle", "basket",
    "kite", "ball", "rock", "pole", "clock", "tower", "statue", "fountain", "backpack", "helmet", "scarf", "laptop",
    "vase", "pillow", "curtain", "shelf", "mirror", "candle", "bowl", "train", "motorcycle", "dress", "coat")
PLURALS = {"man": "men", "woman": "women", "child": "children", "bus": "buses", "glass": "glasses", "bench": "benches",
           "shelf": "shelves", "dress": "dresses", "box": "boxes", "bush": "bushes"}
PLACES = ("street", "park", "garden", "kitchen", "room", "field", "beach", "square", "market", "harbor", "yard")
ADJECTIVES = (
    "red", "blue", "green", "yellow", "white", "black", "brown", "gray", "orange", "pink", "purple", "small", "large",
    "tall", "short", "long", "wide", "narrow", "wooden", "metal", "glass", "stone", "plastic", "old", "new", "wet",
    "dry", "bright", "dark", "shiny", "colorful", "empty", "busy", "round", "square", "striped", "soft", "heavy")
MOODS = ("calm", "cheerful", "quiet", "lively", "peaceful", "warm", "cold", "sunny", "cloudy", "crowded")
ACTIONS = ("sitting", "standing", "walking", "resting", "leaning", "waiting", "lying", "hanging", "moving", "placed")
PREPOSITIONS = ("on", "near", "beside", "behind", "under", "above", "next to", "in front of", "close to", "against")
NUMBERS = ("two", "three", "four", "several", "a few", "many")
TEMPLATES = (
    "The image shows {a0} {action} {prep} {a1} in the middle of a {mood} {place}.",
    "In the background, {a0} stands {prep} {a1}, and {a2} can be seen {prep2} it.",
    "On the left side of the picture, there is {a0} with {a1} {prep} {a2}.",
    "{A0} is {action} {prep} {a1}, while {a2} rests {prep2} the {n3}.",
    "The {n0} has {adj} {p1} and {a2}, which gives the whole scene a {mood} look.",
    "Overall, the atmosphere is {mood} and {mood2}, with {adj} light falling on the {n0} and the {n1}.",
    "Near the {n0}, {number} {adj} {p1} are {action} {prep} {a2}.",
    "{A0} and {a1} are visible on the right, {prep} {a2} that looks {adj2}.",
    "A closer look reveals {a0} {prep} the {n1}, partly hidden by {a2}.",
    "At the bottom of the frame, {number} {p0} are {action} {prep} {a1} next to the {n2}.",
)


def _plural(noun: str) -> str:
    return PLURALS.get(noun, noun + "s")


def _article(phrase: str) -> str:
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _text(rng: random.Random, scene: list, place: str, faithful: float) -> str:
    """About :data:`WORDS_PER_TEXT` words: templates filled with the scene's objects (each with its attribute) or,
    with probability ``1 - faithful``, another object or attribute."""
    sentences, words = [], 0
    templates = list(TEMPLATES)
    rng.shuffle(templates)
    for template in templates:
        if words >= WORDS_PER_TEXT - 8:
            break
        picks = []
        for _ in range(4):
            noun, adjective = rng.choice(scene)
            if rng.random() > faithful:
                noun = rng.choice(OBJECTS)
            if rng.random() > faithful:
                adjective = rng.choice(ADJECTIVES)
            picks.append((noun, adjective))
        fill = {f"a{i}": _article(f"{adj} {noun}") for i, (noun, adj) in enumerate(picks)}
        fill.update({f"n{i}": noun for i, (noun, _) in enumerate(picks)})
        fill.update({f"p{i}": _plural(noun) for i, (noun, _) in enumerate(picks)})
        fill.update(A0=fill["a0"][0].upper() + fill["a0"][1:], adj=rng.choice(ADJECTIVES),
                    adj2=rng.choice(ADJECTIVES), mood=rng.choice(MOODS), mood2=rng.choice(MOODS),
                    action=rng.choice(ACTIONS), prep=rng.choice(PREPOSITIONS), prep2=rng.choice(PREPOSITIONS),
                    number=rng.choice(NUMBERS), place=place)
        sentence = template.format(**fill)
        sentences.append(sentence)
        words += len(sentence.split())
    return " ".join(sentences)


def build_inputs(captions: int, seed: int = SEED):
    """``(references, system_1, system_2)``: one reference and one caption per system for each of ``captions``
    images, from a seeded scene per image (8 objects with an attribute each, a place)."""
    rng = random.Random(seed)
    references, systems = [], ([], [])
    for _ in range(captions):
        scene = [(noun, rng.choice(ADJECTIVES)) for noun in rng.sample(OBJECTS, 8)]
        place = rng.choice(PLACES)
        references.append([_text(rng, scene, place, faithful=1.0)])
        for system, faithful in zip(systems, (0.8, 0.6)):
            system.append(_text(rng, scene, place, faithful))
    return references, systems[0], systems[1]


def prepare(work_dir: Path, reduced: bool = False):
    """The hub cache and the nltk_data folder of the full-size random models, or of 1-layer 16-wide ones
    (``reduced``: to check this script in a minute), built unless already there."""
    from capeval.testing.full_size_detail import (FLAN_T5_BASE, MPNET_BASE, T5_TOKENIZER_PIECES,
                                                  populate_full_size_detail_cache)

    wanted = {"factual": FLAN_T5_BASE, "t5_pieces": T5_TOKENIZER_PIECES, "mpnet": MPNET_BASE}
    if reduced:
        work_dir = work_dir / "reduced"
        wanted["factual"] = dict(FLAN_T5_BASE, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1,
                                 num_heads=2)
        wanted["mpnet"] = dict(MPNET_BASE, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=32)
    hub, stamp = work_dir / "hub", work_dir / "built.json"
    if not (stamp.is_file() and json.loads(stamp.read_text()) == json.loads(json.dumps(wanted, sort_keys=True))):
        start = time.perf_counter()
        populate_full_size_detail_cache(hub, work_dir, factual_config=wanted["factual"],
                                        mpnet_config=wanted["mpnet"])
        print(f"built the full-size random models and NLTK data in {time.perf_counter() - start:.0f} s",
              file=sys.stderr)
    return hub, work_dir / "nltk_data"


class Clock:
    """Wall and process CPU seconds of a block."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def count_generations(model, counter: dict) -> None:
    """Count the inputs, calls, decoder steps (output length) and wall seconds of ``model.generate`` into
    ``counter``, and keep
    each input's output ids (``counter["outputs"]``: unpadded input ids -> output ids without trailing padding)."""
    generate = model.generate

    def counted(input_ids, *args, attention_mask=None, **kwargs):
        start = time.perf_counter()
        output = generate(input_ids, *args, attention_mask=attention_mask, **kwargs)
        counter["seconds"] += time.perf_counter() - start
        counter["texts"] += len(input_ids)
        counter["calls"] += 1
        counter["steps"] += output.shape[1] - 1
        for ids, mask, out in zip(input_ids.tolist(), attention_mask.tolist(), output.tolist()):
            while out and out[-1] == model.config.pad_token_id:
                out.pop()
            counter["outputs"][tuple(i for i, m in zip(ids, mask) if m)] = tuple(out)
        return output

    model.generate = counted


def _work(after: dict, before: dict) -> str:
    texts, calls, steps, seconds = (after[k] - before[k] for k in ("texts", "calls", "steps", "seconds"))
    return f"{texts} sentences generated in {calls} generate calls ({seconds:.0f} s), {steps} decoder steps"


def run_capeval(references, system_1, system_2) -> dict:
    import capeval

    with Clock() as load:
        scorer = capeval.load_scorer("capture", device="cpu")
    counter = {"texts": 0, "calls": 0, "steps": 0, "seconds": 0.0, "outputs": {}}
    count_generations(scorer.parser.model, counter)
    start = dict(counter)
    with Clock() as first:
        scorer.score_systems([system_1], references=references)
    after_first = dict(counter)
    with Clock() as both:
        result = scorer.score_systems([system_1, system_2], references=references)
    return {"load": load, "system_1": first, "add_system_2": both,
            "values": [r["capture"].per_sample for r in result],
            "work": {"system_1": _work(after_first, start), "add_system_2": _work(counter, after_first)},
            "outputs": counter["outputs"]}


@contextlib.contextmanager
def official_on_cpu(nltk_data: Path):
    """capture-metric's GPU calls redirected to this process's CPU (see the module docstring); restored after."""
    import multiprocessing.pool
    import types

    import nltk
    import torch

    nltk.data.path.insert(0, str(nltk_data))
    nltk.tag._get_tagger.cache_clear()
    with contextlib.redirect_stderr(io.StringIO()):  # its import tries nltk.download, which cannot connect here
        import capture_metric.capture as official
    from factual_scene_graph.parser import scene_graph_parser

    parser_init = scene_graph_parser.SceneGraphParser.__init__

    def init_without_target_tokenizer(self, *args, **kwargs):
        parser_init(self, *args, **kwargs)
        if not hasattr(self.tokenizer, "as_target_tokenizer"):
            self.tokenizer.as_target_tokenizer = contextlib.nullcontext

    saved = (torch.cuda.set_device, torch.cuda.device_count, official.multiprocessing)
    torch.cuda.set_device, torch.cuda.device_count = (lambda device: None), (lambda: 1)
    threads = torch.get_num_threads()  # a new thread would otherwise run torch's operators on one thread

    def pool(processes):
        return multiprocessing.pool.ThreadPool(processes, initializer=torch.set_num_threads, initargs=(threads,))

    official.multiprocessing = types.SimpleNamespace(Pool=pool)
    scene_graph_parser.SceneGraphParser.__init__ = init_without_target_tokenizer
    try:
        yield official
    finally:
        torch.cuda.set_device, torch.cuda.device_count, official.multiprocessing = saved
        scene_graph_parser.SceneGraphParser.__init__ = parser_init
        nltk.data.path.remove(str(nltk_data))


def run_official(references, system_1, system_2, nltk_data: Path) -> dict:
    from sentence_transformers import SentenceTransformer

    from capeval.core.hub import resolve

    with official_on_cpu(nltk_data) as official:
        from factual_scene_graph.parser import scene_graph_parser

        counter = {"texts": 0, "calls": 0, "steps": 0, "seconds": 0.0, "parser_loads": 0, "outputs": {}}
        parser_init = scene_graph_parser.SceneGraphParser.__init__

        def counted_init(self, *args, **kwargs):
            parser_init(self, *args, **kwargs)
            counter["parser_loads"] += 1
            count_generations(self.model, counter)

        scene_graph_parser.SceneGraphParser.__init__ = counted_init
        try:
            with Clock() as load:
                evaluator = official.CAPTURE(soft_matching=False)  # its constructor would put the encoder on cuda:0
                evaluator.soft_matching = True
                evaluator.text_encoder = SentenceTransformer(str(resolve("all-mpnet-base-v2")), device="cpu").eval()
            gts = {f"image_{i}": refs for i, refs in enumerate(references)}
            clocks, values, work = {}, [], {}
            for name, system in (("system_1", system_1), ("system_2", system_2)):
                before = dict(counter)
                with Clock() as clock, contextlib.redirect_stdout(io.StringIO()), \
                        contextlib.redirect_stderr(io.StringIO()):
                    _, scores = evaluator.compute_score(gts, {f"image_{i}": [c] for i, c in enumerate(system)})
                clocks[name] = clock
                loads = counter["parser_loads"] - before["parser_loads"]
                work[name] = f"{_work(counter, before)}, {loads} parser loads"
                values.append([float(s) for s in scores])
        finally:
            scene_graph_parser.SceneGraphParser.__init__ = parser_init
    return {"load": load, **clocks, "values": values, "work": work, "outputs": counter["outputs"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--captions", type=int, default=100, help="images (one reference, two systems' captions)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/capeval-capture-speed"),
                        help="where the random models and NLTK data are built (reused)")
    parser.add_argument("--skip-official", action="store_true", help="time capeval only")
    parser.add_argument("--reduced-models", action="store_true",
                        help="1-layer, 16-wide random models (same tokenizers): checks this script, times nothing")
    args = parser.parse_args()
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_EVALUATE_OFFLINE"):
        os.environ[name] = "1"
    args.work_dir.mkdir(parents=True, exist_ok=True)
    hub, nltk_data = prepare(args.work_dir, args.reduced_models)
    os.environ["HF_HUB_CACHE"] = str(hub)
    import huggingface_hub.constants
    import numpy as np
    import torch

    huggingface_hub.constants.HF_HUB_CACHE = str(hub)
    torch.set_num_threads(args.threads)
    references, system_1, system_2 = build_inputs(args.captions)
    texts = [r for refs in references for r in refs] + system_1 + system_2
    print(f"{args.captions} images x (1 reference + 2 systems); words per text: mean "
          f"{np.mean([len(t.split()) for t in texts]):.1f}, min {min(len(t.split()) for t in texts)}, "
          f"max {max(len(t.split()) for t in texts)}; torch threads {args.threads}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    ours = run_capeval(references, system_1, system_2)
    rows = [("capeval", "load", ours["load"], "")]
    rows += [("capeval", stage, ours[stage], ours["work"][stage]) for stage in ("system_1", "add_system_2")]
    if not args.skip_official:
        theirs = run_official(references, system_1, system_2, nltk_data)
        rows.append(("official", "load", theirs["load"], "the encoder (the parser loads in each stage)"))
        rows += [("official", stage, theirs[stage], theirs["work"][stage]) for stage in ("system_1", "system_2")]
        assert len(theirs["values"]) == len(ours["values"]) == 2
        assert all(len(a) == len(b) == args.captions for a, b in zip(ours["values"], theirs["values"]))
        difference = max(abs(a - b) for ours_s, theirs_s in zip(ours["values"], theirs["values"])
                         for a, b in zip(ours_s, theirs_s))
        same_inputs = ours["outputs"].keys() == theirs["outputs"].keys()
        same_outputs = sum(ours["outputs"][key] == theirs["outputs"].get(key) for key in ours["outputs"])
    print(f"\n{'side':<9} {'stage':<13} {'wall s':>9} {'cpu s':>9}  work")
    for side, stage, clock, work in rows:
        print(f"{side:<9} {stage:<13} {clock.wall:>9.1f} {clock.cpu:>9.1f}  {work}")
    print(f"\ncapeval: the second system cost {ours['add_system_2'].wall / ours['system_1'].wall:.2f}x the first "
          f"(wall)")
    if not args.skip_official:
        totals = {side: [sum(getattr(result[stage], kind) for stage in stages) for kind in ("wall", "cpu")]
                  for side, result, stages in (("capeval", ours, ("load", "system_1", "add_system_2")),
                                               ("official", theirs, ("load", "system_1", "system_2")))}
        for side, (wall, cpu) in totals.items():
            print(f"{side}, both systems, loading included: {wall:.1f} s wall, {cpu:.1f} s cpu")
        print(f"speed-up: {totals['official'][0] / totals['capeval'][0]:.2f}x wall, "
              f"{totals['official'][1] / totals['capeval'][1]:.2f}x cpu")
        print(f"per-caption CAPTURE, both systems: max |capeval - official| = {difference:.2e} "
              f"(values: mean {np.mean(ours['values']):.4f}, nonzero {int(np.count_nonzero(ours['values']))} of "
              f"{2 * args.captions})")
        print(f"generator inputs: {'the same' if same_inputs else 'DIFFERENT'} {len(ours['outputs'])} distinct "
              f"token sequences on both sides; identical output ids for {same_outputs} of them")
        assert difference <= 1e-6, f"values differ by {difference}"
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
