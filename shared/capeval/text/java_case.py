"""Java's ``String.toLowerCase(Locale.ENGLISH)`` of one token, as the PTB tokenizer jar lower-cases (``-lowerCase``).

It equals Python's ``str.lower()`` except for the Greek capital sigma, the one character whose lower case depends on
its context: both make it final (``ς``) when a cased letter comes before it and none after it, but Java looks for
those letters within the sigma's word as the JDK's word iterator finds words (letters and digits alternate inside a
word; ``-`` ``_`` ``'`` ``.`` ``"`` and the soft hyphen join letters; ``'`` ``.`` ``,`` ``"`` join digits), while
Python looks across "case-ignorable" characters. So ``ΑΣ-Α`` is ``ασ-α`` in Java and ``ας-α`` in Python. Which
characters are cased, and the word rules, were measured on the jar (``tests/text/test_ptb_python.py``); written here
from those observations and the published rule descriptions (Unicode SpecialCasing's Final_Sigma condition).
"""

from __future__ import annotations

import re
import unicodedata
from typing import List

SIGMA = "\u03a3"

# Java's cased characters besides the lower, upper and title case letters (its short list of Other_Lowercase and
# Other_Uppercase characters; Python's list is longer)
_OTHER_CASED = frozenset(chr(c) for c in [*range(0x2B0, 0x2B9), 0x2C0, 0x2C1, *range(0x2E0, 0x2E5), 0x345, 0x37A,
                                          *range(0x1D2C, 0x1D62), *range(0x2160, 0x2180), *range(0x24B6, 0x24EA)])

# Word units over one kind letter per character: a letter, 0 digit, m joins letters (dashes, connectors, soft
# hyphen), c joins digits (comma, Arabic decimal point), q and p join both (' " and .; p also opens a number), $ opens
# a number (currency, #), % closes one (% & ¢ ‰), d ends a word (danda), k kanji/katakana and h hiragana runs are
# words of their own, ~ a mark (stays with the letter, digit or other character before it, but ends a word after a
# joiner), x any other character.
_LETTER, _DIGIT = "(?:a~*)", "(?:0~*)"
_WORD = f"{_LETTER}+(?:[mqp]{_LETTER}+)*(?:d~*)?"
_NUMBER = f"{_DIGIT}+(?:[qpc]{_DIGIT}+)*"
_UNITS = [re.compile(f"(?:{_WORD})?(?:{_NUMBER}{_WORD})*(?:{_NUMBER}(?:%~*)?)?"),
          re.compile(f"[$p]~*(?:{_NUMBER}{_WORD})*(?:{_NUMBER}(?:%~*)?)?"),
          re.compile("(?:k~*)+"), re.compile("(?:h~*)+"), re.compile(".~*")]


def java_lower(token: str) -> str:
    """``token`` lower-cased as Java's ``toLowerCase(Locale.ENGLISH)`` does it."""
    if SIGMA not in token:
        return token.lower()
    starts = _word_starts(token)
    out = []
    for k, ch in enumerate(token):
        if ch != SIGMA:
            out.append(ch.lower())  # Python's only context-dependent mapping is the sigma's
            continue
        start = max(b for b in starts if b <= k)
        end = min(b for b in starts if b > k)
        final = any(map(_cased, token[start:k])) and not any(map(_cased, token[k + 1:end]))
        out.append("\u03c2" if final else "\u03c3")
    return "".join(out)


def _cased(ch: str) -> bool:
    return unicodedata.category(ch) in ("Ll", "Lu", "Lt") or ch in _OTHER_CASED


def _kind(ch: str) -> str:
    if ch in "'\"":
        return "q"
    if ch == ".":
        return "p"
    if ch in ",\u066b":
        return "c"
    if ch in "%&\xa2\u066a\u2030\u2031":
        return "%"
    if ch in "\u0964\u0965":
        return "d"
    if "\u4e00" <= ch <= "\u9fa5" or "\uf900" <= ch <= "\ufa2d" or "\u30a1" <= ch <= "\u30fa" \
            or ch in "\u3005\u30fd\u30fe":
        return "k"
    if "\u3041" <= ch <= "\u3094" or "\u3099" <= ch <= "\u309e" or ch in "\u30fb\u30fc":
        return "h"
    if ch > "\uffff":  # the JDK's word iterator joins no character outside the Basic Multilingual Plane
        return "x"
    category = unicodedata.category(ch)
    if ch in "\xad\u2027" or category in ("Pd", "Pc"):
        return "m"
    if category[0] == "L" or category == "Mc":
        return "a"
    if category[0] == "N":
        return "0"
    if category in ("Mn", "Me"):
        return "~"
    if category == "Cf":
        return ""  # format characters are invisible to the word rules
    if category == "Sc" or ch == "#":
        return "$"
    return "x"


def _word_starts(token: str) -> List[int]:
    """The positions where the JDK's word iterator puts a boundary in ``token``, its length last."""
    kinds = [_kind(ch) for ch in token]
    index = [i for i, kind in enumerate(kinds) if kind]  # the positions the rules see
    seen = "".join(kinds[i] for i in index)
    starts, p = [0], 0
    while p < len(seen):
        p = max(m.end() for m in (unit.match(seen, p) for unit in _UNITS) if m)
        starts.append(index[p] if p < len(seen) else len(token))
    return starts
