"""The Gradio demos: served on localhost, called with gradio_client, and rendered by headless Chromium."""

import hashlib
import re
import runpy
import shutil
import socket
import subprocess

import numpy as np
import pytest
from browser import DevToolsPage, chromium_or_skip
from PIL import Image

pytest.importorskip("gradio")
gradio_client = pytest.importorskip("gradio_client")

from capeval import functional as F  # noqa: E402
from capeval.demo import (  # noqa: E402
    TINY_BANNER,
    Explanation,
    card_markdown,
    examples,
    format_value,
    markdown_table,
    parse_references,
    provenance_markdown,
)
from capeval.hice_s import visualize as V  # noqa: E402
from capeval.modules import module_dir  # noqa: E402
from capeval.core.scoring import load_scorer, scorers  # noqa: E402

CAPTION = "a red and blue picture"
REFERENCES = ["a picture in red and blue", "two colours"]


@pytest.fixture(scope="module")
def quiet_gradio():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GRADIO_ANALYTICS_ENABLED", "False")
        yield


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(demo) -> str:
    demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    return demo.local_url


def app_demo(name):
    return runpy.run_path(str(module_dir(name) / "app.py"))["demo"]


@pytest.fixture(scope="module")
def served(quiet_gradio):
    """``served(name)``: ``metrics/<name>/app.py`` (or a measurement's) built and served on localhost once for the
    module (what a page or a request sees does not depend on earlier requests); all closed after the module."""
    demos = {}

    def demo_of(name):
        if name not in demos:
            demos[name] = app_demo(name)
            serve(demos[name])
        return demos[name]

    yield demo_of
    for demo in demos.values():
        demo.close()


def call_app(served, metric, image_file):
    """Score CAPTION/REFERENCES through gradio_client with ``metrics/<metric>/app.py`` served on localhost."""
    client = gradio_client.Client(served(metric).local_url, verbose=False)
    references = "" if scorers()[metric].references == "unused" else "\n".join(REFERENCES)
    return client.predict(gradio_client.handle_file(str(image_file)), CAPTION, references, api_name="/score")


@pytest.fixture(scope="module")
def image_file(tmp_path_factory):
    array = np.zeros((48, 64, 3), dtype=np.uint8)
    array[:, :32] = (220, 30, 30)
    array[:, 32:] = (30, 30, 220)
    path = tmp_path_factory.mktemp("demo") / "image.png"
    Image.fromarray(array).save(path)
    return path


def components_from_embeddings(scorer, image, caption, references):
    """The breakdown's cosines, computed here from the backbone's raw embeddings."""
    backbone = scorer.backbone
    image_emb = backbone.encode_images([image])[0].float()
    texts = backbone.encode_texts([scorer.prefix + t for t in [caption] + references]).float()
    cos = [float(F.normalize(image_emb) @ F.normalize(texts[0]))]
    cos += [float(F.normalize(texts[0]) @ F.normalize(t)) for t in texts[1:]]
    return cos


@pytest.mark.parametrize("metric", ["clip_s", "pac_s"])
def test_app_served_and_called_with_gradio_client(tiny_hub, served, image_file, metric):
    scores, breakdown = call_app(served, metric, image_file)
    scorer = load_scorer(metric)
    image = Image.open(image_file)
    expected = scorer.score([CAPTION], images=[image], references=[REFERENCES])
    assert scores[metric] == pytest.approx(expected[metric], abs=1e-6)
    assert scores[f"ref{metric}"] == pytest.approx(expected[f"ref{metric}"], abs=1e-6)
    table = dict(breakdown["data"])
    image_cos, *ref_cos = components_from_embeddings(scorer, image, CAPTION, REFERENCES)
    assert table["cosine(image, caption)"] == pytest.approx(image_cos, abs=1e-6)
    assert table["w"] == (2.5 if metric == "clip_s" else 2.0)
    assert table["max reference cosine"] == pytest.approx(max(ref_cos), abs=1e-6)
    assert scores[metric] == pytest.approx(table["w"] * max(image_cos, 0), abs=1e-5)


def test_bad_input_is_a_clear_error(tiny_hub, served, image_file):
    client = gradio_client.Client(served("clip_s").local_url, verbose=False)
    with pytest.raises(Exception, match="empty caption"):
        client.predict(gradio_client.handle_file(str(image_file)), "   ", "", api_name="/score")
    with pytest.raises(Exception, match="upload an image"):
        client.predict(None, CAPTION, "", api_name="/score")


def test_image_explanation_and_reference_free_call(tiny_hub, image_file):
    def half_size(scorer, result, inputs):
        return inputs.image.resize((inputs.image.width // 2, inputs.image.height // 2))

    from capeval.demo import DemoScorer

    scorer = DemoScorer("clip_s", explanation=Explanation("image", "Half size", half_size))
    scores, panel = scorer.score(Image.open(image_file), CAPTION, "\n \n")
    assert set(scores) - {"provenance", "hashcode"} == {"clip_s", "truncated_texts", "scored"}
    digest = hashlib.sha256(np.asarray(Image.open(image_file).convert("RGB")).tobytes()).hexdigest()[:12]
    assert scores["scored"] == {"caption": CAPTION, "references": None, "image_sha256": digest}
    assert panel.size == (32, 24)
    assert parse_references(" a \n\n b ") == ["a", "b"]
    with pytest.raises(ValueError, match="kind"):
        Explanation("plot", "x", half_size)


def test_text_metric_demo_hides_the_image_and_ignores_an_uploaded_one(tiny_hub, quiet_gradio, served, image_file):
    """A metric whose images are "unused" (ROUGE-L): the image input is hidden, and an image sent anyway (through
    the API or the Python helper) is ignored instead of failing the scorer's input validation."""
    import gradio as gr

    from capeval.demo import DemoScorer, build_demo

    assert scorers()["rouge_l"].images == "unused"
    expected = load_scorer("rouge_l").score([CAPTION], references=[REFERENCES])["rouge_l"]
    scorer = DemoScorer("rouge_l")
    for image in (Image.open(image_file), None):
        scores, panel = scorer.score(image, CAPTION, "\n".join(REFERENCES))
        assert scores["rouge_l"] == pytest.approx(expected) and panel is None
        assert scores["scored"] == {"caption": CAPTION, "references": REFERENCES, "image_sha256": None}
    with pytest.raises(Exception, match="needs at least one reference"):
        scorer.score(Image.open(image_file), CAPTION, "")

    def image_inputs(demo):
        return [block for block in demo.blocks.values() if isinstance(block, gr.Image)]

    assert [block.visible for block in image_inputs(served("clip_s"))] == [True]  # build_demo, through app.py
    demo = build_demo("rouge_l")
    (image_input,) = image_inputs(demo)
    assert image_input.visible is False
    try:
        client = gradio_client.Client(serve(demo), verbose=False)
        scores, _ = client.predict(gradio_client.handle_file(str(image_file)), CAPTION, "\n".join(REFERENCES),
                                   api_name="/score")
    finally:
        demo.close()
    assert scores["rouge_l"] == pytest.approx(expected)


def chromium(url, tmp_path, *action, width=1200, height=900, budget_ms=20000):
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--hide-scrollbars", "--force-device-scale-factor=1", f"--user-data-dir={tmp_path / 'profile'}",
             f"--window-size={width},{height}", f"--virtual-time-budget={budget_ms}"]
    return subprocess.run([chromium_or_skip(), *flags, *action, url], capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("width", [1280, 390])  # desktop and phone
def test_headless_chromium_renders_the_first_example_scored(tiny_hub, served, tmp_path, width):
    """The page opens with the first example scored at startup (no weights loaded on a click): rounded scores,
    the breakdown, the weights' provenance with the tiny-weights banner, the examples and the metric card."""
    binary = chromium_or_skip()
    assert shutil.which(binary)
    shot = tmp_path / "demo.png"
    with DevToolsPage(served("clip_s").local_url, tmp_path / "profile", width=width) as page:
        # the labels exist only once the Svelte front end has rendered the Blocks: wait for them in real time
        page.wait_for('document.body && document.body.innerText.includes("How the score is made")'
                      ' && document.body.innerText.includes("Metric card")')
        page.screenshot(shot)
        dom = page.html()
    pixels = np.asarray(Image.open(shot).convert("L"), dtype=np.float32)
    assert pixels.shape == (900, width)
    assert pixels.std() > 5 and len(np.unique(pixels)) > 20  # not a blank page
    image, caption, references = examples(scorers()["clip_s"])[0]
    expected = load_scorer("clip_s").score([caption], [Image.open(image)], [parse_references(references)])
    # the labels exist only once the Svelte front end has rendered the Blocks
    for text in ("CLIP-S / RefCLIP-S", "References, one per line", "How the score is made", caption,
                 f"{expected['clip_s']:.4f}", f"{expected['refclip_s']:.4f}", "tiny random TEST weights",
                 "openai-clip-vit-b-32", "Examples", "Metric card"):
        assert text in dom, text
    page = re.sub(r"<script.*?</script>", "", dom, flags=re.S)  # what is shown, not the app's config
    assert str(expected["clip_s"]) not in page and f"{expected['clip_s']:.4f}" in page  # no 16-digit numbers


# Run in the page once the front end has rendered: click the second example, then Score at once, as a browser
# driver does (a click waits until the button is enabled; the first attempt is made in the very next task), and
# record what the page showed on the way.
CLICK_EXAMPLE_THEN_SCORE = """
() => {
  const mark = (key, value) => { document.body.dataset[key] = String(value); };
  const find = () => [...document.querySelectorAll("button")].find(b => b.textContent.trim() === "Score");
  const timer = setInterval(() => {
    const rows = document.querySelectorAll("table tbody tr");
    const score = find();
    if (rows.length < 2 || !score) return;
    clearInterval(timer);
    rows[1].click();
    setTimeout(() => {
      mark("disabledAtOnce", score.disabled);
      const attempt = setInterval(() => {
        if (score.disabled) return;
        clearInterval(attempt);
        mark("caption", document.querySelector("textarea").value);
        score.click();
        setTimeout(() => {
          mark("disabledWhileScoring", score.disabled);
          mark("scoresWhileScoring", document.querySelector(".capeval-table").textContent.trim());
        }, 0);
      }, 20);
    }, 0);
  }, 100);
}
"""


def test_a_score_clicked_at_once_after_an_example_echoes_that_example(tiny_hub, quiet_gradio, tmp_path):
    """Score clicked right after an example: the button is disabled until the example's inputs are in place and
    while scoring (the old scores give way to a progress note), and the result shown names the example's caption
    and image digest, with the example's scores."""
    chromium_or_skip()
    demo = app_demo("clip_s")
    try:
        demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True,
                    js=CLICK_EXAMPLE_THEN_SCORE)
        with DevToolsPage(demo.local_url, tmp_path / "profile", width=1280) as page:
            # in real time, however loaded the machine: the marks are set once Score went through, and the result
            # line appears once the server has scored (a virtual-time budget could dump the page while it scored)
            page.wait_for('document.body && document.body.dataset.scoresWhileScoring !== undefined'
                          ' && document.body.innerText.includes("Scored:")')
            dom = page.html()
    finally:
        demo.close()
    body = re.search(r"<body([^>]*)>", dom).group(1)
    marks = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body))
    image, caption, references = examples(scorers()["clip_s"])[1]
    assert marks["caption"] == caption  # the example was in place when Score went through
    assert marks["disabled-at-once"] == "true" and marks["disabled-while-scoring"] == "true"
    while_scoring = marks["scores-while-scoring"]  # the progress note and timer, the old table gone
    assert "Scoring…" in while_scoring and "clip_s" not in while_scoring, while_scoring
    digest = hashlib.sha256(np.asarray(Image.open(image).convert("RGB")).tobytes()).hexdigest()[:12]
    expected = load_scorer("clip_s").score([caption], [Image.open(image)], [parse_references(references)])
    page = re.sub(r"<script.*?</script>", "", dom, flags=re.S)
    scored = re.search(r"Scored:.*?</p>", page, flags=re.S)
    assert scored, re.sub(r"<[^>]+>", " ", page)[-3000:]
    assert caption in scored.group(0) and digest in scored.group(0), scored.group(0)
    assert f"{expected['clip_s']:.4f}" in page and f"{expected['refclip_s']:.4f}" in page


def test_tables_provenance_and_card_helpers(tmp_path, monkeypatch):
    assert format_value(0.123456789) == "0.1235" and format_value(float("nan")) == "n/a" and format_value(3) == "3"
    assert format_value(-1e-7) == "0.0000" and format_value(-0.5) == "-0.5000"
    table = markdown_table([["a|b", 1.0]], ("x", "y"))
    assert table.splitlines() == ["| x | y |", "|:--|--:|", "| a&#124;b | 1.0000 |"]
    tiny = {"capeval": "9", "tiny_random_weights": True,
            "weights": [{"ref": "w1", "source": "org/w1@abc", "tiny_random_weights": True}]}
    text = provenance_markdown(tiny, "m|capeval 9|ff")
    assert text.startswith(TINY_BANNER) and "`w1`: org/w1@abc" in text and "`m|capeval 9|ff`" in text
    real = provenance_markdown({**tiny, "tiny_random_weights": False, "weights": [{**tiny["weights"][0],
                                                                                    "tiny_random_weights": False}]})
    assert TINY_BANNER not in real and "tiny random" not in real
    assert "not reported" in provenance_markdown(None)
    card = tmp_path / "README.md"
    card.write_text("---\ntitle: X\nsdk: gradio\n---\n\n# X\nbody\n")
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert card_markdown(card) == "# X\nbody\n"
    monkeypatch.setenv("SPACE_ID", "org/x")
    assert card_markdown(card).startswith("[Open the metric card on the Hub](https://huggingface.co/spaces/org/x/")


@pytest.mark.parametrize("metric, key", [("polos", "polos"), ("ensembeval", "ensembeval")])
def test_learned_metric_apps_served_and_called(tiny_hub, served, image_file, metric, key):
    scores, panel = call_app(served, metric, image_file)
    direct = load_scorer(metric, device="cpu").score([CAPTION], [Image.open(image_file)], [REFERENCES])
    assert scores[key] == pytest.approx(direct[key], abs=1e-5)
    if metric == "ensembeval":  # the breakdown's contributions add up to the ensemble score
        rows = panel["data"] if isinstance(panel, dict) else panel
        assert sum(float(value) for _, value in rows) == pytest.approx(direct[key], abs=1e-4)


def test_human_correlation_app_served_and_called(served):
    from capeval.functional.correlation import kendall_tau

    client = gradio_client.Client(served("human_correlation").local_url, verbose=False)
    out = client.predict("0.1 0.4 0.35 0.8", "1, 2, 2, 4", api_name="/correlate")
    assert out["kendall_tau_c"] == pytest.approx(kendall_tau([0.1, 0.4, 0.35, 0.8], [1, 2, 2, 4], "c"))


def test_roundtrip_app_shows_the_generated_image(tiny_hub, served, image_file, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    scores, generated = call_app(served, "image_roundtrip", image_file)
    direct = load_scorer("image_roundtrip", device="cpu").score([CAPTION], [Image.open(image_file)])
    assert scores["image_roundtrip"] == pytest.approx(direct["image_roundtrip"], abs=1e-5)
    assert generated is not None


def app_scorer(demo):
    """The ``DemoScorer`` that an app made by ``build_demo`` scores with (its scoring function's closure holds it)."""
    from capeval.demo import DemoScorer

    found = {id(cell.cell_contents): cell.cell_contents for function in demo.fns.values()
             for cell in (getattr(function.fn, "__closure__", None) or ()) if isinstance(cell.cell_contents, DemoScorer)}
    (scorer,) = found.values()
    return scorer


def test_hice_app_shows_the_region_phrase_overlay_and_scores_once_per_request(tiny_hub, served, image_file):
    """The served app (SAM's default 32x32 points, as in a Space) scores a request once, with the report the overlay
    is drawn from, and returns the scores of its scorer, the default one, and the overlay at the working width.
    Each image is segmented once (what costs here): the direct scores come from the app's scorer after the
    request, which segmented the image cold, and the default scorer is recognised by its hashcode."""
    demo_scorer = app_scorer(served("hice_s"))
    calls = []
    real_score = demo_scorer.scorer.score

    def counting_score(*args, **kwargs):
        calls.append(kwargs)
        return real_score(*args, **kwargs)

    demo_scorer.scorer.score = counting_score
    try:
        scores, overlay = call_app(served, "hice_s", image_file)
        assert len(calls) == 1 and calls[0]["return_report"] is True  # the request through the server
        demo_scores, demo_picture = demo_scorer.score(Image.open(image_file), CAPTION, "\n".join(REFERENCES))
        assert len(calls) == 2 and calls[1]["return_report"] is True  # and a DemoScorer call: once each
        assert "reports" not in demo_scores and demo_picture.width == V.MIN_WIDTH
    finally:
        del demo_scorer.scorer.score  # the scorer's own method again
    assert demo_scorer.scorer.hashcode == load_scorer("hice_s", device="cpu").hashcode
    direct = real_score([CAPTION], [Image.open(image_file)], [REFERENCES])
    assert "reports" not in scores
    assert scores["hice_s"] == pytest.approx(direct["hice_s"], abs=1e-5)
    assert scores["refhice_s"] == pytest.approx(direct["refhice_s"], abs=1e-5)
    picture = Image.open(overlay["path"] if isinstance(overlay, dict) else overlay)
    original = Image.open(image_file)
    assert picture.width == V.MIN_WIDTH  # a 64-px photo is drawn at the working width, legible
    assert picture.height > V.MIN_WIDTH * original.height // original.width  # image + phrase panel


def hice_report(mentioned, caption="a sun above a field"):
    return {"caption": caption,
            "phrases": [{"phrase": "sun", "precision": 0.8, "correct": True},
                        {"phrase": "black cat", "precision": 0.1, "correct": False}],
            "regions": [{"index": k, "recall": 0.9 if m else 0.1, "mentioned": m, "best_phrase": "sun"}
                        for k, m in enumerate(mentioned)]}


def two_regions(width, height):
    rng = np.random.RandomState(0)
    image = Image.fromarray(rng.randint(0, 255, (height, width, 3)).astype(np.uint8))
    left = np.zeros((height, width), bool)
    left[:, : width // 2] = True
    return image, [left, ~left]


def test_hice_report_colours_regions_by_status_and_links_phrases():
    image, masks = two_regions(800, 400)
    report = hice_report([True, False])
    drawn = np.asarray(V.draw_hice_report(image, report, masks)).astype(float)
    assert drawn.shape[1] == 800  # within the working widths: drawn at its own size
    original = np.asarray(image).astype(float)
    for (y, x), colour in (((350, 100), V.MENTIONED), ((350, 700), V.UNMENTIONED)):  # away from the labels
        expected = (1 - V.TINT) * original[y, x] + V.TINT * np.array(colour)
        assert np.abs(drawn[y, x] - expected).max() <= 1, (y, x)
    assert drawn[1, 1].tolist() == list(V.MENTIONED) and drawn[1, 798].tolist() == list(V.UNMENTIONED)  # outlines
    rows = V.report_lines(report, unsegmented=False)
    assert ('correct: "sun" (precision 0.80) -> R1', V.CORRECT_TEXT) in rows
    assert ('WRONG: "black cat" (precision 0.10)', V.WRONG_TEXT) in rows
    assert ('R2 UNMENTIONED (recall 0.10); closest phrase "sun"', V.WRONG_TEXT) in rows


def test_hice_report_without_regions_is_untinted_and_says_so():
    image, _ = two_regions(V.MIN_WIDTH // 2, V.MIN_WIDTH // 4)  # a small photo: drawn twice as large
    report = hice_report([False])
    for masks in ([], [np.ones((image.height, image.width), bool)]):  # none found, or the whole-image stand-in
        drawn = V.draw_hice_report(image, report, masks)
        top = np.asarray(drawn)[: V.MIN_WIDTH // 2]
        assert np.array_equal(top, np.asarray(image.resize((V.MIN_WIDTH, V.MIN_WIDTH // 2), Image.LANCZOS)))
    rows = [text for text, _ in V.report_lines(report, unsegmented=True)]
    assert any(text.startswith("No region segmented") for text in rows) and not any("R1" in t for t in rows)


def test_hice_report_text_scales_with_the_image_and_wraps_long_captions():
    report = hice_report([True, False], caption="a very long caption " * 20)
    heights = {}
    for width in (V.MAX_WIDTH // 2, V.MAX_WIDTH, 4000):
        image, masks = two_regions(width, width // 2)
        drawn = V.draw_hice_report(image, report, masks)
        panel = np.asarray(drawn.convert("L"))[drawn.width * image.height // image.width:]
        heights[width] = panel.shape[0]
        ink = np.nonzero((panel < 200).any(axis=0))[0]
        assert ink.max() < drawn.width - 5  # wrapped: nothing runs into the right edge
    assert heights[V.MAX_WIDTH] == pytest.approx(2 * heights[V.MAX_WIDTH // 2], rel=0.1)  # font follows the width
    assert heights[4000] == heights[V.MAX_WIDTH]  # a huge photo is drawn at the largest working width


def test_vcrscore_app_shows_the_three_features_and_the_detected_objects(tiny_hub, served, image_file):
    scores, panel = call_app(served, "vcrscore", image_file)
    direct = load_scorer("vcrscore", device="cpu").score([CAPTION], [Image.open(image_file)], [REFERENCES],
                                                          return_features=True)
    assert scores["vcrscore"] == pytest.approx(direct["vcrscore"], abs=1e-9)
    rows = dict(panel["data"] if isinstance(panel, dict) else panel)
    features = {"(1) word precision vs references + detected objects, %": direct["word_precision"],
                "(2) ViLT image-text retrieval logit": direct["vilt_logit"],
                "(3) MCIP RefCLIP-S": direct["mcip_refclip_s"], "VCRScore = regressor(1, 2, 3)": direct["vcrscore"]}
    for name, value in features.items():
        assert float(rows[name]) == pytest.approx(value, abs=1e-5), name
    objects = direct["detected_objects"][0]
    assert rows["objects found by DETR"] == (", ".join(sorted(set(objects["detr"]))) or "(none)")
    assert rows["objects found by the YOLO-family detector"] == (", ".join(sorted(set(objects["yolo"]))) or "(none)")
    assert objects["yolo"]  # the tiny YOLOS finds something, so the row is not trivially "(none)"
