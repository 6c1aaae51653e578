"""report.html without a browser: self-contained (no external URL; thumbnails are data: URIs made from the image
files), every document text escaped, the table's cells, one CI plot per metric placed by the values, the
disagreement browser's default ranking and entries, coverage and the provenance section."""

import base64
import io
import re

import numpy as np
import pytest
from conftest import INJECTION, KEYS, SYSTEMS, embedded_images, large_report, parse_html, rename_system
from PIL import Image

from capeval.report import write_report


def page_of(report, tmp_path, **options):
    path = write_report(report, tmp_path / "out", **options)["html"]
    text = path.read_text(encoding="utf-8")
    return text, parse_html(text)


@pytest.fixture
def page(report, tmp_path, images_root):
    return page_of(report, tmp_path, images_root=images_root)


def test_the_page_is_self_contained(page):
    text, _ = page
    assert not re.search(r"(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text.replace("http://www.w3.org/2000/svg", ""))
    assert not re.search(r"(?i)<link|@import|url\(", text)
    sources = re.findall(r'\b(?:src|href)="([^"]*)"', text)
    assert sources and all(s.startswith("data:image/jpeg;base64,") for s in sources)
    assert text.count("<script") == 1 and "<script src" not in text  # the one small inline script


def test_captions_references_and_names_are_escaped(page):
    text, dom = page
    assert "<script>alert(" not in text and "&lt;script&gt;alert(&#x27;caption&#x27;)&lt;/script&gt; a dog" in text
    assert "<b>bold</b>" not in text and "R&amp;D &lt;b&gt;bold&lt;/b&gt;" in text
    assert "ours & <v2>" not in text and "ours &amp; &lt;v2&gt;" in text
    captions = [dd.text() for dd in dom.find_all("dd")]
    assert INJECTION in captions  # shown as text (parsed back exactly)


def test_the_table_cells(report, page):
    _, dom = page
    table = dom.find("table", id="scores")
    assert [th.text() for th in table.find("thead").find_all("th")] == ["System", "BLEU-1", "BLEU-2", "BLEU-3",
                                                                        "BLEU-4", "METEOR", "ROUGE-L", "CIDEr",
                                                                        "CLIP-S"]
    rows = table.find("tbody").find_all("tr")
    assert [r.find("th").text() for r in rows] == ["ClipCap (baseline)", "ours_v1", "ours & <v2>"]
    for row, system in zip(rows, SYSTEMS):
        for cell, key in zip(row.find_all("td"), KEYS):
            score = report["systems"][system]["scores"][key]
            value, (low, high) = f"{score['value'] * 100:.1f}", score["ci"]
            assert cell.text().startswith(value) and cell.text().endswith(f"[{low * 100:.1f}, {high * 100:.1f}]")
            best = score["value"] == max(report["systems"][s]["scores"][key]["value"] for s in SYSTEMS)
            assert bool(cell.find_all("b")) == best and (not best or cell.find("b").text() == value)
    ours = dict(zip(KEYS, rows[1].find_all("td")))
    assert ours["cider"].find("sup").text() == "†" and ours["clip_s"].find("sup").text() == "‡"
    assert "significantly worse" in ours["clip_s"].find("sup").attrs["title"]
    assert "scored 12 of 12 images of split test" in dom.find("p", id="coverage").text()
    footer = dom.find("p", id="footer").text()
    assert "1000 resamples over images, seed 12345" in footer and "tests: paired-bs, paired-ar" in footer
    clusters = dom.find("table", id="clusters").find("tbody").find_all("tr")
    assert [[td.text() for td in r.find_all("td")] for r in clusters] == [
        [str(report["clusters"][k][s]) for k in KEYS] for s in SYSTEMS]


def test_one_plot_per_metric_with_dots_ordered_as_the_values_and_ci_whiskers(report, page):
    _, dom = page
    plots = dom.find_all("svg", class_="plot")
    assert [p.attrs["aria-label"] for p in plots] == [f"{t} (×100)" for t in ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4",
                                                                                "METEOR", "ROUGE-L", "CIDEr", "CLIP-S")]
    for plot, key in zip(plots, KEYS):
        groups = [g for g in plot.find_all("g")]
        assert [g.find("title").text().split(":")[0] for g in groups] == list(SYSTEMS)
        dots = [float(g.find("circle").attrs["cx"]) for g in groups]
        values = [report["systems"][s]["scores"][key]["value"] for s in SYSTEMS]
        assert sorted(range(3), key=dots.__getitem__) == sorted(range(3), key=values.__getitem__)
        for group, dot in zip(groups, dots):
            ends = sorted(float(line.attrs["x1"]) for line in group.find_all("line"))
            assert ends[0] < dot < ends[-1]  # the dot sits inside its CI whisker


def visible_cards(dom):
    return [c for c in dom.find("ol", id="cards").find_all("li", class_="card") if "hidden" not in c.attrs]


def test_disagreement_browser_default_ranking_and_entries(report, page):
    _, dom = page
    section = dom.find("section", id="disagreements")
    options = [o.text() for o in section.find("select", id="pair").find_all("option")]
    assert options == ["ours_v1 − ClipCap", "ours & <v2> − ClipCap", "ours_v1 − ours & <v2>"]
    assert [o.attrs.get("value") for o in section.find("select", id="metric").find_all("option")] == list(KEYS)
    assert "selected" in section.find("option", value="cider").attrs
    deltas = [(i, img["scores"]["ours_v1"]["cider"] - img["scores"]["ClipCap"]["cider"])
              for i, img in enumerate(report["images"])]
    expected = sorted(deltas, key=lambda d: -abs(d[1]))[:10]
    cards = visible_cards(dom)
    assert len(cards) == 10 and all(c.attrs["data-pair"] == "0" for c in cards)
    for rank, (card, (index, delta)) in enumerate(zip(cards, expected), 1):
        image = report["images"][index]
        assert card.find("span", class_="rank").text() == f"#{rank}"
        assert f"image {image['image_id']}" in card.find("p", class_="meta").text()
        sign = "+" if delta > 0 else "\u2212"
        assert card.find("p", class_="delta").text() == f"Δ CIDEr = {sign}{abs(delta) * 100:.1f}"
        assert [dd.text() for dd in card.find_all("dd")] == [image["captions"]["ours_v1"],
                                                             image["captions"]["ClipCap"]]
        assert [li.text() for li in card.find("ol", class_="references").find_all("li")] == image["references"]
        rows = card.find("table", class_="image-scores").find("tbody").find_all("tr")
        for row, system in zip(rows, ("ours_v1", "ClipCap")):
            shown = [td.text() for td in row.find_all("td")]
            assert shown == ["n/a" if image["scores"][system][k] is None else f"{image['scores'][system][k] * 100:.1f}"
                             for k in KEYS]
    assert section.find("span", id="shown").text() == "10 of 12"
    assert section.find("span", id="compared").text() == "12"


def test_thumbnails_are_small_jpegs_of_the_image_files(report, page, images_root):
    _, dom = page
    for card in visible_cards(dom):
        image_id = int(card.find("img").attrs["alt"].split()[-1])
        file = next(i["file"] for i in report["images"] if i["image_id"] == image_id)
        uri = card.find("img").attrs["src"]
        thumbnail = Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1])))
        original = Image.open(images_root / file)
        assert thumbnail.format == "JPEG" and max(thumbnail.size) <= 256
        assert max(thumbnail.size) == min(256, max(original.size))
        assert abs(thumbnail.size[0] / thumbnail.size[1] - original.size[0] / original.size[1]) < 0.02
        small = original.convert("RGB").resize(thumbnail.size)
        difference = abs(int(sum(small.convert("L").getdata())) - int(sum(thumbnail.convert("L").getdata())))
        assert difference / (thumbnail.size[0] * thumbnail.size[1]) < 3  # the same picture


def test_without_images_root_or_file_the_card_says_so(report, tmp_path, images_root):
    _, dom = page_of(report, tmp_path)
    assert not dom.find_all("img") and all(c.find("p", class_="noimg").text() == "no images folder given"
                                           for c in visible_cards(dom))
    (images_root / report["images"][10]["file"]).unlink()
    with pytest.warns(UserWarning, match="COCO_val2014_000000000010.jpg: FileNotFoundError"):
        _, dom = page_of(report, tmp_path / "again", images_root=images_root)
    notes = [c.find("p", class_="noimg").text() for c in visible_cards(dom) if c.find_all("p", class_="noimg")]
    assert len(notes) == 1 and notes[0].startswith("image not shown: ") and "FileNotFoundError" in notes[0]


def test_provenance_and_hashcodes_are_collapsible(report, page):
    _, dom = page
    details = dom.find("section", id="provenance").find("details")
    assert "open" not in details.attrs and details.find("summary").text() == "Provenance and hashcodes"
    rows = details.find("table", id="hashcodes").find("tbody").find_all("tr")
    assert [[td.text() for td in r.find_all("td")] for r in rows] == [
        [k, report["metrics"][k]["scorer"], str(report["metrics"][k]["corpus_level"]), report["metrics"][k]["hashcode"]]
        for k in KEYS]
    text = details.text()
    assert "results/ours & <v2>.json" in text and '"seed": 12345' in text and "w-clip_s" in text


def test_names_with_markup_stay_text_in_the_browser_controls(report, tmp_path):
    rename_system(report, "ours_v1", '"><img src=x onerror=alert(1)>')
    text, dom = page_of(report, tmp_path)
    assert "<img src=x" not in text
    assert '"><img src=x onerror=alert(1)> − ClipCap' in [o.text() for o in dom.find("select", id="pair").find_all(
        "option")]


def test_one_system_has_nothing_to_compare(report, tmp_path):
    for system in ("ours_v1", "ours & <v2>"):
        del report["systems"][system]
        for image in report["images"]:
            del image["captions"][system], image["scores"][system]
    report["comparisons"], report["clusters"] = [], {k: {"ClipCap": 1} for k in KEYS}
    _, dom = page_of(report, tmp_path)
    section = dom.find("section", id="disagreements")
    assert "Nothing to compare: the report has one system" in section.text() and not section.find_all("li")
    assert len(dom.find("table", id="scores").find("tbody").find_all("tr")) == 1


@pytest.mark.parametrize("low, high", [(8, 95), (0.5, 1.2), (-3, 250), (75.1, 82.3), (116, 133), (0, 0.001)])
def test_plot_axes_have_at_least_three_round_ticks_inside_the_range(low, high):
    from capeval.report.plot import nice_ticks

    ticks = nice_ticks(low, high)
    steps = {round(b - a, 12) for a, b in zip(ticks, ticks[1:])}
    assert len(ticks) >= 3 and low <= ticks[0] and ticks[-1] <= high and len(steps) == 1
    mantissa = steps.pop() / 10 ** np.floor(np.log10(ticks[1] - ticks[0]))
    assert round(mantissa, 9) in (1, 2, 2.5, 5)


def test_the_page_counts_the_images_compared_and_the_examples_it_embeds(tmp_path):
    """#34 item 9: 300 images compared, a few dozen embedded: the page says 300, not the embedded count."""
    report = large_report(300)
    _, dom = page_of(report, tmp_path)
    counts = dom.find("p", id="counts")
    embedded = embedded_images(report)
    assert 10 < len(embedded) < 60
    assert counts.find("span", id="compared").text() == "300"
    assert counts.find("span", id="shown").text() == "10 of 300"
    assert counts.find("span", id="embedded").text() == str(len(embedded))
    assert len({c.attrs["data-order"] for c in dom.find("ol", id="cards").find_all("li", class_="card")}) == len(
        embedded)
    assert counts.text().startswith("300 images compared.") and f"embeds {len(embedded)} of the" in counts.text()


def signed(delta, factor=100, digits=1):
    return ("+" if delta > 0 else "\u2212") + f"{abs(delta) * factor:.{digits}f}"


def test_the_pairwise_table_shows_the_tables_scale_and_rounded_numbers(report, page):
    """#34 item 9: Δ ×100 with one decimal (the main table's scale), p-values to four decimals, no raw floats."""
    _, dom = page
    table = dom.find("table", id="comparisons")
    assert [th.text() for th in table.find("thead").find_all("th")] == [
        "Systems (Δ = first − second)", "Metric", "Δ", "p bootstrap", "p randomization", "adjusted p bootstrap",
        "adjusted p randomization", "Significant"]
    rows = table.find("tbody").find_all("tr")
    assert len(rows) == len(report["comparisons"])
    for row, comparison in zip(rows, report["comparisons"]):
        cells = [td.text() for td in row.find_all("td")]
        titles = dict(zip(KEYS, ["BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr", "CLIP-S"]))
        assert cells[:3] == [f"{comparison['system_b']} − {comparison['system_a']}", titles[comparison["metric"]],
                             signed(comparison["delta"])]
        assert cells[3:7] == [f"{comparison[k]:.4f}" for k in ("p_bootstrap", "p_randomization",
                                                                "p_bootstrap_adjusted", "p_randomization_adjusted")]
        assert cells[7] == ("yes" if comparison["significant"] else "no")
        assert [td.attrs["data-label"] for td in row.find_all("td")][2] == "Δ"
    assert not any(re.search(r"\d\.\d{5,}", td.text()) for td in table.find_all("td"))  # no raw floats


def test_pairwise_p_values_below_four_decimals_and_other_metrics(tmp_path):
    report = large_report(30)
    report["keys"].append("vcrscore")
    report["metrics"]["vcrscore"] = {"scorer": "vcrscore", "hashcode": "v", "provenance": {}, "corpus_level": False,
                                     "title": "VCRScore", "scale": 1.0, "higher_is_better": True}
    for system in report["systems"]:
        report["systems"][system]["scores"]["vcrscore"] = {"value": 0.5, "ci": None}
    for image in report["images"]:
        for system in report["systems"]:
            image["scores"][system]["vcrscore"] = 0.5
    report["comparisons"].append({"system_a": "base", "system_b": "a", "metric": "vcrscore", "delta": -0.0123456789,
                                  "p_bootstrap": 0.0, "p_randomization": None, "p_bootstrap_adjusted": 0.00004,
                                  "p_randomization_adjusted": float("nan"), "significant": None})
    _, dom = page_of(report, tmp_path)
    last = dom.find("table", id="comparisons").find("tbody").find_all("tr")[-1]
    assert [td.text() for td in last.find_all("td")][2:] == ["\u22120.0123", "0.0000", "n/a", "<0.0001", "n/a",
                                                             "n/a"]
    first = dom.find("table", id="comparisons").find("tbody").find_all("tr")[0]
    assert [td.text() for td in first.find_all("td")][3:7] == ["0.0123", "<0.0001", "0.0741", "1.0000"]


@pytest.mark.parametrize("how", ["provenance", "hashcode"])
def test_tiny_weights_open_the_page_with_a_banner_and_mark_every_value(report, tmp_path, images_root, how):
    """#34 item 3: a banner at the top of the page (not in a collapsed section) names the metrics; their column
    titles, cells (bold best included), plots, pairwise rows and disagreement entries carry the mark."""
    for key in ("clip_s", "meteor"):
        if how == "provenance":
            report["metrics"][key]["provenance"]["tiny_random_weights"] = True
        else:
            report["metrics"][key]["hashcode"] += "|TINY-RANDOM-WEIGHTS"
    text, dom = page_of(report, tmp_path, images_root=images_root)
    main = dom.find("main")
    banner = main.children[0]
    assert banner.tag == "div" and banner.attrs["id"] == "tiny-weights" and banner.attrs["role"] == "alert"
    assert banner.text() == ("WARNING: METEOR, CLIP-S were scored with TINY RANDOM TEST WEIGHTS: their values, "
                             "marked (tiny), mean nothing.")
    table = dom.find("table", id="scores")
    titles = [th.text() for th in table.find("thead").find_all("th")][1:]
    assert [t for t in titles if t.endswith(" (tiny)")] == ["METEOR (tiny)", "CLIP-S (tiny)"]
    for row in table.find("tbody").find_all("tr"):
        for key, cell in zip(KEYS, row.find_all("td")):
            marked = bool(cell.find_all("span", class_="tiny"))
            assert marked == (key in ("clip_s", "meteor")), (key, cell.text())
            if cell.find_all("b") and key in ("clip_s", "meteor"):
                assert cell.find("span", class_="tiny").text() == "(tiny)"  # never "best" without the mark
    plots = [p.attrs["aria-label"] for p in dom.find_all("svg", class_="plot")]
    assert "METEOR (tiny) (×100)" in plots and "CLIP-S (tiny) (×100)" in plots and "CIDEr (×100)" in plots
    pairwise = [r.find_all("td")[1].text() for r in dom.find("table", id="comparisons").find("tbody").find_all("tr")]
    assert {m for m in pairwise if "tiny" in m} == {"METEOR (tiny)", "CLIP-S (tiny)"}
    options = [o.text() for o in dom.find("select", id="metric").find_all("option")]
    assert "CLIP-S (tiny)" in options and "CIDEr" in options


def test_no_banner_without_tiny_weights(page):
    text, dom = page
    assert 'id="tiny-weights"' not in text and "(tiny)" not in text


def test_thumbnails_only_from_files_inside_the_images_folder(report, tmp_path, images_root):
    """#34 item 5: a document whose file leaves the images folder (``..``, an absolute path, a link out of it) gets
    no thumbnail of that file, and says why; files inside still show."""
    from PIL import Image

    outside = tmp_path / "secret.jpg"
    Image.fromarray(np.full((40, 40, 3), 200, np.uint8)).save(outside)
    (images_root / "val2014" / "link.jpg").symlink_to(outside)
    escaping = ["../secret.jpg", str(outside), "val2014/link.jpg"]
    for image, file in zip(report["images"], escaping):
        image["file"] = file
    with pytest.warns(UserWarning, match="is outside the images folder"):
        _, dom = page_of(report, tmp_path, images_root=images_root)
    cards = dom.find("ol", id="cards").find_all("li", class_="card")
    by_file = {c.find("span", class_="file").text(): c for c in cards}
    for file in escaping:
        card = by_file[file]
        assert not card.find_all("img") and "is outside the images folder" in card.find(
            "p", class_="noimg").text()
    inside = [c for f, c in by_file.items() if f not in escaping]
    assert inside and all(c.find("img").attrs["src"].startswith("data:image/jpeg") for c in inside)
