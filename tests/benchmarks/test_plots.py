"""``capeval benchmark --plot``: a scatter for correlation benchmarks, a per-category bar chart for pairwise ones."""

import json

from PIL import Image

from capeval.cli import main


def _assert_png(path):
    assert path.is_file() and path.stat().st_size > 0
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size[0] > 100 and image.size[1] > 100


def test_scatter_plot_for_a_correlation_benchmark(tmp_path, monkeypatch, capsys):
    from test_catalog import _thumb_fixture

    _thumb_fixture(tmp_path)
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    plot = tmp_path / "thumb.png"
    assert main(["benchmark", "rouge_l", "thumb", "--data-dir", str(tmp_path), "--resamples", "0",
                 "--plot", str(plot)]) == 0
    assert json.loads(capsys.readouterr().out)["plot"] == str(plot)
    _assert_png(plot)


def test_bar_plot_for_a_pairwise_benchmark(tmp_path, monkeypatch, capsys):
    from test_pairwise import PAIRS, _write_pascal

    _write_pascal(tmp_path, PAIRS)
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    plot = tmp_path / "pascal.png"
    assert main(["benchmark", "bleu1", "pascal50s", "--data-dir", str(tmp_path), "--resamples", "0",
                 "--plot", str(plot)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["categories"]) == {"HC", "HI", "HM", "MM"} and out["plot"] == str(plot)
    _assert_png(plot)
