"""`capeval benchmark <judge> <dataset> --replay CACHE`: a judge's recorded outputs through capeval's own runner and
benchmark data; FLEUR's published numbers reproduced from its published per-sample outputs."""

import json
import re
from pathlib import Path

import pytest
from scipy import stats

from capeval import InputError
from capeval.benchmarks.replay import run_replayed
from capeval.cli import main
from capeval.judges.cache import JudgeCache
from capeval.judges.published import import_fleur


def _benchmark(argv, capsys):
    assert main(["benchmark", *argv, "--resamples", "0", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def fleur_cache(shared_data, tmp_path_factory):
    """FLEUR's published outputs imported once for the module (the replays only read the cache)."""
    cache = tmp_path_factory.mktemp("fleur") / "fleur.jsonl"
    import_fleur(shared_data / "judges" / "fleur", cache)
    return str(cache), str(shared_data / "benchmarks")


def test_fleur_flickr8k_expert_tau_c_is_reproduced_from_the_published_outputs(fleur_cache, capsys):
    cache, data = fleur_cache
    out = _benchmark(["fleur", "flickr8k_expert", "--replay", cache, "--data-dir", data], capsys)
    # published: 53.0 (FLEUR paper), 53.026 from the published files by the official compute_correlation.py
    assert round(out["value"], 3) == 53.026 and round(out["value"], 1) == 53.0
    assert out["n"] == 16992 and out["statistic"] == "kendall_tau_c"  # 5,664 captions x 3 expert rows
    assert out["replay"]["matched_exact"] == 16992 and out["replay"]["unmatched"] == 0
    assert out["provenance"]["replayed"] is True and out["provenance"]["cache"] == cache
    raw = run_replayed("fleur", "flickr8k_expert", cache, data_dir=data, output="raw_score", resamples=0)
    assert round(raw["value"], 1) == 34.9  # the generated number alone (published raw τ-c)


def test_fleur_pascal50s_accuracies_are_reproduced_with_the_published_labels(fleur_cache, capsys):
    cache, data = fleur_cache
    out = _benchmark(["fleur", "pascal50s", "--replay", cache, "--data-dir", data, "--replay-labels", "published"],
                     capsys)
    published = {"HC": 61.3, "HI": 99.7, "HM": 97.6, "MM": 74.2}  # FLEUR: true count / 1000 in each file
    assert {c: round(v["mean"], 1) for c, v in out["categories"].items()} == published
    assert round(out["value"], 1) == 83.2 and out["n"] == 4000
    own = _benchmark(["fleur", "pascal50s", "--replay", cache, "--data-dir", data], capsys)
    differing = own["replay"]["labels"]["per_category"]
    assert differing == {"HC": 19, "MM": 14}  # the release's majority labels differ from FLEUR's on these pairs
    for category in ("HI", "HM"):
        assert round(own["categories"][category]["mean"], 1) == published[category]
    assert {c: round(own["categories"][c]["mean"], 1) for c in differing} == {"HC": 61.8, "MM": 74.1}


def _published_scores(path):
    """(image basename, caption) → our score, read with a plain split of the published file."""
    scores, image = {}, None
    for block in path.read_text().split("\n\n"):
        fields = dict(line.split(" : ", 1) for line in block.splitlines() if " : " in line)
        image = fields.get("image file", image)
        if "our score" in fields:
            scores[image.rsplit("/", 1)[-1], fields["caption"]] = float(fields["our score"])
    return scores


def test_fleur_composite_through_the_runner_equals_an_independent_join(fleur_cache, shared_data, capsys):
    from capeval.benchmarks import load

    cache, data = fleur_cache
    out = _benchmark(["fleur", "composite", "--replay", cache, "--data-dir", data], capsys)
    published = _published_scores(shared_data / "judges" / "fleur" / "fleur_composite.txt")
    spaced = {(image, re.sub(r"\s+([.,!?;:])", r"\1", caption)): s for (image, caption), s in published.items()}
    benchmark = load("composite", data)
    scores = [published.get((i.rsplit("/", 1)[-1], c), spaced.get((i.rsplit("/", 1)[-1], c)))
              for i, c in zip(benchmark.images, benchmark.candidates)]
    assert None not in scores
    expected = 100 * stats.kendalltau(scores, benchmark.human, variant="c").statistic
    assert out["value"] == pytest.approx(expected, abs=1e-9) and round(out["value"], 2) == 63.44  # published 63.5
    replay = out["replay"]
    assert replay["unmatched"] == 0 and replay["matched_punctuation_spacing"] == 2005  # "umbrella ." / "umbrella."
    # FLEUR scored 11,985 rows; 3 images (9 rows) are not in this release of Composite
    assert replay["cache_records_unused"] == 9 and len(replay["cache_records_unused_first"]) == 5


RATINGS = {"a dog runs .": [4, 4, 3], "a cat sleeps": [1, 2, 1], "a red car": [3, 3, 2], "two men walk": [2, 1, 2]}


def _expert_release(tmp_path):
    folder = tmp_path / "flickr8k"
    folder.mkdir()
    data = {"0": {"image_path": "Flicker8k_Dataset/1.jpg", "ground_truth": ["r1", "r2", "r3", "r4", "r5"],
                  "human_judgement": [{"caption": c, "rating": r} for c, rs in RATINGS.items() for r in rs]}}
    (folder / "flickr8k_expert_clipscore_format.json").write_text(json.dumps(data))
    return tmp_path


def _cache(path, entries, judge="fleur"):
    cache = JudgeCache(path)
    for image, caption, score, references in entries:
        inputs = {"judge": judge, "model": "m@0", "prompt_sha256": "0", "image": {"sha256": None, "file": image},
                  "caption": caption, "references": references, "generation": {"do_sample": False}}
        cache.put(inputs, {"text": str(score), "raw_score": score, "score": score, "digit_probabilities": None,
                           "explanation": None}, "generated")
    return str(path)


def test_unmatched_rows_are_refused_or_omitted_on_request_and_always_reported(tmp_path, capsys):
    data = _expert_release(tmp_path)
    scores = {"a dog runs.": 0.9, "a cat sleeps": 0.1, "a red car": 0.7}  # "two men walk" is not in the cache
    cache = _cache(tmp_path / "c.jsonl", [("images/1.jpg", c, s, None) for c, s in scores.items()])
    with pytest.raises(InputError, match=r"3 of 12 rows are not in the judge cache .*row 9 \(image '1.jpg', "
                                         r"caption 'two men walk'\).*--replay-unmatched omit"):
        run_replayed("fleur", "flickr8k_expert", cache, data_dir=data, resamples=0)
    assert main(["benchmark", "fleur", "flickr8k_expert", "--replay", cache, "--data-dir", str(data)]) == 2
    assert "3 of 12 rows are not in the judge cache" in capsys.readouterr().err
    out = _benchmark(["fleur", "flickr8k_expert", "--replay", cache, "--data-dir", str(data),
                      "--replay-unmatched", "omit"], capsys)
    kept = [(scores[c.replace(" .", ".")], r) for c, rs in RATINGS.items() for r in rs if c != "two men walk"]
    expected = 100 * stats.kendalltau(*zip(*kept), variant="c").statistic
    assert out["value"] == pytest.approx(expected, abs=1e-9) and out["n"] == 9
    assert out["replay"]["unmatched"] == 3 and out["replay"]["matched_punctuation_spacing"] == 3
    assert out["replay"]["unmatched_first"][0] == "row 9 (image '1.jpg', caption 'two men walk')"


def test_the_spacing_rule_matches_only_one_caption_of_the_same_image(tmp_path):
    data = _expert_release(tmp_path)
    cached = [("1.jpg", c, k / 10, None) for k, c in enumerate(["a cat sleeps", "a red car", "two men walk"])]
    ambiguous = _cache(tmp_path / "a.jsonl", cached + [("1.jpg", "a dog runs.", 0.9, None),
                                                       ("1.jpg", "a dog runs  .", 0.8, None)])
    out = run_replayed("fleur", "flickr8k_expert", ambiguous, data_dir=data, resamples=0, unmatched="omit")
    assert out["replay"]["unmatched"] == 3  # "a dog runs ." ~ two cached captions: neither is taken
    other_image = _cache(tmp_path / "b.jsonl", cached + [("2.jpg", "a dog runs.", 0.9, None)])
    out = run_replayed("fleur", "flickr8k_expert", other_image, data_dir=data, resamples=0, unmatched="omit")
    assert out["replay"]["unmatched"] == 3 and out["replay"]["cache_records_unused"] == 1


def test_a_record_with_references_replays_only_for_the_same_references(tmp_path):
    data = _expert_release(tmp_path)
    refs = ["r1", "r2", "r3", "r4", "r5"]
    cached = [("1.jpg", c, k / 10, refs) for k, c in enumerate(["a cat sleeps", "a red car", "two men walk"])]
    cache = _cache(tmp_path / "c.jsonl", cached + [("1.jpg", "a dog runs .", 0.9, refs[:4])], judge="ref_fleur")
    out = run_replayed("ref_fleur", "flickr8k_expert", cache, data_dir=data, resamples=0, unmatched="omit")
    assert out["replay"]["unmatched"] == 3 and out["n"] == 9


def test_replay_usage_errors_are_one_line(tmp_path, capsys):
    data = _expert_release(tmp_path)
    cache = _cache(tmp_path / "c.jsonl", [("1.jpg", "a cat sleeps", 0.5, None)])
    for argv, message in [
        (["--replay-labels", "published"], "--replay-labels needs --replay CACHE"),
        (["--replay", cache, "--replay-labels", "published"], "not a pairwise benchmark"),
        (["--replay", str(tmp_path / "none.jsonl")], "judge cache not found"),
    ]:
        assert main(["benchmark", "fleur", "flickr8k_expert", "--data-dir", str(data), *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    assert main(["benchmark", "clip_s", "flickr8k_expert", "--data-dir", str(data), "--replay", cache]) == 2
    assert "no records of the judge 'clip_s' (it holds ['fleur'])" in capsys.readouterr().err


def _pascal_release(tmp_path, labels):
    """A Pascal-50S-shaped release: 3 HC pairs over 2 images, the given majority labels (0: A, 1: B)."""
    import pandas as pd

    pairs = [("a.jpg", "a dog runs", "a cat sits"), ("a.jpg", "a dog runs", "a car"), ("b.jpg", "two men", "a tree")]
    (tmp_path / "pascal50s").mkdir()
    pd.DataFrame({"image_path": [f"./VOC/{i}" for i, _, _ in pairs], "references": [["r1", "r2"]] * len(pairs),
                  "candidate_a": [a for _, a, _ in pairs], "candidate_b": [b for _, _, b in pairs],
                  "category": [1] * len(pairs), "scores": [{"label": label} for label in labels]}).to_parquet(
        tmp_path / "pascal50s" / "pascal50s_pairs_48refs.parquet")
    return tmp_path


def _fleur_pascal_file(folder, blocks):
    """A FLEUR-format Pascal-50S HC results file: (image, label, (caption, score), (caption, score)) per pair."""
    text = ""
    for image, label, *captions in blocks:
        text += f"image file : VOC2012/JPEGImages/{image}\nlabel : {label}\n\n"
        text += "".join(f"caption : {c}\nmodel score : {s}\nour score : {s}\n\n" for c, s in captions)
    folder.mkdir()
    (folder / "fleur_pascal_HC.txt").write_text(text + "true count : 0\ntie count : 0")


def test_pairwise_replay_with_the_published_labels_and_unmatched_pairs_named(tmp_path, capsys):
    data = _pascal_release(tmp_path, labels=[0, 0, 1])
    _fleur_pascal_file(tmp_path / "fleur", [  # FLEUR labelled the second pair the other way (B preferred)
        ("a.jpg", 0, ("a dog runs", 0.9), ("a cat sits", 0.2)), ("a.jpg", 1, ("a dog runs", 0.9), ("a car", 0.1)),
        ("b.jpg", 1, ("two men", 0.3), ("a tree", 0.8))])
    import_fleur(tmp_path / "fleur", tmp_path / "c.jsonl")
    argv = ["fleur", "pascal50s", "--replay", str(tmp_path / "c.jsonl"), "--data-dir", str(data)]
    own = _benchmark(argv, capsys)
    assert own["categories"]["HC"]["mean"] == 100.0 and own["replay"]["labels"]["per_category"] == {"HC": 1}
    published = _benchmark([*argv, "--replay-labels", "published"], capsys)
    assert published["categories"]["HC"]["mean"] == pytest.approx(200 / 3)  # the second pair now counts wrong
    (tmp_path / "fleur" / "fleur_pascal_HC.txt").write_text(
        "image file : VOC2012/JPEGImages/a.jpg\nlabel : 0\n\ncaption : a dog runs\nmodel score : 0.9\n"
        "our score : 0.9\n\ncaption : a cat sits\nmodel score : 0.2\nour score : 0.2\n")
    import_fleur(tmp_path / "fleur", tmp_path / "d.jsonl")
    argv[3] = str(tmp_path / "d.jsonl")
    assert main(["benchmark", *argv]) == 2
    assert "3 of 6 rows are not in the judge cache" in capsys.readouterr().err
    out = _benchmark([*argv, "--replay-unmatched", "omit"], capsys)
    assert out["n"] == 1 and out["replay"]["pairs_omitted"] == 2
    assert out["replay"]["unmatched_first"] == ["pair 2 caption A (image 'b.jpg', caption 'two men')",
                                                "pair 1 caption B (image 'a.jpg', caption 'a car')",
                                                "pair 2 caption B (image 'b.jpg', caption 'a tree')"]


def test_a_replay_names_its_judge_model_and_marks_tiny_weights_records(tmp_path, capsys):
    import warnings

    from capeval.core.provenance import TinyWeightsWarning

    data = _expert_release(tmp_path)
    entries = [("1.jpg", c, k / 10, None) for k, c in enumerate(RATINGS)]
    real = _cache(tmp_path / "real.jsonl", entries)
    out = _benchmark(["fleur", "flickr8k_expert", "--replay", real, "--data-dir", str(data)], capsys)
    assert out["provenance"]["model"] == "m@0" and out["provenance"]["tiny_random_weights"] is False
    assert "TINY" not in out["hashcode"]
    cache = JudgeCache(tmp_path / "tiny.jsonl")  # as the tiny judge writes them: the model id says tiny
    for record in JudgeCache(real).records():
        cache.put({**record["inputs"], "model": "llava-hf/llava-1.5-13b-hf@5dda288+tiny-random"}, record["outputs"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = run_replayed("fleur", "flickr8k_expert", str(cache.path), data_dir=data, resamples=0)
    assert any(issubclass(w.category, TinyWeightsWarning) for w in caught)
    assert out["provenance"]["model"] == "llava-hf/llava-1.5-13b-hf@5dda288+tiny-random"
    assert out["provenance"]["tiny_random_weights"] is True and out["hashcode"].endswith("|TINY-RANDOM-WEIGHTS")
    edited = tmp_path / "edited.jsonl"  # the model id edited in place: the keys no longer match
    edited.write_text(Path(real).read_text().replace('"model":"m@0"', '"model":"other@1+tiny-random"'))
    with pytest.raises(InputError, match=r"line 1: its key .* is not the key of its inputs"):
        run_replayed("fleur", "flickr8k_expert", str(edited), data_dir=data, resamples=0)


def _refusals(tmp_path):
    """Judge caches the replay must refuse, and the one-line message each gets."""
    entries = [("1.jpg", c, k / 10, None) for k, c in enumerate(RATINGS)]
    good = Path(_cache(tmp_path / "good.jsonl", entries))
    lines = good.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    cases = {}
    swapped = [dict(r) for r in records]
    swapped[0]["key"], swapped[1]["key"] = records[1]["key"], records[0]["key"]
    cases["swapped"] = (swapped, r"line 1: its key .* is not the key of its inputs")
    high = json.loads(lines[2])
    high["outputs"]["score"] = 7.5
    cases["out-of-range"] = ([*records[:2], high, *records[3:]], r"line 3: outputs.score is 7.5, not a finite number")
    mixed = JudgeCache(tmp_path / "mixed.jsonl")
    for k, record in enumerate(records):
        mixed.put({**record["inputs"], "model": "m@0" if k < 2 else "other@1"}, record["outputs"])
    cases["mixed"] = ([json.loads(line) for line in mixed.path.read_text().splitlines()],
                      r"the records of fleur come from more than one judge: model m@0 \(line 1\) and model other@1 "
                      r"\(line 3\)")
    written = {}
    for name, (rows, message) in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        written[name] = (path, message)
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(good.read_bytes()[:-1] + b"\xff\xfe\x00\n")
    written["binary"] = (binary, r"line 4: not UTF-8 text")
    return written


def test_caches_that_could_lie_are_refused_one_line_exit_2_nothing_written(tmp_path, capsys):
    data = _expert_release(tmp_path)
    for name, (path, message) in _refusals(tmp_path).items():
        plot = tmp_path / f"{name}.png"
        argv = ["benchmark", "fleur", "flickr8k_expert", "--replay", str(path), "--data-dir", str(data),
                "--plot", str(plot), "--resamples", "0"]
        assert main(argv) == 2, name
        captured = capsys.readouterr()
        assert re.search(message, captured.err), (name, captured.err)
        assert captured.err.count("\n") == 1 and "Traceback" not in captured.err and captured.out == ""
        assert not plot.exists()
