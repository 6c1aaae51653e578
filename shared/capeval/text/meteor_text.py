"""METEOR 1.5's text handling for ``-l en -norm``, re-implemented: how the jar reads a pycocoevalcap ``SCORE``
request, its punctuation normaliser and the Snowball English stemmer the jar ships (the Porter2 algorithm as
published before Snowball 3.0, which changed it); the Java behaviours they rest on are
:mod:`capeval.text.java_runtime`'s.

Written for capeval from the behaviour of ``meteor-1.5.jar`` (observed by differential tests) and the published
descriptions (the Moses tokenizer conventions METEOR's normaliser follows; the Snowball English algorithm at
snowballstem.org); no METEOR code is copied or translated. The nonbreaking-prefix list is METEOR's own data, read
from the installed jar by :mod:`capeval.text.meteor_data`."""

from __future__ import annotations

import re
from typing import Dict, FrozenSet, List, Sequence, Tuple

from capeval.text.java_runtime import REGEX_SPACE, java_lines, java_split, java_tokens, java_trim, utf16_units

# --- the request ---------------------------------------------------------------------------------------------

SEPARATOR = "|||"


def request_segments(candidate: str, references: Sequence[str]) -> Tuple[str, List[str]]:
    """``(test, references)`` as the jar sees pycocoevalcap's ``SCORE`` line for this candidate: ``|||`` removed
    from the candidate and its double spaces collapsed once, the line split at every ``|||`` (a reference holding
    one becomes two references) and each part trimmed."""
    candidate = candidate.replace(SEPARATOR, "").replace("  ", " ")
    line = " ||| ".join(("SCORE", " ||| ".join(references), candidate))
    parts = java_split(line, SEPARATOR)
    return java_trim(parts[-1]), [java_trim(p) for p in parts[1:-1]]


# --- the normaliser (-norm: punctuation kept, then lower-cased) ----------------------------------------------

_ALPHA = ("A-Za-z\u0160\u017d\u0161\u017e\u0178\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u017e\u0400-\u04ff\u0500-\u0527"
          "\ua640-\ua66e\ua67e-\ua697\u1d00-\u1d7f")
_ALNUM = "0-9" + _ALPHA

_ISOLATE = re.compile(f"([^{_ALNUM}{REGEX_SPACE}.'`,\\-\u2018\u2019])")
_DOT_RUN = re.compile(r"\.(\.+)")
_DOT_RUN_NEXT = re.compile(r"DOTMULTI\.([^.])")
_COMMAS = (re.compile(r"([^0-9]),([^0-9])"), re.compile(r"([0-9]),([^0-9])"), re.compile(r"([^0-9]),([0-9])"))
_SINGLE_QUOTES = re.compile("[`\u2018\u2019]")
_DOUBLE_QUOTES = re.compile("[\u201c\u201d]|''")
_INNER_DASH = re.compile(f"([{_ALNUM}.])-([{_ALNUM}])")
_APOSTROPHES = ((re.compile(f"([^{_ALPHA}])'([^{_ALPHA}])"), r"\1 ' \2"),
                (re.compile(f"([^{_ALPHA}0-9])'([{_ALPHA}])"), r"\1 ' \2"),
                (re.compile(f"([{_ALPHA}])'([^{_ALPHA}])"), r"\1 ' \2"),
                (re.compile(f"([{_ALPHA}])'([{_ALPHA}])"), r"\1 '\2"),
                (re.compile(r"([0-9])'(s)"), r"\1 '\2"))
_LETTER = re.compile(f"[{_ALPHA}]")
_SPACES = re.compile("[ \u2000-\u200a\u202f\u205f\u3000\u00a0]+")

NONBREAKING_ANY, NONBREAKING_BEFORE_NUMBER = 1, 2


def parse_nonbreaking_prefixes(text: str) -> Dict[str, int]:
    """METEOR's ``nonbreaking/<language>.prefixes``: prefix -> kind (always, or only before a number)."""
    prefixes: Dict[str, int] = {}
    for line in java_lines(text):
        words = java_tokens(line)
        if not words or words[0].startswith("#"):
            continue
        numeric = len(words) > 1 and words[1] == "#NUMERIC_ONLY#"
        prefixes[words[0]] = NONBREAKING_BEFORE_NUMBER if numeric else NONBREAKING_ANY
    return prefixes


def normalize(line: str, prefixes: Dict[str, int]) -> str:
    """METEOR's English normalisation with punctuation kept (its ``-norm``), before lower-casing."""
    text = _ISOLATE.sub(r" \1 ", f" {line} ")
    text = _DOT_RUN.sub(r" DOTMULTI\1", text)
    while "DOTMULTI." in text:
        text = _DOT_RUN_NEXT.sub(r"DOTDOTMULTI \1", text).replace("DOTMULTI.", "DOTDOTMULTI")
    for comma in _COMMAS:
        text = comma.sub(r"\1 , \2", text)
    text = _DOUBLE_QUOTES.sub(' " ', _SINGLE_QUOTES.sub("'", text))
    text = text.replace("\u2013", "-").replace("--", "-")
    text = _INNER_DASH.sub(r"\1 \2", text)
    for pattern, replacement in _APOSTROPHES:
        text = pattern.sub(replacement, text)
    words = java_tokens(text)
    out = []
    for i, word in enumerate(words):
        following = words[i + 1] if i + 1 < len(words) else ""
        out.append(_split_final_dot(word, following, prefixes))
    text = "".join(w + " " for w in out)
    while "DOTDOTMULTI" in text:
        text = text.replace("DOTDOTMULTI", "DOTMULTI.")
    text = text.replace("DOTMULTI", ".")
    return java_trim(_SPACES.sub(" ", text))


def _split_final_dot(word: str, following: str, prefixes: Dict[str, int]) -> str:
    """A word ending in '.': kept whole after an abbreviation (or before a lower-case word), dots dropped from a
    dotted acronym (``U.S.`` -> ``US``), else the dot split off."""
    if len(word) < 2 or not word.endswith("."):
        return word
    stem = word[:-1]
    kind = prefixes.get(stem)
    if "." in stem and _LETTER.search(stem):
        return word.replace(".", "")
    if kind == NONBREAKING_ANY or ("a" <= following[:1] <= "z"):
        return word
    if kind == NONBREAKING_BEFORE_NUMBER and "0" <= following[:1] <= "9":
        return word
    return stem + " ."


_PLAIN = re.compile("[a-z0-9 ]*")  # text the normaliser leaves as it is, but for its spaces


def meteor_words(line: str, prefixes: Dict[str, int]) -> List[str]:
    """The words METEOR aligns for one side of a request: normalised, lower-cased, split as the jar splits."""
    if _PLAIN.fullmatch(line):
        return line.split()
    return java_tokens(normalize(line, prefixes).lower())


# --- Snowball English (Porter2, pre-3.0) ---------------------------------------------------------------------

_VOWELS = frozenset("aeiouy")
_NOT_SHORT_AFTER = frozenset("aeiouywxY")  # a short syllable's final letter is none of these
_LI_ENDINGS = frozenset("cdeghkmnrt")
_DOUBLES = ("bb", "dd", "ff", "gg", "mm", "nn", "pp", "rr", "tt")
_WHOLE_WORDS = {"skis": "ski", "skies": "sky", "dying": "die", "lying": "lie", "tying": "tie", "idly": "idl",
                "gently": "gentl", "ugly": "ugli", "early": "earli", "only": "onli", "singly": "singl",
                **{w: w for w in ("sky", "news", "howe", "atlas", "cosmos", "bias", "andes")}}
_AFTER_1A = frozenset(("inning", "outing", "canning", "herring", "earring", "proceed", "exceed", "succeed"))
_REGION_PREFIXES = ("gener", "commun", "arsen")
_STEP2 = {"tional": "tion", "enci": "ence", "anci": "ance", "abli": "able", "entli": "ent", "izer": "ize",
          "ization": "ize", "ational": "ate", "ation": "ate", "ator": "ate", "alism": "al", "aliti": "al",
          "alli": "al", "fulness": "ful", "ousli": "ous", "ousness": "ous", "iveness": "ive", "iviti": "ive",
          "biliti": "ble", "bli": "ble", "ogi": "og", "fulli": "ful", "lessli": "less", "li": ""}
_STEP3 = {"tional": "tion", "ational": "ate", "alize": "al", "icate": "ic", "iciti": "ic", "ical": "ic",
          "ful": "", "ness": "", "ative": ""}
_STEP4 = ("al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ism", "ate", "iti",
          "ous", "ive", "ize", "ion")


def _suffix_set(suffixes) -> Tuple[Tuple[int, ...], FrozenSet[str]]:
    """Suffixes as :func:`_longest_suffix` looks them up: their lengths (longest first) and their set."""
    chosen = frozenset(suffixes)
    return tuple(sorted({len(s) for s in chosen}, reverse=True)), chosen


def _longest_suffix(word: str, suffixes: Tuple[Tuple[int, ...], FrozenSet[str]]) -> str:
    """The longest of ``suffixes`` (a :func:`_suffix_set`) that ``word`` ends with; '' when none."""
    lengths, chosen = suffixes
    n = len(word)
    for k in lengths:
        if k <= n and word[n - k:] in chosen:
            return word[n - k:]
    return ""


_APOSTROPHE_ENDINGS = _suffix_set(("'", "'s", "'s'"))
_STEP1A_ENDINGS = _suffix_set(("sses", "ied", "ies", "s", "us", "ss"))
_STEP1B_ENDINGS = _suffix_set(("eed", "eedly", "ed", "edly", "ing", "ingly"))
_STEP1B_AFTER = _suffix_set(("at", "bl", "iz") + _DOUBLES)
_STEP2_ENDINGS, _STEP3_ENDINGS, _STEP4_ENDINGS = _suffix_set(_STEP2), _suffix_set(_STEP3), _suffix_set(_STEP4)


def _after_vowel_consonant(word: str, start: int) -> int:
    """The position just past the first non-vowel that follows a vowel, from ``start``; len(word) if none."""
    n = len(word)
    i = start
    while i < n and word[i] not in _VOWELS:
        i += 1
    while i < n and word[i] in _VOWELS:
        i += 1
    return i + 1 if i < n else n


def _ends_short_syllable(part: str) -> bool:
    n = len(part)
    if n >= 3 and part[-1] not in _NOT_SHORT_AFTER and part[-2] in _VOWELS and part[-3] not in _VOWELS:
        return True
    return n == 2 and part[0] in _VOWELS and part[1] not in _VOWELS


def _has_vowel(part: str) -> bool:
    return any(ch in _VOWELS for ch in part)


def english_stem(word: str) -> str:
    """The stem METEOR's English stem module compares (Snowball English as shipped in ``meteor-1.5.jar``)."""
    units = utf16_units(word)  # the jar's stemmer counts UTF-16 code units
    if len(units) == len(word):  # no character outside the Basic Multilingual Plane
        return _stem(word)
    return _stem(units).encode("utf-16-le", "surrogatepass").decode("utf-16-le")


def _stem(word: str) -> str:
    if word in _WHOLE_WORDS:
        return _WHOLE_WORDS[word]
    if len(word) < 3:
        return word
    if word.startswith("'"):
        word = word[1:]
    chars = list(word)
    marked_y = False
    for i, ch in enumerate(chars):
        if ch == "y" and (i == 0 or chars[i - 1] in _VOWELS):
            chars[i] = "Y"
            marked_y = True
    word = "".join(chars)
    prefix = next((p for p in _REGION_PREFIXES if word.startswith(p)), None)
    r1 = len(prefix) if prefix else _after_vowel_consonant(word, 0)
    r2 = _after_vowel_consonant(word, r1) if r1 < len(word) else len(word)

    word = _step_1a(word)
    if word not in _AFTER_1A:
        word = _step_1b(word, r1)
        word = _step_1c(word)
        word = _step_2(word, r1)
        word = _step_3(word, r1, r2)
        word = _step_4(word, r2)
        word = _step_5(word, r1, r2)
    return word.replace("Y", "y") if marked_y else word


def _step_1a(word: str) -> str:
    apostrophe = _longest_suffix(word, _APOSTROPHE_ENDINGS)
    if apostrophe:
        word = word[:-len(apostrophe)]
    suffix = _longest_suffix(word, _STEP1A_ENDINGS)
    if suffix == "sses":
        return word[:-2]
    if suffix in ("ied", "ies"):
        return word[:-3] + ("i" if len(word) - 3 >= 2 else "ie")
    if suffix == "s" and len(word) >= 2 and _has_vowel(word[:-2]):
        return word[:-1]
    return word


def _step_1b(word: str, r1: int) -> str:
    suffix = _longest_suffix(word, _STEP1B_ENDINGS)
    if not suffix:
        return word
    start = len(word) - len(suffix)
    if suffix in ("eed", "eedly"):
        return word[:start] + "ee" if start >= r1 else word
    if not _has_vowel(word[:start]):
        return word
    word = word[:start]
    ending = _longest_suffix(word, _STEP1B_AFTER)
    if ending in ("at", "bl", "iz"):
        return word + "e"
    if ending:
        return word[:-1]
    if len(word) == r1 and _ends_short_syllable(word):
        return word + "e"
    return word


def _step_1c(word: str) -> str:
    if len(word) > 2 and word[-1] in "yY" and word[-2] not in _VOWELS:
        return word[:-1] + "i"
    return word


def _step_2(word: str, r1: int) -> str:
    suffix = _longest_suffix(word, _STEP2_ENDINGS)
    start = len(word) - len(suffix)
    if not suffix or start < r1:
        return word
    if suffix == "ogi":
        return word[:start] + "og" if word[start - 1:start] == "l" else word
    if suffix == "li":
        return word[:start] if word[start - 1:start] in _LI_ENDINGS and start > 0 else word
    return word[:start] + _STEP2[suffix]


def _step_3(word: str, r1: int, r2: int) -> str:
    suffix = _longest_suffix(word, _STEP3_ENDINGS)
    start = len(word) - len(suffix)
    if not suffix or start < r1 or (suffix == "ative" and start < r2):
        return word
    return word[:start] + _STEP3[suffix]


def _step_4(word: str, r2: int) -> str:
    suffix = _longest_suffix(word, _STEP4_ENDINGS)
    start = len(word) - len(suffix)
    if not suffix or start < r2:
        return word
    if suffix == "ion" and word[start - 1:start] not in ("s", "t"):
        return word
    return word[:start]


def _step_5(word: str, r1: int, r2: int) -> str:
    if word.endswith("e"):
        start = len(word) - 1
        if start >= r2 or (start >= r1 and not _ends_short_syllable(word[:start])):
            return word[:start]
    elif word.endswith("l"):
        start = len(word) - 1
        if start >= r2 and word[start - 1:start] == "l":
            return word[:start]
    return word
