"""The pure-Python PTB tokenizer (``capeval.text.ptb.tokenize_block``) against pycocoevalcap's Java one
(``stanford-corenlp-3.4.1.jar`` through ``capeval.text.coco_jars.ptb_tokenize_blocks``), text by text, on the same blocks
(one file and lexer each, as in production): every caption, reference and generated description in ``../shared/data``,
a generated adversarial corpus of every character class the lexer treats specially (each text alone, each class as
one block in both orders, and blocks whose lines act on each other), and seeded random soups of those classes. Each
corpus runs in one JVM."""

import importlib.util
import random
import re
import subprocess
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Sequence

import pytest

from capeval import InputError
from capeval.text import coco, coco_jars, ptb

REPO = Path(__file__).resolve().parents[2]


def _verify_script():
    """``benchmarks/verify_ptb.py``: its reader of every text in ``../shared/data`` and its block size."""
    spec = importlib.util.spec_from_file_location("verify_ptb", REPO / "benchmarks" / "verify_ptb.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------------------------------------
# The adversarial corpus: each class the lexer treats specially, with the texts that exercise it
# ---------------------------------------------------------------------------------------------------------------
ADVERSARIAL: Dict[str, List[str]] = {
    "quotes": [
        'he said "hello" to her', '"quoted"', '" spaced "', '""', '"""', 'a "b" c "d', "'single' quotes", "''double''",
        "``latex''", "`tick", "```", "''''", "‘curly single’", "“curly double”", "«guillemets»", "« spaced »",
        "„low double“", "‚low single‘", "‹angle›", "‛reversed", "‟reversed double", "“”", "‘’", "’’", "‘‘", "«»",
        "»«", "„„", "‚‚", "‟‟", "\x91cp1252\x92 \x93quotes\x94", "&quot;entity&quot;", "&QUOT;x&quot;", "&Quot;",
        "&apos;x", "x&apos;s", "x&APOS;s &Apos;", "n&apos;t don&APOS;t", "he said,'no'", "'tis 'Tis",
        "\"A\" '1' `$` \"$5\"", "'a b' 'ab' 'a", "quote at end '", 'x"', '"x', "“a”b‘c’d", "'''a'''", '"\'"', "'\"'"],
    "apostrophes and contractions": [
        "can't won't don't shan't ain't isn't", "CAN'T Won't DON'T", "I'm you're we've they'll he'd she's it's",
        "I'M YOU'RE WE'VE THEY'LL HE'D SHE'S", "can’t don’t it’s we’re", "can‘t don`t it`s", "don&apos;t it&apos;s",
        "'90s '80s '20s '10s '00s '85 '99 '05", "o'clock O'Clock rock'n'roll rock 'n' roll rock 'n roll",
        "y'all Y'all y'know ya'll", "'em 'cause 'til 'till 'tis 'twas", "ma'am Hawai'i O'Neil D'Angelo O'Reilly",
        "l'homme d'artagnan L'Oreal j'accuse qu'il", "Dunkin' somethin' ol' nothin' goin'", "cont'd cont'd. nor'easter",
        "c'mon e'er s'mores ev'ry li'l nat'l Cap'n c'est", "O'o o'o James' boss' dogs' the boys'",
        "man's men's children's dog's", "it'sa it'sx he'dx I'mo", "n't 's 're 'll 've 'd 'm", "'S 'RE 'LL",
        "x'y x'yz xy'z b'day", "Joe'S Joe'Sx I'M'S", "don't's can't've y'all'd", "'", "''", "'s", "'s'", "s'"],
    "split words": [
        "cannot Cannot CANNOT cannotx xcannot", "gonna gotta wanna lemme gimme", "Gonna GOTTA WannA",
        "gonna's cannot's", "I cannot go, I gotta go.", "'tis 'twas 'Tis 'TWAS 'tiss 'twasn't", "cannot.", "wanna,"],
    "hyphens and dashes": [
        "well-known t-shirt x-ray e-mail 3-D 4-H", "a-b-c-d-e-f", "co-op re-enter pre-1990", "-leading trailing-",
        "a - b -- c --- d ---- e ----- f ------ g", "-", "--", "---", "----", "-----", "a--b", "a---b", "a----b",
        "em—dash en–dash bar―x", "— – ―", "\x96 \x97", "&mdash; &ndash; &MD; &Mdash;", "‐hyphen ‑nonbreaking ‒figure",
        "a‐b a‑b a_b a֊b", "minus −5", "pro- anti- pro-choice anti-war pro-5", "x-U.S. non-U.S. Sino-U.S. U.S.-U.K.",
        "a-b.c-d", "1-2 1-a a-1", "soft\xadhyphen \xad x\xad"],
    "slashes": [
        "his/her and/or a/b a/b/c a/b/c/d", "1/2 10/20 1/2/3", "http/1.1", "/ // /// a/ /a", "a\\/b a\\b \\",
        "km/h m/s 24/7 9/11", "mid-late/early-x", "left/right-hand", "x/ y /z"],
    "numbers": [
        "1 12 123 1234 12345 123456", "3.14 .5 5. 0.5 1.2.3", "1,000 1,000,000 1,00 ,5", "10:30 1:2:3 12:00pm",
        "-5 +5 -5.5 +1,000 --5 +-5", "1st 2nd 3rd 4th 1950s 80s", "٣ ١٢٣ ١٫٥ ١٬٠٠٠", "߁߂ ०१२ ๑๒", "１２３",
        "²³ x² H₂O ⁴⁵ ₁₂ ⁺² ₋₁", "1\xad000", "12 345", "12 345 6789", "1 2 3 4 5"],
    "fractions": [
        "1/2 3/4 1/3", "1 1/2 2 3/4 2-1/2 2\xa01/2", "½ ¼ ¾ ⅓ ⅔ ⅕ ⅛ ⅞", "1½ x½", "1⁄2 3⁄4", "12345/6 1/23456",
        "1\\/2"],
    "phone numbers and dates": [
        "(555) 123-4567", "555-1234 555 1234 555-123-4567", "123 456 7890", "1.555.123.4567 555.123.4567",
        "+1 555 123 4567 ++44 20 1234 5678", "(55)1234-5678", "12/25/2000 1-2-99 1/2/2023 2000-01-02"],
    "abbreviations and acronyms": [
        "U.S. U.S U.K. U.S.A. D.C. T.V. G.I. e.g. i.e. a.k.a. a.m. p.m. A.M. P.M.", "Mr. Mrs. Ms. Dr. St. Mt. Ave.",
        "Mr Smith Dr Who", "Jan. Feb. Sept. Dec. Mon. Tues. Fri.", "Calif. Mass. mass. Wash. wash. Pa. pa. Del. del.",
        "Inc. Co. Corp. Ltd. Bros. Jr. Sr.", "Pty. Ltd. Pte. Pty Co. Ltd co. lim", "etc. etc etc.. etc.,",
        "Ph.D. Ed.D. Ph.D Ph. D.", "fig. 3 fig.3 Fig.  3 no. 5 No.5 ca. 1990 pp. 12 op. 3 art. 5", "fig. x no. x",
        "vs. vs cf. cf Alex. Wm. Jos.", "A. B. C. I. x. Z.", "plan B.", "U.S.", "etc.", "Mr.", "e.g.",
        "a.b.c.d.e.f.", "U.S. The dog", "U.S.  The dog", "A. The dog", "A.  He said", "U.S. Mr. Smith ",
        "the U.S. economy", "in the U.S.", "Miss. x", "Miss x", "etc.x y", "etc.xy", "etc.x", "St.Paul", "Mt.Fuji"],
    "ellipses and sentence punctuation": [
        "wait... what", "... .... ..... ...... .......", ". . . . . . .", ". .", "…", "a…b", "x.. y",
        "end. Next", "end.Next", "? ! ?! !? ?? !!! ?!?!", "¿Qué? ¡Hola!", ", ; : ;; :: ,,", "a,b a;b a:b",
        "x., y.; z.: w.,", "x-y., xy-z.: AT&T.,", "dogs. , cats. ;", "。、", "٫ ، ؛ ؟ ۔", "· ‧ • ‣"],
    "urls and emails": [
        "http://www.example.com/path?a=b&c=d.", "https://x.org/a_(b)", "HTTP://X.COM", "http://", "http://a",
        "www.google.com www.bbc.co.uk", "google.com abc.org/path net.net x.edu", "Abc.com A1.com/x a_b.com",
        "me@example.com <me@x.org> &lt;a@b.c&gt;", "a.b@c.d.e first.last@sub.domain.org.", "@user @user_1 @",
        "#hashtag #1 # ## #tag#tag", "photo.jpg x.html. y.JPG file.tar.gz a.b.c.pdf,", "readme.txt!", "img.png?",
        "ftp://x.y mailto:a@b.c", "http://x.com/😀 http://😀"],
    "emoticons": [
        ":) :( :-) :-( ;) ;-) :D :P :p :O :/ :| :] :[ :{ :@ :\\", "=) =( =D", ">:( <:) >:-)", ":)x :)1 :)!",
        ":o) :*) :') :oO", "<3 </3 <33", "^_^ -_- x_x o_O '_'", "(^_^) (-.-) (^-^) (^_-)", "^.[^x=~<>]",
        ":)", "x :)", "8) xD XD"],
    "brackets": [
        "(a) [b] {c}", "((nested)) [[x]] {{y}}", "(", ")", "[", "]", "{", "}", "-LRB- -RRB- -LCB- -RCB- -LSB- -RSB-",
        "-lrb- -rrb-", "f(x) a[1] {a:b}", "(555)", "( 555 )", ")(", "][", "}{"],
    "entities and markup": [
        "AT&T at&t A&M S&P S&P-500 S&Ls R&D B&B", "A&amp;B &amp; &AMP; &amp", "&lt; &gt; &lt;&gt; &lt", "< > << >> <>",
        "a < b > c", "x<y x>y", "<b>bold</b> <i>x</i>", "<br/> <br /> <hr>", "<a href='x'>link</a>",
        '<a href="x y">z</a>', "<!-- comment --> <!DOCTYPE html> <?xml version?>", "<unk> <pad> <eos> <s>",
        "<3 <b", "&nbsp; a&nbsp;b &NBSP;", "&#169; &#39; &odq; &cdq; &HT; &QC;", "caf&eacute; na&iuml;ve &Agrave;",
        "&foo; & ; &;", "&"],
    "symbols and money": [
        "$5 $ 5 $5.00 US$5 C$ A$ US$ $$", "£5 €5 ¥5 ¢5 ₤ ₠ ¤ ฿ ₹ ₩", "5% 5 % %%", "#1 # ## ###", "@ @@ @@@",
        "* ** *** \\* \\*\\*", "+ ++ +5 c++ C++ C# f# F#", "= == =>", "~ ^ | \\ _ __ ___", "° § ¶ © ® ™ × ÷ ± ¬",
        "→ ← ∀ ∑ √ ∞ ≈ ≠ ≤ ≥", "• ‣ ★ ☆ ♥ ✓ ✗", "x*y a+b a=b", "\x80 \xa4 \u20a0"],
    "non-ASCII letters": [
        "café naïve résumé Zoë Ærø straße Ångström", "CAFÉ NAÏVE", "ΑΣ ΟΔΟΣ ΣΑ Σ σς", "ΑΣ-Α ΑΣ1 ΑΣ_Α ΑΣ.Α ΑΣ'Α",
        "Москва Київ", "مرحبا שלום", "नमस्ते สวัสดี", "İstanbul ı İ", "ǅ ǈ ǋ", "ﬁ ﬂ", "ŉ ǰ ΐ", "ßẞ", "ⓐⓑ Ⓐ",
        "ʰʷ ᵃᵇ ª º", "Ⅻ ⅻ", "ꭓ ꝏ", "ǆ"],
    "combining marks": [
        "e\u0301 cafe\u0301 n\u0303", "a\u0300\u0301\u0302", "\u0301 \u0301a", "x\u20dd", "\u0915\u094d\u0937",
        "ΑΣ\u0301", "ΑΣ\u0301Α", "a\u0346b", "\u0483x", "\u200dx\u200c"],
    "emoji and astral": [
        "😀 👍🏽 ❤️ 🇫🇷", "a😀b 😀a a😀", "𝔸𝔹 𝐀", "𐐀 𐐨", "𠀀 𠀁", "dog🐶 🐶dog", "🙂.", "x 😀 .", "Ph.D.\xa0𝔸",
        "etc. 𝔸", "\U0001f600\U0001f600"],
    "CJK": [
        "北京 東京 中文", "日本語のテキスト", "ひらがな カタカナ", "한국어", "北京.", "中文,英文", "漢字々", "ー"],
    "unicode spaces": [
        "a\xa0b", "a\u2009b", "a\u3000b", "a\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200ab",
        "a\u202fb", "a\u205fb", "a\u1680b", "a\u200bb", "a\ufeffb", "\ufeffstart", "a\u200eb\u200f", "\xa0lead",
        "trail\xa0", " \xa0.com", "\xa0.com", "\u3000.com", "x \xa0y", "1\xa0\xa01/2"],
    "control characters": [
        "a\x00b", "a\x01b", "a\x1bb", "a\x1cb\x1dc\x1ed\x1fe", "a\x7fb", "a\x80b", "a\x81b", "a\x9fb",
        "\x00", "\x7f", "a\x08b", "x\x0e\x0fy"],
    "tabs": ["a\tb", "\ta", "a\t", "\t", "a\t\tb", "a \t b", "1\t2", "x.\ty", "etc.\tThe"],
    "very long tokens": [
        "a" * 5000, "A" * 3000 + ".", "1" * 3000, "-" * 2000, "." * 1000, "x-" * 500 + "x", "http://" + "x" * 2000,
        "ab." * 500 + "c", "'" * 500, "?" * 1000, "a " * 2000, "_" * 1000],
    "empty and whitespace": ["", " ", "  ", "\t", "\xa0", " \u3000 ", " .", ". ", "\n", "a\nb", "a \n b"],
}

# Blocks whose lines act on each other (the lexer looks across a line end).
ACROSS_LINES: List[List[str]] = [
    ["U.S.", "The dog runs"], ["U.S.", "The"], ["A.", "", "The x"], ["I.", "He ran "], ["U.S.", "   ", "The x "],
    ["A.", " ", "", "Many dogs "], ["x. ", "About them "], ["etc.", "Dog"], ["etc.", "dog"], ["etc.", ""],
    ["etc.", " "], ["fig.", "3 dogs"], ["no.", "5"], ["Co.", "Ltd"], ["e.g.", "The x "], ["Mr.", "Smith"],
    ["a 'quote", "continues' here"], ['he said "hi', '" she said'], ["<a href='x", "y'> dog"],
    ['<a b="x', 'y"> dog', "z"], ["<b>", "x"], ["don", "'t"], ["it", "'s"], [":)", "x"], [":)"], ["photo.jpg", "x"],
    ["'90", "s"], ["y'", "all"], ["A.", "<b> x"], ["", ""], [""], [], ["a", "", "", "b"], ["U.S.", "", "", "She x "],
    ["dog.", "The cat."], ["p.m.", "The end."], ["St.", "Paul"], ["ca.", "1990"], ["Pty.", "Ltd"]]


def _classes_as_blocks() -> Dict[str, List[List[str]]]:
    """Each adversarial class's blocks: every text alone (it ends the file), the class's texts as one block and in
    reverse order (each text followed by other lines)."""
    return {name: [[text] for text in texts] + [list(texts), list(reversed(texts))]
            for name, texts in ADVERSARIAL.items()}


# ---------------------------------------------------------------------------------------------------------------
# Seeded random soups of the same classes
# ---------------------------------------------------------------------------------------------------------------
_FRAGMENTS = sorted({piece for texts in ADVERSARIAL.values() for text in texts if len(text) < 40
                     for piece in text.split(" ") if piece} | {"The", "He", "A", "I", "the", "dog", "U.S.", "etc."})
_CHARACTERS = list("aAbBcCdDeEhHiIlLmMnNoOpPsStTyYzZ0123456789") * 2 + [" "] * 25 + list(
    ".,;:!?'\"`-_/\\()[]{}<>@#$%^&*+=~|") + list("’‘“”«»„‚‟‹›‛—–―‐…½¼⅓²₂¢£€¥\xa0\u2009\u3000\t\xad\u0301éßΣΑ北😀\x00")


def _assigned_by_unicode_3_2(code: int) -> bool:
    """Characters every Java runtime knows (assigned by Unicode 3.2), outside the refused line breaks."""
    ch = chr(code)
    return unicodedata.ucd_3_2_0.category(ch) not in ("Cn", "Cs") and ch not in ptb.LINE_BREAKS and ch != "\n"


def _soups() -> Dict[str, List[List[str]]]:
    """Four seeded soups, 1,200 lines each in blocks of 1 to 40 lines: the adversarial texts' fragments joined by
    various spaces; single characters of the special classes; the fragments with words that look across line ends;
    any Basic-Multilingual-Plane character Unicode 3.2 assigns, with sigmas, joiners and spaces."""
    rng = random.Random(35)
    spaces = [" ", " ", " ", "", "", "\t", "\xa0", "  ", "\u3000"]
    wide = [chr(c) for c in range(0x20, 0xFFFE) if _assigned_by_unicode_3_2(c)]
    makers = {
        "fragments": lambda: "".join(rng.choice(_FRAGMENTS) + rng.choice(spaces) for _ in range(rng.randint(0, 12))),
        "characters": lambda: "".join(rng.choice(_CHARACTERS) for _ in range(rng.randint(0, 30))),
        "line ends": lambda: " ".join(rng.choice(_FRAGMENTS + ["A.", "U.S.", "etc.", "The", "He", "<b>", "fig.", "3"])
                                      for _ in range(rng.choice([0, 1, 1, 2, 3]))) + rng.choice(["", " ", "  "]),
        "wide unicode": lambda: "".join(rng.choice(wide) if rng.random() < 0.6 else rng.choice("ΣΣΑα-_.'1 @ ")
                                        for _ in range(rng.randint(0, 20))),
    }
    soups = {}
    for name, make in makers.items():
        lines = [make() for _ in range(1200)]
        blocks, start = [], 0
        while start < len(lines):
            size = rng.randint(1, 40)
            blocks.append(lines[start:start + size])
            start += size
        soups[name] = blocks
    return soups


# ---------------------------------------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------------------------------------
def _differences(blocks: Sequence[Sequence[str]], expected: Sequence[Sequence[str]], got=None) -> List[tuple]:
    """``(block, line, text, jar, python)`` of every line where the Python tokenizer (``got``, or run here) differs
    from the jar."""
    found = []
    for b, (block, want) in enumerate(zip(blocks, expected)):
        have = ptb.tokenize_block(block) if got is None else got[b]
        assert len(have) == len(want) == len(block)
        found += [(b, i, block[i], w, h) for i, (w, h) in enumerate(zip(want, have)) if w != h]
    return found


def _report(what: str, blocks, differences) -> str:
    total = sum(len(block) for block in blocks)
    lines = [f"{what}: {total - len(differences)} of {total} texts equal to the jar"]
    lines += [f"  block {b} line {i}: {text!r}\n    jar:    {jar!r}\n    python: {python!r}"
              for b, i, text, jar, python in differences[:10]]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def generated():
    """Every adversarial and soup block, tokenized by the jar in one JVM: name -> (blocks, the jar's lines)."""
    groups = {**_classes_as_blocks(), "across line ends": ACROSS_LINES, **_soups()}
    everything = [block for blocks in groups.values() for block in blocks]
    expected = iter(coco_jars.ptb_tokenize_blocks(everything))
    return {name: (blocks, [next(expected) for _ in blocks]) for name, blocks in groups.items()}


@pytest.mark.parametrize("name", [*ADVERSARIAL, "across line ends"])
def test_adversarial_texts_are_tokenized_as_the_jar_does(generated, name):
    blocks, expected = generated[name]
    differences = _differences(blocks, expected)
    print(_report(name, blocks, differences))
    assert not differences, _report(name, blocks, differences)


@pytest.mark.parametrize("name", ["fragments", "characters", "line ends", "wide unicode"])
def test_random_soups_are_tokenized_as_the_jar_does(generated, name):
    blocks, expected = generated[name]
    differences = _differences(blocks, expected)
    print(_report(name, blocks, differences))
    assert not differences, _report(name, blocks, differences)


def test_every_character_is_tokenized_as_the_jar_does():
    """The measured character tables: every Basic-Multilingual-Plane character (but the refused line breaks and
    surrogate halves) alone, inside a word and a compound, before a decimal part and doubled."""
    lines = [f"{c} a{c}b-c {c}.5 {c}{c}" for c in map(chr, range(0x10000))
             if not "\ud800" <= c <= "\udfff" and c not in ptb.LINE_BREAKS and c != "\n"]
    blocks = [lines[start:start + 5000] for start in range(0, len(lines), 5000)]
    differences = _differences(blocks, coco_jars.ptb_tokenize_blocks(blocks))
    print(_report("every character", blocks, differences))
    assert not differences, _report("every character", blocks, differences)


def test_a_custom_token_class_matches_only_from_its_first_characters():
    """The scanner tries a class that finds its own match (not by the automaton) only where its first characters
    hold the character: none matches anywhere in the adversarial corpus from a character outside its set."""
    texts = [text for texts in ADVERSARIAL.values() for text in texts if len(text) < 200]
    texts += [" ".join(block) for block in ACROSS_LINES]
    customs = [token_class for token_class in ptb.token_classes() if isinstance(token_class, ptb._Custom)]
    assert customs
    for token_class in customs:
        allowed = re.compile(token_class.first)
        for text in map(ptb.utf16_units, texts):
            for pos in range(len(text)):
                if token_class.answer(text, pos) is not None:
                    assert allowed.match(text[pos]), (token_class.first, text, pos)


def test_every_shared_text_is_tokenized_as_the_jar_does(shared_data):
    """Every caption, reference and description of every benchmark and of FLEUR's outputs, in production-sized blocks
    (one JVM for all of them, running while Python tokenizes)."""
    verify = _verify_script()
    sources = verify.shared_texts(shared_data)
    blocks = [block for texts in sources.values() for block in verify.blocks_of(texts, verify.BLOCK)]
    with ThreadPoolExecutor(1) as pool:
        jar = pool.submit(coco_jars.ptb_tokenize_blocks, blocks)
        got = [ptb.tokenize_block(block) for block in blocks]
        differences = _differences(blocks, jar.result(), got)
    print(_report(f"../shared/data ({len(sources)} sources)", blocks, differences))
    assert sum(len(block) for block in blocks) > 500_000
    assert not differences, _report("../shared/data", blocks, differences)


# ---------------------------------------------------------------------------------------------------------------
# Refusals: what the production path does not accept
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("line_break", ptb.LINE_BREAKS)
def test_a_line_break_other_than_newline_is_refused_as_by_the_coco_group(line_break):
    text = f"a dog{line_break}runs"
    with pytest.raises(InputError, match=r"texts\[1\] holds the line break"):
        ptb.tokenize_block(["a cat", text])
    with pytest.raises(InputError, match="holds the line break"):
        coco.score_coco_group([[text]], [["a dog runs"]], metrics=["bleu"])


@pytest.mark.parametrize("texts, message", [
    ("a dog", "not one string"), (["a", None], r"texts\[1\] is a NoneType"), (["a", 3], r"texts\[1\] is a int"),
    (["a \ud800 b"], r"texts\[0\] cannot be written as UTF-8")])
def test_bad_texts_are_refused(texts, message):
    with pytest.raises(InputError, match=message):
        ptb.tokenize_block(texts)


def test_a_newline_inside_a_text_is_a_space_and_an_empty_block_is_empty():
    assert ptb.tokenize_block(["a\ndog", "a dog"]) == ["a dog", "a dog"]
    assert ptb.tokenize_block([]) == []


# ---------------------------------------------------------------------------------------------------------------
# The remaining difference: characters newer than the Java runtime's Unicode version
# ---------------------------------------------------------------------------------------------------------------
def _java_major() -> int:
    try:
        banner = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired):
        return 0
    found = re.search(r'version "(\d+)(?:\.(\d+))?', banner)
    if found is None:
        return 0
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major


# Java 19 brought Unicode 14, where these characters and their lower case were added; Python >= 3.11 has them.
_NEWER_THAN_JAVA = 0 < _java_major() < 19 and tuple(map(int, unicodedata.unidata_version.split("."))) >= (14, 0)


@pytest.mark.xfail(_NEWER_THAN_JAVA, strict=True, reason=(
    "the case mapping of characters newer than the Java runtime's Unicode version (Java 17: Unicode 13) depends on "
    "the JVM: Python lower-cases U+2C2F and U+10570 (Unicode 14), Java 17 leaves them; only tokens such as URLs keep "
    "characters the jar's tables do not know"))
@pytest.mark.parametrize("text", ["see http://x\u2c2fy now", "see http://x\U00010570y now"])
def test_characters_newer_than_the_jvm_are_lower_cased_as_the_jar_does(text):
    assert ptb.tokenize_block([text]) == coco_jars.ptb_tokenize_blocks([[text]])[0]
