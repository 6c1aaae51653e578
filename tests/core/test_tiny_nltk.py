"""capeval.testing.tiny_nltk: NLTK's own loaders read the written data, unmodified NLTK calls find it through
NLTK_DATA, the bytes are the same on every run, and a missing Debian WordNet is one line naming the package."""

import gzip
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import nltk
import pytest

from capeval.testing import tiny_nltk

from memo import memoised

PARAGRAPH = "A man in a red jacket walks past St. Anne's church. Two dogs run beside him. The sky is clear and blue."
SENTENCES = ["A man in a red jacket walks past St. Anne's church.", "Two dogs run beside him.",
             "The sky is clear and blue."]
# captions not in the tagger's training sentences: their nouns, and some other words with their Penn tags
CAPTIONS = {"A black dog sits on the grass near two children.": (("dog", "grass", "children"),
                                                                  {"A": "DT", "black": "JJ", "sits": "VBZ"}),
            "Two women walk past a bakery with bread in their baskets.": (("women", "bakery", "bread", "baskets"),
                                                                           {"Two": "CD", "a": "DT", "with": "IN"})}

# unmodified NLTK calls, in a fresh interpreter whose only configuration is NLTK_DATA
UNMODIFIED_CALLS = """
import json, sys
import nltk
from nltk.corpus import wordnet
from nltk.stem import WordNetLemmatizer

paragraph, captions = json.loads(sys.argv[1])
print(json.dumps({
    "found": [str(nltk.data.find(name)) for name in
              ("tokenizers/punkt_tab/english/", "taggers/averaged_perceptron_tagger_eng/", "corpora/wordnet/")],
    "sentences": nltk.sent_tokenize(paragraph),
    "tags": [nltk.pos_tag(nltk.word_tokenize(caption)) for caption in captions],
    "dog": [synset.name() for synset in wordnet.synsets("dog")],
    "dog_offset": wordnet.synset("dog.n.01").offset(),
    "car_lemmas": wordnet.synsets("car")[0].lemma_names(),
    "dogs": WordNetLemmatizer().lemmatize("dogs", "n"),
    "children": WordNetLemmatizer().lemmatize("children", "n"),
    "version": wordnet.get_version(),
}))
"""


def files_of(folder: Path):
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in sorted(folder.rglob("*"))
            if path.is_file()}


@pytest.fixture(scope="module")
def written_folders(tmp_path_factory):
    """The nltk_data folder written with each wordnet choice, once per module (on first use)."""
    return memoised(lambda choice: tiny_nltk.write_tiny_nltk_data(tmp_path_factory.mktemp(f"nltk-{choice}"),
                                                                   wordnet=choice))


@pytest.fixture(scope="module", params=["debian", "tiny"])
def written(request, written_folders):
    """(wordnet choice, the written nltk_data folder)."""
    return request.param, written_folders(request.param)


@pytest.fixture(scope="module")
def tiny_data_dir(written_folders):
    return written_folders("tiny")


@pytest.fixture
def only_data_dir(monkeypatch, tiny_data_dir):
    """nltk.data.path reset to the written folder alone."""
    monkeypatch.setattr(nltk.data, "path", [str(tiny_data_dir)])
    return tiny_data_dir


def fresh_wordnet(data_dir: Path):
    from nltk.corpus.reader import WordNetCorpusReader

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no multilingual reader: NLTK warns that those functions are unavailable
        return WordNetCorpusReader(nltk.data.find("corpora/wordnet/"), None)


def test_unmodified_nltk_calls_find_the_written_data_through_nltk_data(written, tmp_path):
    wordnet_choice, data_dir = written
    env = {**os.environ, "NLTK_DATA": str(data_dir), "HOME": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", UNMODIFIED_CALLS, json.dumps([PARAGRAPH, list(CAPTIONS)])],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert all(Path(found).is_relative_to(data_dir) for found in out["found"]), out["found"]
    assert out["sentences"] == SENTENCES
    for tagged, (nouns, others) in zip(out["tags"], CAPTIONS.values()):
        tags = dict(tagged)
        assert all(tags[noun] in ("NN", "NNS") for noun in nouns), tagged
        assert {word: tags[word] for word in others} == others
    assert "dog.n.01" in out["dog"]
    assert "automobile" in out["car_lemmas"]
    assert out["dogs"] == "dog" and out["children"] == "child"
    if wordnet_choice == "debian":
        assert out["version"] == "3.0" and out["dog_offset"] == 2084071  # WordNet 3.0's dog.n.01


def test_punkt_tab_loads_as_the_trained_parameters_and_as_nltks_own_writer_writes_it(only_data_dir, tmp_path):
    from nltk.tokenize.punkt import PunktSentenceTokenizer, PunktTokenizer, load_punkt_params, save_punkt_params

    trained = tiny_nltk.trained_punkt_params()
    model_dir = only_data_dir / "tokenizers" / "punkt_tab" / "english"
    loaded = load_punkt_params(nltk.data.find("tokenizers/punkt_tab/english/"))
    assert loaded.abbrev_types == trained.abbrev_types == {"st", "dr", "approx", "e.g"}
    assert set(loaded.collocations) == trained.collocations
    assert loaded.sent_starters == trained.sent_starters
    assert dict(loaded.ortho_context) == dict(trained.ortho_context) and len(trained.ortho_context) > 100
    assert PunktTokenizer("english").tokenize(PARAGRAPH) == SENTENCES
    assert len(PunktSentenceTokenizer().tokenize(PARAGRAPH)) == 4  # untrained: "St." ends a sentence

    nltk.data.path.append(str(tmp_path))  # NLTK's writer stays inside its data roots
    nltk_dir = Path(save_punkt_params(trained, dir=str(tmp_path / "saved-by-nltk")))
    ours, theirs = files_of(model_dir), files_of(nltk_dir)
    assert sorted(ours) == sorted(theirs) == ["abbrev_types.txt", "collocations.tab", "ortho_context.tab",
                                              "sent_starters.txt"]
    for name in ours:  # the same lines, ours sorted
        assert sorted(ours[name].split(b"\n")) == sorted(theirs[name].split(b"\n")), name
        assert ours[name].split(b"\n") == sorted(ours[name].split(b"\n")), name


def test_tagger_json_loads_as_the_trained_tagger_and_as_nltks_own_writer_writes_it(only_data_dir, tmp_path):
    from nltk.tag.perceptron import PerceptronTagger

    trained = tiny_nltk.trained_tagger()
    loaded = PerceptronTagger(lang="eng")  # finds taggers/averaged_perceptron_tagger_eng/ on nltk.data.path
    assert loaded.model.weights == trained.model.weights and len(trained.model.weights) > 500
    assert loaded.tagdict == trained.tagdict and loaded.classes == trained.classes
    tokens = [token for caption in CAPTIONS for token in caption.replace(".", " .").split()]
    assert loaded.tag(tokens) == trained.tag(tokens)

    nltk.data.path.append(str(tmp_path))
    trained.save_to_json(lang="eng", loc=str(tmp_path / "saved-by-nltk"))
    ours = files_of(only_data_dir / "taggers" / "averaged_perceptron_tagger_eng")
    theirs = files_of(tmp_path / "saved-by-nltk")
    assert sorted(ours) == sorted(theirs)
    for name in ours:
        ours_json, theirs_json = json.loads(ours[name]), json.loads(theirs[name])
        if name.endswith(".classes.json"):
            assert ours_json == sorted(theirs_json)
        else:
            assert ours_json == theirs_json


def test_tagger_training_leaves_the_global_random_state_alone():
    import random

    random.seed(123)
    expected = random.random()
    random.seed(123)
    tiny_nltk.trained_tagger()
    assert random.random() == expected


def test_tiny_wordnet_reads_back_as_its_table(only_data_dir):
    wordnet = fresh_wordnet(only_data_dir)
    for name, lexfile, lemmas, hypernyms, gloss in tiny_nltk.TINY_SYNSETS:
        synset = wordnet.synset(name)
        assert synset.lemma_names() == list(lemmas) and synset.lexname() == lexfile
        assert synset.definition() == gloss
        assert sorted(hyper.name() for hyper in synset.hypernyms()) == sorted(hypernyms)
    # index.sense: each lemma under the sense key NLTK derives for it, with its synset's offset, in sorted order
    lines = (only_data_dir / "corpora" / "wordnet" / "index.sense").read_text().splitlines()
    assert lines == sorted(lines)
    senses = {key: int(offset) for key, offset, _, _ in map(str.split, lines)}
    assert senses == {lemma.key(): synset.offset() for name, *_ in tiny_nltk.TINY_SYNSETS
                      for synset in [wordnet.synset(name)] for lemma in synset.lemmas()}
    assert len(senses) == len(lines) == sum(len(lemmas) for _, _, lemmas, _, _ in tiny_nltk.TINY_SYNSETS)
    assert wordnet.lemma_from_key("automobile%1:06:00::") == wordnet.lemma("car.n.01.automobile")
    assert sorted(synset.name() for synset in wordnet.synset("person.n.01").hyponyms()) == [
        "child.n.01", "man.n.01", "woman.n.01"]
    assert [wordnet.morphy(form, pos) for form, pos in [("dogs", "n"), ("children", "n"), ("women", "n"),
                                                        ("littler", "a"), ("smaller", "a")]] == [
        "dog", "child", "woman", "little", "small"]


def test_debian_wordnet_is_copied_unchanged_with_the_documented_lexnames(tmp_path):
    out = tmp_path / "wordnet"
    tiny_nltk.copy_debian_wordnet(out)
    for name in tiny_nltk.DEBIAN_WORDNET_FILES:
        assert (out / name).read_bytes() == (tiny_nltk.DEBIAN_WORDNET_DIR / name).read_bytes(), name
    # lexnames(5WN), installed by wordnet-base: "File Number  Name  Contents" rows of its table
    manual = gzip.decompress(Path("/usr/share/man/man5/lexnames.5WN.gz").read_bytes()).decode()
    rows = re.findall(r"^(\d\d)\t(\S+)\s*\t", manual, flags=re.M)
    category = {"noun": "1", "verb": "2", "adj": "3", "adv": "4"}
    assert len(rows) == 45
    assert (out / "lexnames").read_text() == "".join(f"{number}\t{name}\t{category[name.split('.')[0]]}\n"
                                                     for number, name in rows)


def test_missing_debian_wordnet_is_one_line_naming_the_package(tmp_path):
    with pytest.raises(FileNotFoundError) as missing_all:
        tiny_nltk.write_tiny_nltk_data(tmp_path / "a", debian_wordnet_dir=tmp_path / "absent")
    message = str(missing_all.value)
    assert "\n" not in message and "wordnet-base" in message and "wordnet-sense-index" in message
    partial = tmp_path / "no-sense-index"
    partial.mkdir()
    for name, package in tiny_nltk.DEBIAN_WORDNET_FILES.items():
        if package == "wordnet-base":
            (partial / name).write_text("")
    with pytest.raises(FileNotFoundError, match=r"\['index.sense'\].*install Debian's wordnet-sense-index \(apt"):
        tiny_nltk.copy_debian_wordnet(tmp_path / "b", partial)
    assert not (tmp_path / "b").exists()


def test_written_bytes_do_not_depend_on_the_run_or_the_hash_seed(tmp_path, tiny_data_dir):
    write = "import sys; from capeval.testing.tiny_nltk import write_tiny_nltk_data; " \
            "write_tiny_nltk_data(sys.argv[1], wordnet='tiny')"
    runs = [subprocess.Popen([sys.executable, "-c", write, str(tmp_path / seed)],
                             env={**os.environ, "PYTHONHASHSEED": seed}) for seed in ("1", "2")]
    assert [run.wait(timeout=300) for run in runs] == [0, 0]
    first, second = files_of(tmp_path / "1" / "nltk_data"), files_of(tmp_path / "2" / "nltk_data")
    assert first == second == files_of(tiny_data_dir)
    assert len(first) == 22


def test_unknown_wordnet_choice_is_refused(tmp_path):
    with pytest.raises(ValueError, match="wordnet must be 'debian' or 'tiny'"):
        tiny_nltk.write_tiny_nltk_data(tmp_path, wordnet="princeton")
    assert not (tmp_path / "nltk_data").exists()
