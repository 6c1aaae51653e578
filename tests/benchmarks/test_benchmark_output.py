"""``capeval benchmark --output DIR``: the result document as ``result.json`` (what ``--json`` prints) and the plot as
``plot.png`` in DIR (made if missing); a file given as DIR is a usage error before anything runs."""

import json

import pytest
from PIL import Image

from capeval.cli import main


def test_the_result_and_the_plot_are_written_to_the_output_folder(tmp_path, monkeypatch, capsys):
    from test_catalog import _thumb_fixture

    _thumb_fixture(tmp_path)
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    arguments = ["benchmark", "rouge_l", "thumb", "--data-dir", str(tmp_path), "--resamples", "0", "--json"]
    assert main(arguments) == 0
    alone = json.loads(capsys.readouterr().out)
    folder = tmp_path / "runs" / "thumb"  # its parent exists, it does not: made
    (tmp_path / "runs").mkdir()
    assert main([*arguments, "--output", str(folder)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert sorted(p.name for p in folder.iterdir()) == ["plot.png", "result.json"]
    assert json.loads((folder / "result.json").read_text(encoding="utf-8")) == printed
    assert printed["plot"] == str(folder / "plot.png")
    assert {k: v for k, v in printed.items() if k != "plot"} == alone  # the same run, only written down
    with Image.open(folder / "plot.png") as image:
        assert image.format == "PNG" and min(image.size) > 100


def test_a_named_plot_goes_where_plot_says(tmp_path, monkeypatch, capsys):
    from test_catalog import _thumb_fixture

    _thumb_fixture(tmp_path)
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    plot = tmp_path / "elsewhere.png"
    assert main(["benchmark", "rouge_l", "thumb", "--data-dir", str(tmp_path), "--resamples", "0",
                 "--output", str(tmp_path / "out"), "--plot", str(plot)]) == 0
    capsys.readouterr()
    assert plot.is_file() and sorted(p.name for p in (tmp_path / "out").iterdir()) == ["result.json"]


def test_a_file_as_the_output_folder_is_a_usage_error(tmp_path, capsys):
    taken = tmp_path / "result.json"
    taken.write_text("{}")
    with pytest.raises(SystemExit) as exit_:
        main(["benchmark", "rouge_l", "thumb", "--output", str(taken)])
    assert exit_.value.code == 2 and "is a file" in capsys.readouterr().err
