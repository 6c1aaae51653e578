"""Score-key metadata (capeval.core.keys): checked when declared, looked up on a scorer class or instance, a clear
error for an undeclared key, and the COCOEvalCap name defaulting to the key."""

import pytest

from capeval.core.keys import ScoreKey, UndeclaredKeyError, coco_method, score_key
from capeval.core.scoring import Scorer


class Lengths(Scorer):
    name, images, references = "lengths", "unused", "unused"
    key_metadata = {"lengths": ScoreKey("Length", higher_is_better=False, coco_method="Len"),
                    "chars": ScoreKey("Chars")}

    def _score(self, inputs):
        return {}


def test_lookup_on_the_class_and_the_instance():
    assert score_key(Lengths, "lengths") == ScoreKey("Length", 1.0, False, "Len")
    assert score_key(Lengths(), "chars").report_fields() == {"title": "Chars", "scale": 1.0, "higher_is_better": True}
    assert coco_method(Lengths, "lengths") == "Len" and coco_method(Lengths(), "chars") == "chars"


def test_an_undeclared_key_is_a_clear_error():
    with pytest.raises(UndeclaredKeyError, match=r"test_keys\.Lengths declares no metadata for score key 'words' "
                                                 r"\(it declares \['chars', 'lengths'\]\): add 'words'"):
        score_key(Lengths, "words")
    with pytest.raises(UndeclaredKeyError, match=r"declares no metadata for score key 'x' \(it declares \[\]\)"):
        coco_method(type("Bare", (Lengths,), {"key_metadata": {}}), "x")


@pytest.mark.parametrize("arguments, problem", [
    (("",), "title must be a non-empty string"), (("T", 0.0), "scale must be a finite positive number"),
    (("T", float("nan")), "scale must be a finite positive number"), (("T", True), "scale must be a finite"),
    (("T", 1.0, "yes"), "higher_is_better must be a bool"), (("T", 1.0, True, ""), "coco_method must be")])
def test_metadata_is_checked_when_declared(arguments, problem):
    with pytest.raises(ValueError, match=problem):
        ScoreKey(*arguments)
