"""report.html in headless Chromium at 1280 px (desktop) and 390 px (phone): the screenshot is a drawn page, the
rendered DOM holds the table and the disagreement entries, the page never scrolls sideways (wide tables scroll in
their own box), the inline script re-ranks the browser for a pair and metric chosen in the URL (and counts the images
compared, not the ones embedded), a caption holding markup stays text, the expanded pairwise table fits both widths
without a cut-off column, and the tiny-weights banner is drawn at the top."""

import subprocess

import numpy as np
import pytest
from conftest import INJECTION, KEYS, large_report, parse_html
from browser import DevToolsPage, chromium_or_skip
from PIL import Image

from capeval.report import write_report

# A page of the test's own (not the product's) showing report.html in a frame exactly WIDTH px wide (headless
# Chromium lays a --dump-dom window out at least 500 px wide) and writing what the frame's layout measured into
# its title: the frame's document width, its viewport width and how many disagreement entries are drawn.
FRAME = """<!DOCTYPE html><html><head><title>loading</title></head><body style="margin:0">
<iframe id="report" src="report.html" style="border:0;width:WIDTHpx;height:900px"></iframe>
<script>document.getElementById("report").addEventListener("load", function () {
  var frame = this.contentWindow;
  var drawn = Array.prototype.filter.call(frame.document.querySelectorAll("#cards .card"),
                                         function (card) { return card.getClientRects().length > 0; });
  document.title = ["probe", frame.document.documentElement.scrollWidth, frame.innerWidth, drawn.length].join(" ");
});</script></body></html>"""


def chromium(url, tmp_path, *action, width, height=900):
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--hide-scrollbars", "--force-device-scale-factor=1",
             f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width},{height}",
             "--virtual-time-budget=5000"]
    run = subprocess.run([chromium_or_skip(), *flags, *action, url], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-2000:]
    return run


@pytest.fixture
def page(report, tmp_path, images_root):
    return write_report(report, tmp_path / "out", images_root=images_root)["html"]


def measured_layout(page, tmp_path, width):
    """(document width, viewport width, entries drawn) of ``page`` laid out ``width`` px wide."""
    frame = page.with_name(f"frame-{width}.html")
    frame.write_text(FRAME.replace("WIDTH", str(width)), encoding="utf-8")
    dump = chromium(frame.as_uri(), tmp_path, "--allow-file-access-from-files", "--dump-dom", width=width + 100)
    probe, *measured = parse_html(dump.stdout).find("title").text().split()
    assert probe == "probe"
    return tuple(map(int, measured))


def visible_cards(dom):
    return [c for c in dom.find("ol", id="cards").find_all("li", class_="card") if "hidden" not in c.attrs]


@pytest.mark.parametrize("width", [1280, 390])  # desktop and phone
def test_report_renders_without_sideways_scroll(report, page, tmp_path, width):
    chromium_or_skip()
    shot = tmp_path / f"report-{width}.png"
    chromium(page.as_uri(), tmp_path, f"--screenshot={shot}", width=width)
    pixels = np.asarray(Image.open(shot).convert("L"), dtype=np.float32)
    assert pixels.shape == (900, width)
    assert pixels.std() > 5 and len(np.unique(pixels)) > 20  # not a blank page
    scroll_width, inner_width, drawn = measured_layout(page, tmp_path, width)
    assert inner_width == width and drawn == 10  # the hidden entries take no room
    assert scroll_width <= width, f"the page scrolls sideways at {width} px: {scroll_width} px wide"
    dom = parse_html(chromium(page.as_uri(), tmp_path, "--dump-dom", width=width).stdout)
    rows = dom.find("table", id="scores").find("tbody").find_all("tr")
    assert [r.find("th").text() for r in rows] == ["ClipCap (baseline)", "ours_v1", "ours & <v2>"]
    cards = visible_cards(dom)
    assert len(cards) == 10 and [c.find("span", class_="rank").text() for c in cards] == [
        f"#{n}" for n in range(1, 11)]
    assert all(c.find("img").attrs["src"].startswith("data:image/jpeg;base64,") for c in cards)
    assert INJECTION in [dd.text() for dd in dom.find_all("dd")]  # markup in a caption shown as text


def test_the_script_ranks_the_pair_and_metric_chosen_in_the_url(report, page, tmp_path):
    """Pair 2 = ours_v1 − "ours & <v2>" on BLEU-4, where ours_v1 has no score for one image: 11 candidates."""
    chromium_or_skip()
    url = page.as_uri() + "#pair=2&metric=bleu_4"
    dom = parse_html(chromium(url, tmp_path, "--dump-dom", width=1280).stdout)
    deltas = [(i, image["scores"]["ours_v1"]["bleu_4"] - image["scores"]["ours & <v2>"]["bleu_4"])
              for i, image in enumerate(report["images"]) if image["scores"]["ours_v1"]["bleu_4"] is not None]
    expected = sorted(deltas, key=lambda d: -abs(d[1]))[:10]
    cards = visible_cards(dom)
    assert [c.attrs["data-pair"] for c in cards] == ["2"] * 10
    for rank, (card, (index, delta)) in enumerate(zip(cards, expected), 1):
        assert card.find("span", class_="rank").text() == f"#{rank}"
        assert f"image {report['images'][index]['image_id']}" in card.find("p", class_="meta").text()
        sign = "+" if delta > 0 else "\u2212"
        assert card.find("p", class_="delta").text() == f"Δ BLEU-4 = {sign}{abs(delta) * 100:.1f}"
        selected = [cell for cell in card.find_all("td", class_="sel")]
        assert len(selected) == 3 and all(cell.attrs["data-col"] == str(KEYS.index("bleu_4")) for cell in selected)
    assert dom.find("span", id="shown").text() == "10 of 11"


def test_the_script_counts_the_images_compared_not_the_ones_embedded(tmp_path):
    """#34 item 9: 300 images compared, a few dozen embedded: after the script re-ranks pair 2 on CLIP-S, the page
    still says 10 of 300 (it said 10 of the embedded count)."""
    chromium_or_skip()
    page = write_report(large_report(300), tmp_path / "out")["html"]
    dom = parse_html(chromium(page.as_uri() + "#pair=2&metric=clip_s", tmp_path, "--dump-dom", width=1280).stdout)
    assert [c.attrs["data-pair"] for c in visible_cards(dom)] == ["2"] * 10  # the script ran
    assert dom.find("span", id="shown").text() == "10 of 300"
    assert dom.find("span", id="compared").text() == "300"


# Measures, in the page, the expanded pairwise table against its box and the window: how far its right edge and its
# last header cell reach, and the widths that would make something scroll.
PAIRWISE_LAYOUT = """(function () {
  var details = document.querySelector("#table details");
  details.open = true;
  var table = document.getElementById("comparisons"), box = table.parentElement;
  var cells = table.querySelectorAll("tbody tr:first-child td"), last = cells[cells.length - 1];
  return {tableRight: table.getBoundingClientRect().right, lastRight: last.getBoundingClientRect().right,
          boxRight: box.getBoundingClientRect().right, boxScroll: box.scrollWidth, boxClient: box.clientWidth,
          pageScroll: document.documentElement.scrollWidth, viewport: window.innerWidth,
          lastVisible: last.getClientRects().length > 0, lastText: last.textContent};
})()"""


@pytest.mark.parametrize("width", [1280, 390])
def test_the_expanded_pairwise_table_fits_the_window(report, page, tmp_path, width):
    """#34 item 9: every column of the expanded pairwise table is inside the window at 1280 and 390 px (no column
    cut off behind a scroll box, no sideways page scroll)."""
    chromium_or_skip()
    with DevToolsPage(page.as_uri(), tmp_path / "profile", width=width, height=900) as browser:
        browser.wait_for("document.getElementById('comparisons') !== null && document.readyState === 'complete'")
        layout = browser.evaluate(PAIRWISE_LAYOUT)
        shot = tmp_path / f"pairwise-{width}.png"
        browser.evaluate("document.getElementById('comparisons').scrollIntoView()")
        browser.screenshot(shot)
    assert layout["viewport"] == width
    assert layout["lastVisible"] and layout["lastText"].endswith(("yes", "no")), layout
    assert layout["boxScroll"] <= layout["boxClient"], layout  # nothing hidden behind the box's scroll bar
    assert layout["tableRight"] <= layout["boxRight"] + 0.5 and layout["lastRight"] <= width, layout
    assert layout["pageScroll"] <= width, layout
    pixels = np.asarray(Image.open(shot).convert("L"), dtype=np.float32)
    assert pixels.shape == (900, width) and pixels.std() > 5


def test_the_tiny_weights_banner_is_drawn_at_the_top(report, tmp_path):
    chromium_or_skip()
    report["metrics"]["clip_s"]["provenance"]["tiny_random_weights"] = True
    page = write_report(report, tmp_path / "out")["html"]
    with DevToolsPage(page.as_uri(), tmp_path / "profile", width=390, height=900) as browser:
        browser.wait_for("document.getElementById('tiny-weights') !== null && document.readyState === 'complete'")
        box = browser.evaluate("(function () { var r = document.getElementById('tiny-weights')"
                               ".getBoundingClientRect(); return [r.top, r.bottom, r.width, "
                               "document.getElementById('tiny-weights').innerText]; })()")
    top, bottom, banner_width, text = box
    assert 0 <= top < 40 and bottom - top > 20 and 300 < banner_width <= 390
    assert text.startswith("WARNING: CLIP-S was scored with TINY RANDOM TEST WEIGHTS")
