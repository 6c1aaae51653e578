"""What each caption matched, missed and invented (issue #41 item 4), through the suite on the production path (tiny
parser, encoder and NLTK data; the parser's model answers hand-written scene graphs): each system's per-image
records of ``capture`` and ``spice_factual`` are the scorer's own on that system alone, whatever the chunk size
(nothing dropped, image order kept); report.json carries them in its images' ``details``, scores.csv their counts
only; ``COCOEvalCap`` keeps its per-image values; a ``capeval-report/2`` document is still compared."""

import copy
import csv
import json
import warnings

import pytest

from capeval.core.evaluation_sets import EvalImage, GroundTruth, SystemCaptions
from capeval.core.keys import coco_method
from capeval.core.scoring import load_scorer
from capeval.report.schema import SCHEMA_VERSION, validate_report
from capeval.suite import resolve_plan, score_suite
from capeval.suite.run import compare_report, evaluate_captions
from scene_graph_oracles import SENTENCE_GRAPHS

# every sentence and every whole text below → its FACTUAL output, as the model decodes it
GRAPHS = {
    **SENTENCE_GRAPHS,
    "A red car is on the street. Two men walk a dog.": "(car, is, red), (car, on, street), (men, walk, dog)",
    "A man is sitting on a bench. The bench is wooden.": "(man, sit on, bench), (bench, is, wooden)",
}
REFERENCES = [["A red automobile is on a road.", "Two men and a dog are near a car."], ["A puppy is on a car."],
              ["A man is sitting on a bench. The bench is wooden."], ["Two men and a dog are near a car."],
              ["A puppy is on a car.", "The bench is wooden."]]
CAPTIONS = {"model_a": ["A red car is on the street. Two men walk a dog.", "A dog sits on a red car.",
                        "The man sits on a bench.", "Two men walk a dog.", "The man sits on a bench."],
            "model_b": ["A dog sits on a red car.", "The man sits on a bench.", "A red car is on the street.",
                        "A puppy is on a car.", "A dog sits on a red car."]}
OPTIONS = {"device": "cpu", "batch_size": 7}  # a parser of its own settings: no other test's parses in its cache
DETAILED = {"capture": "capture_details", "spice_factual": "spice_factual_details"}


@pytest.fixture(scope="module")
def scorers(tiny_hub):
    """The two scorers alone, holding the process's parser of OPTIONS (the suite's scorers get the same one), whose
    model answers GRAPHS for the rest of the module."""
    loaded = {name: load_scorer(name, **OPTIONS) for name in DETAILED}
    parser = loaded["capture"].parser
    assert loaded["spice_factual"].parser is parser
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parser, "generate", lambda texts, input_limits=None: [GRAPHS[t.strip()] for t in texts])
        yield loaded


def alone(scorers, name, system):
    return scorers[name].score(CAPTIONS[system], references=REFERENCES)[DETAILED[name]]


def evaluation_set():
    truth = GroundTruth({i: EvalImage(i, None, tuple(refs)) for i, refs in enumerate(REFERENCES)}, "inline")
    return truth, [SystemCaptions(name, dict(enumerate(captions)), f"{name}.jsonl")
                   for name, captions in CAPTIONS.items()]


def suite(chunk_images):
    truth, systems = evaluation_set()
    plan = resolve_plan(list(DETAILED), {name: {"batch_size": OPTIONS["batch_size"]} for name in DETAILED},
                        device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny random weights
        return score_suite(truth, systems, plan, chunk_images=chunk_images, show_progress=False)


def test_each_system_s_records_are_its_own_whatever_the_chunks(scorers):
    whole, chunked = suite(chunk_images=256), suite(chunk_images=2)  # 5 images: chunks of 2, 2 and 1
    for system in CAPTIONS:
        for name in DETAILED:
            expected = alone(scorers, name, system)
            assert len(expected) == len(REFERENCES)
            assert chunked.details[system][name] == whole.details[system][name] == expected, (system, name)
            assert chunked.per_image[system][name] == whole.per_image[system][name]
    first = whole.details["model_a"]["capture"][0]["objects"]  # the synonym stage (tiny WordNet: car ~ automobile)
    assert ["car", "automobile"] in first["matched"] and first["missed"] == ["road"] and first["invented"] == ["street"]
    assert whole.details["model_a"]["capture"] != whole.details["model_b"]["capture"]


def write_records(folder, system):
    path = folder / f"{system}.jsonl"
    path.write_text("".join(json.dumps({"caption": caption, "references": refs}) + "\n"
                            for caption, refs in zip(CAPTIONS[system], REFERENCES)), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def evaluated(scorers, tmp_path_factory):
    folder = tmp_path_factory.mktemp("records")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = evaluate_captions(records=[write_records(folder, system) for system in CAPTIONS],
                                   metrics=list(DETAILED), options={name: {"batch_size": 7} for name in DETAILED},
                                   device="cpu", baseline="model_a", resamples=50, show_progress=False,
                                   output=folder / "out")
    return report, folder / "out"


def test_report_json_carries_every_image_s_records(scorers, evaluated):
    report, out = evaluated
    document = json.loads((out / "report.json").read_text(encoding="utf-8"))
    validate_report(document)
    assert document["schema"] == SCHEMA_VERSION == "capeval-report/3"
    for system in CAPTIONS:
        for name in DETAILED:
            assert [image["details"][system][name] for image in document["images"]] == alone(scorers, name, system)


def test_scores_csv_carries_the_counts_only(scorers, evaluated):
    _, out = evaluated
    with open(out / "scores.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    kinds, statuses = ("objects", "attributes", "relations"), ("matched", "missed", "invented")
    counted = [f"capture_{kind}_{status}" for kind in kinds for status in statuses]
    spice_counts = ["spice_factual_matches", "spice_factual_candidate_tuples", "spice_factual_reference_tuples"]
    header = list(rows[0])
    assert header[header.index("spice_factual") + 1:] == [*counted, *spice_counts, "tiny_random_weights"]
    for system in CAPTIONS:
        records, spice = alone(scorers, "capture", system), alone(scorers, "spice_factual", system)
        mine = [row for row in rows if row["system"] == system]
        assert len(mine) == len(records)
        for row, record, spice_record in zip(mine, records, spice):
            assert [int(row[c]) for c in counted] == [len(record[k][s]) for k in kinds for s in statuses]
            assert [int(row[c]) for c in spice_counts] == [spice_record[c[len("spice_factual_"):]]
                                                            for c in spice_counts]
    text = (out / "scores.csv").read_text(encoding="utf-8")
    assert "automobile" not in text and "street" not in text.replace("on the street", "")  # no element lists


def test_the_html_cards_show_what_each_caption_missed(evaluated):
    report, out = evaluated
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.count('class="image-details" data-key="capture"') == page.count('<li class="card"') + \
        page.count('<li hidden class="card"') > 0
    assert 'data-status="missed"' in page and 'data-status="invented"' in page


def test_a_report_of_version_2_is_compared_as_one_without_records(evaluated):
    report, _ = evaluated
    older = copy.deepcopy(report)
    older["schema"] = "capeval-report/2"
    for image in older["images"]:
        del image["details"]
    compared, again = compare_report(older), compare_report(report)
    validate_report(compared)
    assert compared["schema"] == SCHEMA_VERSION and all(image["details"] == {} for image in compared["images"])
    assert compared["comparisons"] == again["comparisons"] and compared["systems"] == again["systems"]


def test_cocoevalcap_keeps_capture_s_per_image_values(scorers, tmp_path):
    from capeval.cocoevalcap import COCOEvalCap

    annotations = {"images": [{"id": i} for i in range(len(REFERENCES))],
                   "annotations": [{"image_id": i, "id": 10 * i + j, "caption": ref}
                                   for i, refs in enumerate(REFERENCES) for j, ref in enumerate(refs)]}
    results = [{"image_id": i, "caption": caption} for i, caption in enumerate(CAPTIONS["model_a"])]
    evaluation = COCOEvalCap(annotations, results, metrics=["capture"], capture={"batch_size": 7}, device="cpu",
                             quiet=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        evaluation.evaluate()
    expected = scorers["capture"].score(CAPTIONS["model_a"], references=REFERENCES)["capture_per_sample"]
    method = coco_method(scorers["capture"], "capture")
    assert [evaluation.imgToEval[i][method] for i in range(len(REFERENCES))] == expected
