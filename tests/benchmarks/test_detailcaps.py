"""DetailCaps-4870 in the authors' published schema (a small parquet written here with its exact columns) and the
DetailCaps meta-evaluation through ``capeval benchmark``: PCC, Kendall τ and sample τ equal scipy on the same
numbers."""

import json
import math
import re
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats

from capeval import InputError
from capeval.benchmarks import load
from capeval.benchmarks.catalog import PARQUET_FILE, cards_dir, convert_to_parquet
from capeval.benchmarks.detailcaps import HUB_REPOSITORY, HUB_REVISION, RELEASE_FILE, SYSTEMS
from capeval.cli import main
from capeval.core import scoring
from capeval.core.scoring import Scorer, summarize

REFERENCES = ("GT_Caption_GPT4O", "GT_Caption_GPT4V", "GT_Caption_Gemini15Pro")
# the published columns and types (lmms-eval reads binary as image bytes; GPT4_Eval is a JSON string or null)
SCHEMA = pa.schema([(c, pa.string()) for c in REFERENCES] + [(s, pa.string()) for s in SYSTEMS] +
                   [("binary", pa.binary()), ("image", pa.string()), ("source", pa.string()),
                    ("GPT4_Eval", pa.string())])
RECORDS = [
    ("coco/000000001.jpg", "COCO", ["A brown dog runs across a green lawn near a wooden fence.",
                                    "A dog is running on grass beside a fence in daylight.",
                                    "A brown dog sprints over the lawn."],
     {"CogVLM": "A brown dog runs on a green lawn next to a wooden fence.", "ShareCaptioner": "A dog on grass.",
      "LLaVA_v15": "A cat sleeps on a red sofa."}, {"CogVLM": 8, "ShareCaptioner": 6, "LLaVA_v15": 2}),
    ("https://example.org/laion/7.jpg", "LAION", ["Two people walk along a sandy beach at sunset.",
                                                  "A couple strolls on the beach while the sun sets.",
                                                  "Two walkers on a beach in the evening light."],
     {"CogVLM": "Two people walk on a beach.", "ShareCaptioner": "Two people walk along the sandy beach at sunset.",
      "LLaVA_v15": "A beach at sunset with two people walking along the water."},
     {"CogVLM": 5, "ShareCaptioner": 9, "LLaVA_v15": 7}),
    ("sa_1234", "SAM", ["A red bus parked on a city street with tall buildings.",
                        "A city street where a red double decker bus is parked.",
                        "A parked red bus among buildings."],
     {"CogVLM": "A red bus on a street.", "ShareCaptioner": "A bus parked in a city with buildings.",
      "LLaVA_v15": "A red car."}, {"CogVLM": 6, "ShareCaptioner": 6, "LLaVA_v15": 6}),  # all tied: no sample τ
    ("flickr/42.jpg", "Flickr", ["A child in a yellow coat plays in the snow.",
                                 "A small kid wearing yellow plays outside in snow.",
                                 "A child playing in snow."],
     {"CogVLM": "A child plays in the snow wearing a yellow coat.", "ShareCaptioner": "A kid in snow.",
      "LLaVA_v15": "A child in a yellow coat plays in the snow with a sled."},
     {"CogVLM": 8, "ShareCaptioner": 5, "LLaVA_v15": 8}),
    ("https://example.org/cc/9.jpg", "CC", ["A bowl of fruit on a kitchen table.", "Fruit in a bowl on a table.",
                                            "Apples and bananas in a bowl."],
     {"CogVLM": "A bowl of apples.", "ShareCaptioner": "Fruit on a table.", "LLaVA_v15": "A kitchen."}, None),
]


def _write_release(root, records=RECORDS):
    folder = root / "detailcaps_4870"
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{**dict(zip(REFERENCES, refs)), **captions, "binary": b"\x89PNG\r\n", "image": image, "source": source,
             "GPT4_Eval": None if scores is None else json.dumps(scores)}
            for image, source, refs, captions, scores in records]
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), str(folder / RELEASE_FILE))
    return folder / RELEASE_FILE


class CaptionWords(Scorer):
    """Per sample: the caption's number of words (a scorer registered by this test only)."""

    name, images, references = "caption_words", "unused", "unused"

    def __init__(self, *, device=None, dtype=None, batch_size=None):
        pass

    def _score(self, inputs):
        return summarize({"caption_words": [float(len(c.split())) for c in inputs.predictions]})


@pytest.fixture
def caption_words(monkeypatch):
    scoring.scorers()
    monkeypatch.setitem(scoring._SCORERS, "caption_words",
                        scoring.ScorerSpec("caption_words", CaptionWords, "unused", "unused", help="words"))


def _judged(records=RECORDS):
    """(image index, caption, references, GPT-4 score) of every judged row, records in order, LVLMs in order."""
    return [(k, captions[s], refs, scores[s]) for k, (_, _, refs, captions, scores) in enumerate(records)
            if scores is not None for s in SYSTEMS]


def _expected(metric, judged, variant="b"):
    """scipy on the same numbers: PCC and τ over every row, τ per image averaged where defined."""
    metric, human = np.asarray(metric, float), np.asarray([row[3] for row in judged], float)
    image = np.asarray([row[0] for row in judged])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        per_image = [stats.kendalltau(metric[image == k], human[image == k], variant=variant).statistic
                     for k in dict.fromkeys(image)]
    defined = [t for t in per_image if not math.isnan(t)]
    return {"pcc": stats.pearsonr(metric, human).statistic,
            "kendall_tau": stats.kendalltau(metric, human, variant=variant).statistic,
            "sample_tau": float(np.mean(defined))}, len(per_image) - len(defined)


def _run(capsys, *arguments):
    assert main(["benchmark", *arguments, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_loader_reads_the_published_schema(tmp_path):
    _write_release(tmp_path)
    bench = load("detailcaps_4870", tmp_path)
    assert len(bench.candidates) == 3 * len(RECORDS) and bench.categories == list(SYSTEMS) * len(RECORDS)
    for k, (image, _, refs, captions, scores) in enumerate(RECORDS):
        rows = range(3 * k, 3 * k + 3)
        assert [bench.candidates[j] for j in rows] == [captions[s] for s in SYSTEMS]
        assert all(bench.references[j] == refs and bench.images[j] == image for j in rows)  # GPT-4o, 4V, Gemini
        human = [bench.human[j] for j in rows]
        assert human == [scores[s] for s in SYSTEMS] if scores else all(math.isnan(h) for h in human)
    assert bench.statistic == "detailcaps"
    one_null = [(*RECORDS[0][:4], {**RECORDS[0][4], "ShareCaptioner": None})]
    _write_release(tmp_path / "null", one_null)
    human = load("detailcaps_4870", tmp_path / "null").human
    assert human[0] == 8 and math.isnan(human[1]) and human[2] == 2  # a null score is that caption's alone


@pytest.mark.parametrize("variant", ["b", "c"])
def test_capeval_benchmark_equals_scipy_with_a_registered_scorer(tmp_path, monkeypatch, capsys, caption_words,
                                                                  variant):
    _write_release(tmp_path)
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    out = _run(capsys, "caption_words", "detailcaps_4870", "--data-dir", str(tmp_path), "--resamples", "0",
               "--nan-policy", "omit", "--statistic", f"kendall_tau_{variant}")
    judged = _judged()
    expected, undefined = _expected([len(caption.split()) for _, caption, _, _ in judged], judged, variant)
    assert out["values"] == pytest.approx(expected, abs=1e-12)
    assert out["tau_variant"] == variant and out["n"] == 12 and out["omitted"] == 3 and out["images"] == 4
    assert out["sample_tau_undefined"] == undefined == 1 and out["sample_tau_images"] == 3
    assert "published" not in out


def test_capeval_benchmark_equals_scipy_with_rouge_l(tmp_path, monkeypatch, capsys):
    _write_release(tmp_path)
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    out = _run(capsys, "rouge_l", "detailcaps_4870", "--data-dir", str(tmp_path), "--resamples", "200",
               "--nan-policy", "omit")
    judged = _judged()
    direct = scoring.load_scorer("rouge_l").score([c for _, c, _, _ in judged],
                                                  references=[list(r) for _, _, r, _ in judged])
    expected, _ = _expected(direct["rouge_l_per_sample"], judged)
    assert out["values"] == pytest.approx(expected, abs=1e-12)
    assert set(out["ci95"]) == {"pcc", "kendall_tau", "sample_tau"}
    assert all(low <= high for low, high in out["ci95"].values())
    again = _run(capsys, "rouge_l", "detailcaps_4870", "--data-dir", str(tmp_path), "--resamples", "200",
                 "--nan-policy", "omit")
    assert again["ci95"] == out["ci95"]  # seeded image resampling
    assert out["published"]["unverified"] is True and out["published"]["sample_tau"] == 0.3383


def test_missing_judgments_and_other_protocols_are_refused(tmp_path, monkeypatch, capsys):
    _write_release(tmp_path)
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    base = ["benchmark", "rouge_l", "detailcaps_4870", "--data-dir", str(tmp_path), "--resamples", "0"]
    for extra, message in (([], r"human: missing value \(NaN\) at rows 12, 13, 14 .*--nan-policy omit"),
                           (["--statistic", "pearson"], "--statistic picks the tau variant"),
                           (["--sample-references-per", "pair"], "--sample-references-per does not apply")):
        assert main([*base, *extra]) != 0
        assert re.search(message, capsys.readouterr().err)


@pytest.mark.parametrize("change, message", [
    (lambda row: row.update(GPT4_Eval="not json"), "record 1: field 'GPT4_Eval': not JSON"),
    (lambda row: row.update(GPT4_Eval=json.dumps({"CogVLM": 1, "LLaVA_v15": 2})),
     r"record 1: field 'GPT4_Eval': no score for \['ShareCaptioner'\]"),
    (lambda row: row.update(GPT4_Eval=json.dumps({"CogVLM": 1, "ShareCaptioner": "high", "LLaVA_v15": 2})),
     "record 1: field 'GPT4_Eval.ShareCaptioner': 'high' is not a finite number"),
    (lambda row: row.update(CogVLM=None), "record 1: field 'CogVLM': None is not a string"),
])
def test_bad_records_name_the_record_and_the_field(tmp_path, change, message):
    path = _write_release(tmp_path)
    rows = pq.read_table(str(path)).to_pylist()
    change(rows[1])
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), str(path))
    with pytest.raises(InputError, match=message):
        load("detailcaps_4870", tmp_path)


def test_a_missing_column_and_a_repeated_image_are_errors(tmp_path, monkeypatch, caption_words):
    path = _write_release(tmp_path)
    pq.write_table(pq.read_table(str(path)).drop(["GPT4_Eval"]), str(path))
    with pytest.raises(InputError, match=r"columns \['GPT4_Eval'\] are missing"):
        load("detailcaps_4870", tmp_path)
    twice = [RECORDS[0], (RECORDS[0][0], *RECORDS[1][1:])]  # two records of one image
    _write_release(tmp_path, twice)
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    from capeval.benchmarks.detailcaps_protocol import run_detailcaps

    with pytest.raises(InputError, match="image 'coco/000000001.jpg' has two rows of one category"):
        run_detailcaps("caption_words", load("detailcaps_4870", tmp_path), resamples=0)


def test_the_authors_hub_file_at_the_pinned_commit_is_checked(tmp_path, monkeypatch):
    import huggingface_hub.constants as hub_constants

    repo = tmp_path / "hub" / f"datasets--{HUB_REPOSITORY.replace('/', '--')}"
    other = "0123456789abcdef0123456789abcdef01234567"
    for revision in (HUB_REVISION, other):
        (repo / "snapshots" / revision).mkdir(parents=True)
        _write_release(tmp_path / revision)
        (repo / "snapshots" / revision / RELEASE_FILE).write_bytes(
            (tmp_path / revision / "detailcaps_4870" / RELEASE_FILE).read_bytes())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(other)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("CAPEVAL_BENCHMARK_DIR", raising=False)
    with pytest.raises(InputError, match="sha256 differs from the pinned"):
        load("detailcaps_4870")  # the fixture is not the 971 MB release
    assert load("detailcaps_4870", revision=other).candidates == load("detailcaps_4870", tmp_path / other).candidates
    with pytest.raises(InputError, match=f"could not fetch {RELEASE_FILE} from the hub dataset {HUB_REPOSITORY}@f+"):
        load("detailcaps_4870", revision="f" * 40)


def test_conversion_to_the_uniform_schema_matches_the_card(tmp_path):
    import datasets
    import yaml

    _write_release(tmp_path / "raw", RECORDS[:4])  # every record judged: the round trip compares numbers
    folder = convert_to_parquet("detailcaps_4870", tmp_path / "raw", tmp_path / "out")
    card = (cards_dir() / "detailcaps_4870" / "README.md").read_text()
    assert (folder / "README.md").read_text() == card
    meta = yaml.safe_load(card.split("---\n")[1])
    table = pq.read_table(folder / PARQUET_FILE)
    assert datasets.Features._from_yaml_list(meta["dataset_info"]["features"]) == \
        datasets.Features.from_arrow_schema(table.schema)
    assert load("detailcaps_4870", tmp_path / "out") == load("detailcaps_4870", tmp_path / "raw")
