"""The report document's versioned schema (``capeval/report/report.schema.json``, issue #36 item 4): every document
the suite writes follows it — inline records and COCO annotation files, one and several systems, a baseline, a
metric undefined (NaN) on some images, tiny random weights, the exact randomization test (at most 16 images) and the
sampled one, undefined p-values, and ``capeval evaluate``'s report.json and ``--json`` — and a document with a wrong
type, a missing or unknown field, the wrong version or fields naming no system / key fails with the field named.

(``tests/conftest.py`` also validates every document the suite builds, and every report.json written for a document
that names a schema, in every test.)"""

import configparser
import contextlib
import copy
import io
import json
import re
import warnings
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from capeval import InputError
from capeval.cli import main
from capeval.report.schema import SCHEMA_VERSION, report_schema, validate_report
from capeval.suite.run import evaluate_captions

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "coco_small"
SYSTEMS = ("baseline", "model_a", "model_b")
REFERENCES = ["a dog runs on the grass", "a brown dog running in a field", "the dog is playing outside"]
CAPTIONS = ["a dog on the grass", "a cat sleeping on a sofa", "two dogs play in a park", "a man rides a bike",
            "a red car on the road", "a bowl of fruit on a table", "a child flies a kite", "a plane in the sky"]


def write_records(folder, name, captions):
    """A JSONL record source: one caption per record, the same references for each."""
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"caption": c, "references": REFERENCES}) + "\n" for c in captions))
    return str(path)


def written(out):
    return json.loads((Path(out) / "report.json").read_text(encoding="utf-8"))


def both_follow_the_schema(report, out=None):
    """The returned document and, when written, report.json validate; report.json is the one read back."""
    validate_report(report)
    if out is None:
        return report
    document = written(out)
    validate_report(document)
    assert document["schema"] == SCHEMA_VERSION
    return document


@pytest.fixture(scope="module")
def coco_files(tmp_path_factory):
    """Three systems on COCO annotation files against a baseline, every file written (6 images: exact test)."""
    out = tmp_path_factory.mktemp("coco") / "report"
    report = evaluate_captions([EXAMPLE / f"{s}.json" for s in SYSTEMS], annotations=EXAMPLE / "captions_val2014.json",
                               images=EXAMPLE / "images" / "val2014", metrics=["bleu", "rouge_l", "cider"],
                               baseline="baseline", resamples=100, seed=3, output=out, show_progress=False)
    return report, out


def test_the_schema_is_draft_2020_12_and_its_id_names_the_version():
    schema = report_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    version = schema["properties"]["schema"]["const"]
    assert re.fullmatch(r"capeval-report/[1-9][0-9]*", version) and version == SCHEMA_VERSION
    assert schema["$id"] == f"urn:capeval:{version}"


def test_setup_cfg_ships_the_schema_as_package_data():
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    assert "report.schema.json" in config["options.package_data"]["capeval.report"].split()
    assert (REPO / "shared" / "capeval" / "report" / "report.schema.json").is_file()


def test_the_enumerations_are_the_comparisons_own():
    from capeval.statistics.systems import CORRECTIONS, P_VALUES, TESTS

    significance = report_schema()["$defs"]["significance"]["properties"]
    assert significance["correction"]["enum"] == list(CORRECTIONS)
    assert significance["p_values"]["enum"] == list(P_VALUES)
    assert significance["tests"]["items"]["enum"] == list(TESTS)


def test_several_systems_on_coco_files_with_a_baseline(coco_files):
    report, out = coco_files
    document = both_follow_the_schema(report, out)
    assert document["baseline"] == "baseline" and sorted(document["systems"]) == sorted(SYSTEMS)
    assert len(document["images"]) == document["coverage"]["scored"] == 6
    assert document["significance"]["randomization"] == "exact"  # 6 images: every swap pattern
    assert len(document["comparisons"]) == 3 * len(document["keys"])  # 3 pairs × every key


def test_the_coco_group_of_one_system_on_inline_records(tmp_path):
    """One system: no pair, so no comparison; ``"coco"`` expands to the group (SPICE where its jars exist)."""
    report = evaluate_captions(records=[write_records(tmp_path, "only", CAPTIONS)], metrics=["coco"],
                               resamples=100, show_progress=False, output=tmp_path / "out")
    document = both_follow_the_schema(report, tmp_path / "out")
    assert document["comparisons"] == [] and document["baseline"] is None
    assert {"bleu_4", "meteor", "rouge_l", "cider"} <= set(document["keys"])
    assert document["images"][0]["image_id"] == 0 and document["images"][0]["file"] is None


def test_the_sampled_randomization_and_pairs_without_a_p_value(tmp_path):
    """20 images (> 16: drawn swaps); with sacrebleu's counting two identical systems have no p-value (null)."""
    captions = [f"{CAPTIONS[i % len(CAPTIONS)]} number {i}" for i in range(20)]
    other = [c.replace("a ", "the ", 1) for c in captions]
    sources = [write_records(tmp_path, "a", captions), write_records(tmp_path, "same", captions),
               write_records(tmp_path, "b", other)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the undefined p-values are announced
        sampled = evaluate_captions(records=sources, metrics=["rouge_l", "bleu"], baseline="a", resamples=200,
                                    p_values="sacrebleu", show_progress=False, output=tmp_path / "out")
    document = both_follow_the_schema(sampled, tmp_path / "out")
    assert document["significance"]["randomization"] == "sampled"
    identical = [c for c in document["comparisons"] if {c["system_a"], c["system_b"]} == {"a", "same"}]
    assert identical and all(c["p_randomization"] is None and c["undefined"] for c in identical)
    assert document["undefined"]  # their causes


def test_the_cli_writes_report_json_and_prints_json_that_follow_the_schema(tmp_path):
    out = tmp_path / "report"
    argv = ["evaluate", "--karpathy", str(EXAMPLE / "dataset_coco.json"), "--split", "test", "--results",
            *[str(EXAMPLE / f"{s}.json") for s in SYSTEMS[:2]], "--images", str(EXAMPLE / "images"),
            "--metrics", "rouge_l", "--resamples", "100", "--output", str(out), "--json"]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        assert main(argv) == 0, stderr.getvalue()
    printed = json.loads(stdout.getvalue())
    validate_report(printed)
    validate_report(written(out))
    assert printed["coverage"]["split"] == "test"


def test_tiny_random_weights_are_named(tiny_hub, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = evaluate_captions([EXAMPLE / f"{s}.json" for s in SYSTEMS[:2]],
                                   annotations=EXAMPLE / "captions_val2014.json",
                                   images=EXAMPLE / "images" / "val2014", metrics=["clip_s"], baseline="model_a",
                                   resamples=100, device="cpu", show_progress=False, output=tmp_path / "out")
    document = both_follow_the_schema(report, tmp_path / "out")
    assert document["tiny_random_weights"] == ["clip_s", "refclip_s"]
    for key in document["tiny_random_weights"]:
        assert document["metrics"][key]["provenance"]["weights"][0]["tiny_random_weights"] is True


def test_a_metric_undefined_on_some_images(tiny_hub, shared_data, tmp_path):
    """HiCE-S's local terms are undefined (NaN: null in the document) for a caption without phrases."""
    class Phrases:
        TABLE = {"a dog on the grass": ["dog", "grass"], "a cat": ["cat"], "cats on a blanket": ["cats", "blanket"]}

        def extract(self, captions):
            return [list(self.TABLE.get(c, [])) for c in captions]

    root = shared_data / "images" / "pacscore"
    sources = []
    for name, captions in {"base": ["a dog on the grass", "nothing to parse"], "new": ["a cat", "a cat"]}.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"caption": c, "image": str(root / f"image{i + 1}.jpg"),
                                            "references": ["a cat", "cats on a blanket"]}) + "\n"
                                for i, c in enumerate(captions)))
        sources.append(str(path))
    options = {"phrase_parser": Phrases(), "device": "cpu",
               "region_settings": {"points_per_side": 4, "pred_iou_thresh": 0.0, "stability_score_thresh": 0.0,
                                   "max_regions": 4}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = evaluate_captions(records=sources, metrics=["hice_s"], options={"hice_s": options}, resamples=100,
                                   baseline="base", show_progress=False, output=tmp_path / "out")
    document = both_follow_the_schema(report, tmp_path / "out")
    assert document["undefined_images"]["base"]["local_itc"] == 1
    assert [row["scores"]["base"]["local_itc"] for row in document["images"]].count(None) == 1
    assert document["metrics"]["local_itc"]["mean_over_defined"] is True


def broken(report, change):
    document = json.loads(json.dumps(copy.deepcopy(written(report[1]))))
    change(document)
    return document


@pytest.mark.parametrize("change, message", [
    (lambda d: d["systems"]["model_a"]["scores"]["cider"].update(value="high"),
     r"report\['systems'\]\['model_a'\]\['scores'\]\['cider'\]\['value'\]: 'high' is not of type 'number', 'null'"),
    (lambda d: d["metrics"]["bleu_1"].pop("hashcode"),
     r"report\['metrics'\]\['bleu_1'\]: 'hashcode' is a required property"),
    (lambda d: d["metrics"]["rouge_l"].pop("title"), r"report\['metrics'\]\['rouge_l'\]: 'title' is a required"),
    (lambda d: d["metrics"]["cider"].update(higher_is_better="yes"),
     r"report\['metrics'\]\['cider'\]\['higher_is_better'\]: 'yes' is not of type 'boolean'"),
    (lambda d: d.update(notes="by hand"),
     r"report: Additional properties are not allowed \('notes' was unexpected\)"),
    (lambda d: d["comparisons"][0].update(p_value=0.5),
     r"report\['comparisons'\]\[0\]: Additional properties are not allowed \('p_value' was unexpected\)"),
    (lambda d: d["images"][2]["scores"]["model_b"].update(cider="0.5"),
     r"report\['images'\]\[2\]\['scores'\]\['model_b'\]\['cider'\]: '0.5' is not of type 'number', 'null'"),
    (lambda d: d["significance"].update(p_values="exact"),
     r"report\['significance'\]\['p_values'\]: 'exact' is not one of \['noreen', 'sacrebleu'\]"),
    (lambda d: d["metrics"]["bleu_2"].update(hashcode="bleu-123"),
     r"report\['metrics'\]\['bleu_2'\]\['hashcode'\]: 'bleu-123' does not match"),
    (lambda d: d["images"][0]["scores"].pop("model_a"),
     r"report\['images'\]\[0\]\['scores'\]: systems \['baseline', 'model_b'\], expected the document's systems"),
    (lambda d: d["comparisons"][1].update(system_b="model_c"),
     r"report\['comparisons'\]\[1\]: \['model_c'\] are not among the document's systems"),
    (lambda d: d["clusters"]["cider"].update(ghost=1),
     r"report\['clusters'\]\['cider'\]: \['ghost'\] are not among the document's systems"),
    (lambda d: d["systems"]["model_b"]["scores"].pop("bleu_3"),
     r"report\['systems'\]\['model_b'\]\['scores'\]: keys .*, expected the document's keys"),
    (lambda d: d.pop("statistics"), r"report: 'statistics' is a required property"),
    (lambda d: d["statistics"]["model_a"]["cider"].pop("combine"),
     r"report\['statistics'\]\['model_a'\]\['cider'\]: 'combine' is a required property"),
    (lambda d: d["statistics"]["model_a"]["cider"].update(dtype="object"),
     r"report\['statistics'\]\['model_a'\]\['cider'\]\['dtype'\]: 'object' is not one of"),
    (lambda d: d["statistics"]["model_a"]["cider"]["columns"][0].__setitem__(1, "high"),
     r"report\['statistics'\]\['model_a'\]\['cider'\]\['columns'\]\[0\]\[1\]: 'high' does not match"),
    (lambda d: d["statistics"]["model_a"]["cider"]["columns"][0].pop(),
     r"report\['statistics'\]\['model_a'\]\['cider'\]\['columns'\]\[0\]: 5 values, expected one per image "
     r"\(6\)"),
    (lambda d: d["statistics"]["model_a"]["bleu_1"].update(columns="bleu_2"),
     r"report\['statistics'\]\['model_a'\]\['bleu_1'\]\['columns'\]: \['bleu_2'\] are not among the document's "
     r"keys before 'bleu_1' \[\]"),
    (lambda d: d["statistics"].pop("model_b"),
     r"report\['statistics'\]: systems \['baseline', 'model_a'\], expected the document's systems"),
    (lambda d: d["statistics"]["baseline"].pop("rouge_l"),
     r"report\['statistics'\]\['baseline'\]: keys .*, expected the document's keys"),
    (lambda d: d["images"][1].pop("details"), r"report\['images'\]\[1\]: 'details' is a required property"),
    (lambda d: d["images"][0]["details"].update(model_c={}),
     r"report\['images'\]\[0\]\['details'\]: \['model_c'\] are not among the document's systems"),
    (lambda d: d["images"][0]["details"].update(model_a={"capture": {}}),
     r"report\['images'\]\[0\]\['details'\]\['model_a'\]: \['capture'\] are not among the document's keys"),
    (lambda d: d["images"][0]["details"].update(model_a={"cider": [1, 2]}),
     r"report\['images'\]\[0\]\['details'\]\['model_a'\]\['cider'\]: \[1, 2\] is not of type 'object'"),
    (lambda d: d["images"][0]["details"].update(model_a={"cider": {"objects": {}}}),
     r"report\['images'\]\[0\]\['details'\]\['model_a'\]\['cider'\]: 'attributes' is a required property"),
])
def test_a_document_off_the_schema_fails_naming_the_field(coco_files, change, message):
    document = broken(coco_files, change)
    with pytest.raises(InputError, match=rf"report does not follow {re.escape(SCHEMA_VERSION)}: {message}"):
        validate_report(document)


@pytest.mark.parametrize("version, shown", [("capeval-report/0", "'capeval-report/0'"), (None, "None")])
def test_another_version_or_none_fails_naming_both(coco_files, version, shown):
    document = broken(coco_files, lambda d: d.update(schema=version) if version else d.pop("schema"))
    with pytest.raises(InputError, match=rf"report: schema is {shown}, expected '{re.escape(SCHEMA_VERSION)}'"):
        validate_report(document)


def test_the_first_problems_are_shown_and_the_others_counted(coco_files):
    def change(document):
        for name in SYSTEMS:
            document["systems"][name]["source"] = 7
            document["systems"][name]["scores"]["cider"]["ci"] = [0.1]

    with pytest.raises(InputError) as raised:
        validate_report(broken(coco_files, change))
    assert str(raised.value).count("is not of type") + str(raised.value).count("is too short") == 3
    assert str(raised.value).endswith("(and 3 more)")


def test_the_session_check_fails_a_test_whose_suite_builds_a_document_off_the_schema(tmp_path, monkeypatch):
    """tests/conftest.py's check runs after the real ``build_report``: a comparison with a field the schema does
    not know (added after the real ``compare_systems``) fails the run, naming the field."""
    import capeval.statistics.systems as systems

    compare = systems.compare_systems

    def with_a_stray_field(*args, **kwargs):
        comparison = compare(*args, **kwargs)
        comparison["significance"]["stray"] = True
        return comparison

    monkeypatch.setattr(systems, "compare_systems", with_a_stray_field)
    with pytest.raises(Exception, match=rf"report does not follow {re.escape(SCHEMA_VERSION)}: report\['significance'\]: "
                                        r"Additional properties are not allowed \('stray' was unexpected\)"):
        evaluate_captions(records=[write_records(tmp_path, "only", CAPTIONS)], metrics=["rouge_l"], resamples=100,
                          show_progress=False)


def test_the_session_check_reads_back_every_report_json_that_names_the_schema(coco_files, tmp_path):
    import capeval.report.write as write

    document = broken(coco_files, lambda d: d["coverage"].update(scored="6"))
    with pytest.raises(InputError, match=r"report\['coverage'\]\['scored'\]: '6' is not of type 'integer'"):
        write.write_report(document, tmp_path / "out")
    assert json.loads((tmp_path / "out" / "report.json").read_text())["coverage"]["scored"] == "6"  # written first
