"""The CAPTURE demo: the caption's and the references' scene graphs side by side, each element marked matched, missed
or invented as the scorer reports it (``capture_details``), every text escaped; the app served with the tiny
models (the tiny FACTUAL parser's generation answers hand-written graphs), called with gradio_client and rendered by
headless Chromium."""

import runpy
import socket
from html.parser import HTMLParser

import numpy as np
import pytest
from browser import DevToolsPage, chromium_or_skip
from PIL import Image

pytest.importorskip("gradio")
gradio_client = pytest.importorskip("gradio_client")

from capeval.core.scoring import load_scorer, scorers  # noqa: E402
from capeval.demo import examples, parse_references  # noqa: E402
from capeval.modules import module_dir  # noqa: E402
from capeval.report.scene_graphs import KINDS, STATUSES, scene_graphs_html  # noqa: E402

# a caption against two references: the synonym stage pairs car with automobile, street is invented, road missed
CAPTION = "A red car is on the street. Two men walk a dog."
REFERENCES = ["A red automobile is on a road.", "Two men and a dog are near a car."]
# hand-written FACTUAL outputs (raw, as the model decodes them) of every sentence the app parses
GRAPHS = {
    "A red car is on the street.": "(car, is, red), (car, on, street)",
    "Two men walk a dog.": "(men, is, 2), (men, walk, dog)",
    "A red automobile is on a road.": "(automobile, is, red), (automobile, on, road)",
    "Two men and a dog are near a car.": "(men, near, car), (dog, near, car), (men, is, 2)",
    "a red square next to a blue square": "(square, is, red), (square, next to, square), (square, is, blue)",
    "a red and a blue square side by side": "(square, is, red), (square, is, blue)",
    "two coloured squares on a white background":
        "(squares, is, 2), (squares, is, coloured), (squares, on, background), (background, is, white)",
}


class GraphTable(HTMLParser):
    """The view's table read back: ``rows[kind] = (caption items, reference items)``, an item being
    ``(statuses, text)`` with ``statuses`` from the ``data-status`` attribute and ``text`` the shown text."""

    def __init__(self, page: str):
        super().__init__()
        self.rows, self._kind, self._cells, self._item, self._in = {}, None, [], None, None
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr":
            self._kind, self._cells = None, []
        elif tag == "th":
            self._in = "th"
        elif tag == "td":
            self._cells.append([])
        elif tag == "li":
            self._item = [attrs["data-status"].split(), ""]

    def handle_endtag(self, tag):
        if tag == "th":
            self._in = None
        elif tag == "li":
            self._cells[-1].append((self._item[0], self._item[1].strip()))
            self._item = None
        elif tag == "tr" and self._kind in KINDS:
            self.rows[self._kind] = tuple(self._cells)

    def handle_data(self, data):
        if self._in == "th" and self._kind is None and data.strip():
            self._kind = data.strip()
        if self._item is not None:
            self._item[1] += data


def expected_sides(kind_detail):
    """Per element of each side: its statuses and its matched partners, straight from the scorer's lists."""
    caption, references = {}, {}

    def mark(side, element, status, partner=None):
        statuses, partners = side.setdefault(element, ([], []))
        if status not in statuses:
            statuses.append(status)
        if partner is not None and partner != element and partner not in partners:
            partners.append(partner)

    for c, r in kind_detail["matched"]:
        mark(caption, c, "matched", r)
        mark(references, r, "matched", c)
    for element in kind_detail["invented"]:
        mark(caption, element, "invented")
    for element in kind_detail["missed"]:
        mark(references, element, "missed")
    return caption, references


def shown_sides(items):
    """The view's items of one column as ``{element: (statuses, partners)}`` (the marker stripped, ``≈`` read)."""
    shown = {}
    for statuses, text in items:
        markers = "".join(STATUSES[s][0] for s in statuses)
        assert text.startswith(markers + " "), text
        element, _, partners = text[len(markers) + 1:].partition(" ≈ ")
        assert element not in shown, f"{element} shown twice"
        shown[element] = (statuses, partners.split(", ") if partners else [])
    return shown


def assert_view_shows(page, details):
    rows = GraphTable(page).rows
    assert list(rows) == list(KINDS)
    for kind in KINDS:
        caption_items, reference_items = rows[kind]
        caption, references = expected_sides(details[kind])
        assert shown_sides(caption_items) == {e: tuple(v) for e, v in caption.items()}, kind
        assert shown_sides(reference_items) == {e: tuple(v) for e, v in references.items()}, kind


def test_the_view_marks_both_sides_and_escapes_every_text():
    """Hand-written details: an element matched in one reference and missed in another carries both markers, a
    synonym pair names its partner on both sides, an empty side says so, and markup in an element is shown as text."""
    evil = '<img src=x onerror="alert(1)">'
    details = {
        "objects": {"precision": 0.5, "recall": 0.25, "f1": 1 / 3, "matched": [["car", "automobile"], ["dog", "dog"]],
                    "missed": ["road", "automobile"], "invented": [evil, "a & b"]},
        "attributes": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "matched": [], "missed": [], "invented": []},
        "relations": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "matched": [], "missed": ["man 'near' car"],
                      "invented": []},
    }
    page = scene_graphs_html(details)
    assert "<img" not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    assert "a &amp; b" in page and "man &#x27;near&#x27; car" in page
    assert_view_shows(page, details)
    rows = GraphTable(page).rows
    assert shown_sides(rows["objects"][1])["automobile"] == (["matched", "missed"], ["car"])
    assert shown_sides(rows["objects"][0])["car"] == (["matched"], ["automobile"])
    assert rows["attributes"] == ([], []) and "<i>none</i>" in page
    assert rows["relations"][0] == [] and shown_sides(rows["relations"][1]) == {"man 'near' car": (["missed"], [])}
    assert "P 0.500<br>R 0.250<br>F1 0.333" in page  # each kind's numbers, rounded for reading
    for marker, meaning, _, _ in STATUSES.values():  # the legend: the markers read without colour
        assert f"<b>{marker}</b> {meaning}" in page


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def capture_app(tiny_hub):
    """``(demo, scorer)``: ``metrics/capture/app.py`` built (scoring its first example) and served on localhost, and
    a scorer loaded with the app's options, which shares the app's parser; the tiny parser's generation answers
    :data:`GRAPHS` while the app lives (the parse cache, the sentence splitting and everything after are real)."""
    scorer = load_scorer("capture")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GRADIO_ANALYTICS_ENABLED", "False")
        patch.setattr(scorer.parser, "generate", lambda texts, input_limits=None: [GRAPHS[t.strip()] for t in texts])
        demo = runpy.run_path(str(module_dir("capture") / "app.py"))["demo"]
        demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
        try:
            yield demo, scorer
        finally:
            demo.close()


def panel_of(demo):
    (panel,) = [block for block in demo.blocks.values() if type(block).__name__ == "HTML"]
    return panel


def test_app_opens_with_its_first_example_scored_and_its_scene_graphs(capture_app):
    demo, scorer = capture_app
    _, caption, references = examples(scorers()["capture"])[0]
    expected = scorer.score([caption], references=[parse_references(references)])
    details = expected["capture_details"][0]
    page = panel_of(demo).value
    assert_view_shows(page, details)
    rows = GraphTable(page).rows
    shown = {status for kind in KINDS for side in rows[kind] for statuses, _ in side for status in statuses}
    assert shown == {"matched", "missed", "invented"}  # not a degenerate example
    texts = [block.value for block in demo.blocks.values() if type(block).__name__ == "Markdown"
             and isinstance(block.value, str)]
    assert any(f"{expected['capture']:.4f}" in text and caption in text for text in texts)  # the scores shown


def test_app_called_with_gradio_client_returns_the_scorers_values_and_view(capture_app):
    demo, scorer = capture_app
    client = gradio_client.Client(demo.local_url, verbose=False)
    scores, page = client.predict(None, CAPTION, "\n".join(REFERENCES), api_name="/score")
    expected = scorer.score([CAPTION], references=[REFERENCES])
    assert scores["capture"] == pytest.approx(expected["capture"], abs=1e-12)
    assert scores["capture_details"] == expected["capture_details"]
    details = expected["capture_details"][0]
    assert ["car", "automobile"] in details["objects"]["matched"]  # the synonym stage on the tiny WordNet
    assert "street" in details["objects"]["invented"] and "road" in details["objects"]["missed"]
    assert_view_shows(page, details)
    assert shown_sides(GraphTable(page).rows["objects"][0])["car"] == (["matched"], ["automobile"])


def test_headless_chromium_shows_the_scene_graphs(capture_app, tmp_path):
    chromium_or_skip()
    demo, scorer = capture_app
    shot = tmp_path / "capture.png"
    with DevToolsPage(demo.local_url, tmp_path / "profile", width=1280) as page:
        page.wait_for('document.body && document.body.innerText.includes("References\' scene graph")'
                      ' && document.body.innerText.includes("Metric card")')
        page.screenshot(shot)
        text = page.evaluate("document.body.innerText")
    pixels = np.asarray(Image.open(shot).convert("L"), dtype=np.float32)
    assert pixels.std() > 5 and len(np.unique(pixels)) > 20  # not a blank page
    _, caption, references = examples(scorers()["capture"])[0]
    details = scorer.score([caption], references=[parse_references(references)])["capture_details"][0]
    for kind in KINDS:
        for c, r in details[kind]["matched"]:
            assert c in text and r in text
        for element in details[kind]["missed"] + details[kind]["invented"]:
            assert element in text
    for marker, meaning, _, _ in STATUSES.values():
        assert f"{marker} {meaning}" in text
