"""Small NLTK data in NLTK's own formats, for offline tests (never product code paths).

    data_dir = write_tiny_nltk_data(tmp_dir)  # then NLTK_DATA=<data_dir> (or nltk.data.path.insert(0, data_dir))

writes ``<root>/nltk_data`` with the three resources that ``nltk.sent_tokenize``, ``nltk.word_tokenize``,
``nltk.pos_tag`` and ``nltk.corpus.wordnet`` load by default in NLTK >= 3.9 (written and read back by 3.9.1, 3.9.2
and 3.10.4, the same bytes from each):

- ``tokenizers/punkt_tab/english/``: a Punkt model trained by NLTK's ``PunktTrainer`` on :data:`CAPTION_PARAGRAPHS`,
  in punkt_tab's tab files (``collocations.tab``, ``sent_starters.txt``, ``abbrev_types.txt``, ``ortho_context.tab``:
  one item per line, fields tab-separated, LF, no final newline, as ``nltk.tokenize.punkt.save_punkt_params`` writes
  them and ``load_punkt_params`` reads them). It learns the abbreviations ``st``, ``dr``, ``approx`` and ``e.g``.
- ``taggers/averaged_perceptron_tagger_eng/``: an averaged perceptron trained by ``PerceptronTagger.train`` (5
  iterations, its shuffle seeded) on :data:`TAGGED_CAPTIONS` (Penn tags), as the three JSON files
  ``PerceptronTagger.load_from_json`` reads (``averaged_perceptron_tagger_eng.{weights,tagdict,classes}.json``,
  ``json.dump`` of its weights, tag dictionary and class list, as ``PerceptronTagger.save_to_json`` writes them).
- ``corpora/wordnet/``: ``wordnet="debian"``: WordNet 3.0 from Debian's packages ``wordnet-base`` (the database files)
  and ``wordnet-sense-index`` (``index.sense``, which NLTK's reader opens on load), copied unchanged, plus ``lexnames``,
  which Debian does not ship, written from its documented table (lexnames(5WN)). Debian builds the data and index
  files with ``grind`` from Princeton's lexicographer files (README.Debian, package 1:3.0-37); they were not
  byte-compared with Princeton's tarball or NLTK's zip (neither reachable here). Checked by hand when this module was
  written: NLTK loads them as version 3.0 with WordNet 3.0's counts (82,115 noun, 13,767 verb, 18,156 adjective and
  3,621 adverb synsets; 147,306 lemma names) and offsets (dog.n.01 = 2084071, which the tests check), and the files
  plus ``lexnames`` add up to 36,348,023 bytes, 5,968 short of the unzipped size of NLTK's ``wordnet`` package, which
  also holds ``LICENSE``, ``README`` and ``citation.bib``. Loading the whole database takes NLTK several seconds.
  ``wordnet="tiny"``: :data:`TINY_SYNSETS`, a dozen synsets written here in the same file formats (byte offsets, index
  files, sense index, exception lists), loaded in milliseconds, for tests that need no more words than them. NLTK's
  ``binary_search_file`` misses the first line of this short ``index.sense``, so ``lemma_from_key`` cannot find the
  alphabetically first sense key (``adult_female%1:18:00::``); ``synsets``, ``lemmas`` and ``morphy`` read the
  index files whole.

Every file is written in a fixed order (sets sorted, JSON keys sorted): the same bytes on every run, whatever
``PYTHONHASHSEED``.

The official data packages, for ``capeval fetch capture`` to pin (nltk_data's ``index.xml``, repository nltk/nltk_data,
read at commit 550b6625bcef1f2abff2ff770a5a0d272c9c6b2a; ``checksum`` is an MD5; punkt_tab and the tagger carry no
version attribute, so the checksums are the pins; each ``url`` names the moving ``gh-pages`` branch, so a pinned fetch
replaces ``gh-pages`` with that commit):

- punkt_tab: ``https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/tokenizers/punkt_tab.zip``,
  size 4319076, unzipped_size 10885330, checksum 27ea9ee08fe27fe4484e4c5585cce748, sha256_checksum
  e57f64187974277726a3417ca6f181ec5403676c717672eef6a748a7b20e0106, subdir tokenizers, unzip 1.
- averaged_perceptron_tagger_eng ("Averaged Perceptron Tagger (JSON)", MIT License):
  ``https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/taggers/averaged_perceptron_tagger_eng.zip``,
  size 1539115, unzipped_size 5703817, checksum 729e2255f83045670374180de9bdb613, sha256_checksum
  6025f530624335c67d6547d44757b357b4e79bae030a0383e9887a92c1718f0b, subdir taggers, unzip 1.
- wordnet (version 3.0, Princeton WordNet License):
  ``https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/wordnet.zip``, size 10775600,
  unzipped_size 36353991, checksum b3f38606f626e54c6f060548546f71f0, sha256_checksum
  cbda5ea6eef7f36a97a43d4a75f85e07fccbb4f23657d27b4ccbc93e2646ab59, subdir corpora, unzip 0 (the same size and MD5 at
  commit 5db857e6f7df11eabb5e5665836db9ec8df07e28, 2023-02-02).
- NLTK 3.10's ``nltk.corpus.wordnet`` loads ``omw-2.0`` lazily, for multilingual lookups only; neither it nor
  ``omw-1.4`` is needed by ``synsets``, ``lemmas`` or ``WordNetLemmatizer``, so none is written here.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Dict, List, Tuple

DEBIAN_WORDNET_DIR = Path("/usr/share/wordnet")
# the WordNet 3.0 files NLTK's WordNetCorpusReader opens, with the Debian package that installs each
DEBIAN_WORDNET_FILES: Dict[str, str] = {
    **{name: "wordnet-base" for name in (
        "adj.exc", "adv.exc", "noun.exc", "verb.exc", "cntlist.rev", "data.adj", "data.adv", "data.noun", "data.verb",
        "index.adj", "index.adv", "index.noun", "index.verb")},
    "index.sense": "wordnet-sense-index",
}
# WordNet 3.0's lexicographer files, by number (lexnames(5WN)); the syntactic category follows from the prefix
LEXICOGRAPHER_FILES = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact", "noun.attribute",
    "noun.body", "noun.cognition", "noun.communication", "noun.event", "noun.feeling", "noun.food", "noun.group",
    "noun.location", "noun.motive", "noun.object", "noun.person", "noun.phenomenon", "noun.plant", "noun.possession",
    "noun.process", "noun.quantity", "noun.relation", "noun.shape", "noun.state", "noun.substance", "noun.time",
    "verb.body", "verb.change", "verb.cognition", "verb.communication", "verb.competition", "verb.consumption",
    "verb.contact", "verb.creation", "verb.emotion", "verb.motion", "verb.perception", "verb.possession", "verb.social",
    "verb.stative", "verb.weather", "adj.ppl")
_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
_POS_FILE = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}

CAPTION_PARAGRAPHS = (
    "A brown dog runs across a green lawn in front of St. Mary's church. A man in a blue jacket throws a red ball "
    "toward the dog. Two children sit on a wooden bench and watch them. The sky above the trees is clear and bright.",
    "The photo shows a busy street near St. James park at dusk. Yellow taxis wait at a red light, e.g. a cab with its "
    "roof sign lit. A woman with an umbrella crosses the road. Shop windows glow on both sides of the street.",
    "Dr. Lee, a doctor in a white coat, stands beside a hospital bed. She holds a clipboard and a pen. A monitor on "
    "the wall shows green lines. The room has a large window with white curtains.",
    "A small kitchen with approx. two meters of counter space is shown. A silver kettle sits on the stove, e.g. next "
    "to a frying pan. Three mugs hang from hooks under a shelf. A cat sleeps on a chair by the door.",
    "Four cyclists ride along a coastal road on a sunny day. The lead rider wears a red helmet and a black jersey. The "
    "sea is calm and blue on the left. A white lighthouse stands on a rocky hill in the distance.",
    "An old car is parked outside a bakery on St. Peter's square. Its paint is pale green and slightly faded. A man "
    "carries a loaf of bread out of the shop. Pigeons gather on the cobblestones near his feet.",
    "Dr. Patel and two students look at a skeleton in a museum hall. The skeleton belongs to a large dinosaur with a "
    "long tail. Light comes from tall windows, e.g. the ones behind the display. A guard stands near the exit.",
    "A wooden table holds approx. a dozen plates of food. There are bowls of rice, a tray of grilled fish and a basket "
    "of bread. Several people sit around the table and talk. A lamp hangs low over the middle of the table.",
)

# caption-like sentences, one a line, each token word/PennTag
TAGGED_CAPTIONS = """\
A/DT brown/JJ dog/NN runs/VBZ across/IN a/DT green/JJ lawn/NN ./.
A/DT man/NN in/IN a/DT blue/JJ jacket/NN throws/VBZ a/DT red/JJ ball/NN ./.
Two/CD children/NNS sit/VBP on/IN a/DT wooden/JJ bench/NN ./.
The/DT sky/NN above/IN the/DT trees/NNS is/VBZ clear/JJ and/CC bright/JJ ./.
Yellow/JJ taxis/NNS wait/VBP at/IN a/DT red/JJ light/NN ./.
A/DT woman/NN with/IN an/DT umbrella/NN crosses/VBZ the/DT road/NN ./.
Shop/NN windows/NNS glow/VBP on/IN both/DT sides/NNS of/IN the/DT street/NN ./.
A/DT doctor/NN in/IN a/DT white/JJ coat/NN stands/VBZ beside/IN a/DT bed/NN ./.
She/PRP holds/VBZ a/DT clipboard/NN and/CC a/DT pen/NN ./.
A/DT monitor/NN on/IN the/DT wall/NN shows/VBZ green/JJ lines/NNS ./.
The/DT room/NN has/VBZ a/DT large/JJ window/NN with/IN white/JJ curtains/NNS ./.
A/DT silver/JJ kettle/NN sits/VBZ on/IN the/DT stove/NN ./.
Three/CD mugs/NNS hang/VBP from/IN hooks/NNS under/IN a/DT shelf/NN ./.
A/DT cat/NN sleeps/VBZ on/IN a/DT chair/NN by/IN the/DT door/NN ./.
Four/CD cyclists/NNS ride/VBP along/IN a/DT coastal/JJ road/NN ./.
The/DT lead/JJ rider/NN wears/VBZ a/DT red/JJ helmet/NN and/CC a/DT black/JJ jersey/NN ./.
The/DT sea/NN is/VBZ calm/JJ and/CC blue/JJ ./.
A/DT white/JJ lighthouse/NN stands/VBZ on/IN a/DT rocky/JJ hill/NN ./.
An/DT old/JJ car/NN is/VBZ parked/VBN outside/IN a/DT bakery/NN ./.
Its/PRP$ paint/NN is/VBZ pale/JJ green/JJ ./.
A/DT man/NN carries/VBZ a/DT loaf/NN of/IN bread/NN out/IN of/IN the/DT shop/NN ./.
Pigeons/NNS gather/VBP on/IN the/DT cobblestones/NNS near/IN his/PRP$ feet/NNS ./.
Two/CD students/NNS look/VBP at/IN a/DT skeleton/NN in/IN a/DT museum/NN hall/NN ./.
The/DT skeleton/NN belongs/VBZ to/TO a/DT large/JJ dinosaur/NN with/IN a/DT long/JJ tail/NN ./.
Light/NN comes/VBZ from/IN tall/JJ windows/NNS ./.
A/DT guard/NN stands/VBZ near/IN the/DT exit/NN ./.
A/DT wooden/JJ table/NN holds/VBZ a/DT dozen/NN plates/NNS of/IN food/NN ./.
There/EX are/VBP bowls/NNS of/IN rice/NN and/CC a/DT basket/NN of/IN bread/NN ./.
Several/JJ people/NNS sit/VBP around/IN the/DT table/NN and/CC talk/VBP ./.
A/DT lamp/NN hangs/VBZ over/IN the/DT middle/NN of/IN the/DT table/NN ./.
A/DT girl/NN in/IN a/DT yellow/JJ dress/NN holds/VBZ a/DT small/JJ puppy/NN ./.
Two/CD dogs/NNS play/VBP with/IN a/DT stick/NN on/IN the/DT beach/NN ./.
A/DT boy/NN rides/VBZ a/DT bicycle/NN down/IN a/DT narrow/JJ street/NN ./.
The/DT horse/NN grazes/VBZ in/IN a/DT field/NN of/IN tall/JJ grass/NN ./.
Three/CD birds/NNS sit/VBP on/IN a/DT wire/NN above/IN the/DT road/NN ./.
A/DT red/JJ bus/NN drives/VBZ past/IN a/DT row/NN of/IN houses/NNS ./.
The/DT cars/NNS are/VBP parked/VBN along/IN the/DT curb/NN ./.
A/DT woman/NN is/VBZ reading/VBG a/DT book/NN under/IN a/DT tree/NN ./.
The/DT man/NN is/VBZ holding/VBG a/DT cup/NN of/IN coffee/NN ./.
Snow/NN covers/VBZ the/DT roofs/NNS of/IN the/DT small/JJ houses/NNS ./.
"""
TAGGER_SEED = 0
TAGGER_ITERATIONS = 5

# the tiny WordNet: (name, lexicographer file, lemmas, hypernym names, gloss); names follow NLTK's lemma.pos.nn
TINY_SYNSETS: Tuple[Tuple[str, str, Tuple[str, ...], Tuple[str, ...], str], ...] = (
    ("entity.n.01", "noun.Tops", ("entity",), (), "whatever exists"),
    ("animal.n.01", "noun.Tops", ("animal", "beast"), ("entity.n.01",), "a living creature that moves"),
    ("dog.n.01", "noun.animal", ("dog", "domestic_dog"), ("animal.n.01",), "a domesticated canine kept as a pet"),
    ("person.n.01", "noun.Tops", ("person", "individual", "someone"), ("entity.n.01",), "a human being"),
    ("man.n.01", "noun.person", ("man", "adult_male"), ("person.n.01",), "an adult male person"),
    ("woman.n.01", "noun.person", ("woman", "adult_female"), ("person.n.01",), "an adult female person"),
    ("child.n.01", "noun.person", ("child", "kid"), ("person.n.01",), "a young person"),
    ("vehicle.n.01", "noun.artifact", ("vehicle",), ("entity.n.01",), "a conveyance that carries people or goods"),
    ("car.n.01", "noun.artifact", ("car", "auto", "automobile", "machine", "motorcar"), ("vehicle.n.01",),
     "a motor vehicle with four wheels"),
    ("red.a.01", "adj.all", ("red", "reddish"), (), "of the colour of blood"),
    ("small.a.01", "adj.all", ("small", "little"), (), "limited in size"),
    ("wooden.a.01", "adj.all", ("wooden",), (), "made of wood"),
)
# irregular forms for morphy, by part of speech (the <pos>.exc lists)
TINY_EXCEPTIONS = {"n": (("children", "child"), ("men", "man"), ("women", "woman")), "a": (("littler", "little"),),
                   "v": (), "r": ()}
_TINY_HEADER = ("  1 A few synsets written by capeval.testing in the file formats of the WordNet 3.0 database.  \n"
                "  2 Not WordNet: for tests only.  \n")


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))


# --- Punkt -----------------------------------------------------------------------------------------------------------


def trained_punkt_params():
    """The ``PunktParameters`` NLTK's ``PunktTrainer`` learns from :data:`CAPTION_PARAGRAPHS`."""
    from nltk.tokenize.punkt import PunktTrainer

    trainer = PunktTrainer()
    trainer.train("\n\n".join(CAPTION_PARAGRAPHS), finalize=True)
    return trainer.get_params()


def write_punkt_tab(params, out_dir: Path) -> None:
    """``params`` as punkt_tab's four files in ``out_dir``, each item on its own line, sorted."""
    _write_text(out_dir / "collocations.tab", "\n".join("\t".join(pair) for pair in sorted(params.collocations)))
    _write_text(out_dir / "sent_starters.txt", "\n".join(sorted(params.sent_starters)))
    _write_text(out_dir / "abbrev_types.txt", "\n".join(sorted(params.abbrev_types)))
    _write_text(out_dir / "ortho_context.tab",
                "\n".join(f"{word}\t{flags}" for word, flags in sorted(params.ortho_context.items())))


# --- averaged perceptron tagger --------------------------------------------------------------------------------------


def tagged_captions() -> List[List[Tuple[str, str]]]:
    """:data:`TAGGED_CAPTIONS` as NLTK's tagged sentences: lists of (word, tag)."""
    return [[tuple(token.rsplit("/", 1)) for token in line.split()] for line in TAGGED_CAPTIONS.splitlines()]


def trained_tagger():
    """A ``PerceptronTagger`` trained by its own ``train`` on :func:`tagged_captions`; the shuffle between iterations
    draws from the global ``random``, seeded with :data:`TAGGER_SEED` and restored afterwards."""
    from nltk.tag.perceptron import PerceptronTagger

    tagger = PerceptronTagger(load=False)
    state = random.getstate()
    random.seed(TAGGER_SEED)
    try:
        tagger.train(tagged_captions(), nr_iter=TAGGER_ITERATIONS)
    finally:
        random.setstate(state)
    return tagger


def write_tagger_json(tagger, out_dir: Path) -> None:
    """The tagger's weights, tag dictionary and classes as the JSON files ``PerceptronTagger.load_from_json("eng")``
    reads, keys and classes sorted."""
    weights, tagdict, classes = tagger.encode_json_obj()
    for obj, part in ((weights, "weights"), (tagdict, "tagdict"), (sorted(classes), "classes")):
        _write_text(out_dir / f"averaged_perceptron_tagger_eng.{part}.json", json.dumps(obj, sort_keys=True))


# --- WordNet ---------------------------------------------------------------------------------------------------------


def lexnames_text() -> str:
    """WordNet 3.0's ``lexnames``: file number, name and syntactic category, tab-separated, one file a line."""
    return "".join(f"{number:02d}\t{name}\t{_CATEGORY[name.split('.')[0]]}\n"
                   for number, name in enumerate(LEXICOGRAPHER_FILES))


def copy_debian_wordnet(out_dir: Path, debian_dir: Path = DEBIAN_WORDNET_DIR) -> None:
    """WordNet 3.0 from Debian's packages into ``out_dir``, with :func:`lexnames_text`; a missing file is a
    one-line ``FileNotFoundError`` naming the package to install."""
    missing = [name for name in DEBIAN_WORDNET_FILES if not (Path(debian_dir) / name).is_file()]
    if missing:
        packages = sorted({DEBIAN_WORDNET_FILES[name] for name in missing})
        raise FileNotFoundError(f"WordNet 3.0 database files {missing} are not in {debian_dir}: install Debian's "
                                f"{' and '.join(packages)} (apt-get install -y {' '.join(packages)})")
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in DEBIAN_WORDNET_FILES:
        shutil.copyfile(Path(debian_dir) / name, out_dir / name)
    _write_text(out_dir / "lexnames", lexnames_text())


def _synset_layout(pos: str) -> Dict[str, Tuple[int, str, List[str]]]:
    """Each of :data:`TINY_SYNSETS` of ``pos``: its byte offset, its data-file line and its pointer symbols. Offsets
    are 8 digits wide, so a line's length does not depend on them: the lines are laid out with zeros first."""
    table = {name: (lexfile, lemmas, gloss) for name, lexfile, lemmas, _, gloss in TINY_SYNSETS
             if name.split(".")[1] == pos}
    pointers: Dict[str, List[Tuple[str, str]]] = {name: [] for name in table}
    for name, _, _, hypernyms, _ in TINY_SYNSETS:
        for hypernym in hypernyms if name in table else ():
            pointers[name].append(("@", hypernym))
            pointers[hypernym].append(("~", name))

    def line(name: str, offsets: Dict[str, int]) -> str:
        lexfile, lemmas, gloss = table[name]
        words = " ".join(f"{lemma} 0" for lemma in lemmas)
        links = "".join(f" {symbol} {offsets.get(target, 0):08d} {pos} 0000" for symbol, target in pointers[name])
        return (f"{offsets.get(name, 0):08d} {LEXICOGRAPHER_FILES.index(lexfile):02d} {pos} {len(lemmas):02x} {words} "
                f"{len(pointers[name]):03d}{links} | {gloss}  \n")

    offsets, position = {}, len(_TINY_HEADER.encode())
    for name in table:
        offsets[name] = position
        position += len(line(name, {}).encode())
    return {name: (offsets[name], line(name, offsets), [symbol for symbol, _ in pointers[name]]) for name in table}


def write_tiny_wordnet(out_dir: Path) -> None:
    """:data:`TINY_SYNSETS` and :data:`TINY_EXCEPTIONS` in the WordNet database formats (wndb(5WN), senseidx(5WN)):
    data and index files per part of speech, ``index.sense``, exception lists, ``lexnames`` and an empty
    ``cntlist.rev`` (no sense counts). A lemma has one sense per synset of a part of speech, numbered in table order,
    all with lexicographer id 0 (so a lemma is in at most one synset of a lexicographer file)."""
    lexfiles = {name: lexfile for name, lexfile, *_ in TINY_SYNSETS}
    senses: List[str] = []
    for pos, file_pos in _POS_FILE.items():
        layout = _synset_layout(pos)
        _write_text(out_dir / f"data.{file_pos}", _TINY_HEADER + "".join(text for _, text, _ in layout.values()))
        by_lemma: Dict[str, List[str]] = {}
        for name, _, lemmas, _, _ in TINY_SYNSETS:
            for lemma in lemmas if name in layout else ():
                by_lemma.setdefault(lemma.lower(), []).append(name)
        index = []
        for lemma, names in sorted(by_lemma.items()):
            symbols = sorted({symbol for name in names for symbol in layout[name][2]})
            offsets = " ".join(f"{layout[name][0]:08d}" for name in names)
            index.append(f"{lemma} {pos} {len(names)} {len(symbols)} {''.join(s + ' ' for s in symbols)}"
                         f"{len(names)} 0 {offsets}  \n")
            ss_type = {"n": 1, "v": 2, "a": 3, "r": 4}[pos]
            for number, name in enumerate(names, start=1):
                key = f"{lemma}%{ss_type}:{LEXICOGRAPHER_FILES.index(lexfiles[name]):02d}:00::"
                senses.append(f"{key} {layout[name][0]:08d} {number} 0\n")
        _write_text(out_dir / f"index.{file_pos}", _TINY_HEADER + "".join(index))
        _write_text(out_dir / f"{file_pos}.exc", "".join(f"{form} {base}\n" for form, base in TINY_EXCEPTIONS[pos]))
    _write_text(out_dir / "index.sense", "".join(sorted(senses)))
    _write_text(out_dir / "cntlist.rev", "")
    _write_text(out_dir / "lexnames", lexnames_text())


# --- all of it -------------------------------------------------------------------------------------------------------


def write_tiny_nltk_data(root, *, wordnet: str = "debian", debian_wordnet_dir: Path = DEBIAN_WORDNET_DIR) -> Path:
    """Write ``<root>/nltk_data`` (punkt_tab english, averaged_perceptron_tagger_eng, wordnet) and return it: the
    folder to put in ``NLTK_DATA`` or first in ``nltk.data.path``. ``wordnet``: ``"debian"`` (WordNet 3.0 from
    ``debian_wordnet_dir``) or ``"tiny"`` (:data:`TINY_SYNSETS`)."""
    if wordnet not in ("debian", "tiny"):
        raise ValueError(f"wordnet must be 'debian' or 'tiny', not {wordnet!r}")
    data_dir = Path(root) / "nltk_data"
    wordnet_dir = data_dir / "corpora" / "wordnet"
    if wordnet == "debian":
        copy_debian_wordnet(wordnet_dir, debian_wordnet_dir)
    else:
        write_tiny_wordnet(wordnet_dir)
    write_punkt_tab(trained_punkt_params(), data_dir / "tokenizers" / "punkt_tab" / "english")
    write_tagger_json(trained_tagger(), data_dir / "taggers" / "averaged_perceptron_tagger_eng")
    return data_dir
