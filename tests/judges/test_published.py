"""FLEUR's published per-sample outputs read into a judge cache: every block, counts, one-line errors."""

import json

import pytest

from capeval import InputError
from capeval.cli import main
from capeval.judges.cache import JudgeCache, inputs_key
from capeval.judges.published import import_fleur, read_published

FIRST_EXPERT_BLOCK = ("Flickr8k_Dataset/1056338697_4f7d7ce270.jpg",
                      "A young child is wearing blue goggles and sitting in a float in a pool .", 0.0,
                      0.00751495361328125)


def _blocks(text):
    """(image, caption, model score, our score) of every caption block, by a plain split (independent of the
    reader under test)."""
    out, image = [], None
    for block in text.split("\n\n"):
        fields = dict(line.split(" : ", 1) for line in block.splitlines() if " : " in line)
        image = fields.get("image file", image)
        if "our score" in fields:
            out.append((image, fields["caption"], float(fields["model score"]), float(fields["our score"])))
    return out


def test_every_published_block_becomes_a_cache_record(shared_data, tmp_path):
    folder = shared_data / "judges" / "fleur"
    summary = import_fleur(folder, tmp_path / "fleur.jsonl")
    files = summary["files"]
    assert {name: f["records"] for name, f in files.items()} == {
        "fleur_flickr8k_expert.txt": 5664, "fleur_composite.txt": 11985, **{
            f"fleur_pascal_{c}.txt": 2000 for c in ("HC", "HI", "HM", "MM")}}
    assert summary["missing"] == [] and summary["records"] == 25649
    for category, true_count in {"HC": 613, "HI": 997, "HM": 976, "MM": 742}.items():  # the files' own last lines
        assert files[f"fleur_pascal_{category}.txt"]["pairs"] == 1000
        assert files[f"fleur_pascal_{category}.txt"]["true count"] == true_count
        assert files[f"fleur_pascal_{category}.txt"]["recomputed true count"] == true_count
    cache = JudgeCache(tmp_path / "fleur.jsonl")
    records = list(cache.records())
    expected = [b for name in sorted(files, key=list(files).index) for b in _blocks((folder / name).read_text())]
    assert [(r["inputs"]["image"]["file"], r["inputs"]["caption"], r["outputs"]["raw_score"], r["outputs"]["score"])
            for r in records] == expected
    first = records[0]
    assert (first["inputs"]["image"]["file"], first["inputs"]["caption"], first["outputs"]["raw_score"],
            first["outputs"]["score"]) == FIRST_EXPERT_BLOCK
    assert first["inputs"]["image"]["sha256"] is None and first["key"] == inputs_key(first["inputs"])
    assert first["origin"] == "published:Yebin46/FLEUR@b9cd6c9/results/fleur_flickr8k_expert.txt"
    assert cache.find("fleur", "1056338697_4f7d7ce270.jpg", FIRST_EXPERT_BLOCK[1])["outputs"]["score"] == \
        FIRST_EXPERT_BLOCK[3]
    pascal = [r for r in records if r["published"]["file"] == "fleur_pascal_HC.txt"]
    assert [r["published"]["position"] for r in pascal[:4]] == [0, 1, 0, 1]
    assert [r["published"]["pair"] for r in pascal[:4]] == [0, 0, 1, 1]
    assert pascal[0]["published"]["section"] == "HC" and pascal[0]["published"]["label"] in (0, 1)


PASCAL_OK = ("image file : VOC/1.jpg\nlabel : 1\n\ncaption : a dog\nmodel score : 0.5\nour score : 0.4\n\n"
             "caption : a cat\nmodel score : 0.9\nour score : 0.8\n\ntrue count : 1\ntie count : 0")


@pytest.mark.parametrize("name, text, line, problem", [
    ("fleur_composite.txt", "image file : a.jpg\ncaption : a dog\nmodel score : 0.5\n\nimage file : b.jpg\n", 1 + 1,
     "without 'model score' and 'our score'"),
    ("fleur_composite.txt", "image file : a.jpg\ncaption : a dog\nmodel score : high\nour score : 0.4\n", 3,
     "not a finite number"),
    ("fleur_composite.txt", "caption : a dog\n", 1, "before any 'image file'"),
    ("fleur_composite.txt", "image file : a.jpg\ncaption : a dog\nscore : 0.5\n", 3, "unexpected line"),
    ("fleur_composite.txt", "image file : a.jpg\ncaption : a dog\nour score : 0.5\n", 3, "without a 'model score'"),
    ("fleur_pascal_HC.txt", PASCAL_OK.replace("label : 1\n", ""), 3, "needs a 'label'"),
    ("fleur_pascal_HC.txt", PASCAL_OK.replace("label : 1", "label : 2"), 2, "must be 0 or 1"),
    ("fleur_pascal_HC.txt", PASCAL_OK.replace("caption : a cat\nmodel score : 0.9\nour score : 0.8\n\n", ""), 1,
     "with 1 caption(s), expected 2"),
])
def test_a_malformed_block_is_one_error_naming_the_file_and_line(tmp_path, name, text, line, problem):
    (tmp_path / name).write_text(text)
    with pytest.raises(InputError) as error:
        read_published(tmp_path / name)
    message = str(error.value)
    assert f"{name}: line {line}: " in message and problem in message and "\n" not in message


def test_a_caption_repeated_with_other_scores_is_refused_naming_both_lines(tmp_path):
    (tmp_path / "fleur_pascal_HC.txt").write_text(PASCAL_OK)
    (tmp_path / "fleur_pascal_HI.txt").write_text(PASCAL_OK.replace("our score : 0.4", "our score : 0.3"))
    with pytest.raises(InputError, match=r"fleur_pascal_HI.txt: line 1: .*'a dog'.*fleur_pascal_HC.txt: line 1"):
        import_fleur(tmp_path, tmp_path / "out.jsonl")
    assert not (tmp_path / "out.jsonl").exists()


def test_import_fleur_command(tmp_path, capsys):
    (tmp_path / "fleur_pascal_MM.txt").write_text(PASCAL_OK)
    assert main(["judges", "import-fleur", str(tmp_path), "--output", str(tmp_path / "c.jsonl")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["records"] == 2 and summary["files"]["fleur_pascal_MM.txt"]["true count"] == 1
    assert "fleur_flickr8k_expert.txt" in summary["missing"]
    assert main(["judges", "import-fleur", str(tmp_path), "--output", str(tmp_path / "c.jsonl")]) == 2
    assert capsys.readouterr().err.strip().endswith("exists; imports write a new cache")
    assert main(["judges", "import-fleur", str(tmp_path / "none"), "--output", str(tmp_path / "d.jsonl")]) == 2
