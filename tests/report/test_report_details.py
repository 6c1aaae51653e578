"""The images' detail records in the renderings (issue #41 item 4), on the realistic document of ``conftest.py`` with
a CAPTURE-like key and a record key of counts added: report.html's disagreement cards show, for each system of the
pair, its matched, missed and invented elements (every text escaped), or a record as its JSON; scores.csv carries
the counts only, one column per key, kind and status; a document without records renders as before."""

import copy
import csv
import json

import numpy as np
import pytest
from conftest import SYSTEMS, parse_html

from capeval.report import write_report

KINDS, STATUSES = ("objects", "attributes", "relations"), ("matched", "missed", "invented")
HOSTILE = "<img src=x onerror=alert(1)>"


def scene_graph(rng, image, system):
    """A CAPTURE record that differs by image and system: element texts name both (one is hostile HTML)."""
    def kind(name):
        sizes = rng.integers(0, 4, 3)
        return {"precision": float(rng.random()), "recall": float(rng.random()), "f1": float(rng.random()),
                "matched": [[f"{name}{n} of {system}", f"{name}{n} ref"] for n in range(sizes[0])],
                "missed": [f"{name} missed {n} on {image}" for n in range(sizes[1])]
                + ([HOSTILE] if name == "objects" and image == 3 else []),
                "invented": [f"{name} invented {n} by {system}" for n in range(sizes[2])]}
    return {name: kind(name) for name in KINDS}


def with_records(report):
    """The document with the key ``capture`` (per-image scores and scene-graph records) and, on ``cider``, records
    of counts (as the FACTUAL SPICE's)."""
    document = copy.deepcopy(report)
    rng = np.random.default_rng(3)
    document["keys"].append("capture")
    document["metrics"]["capture"] = {**document["metrics"]["cider"], "scorer": "capture", "title": "CAPTURE",
                                      "corpus_level": False}
    for system in SYSTEMS:
        document["systems"][system]["scores"]["capture"] = {"value": 0.5, "ci": [0.4, 0.6]}
    for index, image in enumerate(document["images"]):
        image["details"] = {}
        for system in SYSTEMS:
            image["scores"][system]["capture"] = float(rng.random())
            image["details"][system] = {"capture": scene_graph(rng, index, system),
                                        "cider": {"precision": 0.5, "matches": index, "candidate_tuples": 2 * index,
                                                  "note": "<b>not html</b>"}}
    return document


@pytest.fixture
def written(report, tmp_path):
    document = with_records(report)
    return document, write_report(document, tmp_path / "out")


def test_each_card_shows_each_system_s_matched_missed_and_invented_elements(written):
    document, paths = written
    dom = parse_html(paths["html"].read_text(encoding="utf-8"))
    cards = dom.find("ol", id="cards").find_all("li", class_="card")
    assert cards
    systems_of_pair = {}
    pairs = dom.find("select", id="pair").find_all("option")
    for option in pairs:
        first, second = option.text().split(" − ")
        systems_of_pair[option.attrs["value"]] = (first, second)
    for card in cards:
        image = next(i for i in document["images"] if f"image {i['image_id']}" in card.find("p", class_="meta").text())
        pair = systems_of_pair[card.attrs["data-pair"]]
        part = card.find("div", class_="image-details", **{"data-key": "capture"})
        graphs = part.find_all("div", class_="capeval-scene-graphs")
        assert len(graphs) == 2  # one per system of the pair, in the pair's order
        for system, graph in zip(pair, graphs):
            record = image["details"][system]["capture"]
            shown = sorted((item.attrs["data-status"], item.text()) for item in graph.find_all("li"))
            want = sorted([("matched", f"✓ {c} ≈ {r}") for k in KINDS for c, r in record[k]["matched"]]
                          + [("matched", f"✓ {r} ≈ {c}") for k in KINDS for c, r in record[k]["matched"]]
                          + [("missed", f"− {e}") for k in KINDS for e in record[k]["missed"]]
                          + [("invented", f"+ {e}") for k in KINDS for e in record[k]["invented"]])
            assert shown == want, system
        counts = part.find("table", class_="detail-counts").find("tbody").find_all("tr")
        assert [row.find("th").text() for row in counts] == list(pair)
        for system, row in zip(pair, counts):
            record = image["details"][system]["capture"]
            assert [cell.text() for cell in row.find_all("td")] == [
                " ".join(f"{mark}{len(record[k][s])}" for mark, s in zip("✓−+", STATUSES)) for k in KINDS]
        pre = card.find("div", class_="image-details", **{"data-key": "cider"}).find_all("pre")
        assert [json.loads(p.text()) for p in pre] == [image["details"][s]["cider"] for s in pair]


def test_every_element_text_is_escaped(written):
    _, paths = written
    text = paths["html"].read_text(encoding="utf-8")
    assert HOSTILE not in text and "<b>not html</b>" not in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text and "&lt;b&gt;not html&lt;/b&gt;" in text


def test_scores_csv_carries_the_counts_only(written):
    document, paths = written
    with open(paths["csv"], newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    counted = [f"capture_{k}_{s}" for k in KINDS for s in STATUSES]
    header = list(rows[0])
    assert header[header.index("capture") + 1:] == ["cider_matches", "cider_candidate_tuples", *counted,
                                                   "tiny_random_weights"]
    assert len(rows) == len(document["images"]) * len(SYSTEMS)
    for row in rows:
        image = next(i for i in document["images"] if str(i["image_id"]) == row["image_id"])
        records = image["details"][row["system"]]
        assert [int(row[c]) for c in counted] == [len(records["capture"][k][s]) for k in KINDS for s in STATUSES]
        assert (int(row["cider_matches"]), int(row["cider_candidate_tuples"])) == (
            records["cider"]["matches"], records["cider"]["candidate_tuples"])
    text = paths["csv"].read_text(encoding="utf-8")
    assert "missed 0" not in text and "invented 0" not in text and "onerror" not in text  # no element lists


def test_a_document_without_records_renders_as_before(report, tmp_path):
    paths = write_report(report, tmp_path / "out")
    assert 'class="image-details"' not in paths["html"].read_text(encoding="utf-8")
    with open(paths["csv"], newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    assert header == ["image_id", "file", "system", "caption", *report["keys"], "tiny_random_weights"]
