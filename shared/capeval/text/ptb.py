"""Penn Treebank tokenization in pure Python, token for token equal to pycocoevalcap 1.2's Java tokenizer.

pycocoevalcap writes its captions one per line (a caption's own ``"\\n"`` replaced by a space) into one file, runs
``stanford-corenlp-3.4.1.jar``'s ``PTBTokenizer -preserveLines -lowerCase`` on it and drops the tokens in its
punctuation list (:data:`PTB_PUNCTUATION`). :func:`tokenize_block` returns what that gives for one such file: one
lower-cased line of space-joined tokens per text, equal to ``capeval.text.coco_jars.ptb_tokenize_blocks([texts])[0]``.

How it works. A maximal-munch scanner: at a token start every token class that can match is tried and the longest
match wins (the earlier class on a tie). Within a class, too, the longest match counts, not the first alternative
that Python's ``re`` would take (``www.Google.com/maps.html?q=paris`` is one address, ``AT&AMP;T`` one token): the
classes given by a regular expression are read together by one automaton (:mod:`capeval.text.longest_match`), in
time linear in the text however long its runs of emoji, symbols or addresses. A class may look past its token and
count that look-ahead in its length (a word before ``'s``), give part of its match back to be scanned again
(``cannot`` -> ``can`` + ``not``) and rewrite its token (brackets -> ``-LRB-``..., quotes, dashes, ellipses,
``&amp;``, vulgar fractions, some currency signs).
Runs of plain words, numbers and spaces take a fast path, used only where no class could match longer. A class may
look across a line end (``U.S.`` then ``The ...`` on the next line, ``etc.`` then a capital), so a line's tokens can
depend on the lines after it, as in the jar's single-file lexer; lines that end otherwise are cached (bounded).

Provenance and licence. CoreNLP is GPL-2.0-or-later and capeval must not be a derivative of it. This module is our
own implementation of the Penn Treebank tokenization conventions (clitics ``n't 's 're 've 'll 'm 'd`` split off,
quotes as \\`\\` and '', brackets as ``-LRB-``..., ``--``, ``...``), written from those published conventions and
from the jar's observed behaviour, which is the oracle: its token classes, their order, the abbreviation lists and
the look-aheads were found or confirmed by running the jar on probes and generated inputs, and are checked text by
text against it (``tests/text/test_ptb_python.py``, ``tests/text/test_ptb_longest_match.py``,
``benchmarks/verify_ptb.py``). CoreNLP's lexer specification was read to understand some behaviours; none of its
code or grammar was copied or transliterated: the scanner, the class set (several of the jar's rules merged where
their output is the same, others split), the fast paths and the regular expressions are written here. The character tables below (which characters the jar treats as letters,
digits and symbols, fixed by the Unicode version compiled into the 2014 jar) were measured by running every Basic
Multilingual Plane character through it; they are facts about its behaviour.

Lower-casing is Java's (:mod:`capeval.text.java_runtime`: a Greek capital sigma inside a token is final or not as Java
decides it). Remaining difference from the jar (the ``xfail`` test holds examples): characters newer than the Java
runtime's Unicode version (Java 17: Unicode 13; Python 3.11: Unicode 14) have a lower case and a category in Python
and none in Java, e.g. ``Ⱟ`` (U+2C2F) inside a URL is lower-cased by Python only; URLs, e-mail addresses and the
like are the only tokens that keep characters the jar's own tables do not know. This depends on the installed JVM,
not on the jar, so it is not emulated.
"""

from __future__ import annotations

import functools
import re
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

from capeval.core.caches import LruCache
from capeval.core.errors import InputError
from capeval.text.java_runtime import SIGMA, java_lower, utf8_written, utf16_units
from capeval.text.longest_match import LongestMatch

# pycocoevalcap's PUNCTUATIONS: the tokens it drops (compared after lower-casing, so -lrb- and the like stay)
PTB_PUNCTUATION = frozenset(["''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-", ".", "?", "!", ",", ":", "-",
                             "--", "...", ";"])
# Characters other than "\n" that the jar ends a line at: pycocoevalcap would pair the following lines' tokens with
# the wrong images, so capeval refuses them ("\n" is replaced by a space, as pycocoevalcap does).
LINE_BREAKS = ("\r", "\x0b", "\x0c", "\x85", "\u2028", "\u2029")

# ---------------------------------------------------------------------------------------------------------------
# Character tables measured on the jar: hexadecimal code points and ranges of the Basic Multilingual Plane (the jar
# reads UTF-16 units: each half of a surrogate pair is a character it cannot tokenize, i.e. drops)
# ---------------------------------------------------------------------------------------------------------------
_UNICODE_LETTERS = (  # letters of the jar's Unicode tables
    "41-5A 61-7A AA B5 BA C0-D6 D8-F6 F8-2C1 2C6-2D1 2E0-2E4 2EC 2EE 370-374 376-377 37A-37D 386 388-38A 38C "
    "38E-3A1 3A3-3F5 3F7-481 48A-527 531-556 559 561-587 5D0-5EA 5F0-5F2 620-64A 66E-66F 671-6D3 6D5 6E5-6E6 "
    "6EE-6EF 6FA-6FC 6FF 710 712-72F 74D-7A5 7B1 7CA-7EA 7F4-7F5 7FA 800-815 81A 824 828 840-858 8A0 8A2-8AC "
    "904-939 93D 950 958-961 971-977 979-97F 985-98C 98F-990 993-9A8 9AA-9B0 9B2 9B6-9B9 9BD 9CE 9DC-9DD 9DF-9E1 "
    "9F0-9F1 A05-A0A A0F-A10 A13-A28 A2A-A30 A32-A33 A35-A36 A38-A39 A59-A5C A5E A72-A74 A85-A8D A8F-A91 "
    "A93-AA8 AAA-AB0 AB2-AB3 AB5-AB9 ABD AD0 AE0-AE1 B05-B0C B0F-B10 B13-B28 B2A-B30 B32-B33 B35-B39 B3D "
    "B5C-B5D B5F-B61 B71 B83 B85-B8A B8E-B90 B92-B95 B99-B9A B9C B9E-B9F BA3-BA4 BA8-BAA BAE-BB9 BD0 C05-C0C "
    "C0E-C10 C12-C28 C2A-C33 C35-C39 C3D C58-C59 C60-C61 C85-C8C C8E-C90 C92-CA8 CAA-CB3 CB5-CB9 CBD CDE CE0-CE1 "
    "CF1-CF2 D05-D0C D0E-D10 D12-D3A D3D D4E D60-D61 D7A-D7F D85-D96 D9A-DB1 DB3-DBB DBD DC0-DC6 E01-E30 "
    "E32-E33 E40-E46 E81-E82 E84 E87-E88 E8A E8D E94-E97 E99-E9F EA1-EA3 EA5 EA7 EAA-EAB EAD-EB0 EB2-EB3 EBD "
    "EC0-EC4 EC6 EDC-EDF F00 F40-F47 F49-F6C F88-F8C 1000-102A 103F 1050-1055 105A-105D 1061 1065-1066 "
    "106E-1070 1075-1081 108E 10A0-10C5 10C7 10CD 10D0-10FA 10FC-1248 124A-124D 1250-1256 1258 125A-125D "
    "1260-1288 128A-128D 1290-12B0 12B2-12B5 12B8-12BE 12C0 12C2-12C5 12C8-12D6 12D8-1310 1312-1315 1318-135A "
    "1380-138F 13A0-13F4 1401-166C 166F-167F 1681-169A 16A0-16EA 1700-170C 170E-1711 1720-1731 1740-1751 "
    "1760-176C 176E-1770 1780-17B3 17D7 17DC 1820-1877 1880-18A8 18AA 18B0-18F5 1900-191C 1950-196D 1970-1974 "
    "1980-19AB 19C1-19C7 1A00-1A16 1A20-1A54 1AA7 1B05-1B33 1B45-1B4B 1B83-1BA0 1BAE-1BAF 1BBA-1BE5 1C00-1C23 "
    "1C4D-1C4F 1C5A-1C7D 1CE9-1CEC 1CEE-1CF1 1CF5-1CF6 1D00-1DBF 1E00-1F15 1F18-1F1D 1F20-1F45 1F48-1F4D "
    "1F50-1F57 1F59 1F5B 1F5D 1F5F-1F7D 1F80-1FB4 1FB6-1FBC 1FBE 1FC2-1FC4 1FC6-1FCC 1FD0-1FD3 1FD6-1FDB "
    "1FE0-1FEC 1FF2-1FF4 1FF6-1FFC 2071 207F 2090-209C 2102 2107 210A-2113 2115 2119-211D 2124 2126 2128 "
    "212A-212D 212F-2139 213C-213F 2145-2149 214E 2183-2184 2C00-2C2E 2C30-2C5E 2C60-2CE4 2CEB-2CEE 2CF2-2CF3 "
    "2D00-2D25 2D27 2D2D 2D30-2D67 2D6F 2D80-2D96 2DA0-2DA6 2DA8-2DAE 2DB0-2DB6 2DB8-2DBE 2DC0-2DC6 2DC8-2DCE "
    "2DD0-2DD6 2DD8-2DDE 2E2F 3005-3006 3031-3035 303B-303C 3041-3096 309D-309F 30A1-30FA 30FC-30FF 3105-312D "
    "3131-318E 31A0-31BA 31F0-31FF 3400-4DB5 4E00-9FCC A000-A48C A4D0-A4FD A500-A60C A610-A61F A62A-A62B "
    "A640-A66E A67F-A697 A6A0-A6E5 A717-A71F A722-A788 A78B-A78E A790-A793 A7A0-A7AA A7F8-A801 A803-A805 "
    "A807-A80A A80C-A822 A840-A873 A882-A8B3 A8F2-A8F7 A8FB A90A-A925 A930-A946 A960-A97C A984-A9B2 A9CF "
    "AA00-AA28 AA40-AA42 AA44-AA4B AA60-AA76 AA7A AA80-AAAF AAB1 AAB5-AAB6 AAB9-AABD AAC0 AAC2 AADB-AADD "
    "AAE0-AAEA AAF2-AAF4 AB01-AB06 AB09-AB0E AB11-AB16 AB20-AB26 AB28-AB2E ABC0-ABE2 AC00-D7A3 D7B0-D7C6 "
    "D7CB-D7FB F900-FA6D FA70-FAD9 FB00-FB06 FB13-FB17 FB1D FB1F-FB28 FB2A-FB36 FB38-FB3C FB3E FB40-FB41 "
    "FB43-FB44 FB46-FBB1 FBD3-FD3D FD50-FD8F FD92-FDC7 FDF0-FDFB FE70-FE74 FE76-FEFC FF21-FF3A FF41-FF5A "
    "FF66-FFBE FFC2-FFC7 FFCA-FFCF FFD2-FFD7 FFDA-FFDC"
)
_EXTRA_WORD_LETTERS = (  # marks, modifiers and the soft hyphen that continue a word but not a hyphenated compound
    "AD 2C2-2C5 2D2-2DF 2E5-2EB 2ED 2EF-36F 375 378-379 384-385 3F6 483-487 55A-55F 591-5BD 5BF 5C1-5C2 5C4-5C5 "
    "5C7 615-61A 64B-65E 670 6D6-6E4 6E7-6ED 6FD-6FE 70F 711 730-74C 7A6-7B0 7EB-7F3 900-903 93C 93E-94E 951-955 "
    "962-963 981-983 9BC 9BE-9C4 9C7-9C8 9CB-9CD 9D7 9E2-9E3 A01-A03 A3C A3E-A4F A81-A83 ABC ABE-ACF B82 BBE-BC2 "
    "BC6-BC8 BCA-BCD C01-C03 C3E-C56 D3E-D44 D46-D48 E31 E34-E3A E47-E4E EB1 EB4-EBC EC8-ECD"
)
_DIGITS = (
    "30-39 660-669 6F0-6F9 7C0-7C9 966-96F 9E6-9EF A66-A6F AE6-AEF B66-B6F BE6-BEF C66-C6F CE6-CEF D66-D6F "
    "E50-E59 ED0-ED9 F20-F29 1040-1049 1090-1099 17E0-17E9 1810-1819 1946-194F 19D0-19D9 1A80-1A89 1A90-1A99 "
    "1B50-1B59 1BB0-1BB9 1C40-1C49 1C50-1C59 A620-A629 A8D0-A8D9 A900-A909 A9D0-A9D9 AA50-AA59 ABF0-ABF9 "
    "FF10-FF19"
)
_SYMBOLS = (  # characters that are a token of their own (where no longer class starts with them)
    "24-26 2B 2F 3A-3B 3D 5C 5E 7C 7E A1 A5-A9 AC AE-B1 B4 B6-B8 BF D7 F7 37E 387 589 5BE 5C0 5C3 5C6 5F3-5F4 "
    "600-603 606-60C 614 61B 61E-61F 66A 66D 6D4 700-70D 7F6-7F8 964-965 E3F E4F 1FBD 2016-2017 2020-2023 "
    "2030-2038 203B 203E-2042 2044 207A-207E 208A-208E 20A4 2100-2101 2103-2106 2108-2109 2114 2116-2118 "
    "211E-2123 2125 2127 2129 212E 213A-213B 2140-2144 214A-214D 214F 2155-215E 2190-2BFF 3001-3002 3012 30FB "
    "FF01-FF0F FF1A-FF20 FF3B-FF40 FF5B-FF65 FFE0-FFE1 FFE5-FFE6"
)


def _char_class(ranges: str) -> str:
    """The body of a regex character class for ``"41-5A 61 ..."``."""
    parts = []
    for item in ranges.split():
        low, _, high = item.partition("-")
        parts.append(re.escape(chr(int(low, 16))) + ("-" + re.escape(chr(int(high, 16))) if high else ""))
    return "".join(parts)


def _ci(word: str) -> str:
    """``word`` with its ASCII letters in either case, as the jar's case-insensitive literals match (re.IGNORECASE
    would also match Unicode case variants such as the Kelvin sign)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isascii() and c.isalpha() else re.escape(c) for c in word)


def _words(spec: str) -> str:
    """Alternatives of ``spec``'s words, case-insensitive, longest first; ``=`` before a word keeps its first letter's
    case as written."""
    words = sorted(spec.split(), key=lambda w: -len(w.lstrip("=")))
    return "|".join(re.escape(w[1]) + _ci(w[2:]) if w.startswith("=") else _ci(w) for w in words)


# ---------------------------------------------------------------------------------------------------------------
# Pieces of the token classes
# ---------------------------------------------------------------------------------------------------------------
_UL = _char_class(_UNICODE_LETTERS)
_XL = _char_class(_EXTRA_WORD_LETTERS)
_DG = _char_class(_DIGITS)
ENTITY_LETTER = "&[aeiouAEIOU](?:" + _words("acute grave uml") + ");"   # caf&eacute;
LETTER = f"(?:[{_UL}{_XL}]|{ENTITY_LETTER})"                            # a word's letter
LETTER_OR_DIGIT = f"(?:[{_UL}{_XL}{_DG}]|{ENTITY_LETTER})"
DIGIT = f"[{_DG}]"
ALNUM = f"[{_UL}{_DG}]"                                                 # a hyphenated compound's letter or digit
SPACE = "[ \\t\\xa0\\u2000-\\u200a\\u3000]"
SPACE_OR_NL = "[ \\t\\xa0\\u2000-\\u200a\\u3000\\n]"
APOSTROPHE = "(?:['\\x92\\u2019]|&" + _ci("apos") + ";)"
APOSTROPHE_LIKE = "(?:['\\x92\\u2019`\\x91\\u2018\\u201b]|&" + _ci("apos") + ";)"
CLITIC = APOSTROPHE + "(?:[msdMSD]|" + _words("re ve ll") + ")"         # 's 'm 'd 're 've 'll
NEG_CLITIC = "[nN]" + APOSTROPHE_LIKE + "[tT]"                           # n't
WORD = f"{LETTER}{LETTER_OR_DIGIT}*(?:[.!?]{LETTER}{LETTER_OR_DIGIT}*)*"  # letters first; inner . ! ? (scene.The)
NOT_N_STEM = "[A-Za-z\\xad]*[A-MO-Za-mo-z]\\xad*"                       # what n't splits off: ASCII, not ending in n
SGML = ("<(?:[!?][A-Za-z-][^>\\r\\n]*|[A-Za-z][\\w:.-]*(?:[ ]+[A-Za-z][\\w:.-]*(?:[ ]*=[ ]*(?:'[^']*'|\"[^\"]*\"))?)*"
        "[ ]*/?|/[A-Za-z][\\w:.-]*)[ ]*>").replace("\\w", "A-Za-z0-9_")
_NAMED_ACRONYMS = ("(?:" + _words("Canada Sino Korean EU Japan non") + ")-" + _ci("U.S") + "|" + _ci("U.S.-") + "(?:"
                   + _ci("U.K") + "|" + _ci("U.S.S.R") + ")")
ACRONYM = f"(?:{_NAMED_ACRONYMS}|[A-Za-z](?:\\.[A-Za-z])*)"               # U.S, A.B.C, and one letter
DOTTED_ACRONYM = f"(?:{_NAMED_ACRONYMS}|[A-Za-z](?:\\.[A-Za-z])+)"
QUOTE_MARKS = "[`\\u2018\\u2019\\u201a\\u201b\\u201c\\u201d\\x91-\\x94\\u201e\\u201f\\u2039\\u203a\\xab\\xbb]"
URL_END = '[^ \\t\\n\\f\\r"<>|.!?(){},-]'
URL_PATH = f'(?:/[^ \\t\\n\\f\\r"<>|()]+{URL_END})?'
HYPHENATED = f"[A-Za-z0-9][A-Za-z0-9.,\\xad]*(?:-(?:{DOTTED_ACRONYM}\\.|[A-Za-z0-9\\xad]+))+"
ELISION = f"[dDoOlL]{APOSTROPHE_LIKE}{ALNUM}"                            # d'Artagnan, o'clock
COMPOUND = f"(?:{ELISION})?{ALNUM}+(?:[-_\\u058a\\u2010\\u2011](?:{ELISION})?{ALNUM}+)*"
CAPS_AND = "[A-Z]+(?:(?:[+&]|&" + _ci("amp") + ";)[A-Z]+)+"              # AT&T
IN_SENTENCE = "[,;:\\u3001]"
PUNCTUATION = "[,;:\\u3001?!.\\xa1\\xbf\\u037e\\u0589\\u061f\\u06d4\\u0700-\\u0702\\u07fa\\u3002=/]"
CURRENCY = "[\\xa2\\xa3\\xa4\\xa5\\x80\\u20a0\\u20ac\\u060b\\u0e3f\\u20a4\\uffe0\\uffe1\\uffe5\\uffe6]"

# Abbreviations that keep their period: AFTER_LOWER ones are usually followed by a lower-case word (months, days,
# states, companies; at a sentence end their period is given again), BEFORE_NAME ones by a name (titles; acronyms
# too), BEFORE_NUMBER ones keep it only before a number.
_AFTER_LOWER = (
    "Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec Mon Tue Tues Wed Thu Thurs Fri Ala Ariz =Az =Ark Calif Colo "
    "Conn Ct Dak =Del Fla Ga =Ill Ind Kan Kans Ky =La =Mass Md Mich Minn =Miss Mo Mont Neb Nev Okla =Ore =Pa Penn "
    "Tenn =Tex Va Vt =Wash Wis Wisc Wyo Inc Co Cos Corp Ltd Plc Rt Bancorp Bhd Assn Univ Intl Sys tel est ext sq Jr "
    "Sr Bros Ed.D Ph.D Blvd Rd Esq etc al seq Bldg")
_BEFORE_NAME = (
    "Mr Mrs Ms =Miss Dr Drs Prof Profs Sen Sens Rep Reps Atty Attys Lt Col Gen Messrs Gov Govs Adm Rev Maj Sgt Cpl "
    "Pvt Capt St Ste Ave Pres Lieut Hon Brig Cmdr Comdr Pfc Spc Supt Supts Det Mt Ft Adj Adv Asst Assoc Ens Insp Mlle "
    "Mme Msgr Sfc vs Alex Wm Jos Cie a.k.a cf TREAS Ph Invt Elec Natl Mfg Mtg Dept")
_BEFORE_NUMBER = "ca fig figs prop no nos art bldg pp op"
_PTY = "Pty Pte Ptys Ptes Ppty Ppte Pptys Pptes"  # P, p?, t, then y or e in lower case only, s?
AFTER_LOWER = _words(_AFTER_LOWER) + "|" + _ci("P") + "[pP]?" + _ci("t") + "[ye][sS]?"
BEFORE_NAME = ACRONYM + "|" + _words(_BEFORE_NAME)  # an acronym first: a.k.a.b. is one
BEFORE_NUMBER = _words(_BEFORE_NUMBER)
# After an acronym and spaces, these words (capitalized, then a space) make its period end the sentence too.
SENTENCE_STARTS = _words(
    "=About =According =Additionally =After =An =A =As =At =But =Earlier =He =Her =Here =However =If =In =It =Last "
    "=Many =More =Mr. =Ms. =Now =Once =One =Other =Our =She =Since =So =Some =Such =That =The =Their =Then =There "
    "=These =They =This =We =When =While =What =Yet =You")
FILE_EXTENSIONS = _words(
    "bat bmp c class cgi cpp dll doc docx exe gif gz h htm html jar java jpeg jpg mov mp3 pdf php pl png ppt ps py "
    "sql tar txt wav x xml zip")
SPLIT_WORDS = {"cannot": 3, "'twas": 3, "'tis": 2, "gonna": 2, "gotta": 2, "lemme": 2, "gimme": 2, "wanna": 2}

# ---------------------------------------------------------------------------------------------------------------
# Token rewrites
# ---------------------------------------------------------------------------------------------------------------
BRACKETS = {"(": "-LRB-", ")": "-RRB-", "{": "-LCB-", "}": "-RCB-", "[": "-LSB-", "]": "-RSB-"}
_CLOSING_QUOTES = {"'": "'", "\x92": "'", "\u2019": "'", "\u203a": "'", "\x91": "`", "\u2018": "`", "\u201b": "`",
                   "\u2039": "`", "\x93": "``", "\u201c": "``", "\xab": "``", "\x94": "''", "\u201d": "''",
                   "\xbb": "''"}
_FRACTIONS = {"\xbc": "1/4", "\xbd": "1/2", "\xbe": "3/4", "\u2153": "1/3", "\u2154": "2/3"}
_CURRENCIES = {"\xa2": "cents", "\xa3": "#", "\x80": "$", "\xa4": "$", "\u20a0": "$", "\u20ac": "$"}
_AMP_ENTITY = re.compile("&" + _ci("amp") + ";")


def _closing_quotes(token: str) -> str:
    """Apostrophes and quotes as the jar writes them where they close or sit in a clitic (``’s`` -> ``'s``)."""
    return "".join(_CLOSING_QUOTES.get(c, c) for c in token.replace("&apos;", "'"))  # not &APOS;: kept as it is


def _no_soft_hyphens(token: str) -> str:
    return token.replace("\xad", "") or "-"


def _amp(token: str) -> str:
    return _AMP_ENTITY.sub("&", token)


def _nbsp(token: str) -> str:
    return token.replace(" ", "\xa0")


def _parens(token: str) -> str:
    return token.replace("(", "-LRB-").replace(")", "-RRB-")


# ---------------------------------------------------------------------------------------------------------------
# Token classes. A class answers at a position with (the end of all it matched, look-ahead included; the token, or
# None for skipped text; where scanning goes on) or None. Most are a regular expression (:class:`_Pattern`): the
# scanner finds every such class's longest match at once (:class:`~capeval.text.longest_match.LongestMatch`); the
# others (:class:`_Custom`) answer for themselves.
# ---------------------------------------------------------------------------------------------------------------
Answer = Optional[Tuple[int, Optional[str], int]]
TokenClass = Callable[[str, int], Answer]


class _Pattern:
    """A class given by ``pattern`` (and a look-ahead ``after``, counted in the match's length, left in the text):
    its longest match, made into (token, where scanning goes on) by ``make``."""

    def __init__(self, pattern: str, make: Callable[["re.Match[str]"], Tuple[Optional[str], int]], after: str = ""):
        self.expression = f"(?:{pattern})(?:{after})" if after else pattern
        self._pinned_pattern = f"(?:{pattern})" + (f"(?=(?:{after})\\Z)" if after else "\\Z")
        self._pinned: Optional["re.Pattern[str]"] = None  # compiled when the class first answers
        self._make = make

    def answer(self, text: str, pos: int, end: int) -> Answer:
        """The answer for a longest match from ``pos`` to ``end``."""
        if self._pinned is None:
            self._pinned = re.compile(self._pinned_pattern)
        token, resume = self._make(self._pinned.match(text, pos, end))
        return end, token, resume


class _Custom:
    """A class that finds its own match, tried only at the characters ``first`` matches."""

    def __init__(self, first: str, answer: Callable[[str, int], Answer]):
        self.first, self.answer = first, answer


def _plain(pattern: str, rewrite: Callable[[str], str] = str, after: str = "") -> _Pattern:
    """``pattern``'s match as the token (rewritten)."""
    return _Pattern(pattern, lambda m: (rewrite(m.group()), m.end()), after)


def _fixed(pattern: str, token: Optional[str]) -> _Pattern:
    """``pattern``'s match written as ``token`` (None: skipped)."""
    return _Pattern(pattern, lambda m: (token, m.end()))


def _split_word() -> _Pattern:
    """Words split in two: ``cannot`` -> ``can`` ``not``, ``gonna`` -> ``gon`` ``na``, ``'tis`` -> ``'t`` ``is``; the
    second part is scanned again."""
    def make(m: "re.Match[str]") -> Tuple[str, int]:
        cut = m.end() - SPLIT_WORDS[m.group().lower()]
        return m.string[m.start():cut], cut
    return _Pattern(_words(" ".join(SPLIT_WORDS)), make)


def _acronym_ending_sentence() -> _Pattern:
    """An acronym whose period also ends the sentence (``U.S.``, spaces, ``The``, a space): the jar writes the
    acronym, then its period again; a one-letter acronym (``A.``) loses its period to the sentence instead."""
    def make(m: "re.Match[str]") -> Tuple[str, int]:
        if m.end() - m.start() == 2:
            return m.string[m.start()], m.start() + 1
        return m.group(), m.end() - 1
    return _Pattern(f"{ACRONYM}\\.", make, after=f"{SPACE_OR_NL}+(?:{SENTENCE_STARTS}|{SGML}){SPACE_OR_NL}")


_SPACE_OR_NL_CHARS = frozenset(" \t\xa0\u3000\n" + "".join(map(chr, range(0x2000, 0x200B))))


def _abbreviation_after_lower() -> TokenClass:
    """``etc.`` and the like keep their period, and count the next two characters in their length; at a sentence end
    (a space, then a space, a capital or a tag) or at the end of the text, the period is also written again."""
    regex = re.compile(f"(?:{AFTER_LOWER})\\.")
    tag = re.compile(SGML)

    def answer(text: str, pos: int) -> Answer:
        m = regex.match(text, pos)
        if m is None:
            return None
        end = m.end()
        if end + 2 > len(text):
            return end, m.group(), end - 1
        following = text[end + 1]
        if text[end] in _SPACE_OR_NL_CHARS and (following in _SPACE_OR_NL_CHARS or tag.match(text, end + 1) or (
                following.isupper() and following <= "\uffff")):  # the jar sees half a surrogate pair: not upper
            return end + 2, m.group(), end - 1
        return end + 2, m.group(), end
    return answer


def _phone() -> TokenClass:
    """Telephone numbers (``(555) 123-4567``, ``555-123-4567``, ``1.555.123.4567``): the longest match, spaces as
    no-break spaces, parentheses as -LRB- -RRB-."""
    sep = "[- \\xa0]"
    regex = re.compile(
        f"(?:\\([0-9]{{2,3}}\\)[ \\xa0]?|(?:\\+\\+?)?(?:[0-9]{{2,4}}{sep})?[0-9]{{2,4}}{sep})[0-9]{{3,4}}{sep}?"
        "[0-9]{3,5}|(?:(?:\\+\\+?)?[0-9]{2,4}\\.)?[0-9]{2,4}\\.[0-9]{3,4}\\.[0-9]{3,5}")

    def answer(text: str, pos: int) -> Answer:
        if regex.match(text, pos) is None:
            return None
        for end in range(min(len(text), pos + 22), pos, -1):  # no phone number is longer than 22 characters
            if regex.fullmatch(text, pos, end):
                return end, _parens(_nbsp(text[pos:end])), end
        return None
    return answer


def _double_quote() -> TokenClass:
    """``"`` (or ``&quot;``) as \\`\\` before a letter, digit or $, else as ''."""
    regex = re.compile('"|&' + _ci("quot") + ";")
    opening = re.compile("[A-Za-z0-9$]")

    def answer(text: str, pos: int) -> Answer:
        m = regex.match(text, pos)
        if m is None:
            return None
        if m.group() not in ('"', "&quot;"):  # &QUOT; and the like match but are kept as they are
            return m.end(), m.group(), m.end()
        return m.end(), ("``" if opening.match(text, m.end()) else "''"), m.end()
    return answer


@functools.lru_cache(maxsize=None)
def token_classes() -> Tuple[Union[_Pattern, _Custom], ...]:
    """The token classes in priority order (the earlier wins a tie in length), compiled on first use."""
    return (
        _split_word(),
        _plain(_ci("c++") + "|[cCfF]#"),
        _plain(SGML, _nbsp),
        _fixed("[\\x96\\x97\\u2013\\u2014\\u2015]|&(?:" + _words("MD mdash ndash") + ");", "--"),
        _fixed("&" + _ci("amp") + ";", "&"),
        _plain("&(?:" + _words("HT TL UR LR QC QL QR odq cdq") + "|#[0-9]+);"),
        # words, and words before a clitic they are split from
        _plain(WORD, _no_soft_hyphens, after=CLITIC),
        _plain(NOT_N_STEM, _no_soft_hyphens, after=NEG_CLITIC),
        _plain(WORD, _no_soft_hyphens),
        # words that keep an apostrophe inside or at an edge
        *map(_plain, (
            f"{APOSTROPHE}[nN]{APOSTROPHE}?",                                           # rock 'n' roll
            f"[lLdDjJ]{APOSTROPHE}",                                                    # l' d' j'
            "(?:" + _words("Dunkin somethin ol") + f"){APOSTROPHE}",
            f"{APOSTROPHE}" + _ci("em"),
            f"[A-HJ-XZn]{APOSTROPHE_LIKE}[{_UL}]{{2,}}",                                # O'Neil D'Angelo
            f"{APOSTROPHE}[2-9]0[sS]",                                                  # '90s
            f"{APOSTROPHE}" + _ci("til") + "[lL]?",
            f"[{_UL}]+[aeiouyAEIOUY]{APOSTROPHE_LIKE}[aeiouA-Z][{_UL}]*",               # Hawai'i ma'am
            f"{APOSTROPHE}" + _ci("cause"),
            _ci("cont'd") + "\\.?",
            _words("'twas nor'easter c'mon e'er s'mores ev'ry li'l nat'l"),
            f"[oO]{APOSTROPHE_LIKE}[oO]")),
        _plain("[yY]" + APOSTROPHE, after=f"[{_UL}]"),                                  # y'all -> y' all
        # addresses
        _plain(_ci("http") + '[sS]?://[^ \\t\\n\\f\\r"<>|(){}]+' + URL_END),
        _plain(_ci("www.") + '(?:[^ \\t\\n\\f\\r"<>|.!?(){},]+\\.)+[a-zA-Z]{2,4}' + URL_PATH),
        _plain('(?:[^ \\t\\n\\f\\r"`\'<>|.!?(){}\\x2c-\\x5f$]+\\.)+(?:' + _words("com net org edu") + ")" + URL_PATH),
        _plain("(?:&" + _ci("lt") + ';|<)?[a-zA-Z0-9][^ \\t\\n\\f\\r"<>|()\\xa0{}]*@'
               '(?:[^ \\t\\n\\f\\r"<>|(){}.\\xa0]+\\.)*[^ \\t\\n\\f\\r"<>|(){}.\\xa0]+(?:&' + _ci("gt") + ";|>)?"),
        _plain(f"@[a-zA-Z_][a-zA-Z_0-9]*|#{LETTER}+"),
        # clitics split from their word
        _plain(CLITIC, _closing_quotes, after="[^A-Za-z]"),
        _plain(NEG_CLITIC, _closing_quotes, after="[^A-Za-z]"),
        # numbers: dates, decimals and groups, super/subscripts, fractions
        _plain(f"{DIGIT}{{1,2}}[-/]{DIGIT}{{1,2}}[-/]{DIGIT}{{2,4}}"),
        _plain(f"[-+]?(?:{DIGIT}*(?:[.:,\\xad\\u066b\\u066c]{DIGIT}+)+|{DIGIT}+)", _no_soft_hyphens),
        _plain("[\\u207a\\u207b\\u208a\\u208b]?(?:[\\u2070\\xb9\\xb2\\xb3\\u2074-\\u2079]+|[\\u2080-\\u2089]+)"),
        _plain(f"(?:{DIGIT}{{1,4}}[- \\xa0])?{DIGIT}{{1,4}}(?:\\\\?/|\\u2044){DIGIT}{{1,4}}", _nbsp),
        _plain("[\\xbc\\xbd\\xbe\\u2153-\\u215e]", lambda t: _FRACTIONS.get(t, t)),
        # treebank specials, slashed compounds, money
        _plain("-(?:" + _words("RRB LRB RCB LCB RSB LSB") + ")-|" + _ci("C.D.s") + "|" + _words("pro- anti-") + "|"
               + _ci("S") + "(?:&|&" + _ci("amp") + ";)(?:" + _ci("P-500") + "|" + _ci("Ls") + ")|" + _ci("Cap")
               + APOSTROPHE + _ci("n") + "|" + _ci("c") + APOSTROPHE + _ci("est"), _amp),
        _plain("[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}(?:\\\\?/[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}){1,2}"),      # a/b
        _plain("[A-Z]*\\$|#"),
        _plain(CURRENCY, lambda t: _CURRENCIES.get(t, t)),
        # abbreviations and acronyms
        _acronym_ending_sentence(),
        _plain(f"(?:{BEFORE_NUMBER})\\.", after=f"{SPACE_OR_NL}?{DIGIT}"),
        _plain("(?:" + _ci("pt") + "[eyEY]|" + _ci("co") + ")\\.", after=f"{SPACE}(?:" + _words("ltd lim") + ")"),
        _Custom("[A-Za-z]", _abbreviation_after_lower()),
        _plain(f"(?:{BEFORE_NAME})\\."),
        _plain(f"(?:{BEFORE_NAME})", after=SPACE),
        _plain(ACRONYM, after=SPACE_OR_NL),
        _plain(f"{APOSTROPHE}[0-9][0-9]", after=SPACE_OR_NL),
        _plain(f"{LETTER_OR_DIGIT}+(?:\\.{LETTER_OR_DIGIT}+)*\\.(?:{FILE_EXTENSIONS})", after=f"{SPACE_OR_NL}|[.?!,]"),
        _plain(f"{WORD}\\.", _no_soft_hyphens, after=IN_SENTENCE),
        _Custom("[0-9(+]", _phone()),
        _Custom('["&]', _double_quote()),
        # punctuation and symbols
        _fixed("<|&" + _ci("lt") + ";", "<"),
        _fixed(">|&" + _ci("gt") + ";", ">"),
        _plain("[<>]?[:;=][-o*']?[()DPdpO\\\\{@|\\[\\]]", _parens, after="[^A-Za-z0-9]"),  # :-) ;D
        *[_plain(pattern, _parens) for pattern in (                                     # ^_^ (^_^) (-.-) (^-^)
            "[\\^x=~<>]\\.\\[\\^[xX]=~<>\\]", "[-\\^x=~<>']_[-\\^x=~<>']", "\\([-\\^x=~<>'][_.]?[-\\^x=~<>']\\)",
            "\\([\\^x=~<>']-[\\^x=~<>'`]\\)")],
        _plain("[(){}\\[\\]]", BRACKETS.__getitem__),
        _plain("-+", lambda t: "--" if 3 <= len(t) <= 4 else t),
        _fixed("\\.{3,5}|(?:\\.[ \\xa0]){2,4}\\.|[\\x85\\u2026]", "..."),
        _plain("@+|#+|_+|\\*+|(?:\\\\\\*){1,3}"),
        _plain("[?!]+|" + PUNCTUATION),
        # hyphenated and &-joined compounds
        _plain(HYPHENATED + "\\.", _no_soft_hyphens, after=IN_SENTENCE),
        _plain(HYPHENATED, _no_soft_hyphens),
        _plain(COMPOUND + "\\.", after=IN_SENTENCE),
        _plain(COMPOUND),
        _plain(CAPS_AND + "\\.", _amp, after=IN_SENTENCE),
        _plain(CAPS_AND, _amp),
        # quotes and the rest
        _plain("'", lambda _: "`", after="[A-Za-z][^ \\t\\n\\r\\xa0]"),
        _plain(CLITIC, _closing_quotes),
        _plain(NEG_CLITIC, _closing_quotes),
        _plain("''", _closing_quotes),
        _plain(APOSTROPHE, _closing_quotes),
        _plain(f"{QUOTE_MARKS}{{1,2}}", _closing_quotes),
        _plain("<<|>>"),
        _plain(f"[{_char_class(_SYMBOLS)}]"),
        _fixed(SPACE + "+", None),
        _fixed("[\\x00\\x7f\\u200b\\u200e\\u200f\\ufeff]|&" + _ci("nbsp") + ";", None),
    )


class _Lexer:
    """The token classes compiled: one automaton for the pattern classes, the custom classes by first character."""

    def __init__(self) -> None:
        self.classes = token_classes()
        self.patterns = [k for k, token_class in enumerate(self.classes) if isinstance(token_class, _Pattern)]
        self.automaton = LongestMatch([self.classes[k].expression for k in self.patterns])
        self._customs = [(k, re.compile(token_class.first), token_class) for k, token_class in enumerate(self.classes)
                         if isinstance(token_class, _Custom)]
        self._customs_by_char: Dict[str, Tuple[Tuple[int, _Custom], ...]] = {}  # bounded by the alphabet

    def customs(self, ch: str) -> Tuple[Tuple[int, _Custom], ...]:
        """The custom classes that can match from ``ch`` on, with their priorities."""
        found = self._customs_by_char.get(ch)
        if found is None:
            found = self._customs_by_char[ch] = tuple(
                (k, token_class) for k, first, token_class in self._customs if first.match(ch))
        return found

    def longest(self, text: str, pos: int, failed: Set[int]) -> Answer:
        """The answer of the class with the longest match from ``pos`` (the earlier on a tie), or None."""
        best_end, best, answer = 0, len(self.classes), None
        ends = self.automaton.ends(text, pos, failed)
        for expression in ends:
            end, k = ends[expression], self.patterns[expression]
            if end > best_end or (end == best_end and k < best):
                best_end, best = end, k
        for k, token_class in self.customs(text[pos]):
            found = token_class.answer(text, pos)
            if found is not None and (found[0] > best_end or (found[0] == best_end and k < best)):
                best_end, best, answer = found[0], k, found
        if answer is None and best < len(self.classes):
            answer = self.classes[best].answer(text, pos, best_end)
        return answer


@functools.lru_cache(maxsize=None)
def _lexer() -> _Lexer:
    return _Lexer()


# ---------------------------------------------------------------------------------------------------------------
# The scanner
# ---------------------------------------------------------------------------------------------------------------
# Words whose period is an abbreviation's (see AFTER_LOWER, BEFORE_NAME, BEFORE_NUMBER), lower case
_ABBREVIATIONS = frozenset(w.lstrip("=").lower() for w in " ".join(
    [_AFTER_LOWER, _BEFORE_NAME, _BEFORE_NUMBER, _PTY]).split())
# Fast paths, used only where no token class can match longer: spaces from an ASCII one on (a no-break space may
# start an address); a run of words of letters (hyphenated or not) each followed by spaces, unless it holds a split
# word; a word of letters before a space, a line end, a comma, "'s" or a period that ends the text or precedes a
# space (unless the word is one letter, an abbreviation or a split word); any other word (letters and digits after a
# letter) before a space or a line end; ASCII digits not followed by a space and a digit; [,;:=?!] and "." before a
# space that is not followed by "." (". . ." is an ellipsis).
_SPLIT_HINT = re.compile("[nN][nN]|[tT][tT]|[mM][mM]")  # every split word holds one of these
_SPLIT_WORD = re.compile("(?<![A-Za-z])(?:" + _words(" ".join(SPLIT_WORDS)) + ")(?![A-Za-z])")


@functools.lru_cache(maxsize=None)
def _fast_paths() -> Tuple["re.Pattern[str]", "re.Pattern[str]"]:
    """The word-run and single-token fast paths, compiled on first use."""
    word_run = re.compile("(?:[A-Za-z]+(?:-[A-Za-z]+)*[ \\t][ \\t\\xa0\\u2000-\\u200a\\u3000]*)+")
    fast = re.compile(
        "(?P<space>[ \\t][ \\t\\xa0\\u2000-\\u200a\\u3000]*)"
        "|(?P<word>[A-Za-z]+(?:-[A-Za-z]+)*)(?=[ \\t\\n]|\\Z|,(?:[ \\t\\n]|\\Z)|(?P<period>\\.(?:[ \\t\\n]|\\Z))"
        "|(?P<clitic>'s(?:[ \\t\\n]|\\Z)))"
        f"|(?P<other_word>[{_UL}{_XL}][{_UL}{_XL}{_DG}]*)(?=[ \\t\\n]|\\Z)"
        "|[0-9]+(?=[\\t\\n]|\\Z| [^0-9])"
        "|(?:[,;:=]|[?!]+|\\.)(?=[\\t\\n]|\\Z| [^.])")
    return word_run, fast


def _scan(text: str, pos: int, one_line: bool) -> Tuple[List[str], int]:
    """The jar's tokens from ``pos`` (a token start) on, before lower-casing, ``"\\n"`` for a line end; with
    ``one_line``, up to the first line end (the look-aheads still see the text after it)."""
    tokens: List[str] = []
    n = len(text)
    run, fast = (regex.match for regex in _fast_paths())
    lexer, failed = _lexer(), set()
    while pos < n:
        m = run(text, pos)
        if m is not None and (_SPLIT_HINT.search(m.group()) is None or _SPLIT_WORD.search(m.group()) is None):
            tokens.extend(m.group().split())
            pos = m.end()
            continue
        m = fast(text, pos)
        if m is not None:
            word = m.group("word")
            if word is None:
                if m.group("other_word") is not None:
                    tokens.append(_no_soft_hyphens(m.group()))
                elif m.group("space") is None:
                    tokens.append(m.group())
                pos = m.end()
                continue
            if m.group("clitic") is not None:
                tokens += (word, "'s")
                pos = m.end() + 2
                continue
            lower = word.lower()
            if lower not in SPLIT_WORDS and (m.group("period") is None or (
                    len(word) > 1 and lower not in _ABBREVIATIONS)):
                tokens.append(word)
                pos = m.end()
                continue
        if text[pos] == "\n":
            tokens.append("\n")
            pos += 1
            if one_line:
                break
            continue
        best = lexer.longest(text, pos, failed)
        if best is None:  # a character the jar cannot tokenize: dropped
            pos += 1
            continue
        if best[1] is not None:
            tokens.append(best[1])
        pos = best[2]
    return tokens, pos


def raw_tokens(text: str) -> List[str]:
    """The jar's tokens of a file holding ``text``, before lower-casing and punctuation removal, ``"\\n"`` for each
    line end (``text`` as the jar reads it: see :func:`~capeval.text.java_runtime.utf16_units`)."""
    return _scan(text, 0, one_line=False)[0]


# ---------------------------------------------------------------------------------------------------------------
# pycocoevalcap's call
# ---------------------------------------------------------------------------------------------------------------
# a line's result, for lines whose tokens do not depend on the lines after them
_CACHE: LruCache[str] = LruCache(200_000)
_SPACES = " \t\xa0\u3000" + "".join(map(chr, range(0x2000, 0x200B)))


def tokenize_block(texts: Sequence[str]) -> List[str]:
    """Each text of ``texts`` tokenized as pycocoevalcap's ``PTBTokenizer.tokenize`` does the captions of one call
    (one file, one lexer: a text's tokens may depend on the texts after it): lower-cased, punctuation tokens
    dropped, tokens joined by single spaces. Equal to ``capeval.text.coco_jars.ptb_tokenize_blocks([texts])[0]``.
    Raises :class:`~capeval.core.errors.InputError` for a text that is not a string, holds a line break other than
    ``"\\n"`` (:data:`LINE_BREAKS`) or cannot be written as UTF-8."""
    if isinstance(texts, str):
        raise InputError("texts must be a list of strings, not one string")
    lines = [utf16_units(_checked(i, text)) for i, text in enumerate(texts)]
    joined = "\n".join(lines)
    if "<" in joined:  # a tag's quoted attribute may run over a line end: the whole file in one piece
        return _read_back(raw_tokens(joined), len(lines))
    out: List[str] = []
    last = len(lines) - 1
    owns = [i < last and _stands_alone(line) for i, line in enumerate(lines)]  # the last line ends the file
    cached = iter(_CACHE.get_many(line for line, own in zip(lines, owns) if own))
    made: Dict[str, str] = {}  # this call's new results: a line repeated in the block is tokenized once
    pos = 0
    for line, own in zip(lines, owns):
        found = next(cached) if own else None
        if found is None and own:
            found = made.get(line)
        if found is not None:
            out.append(found)
        else:
            tokens = _scan(joined, pos, one_line=True)[0]
            if tokens and tokens[-1] == "\n":
                tokens.pop()
            out.append(_kept(_as_written(" ".join(tokens))))
            if own:
                made[line] = out[-1]
        pos += len(line) + 1
    _CACHE.put_many(made.items())
    return out


def _stands_alone(line: str) -> bool:
    """Whether a line's tokens do not depend on the lines after it: they do only where it ends in a letter and a
    period (an acronym or an abbreviation may end the sentence)."""
    end = line.rstrip(_SPACES)[-2:]
    return not (end[-1:] == "." and end[:1].isascii() and end[:1].isalpha())


def refuse_line_break(text: str, where: str) -> None:
    """An :class:`InputError` naming ``where`` when ``text`` holds a line break other than ``"\\n"``
    (:data:`LINE_BREAKS`): the jar's lexer ends a line there, so pycocoevalcap would pair the following tokens with
    the wrong images."""
    found = [b for b in LINE_BREAKS if b in text]
    if found:
        raise InputError(f"{where} holds the line break {found[0]!r}: the PTB tokenizer of the COCO metrics would "
                         "split it into two lines (only '\\n' is replaced by a space, as in pycocoevalcap)")


def _checked(i: int, text: str) -> str:
    if not isinstance(text, str):
        raise InputError(f"texts[{i}] is a {type(text).__name__}, not a string")
    refuse_line_break(text, f"texts[{i}]")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise InputError(f"texts[{i}] cannot be written as UTF-8 ({error.reason} at character {error.start})") \
                from None
    return text.replace("\n", " ")


def _as_written(line: str) -> str:
    """One line of tokens as the jar writes it: UTF-16 halves joined again (a half alone is written "?"), each token
    lower-cased as Java does."""
    if line.isascii():
        return line.lower()
    line = utf8_written(line)
    if SIGMA in line:
        return " ".join(map(java_lower, line.split(" ")))
    return line.lower()  # equal to lower-casing each token: its neighbours are spaces


def _kept(line: str) -> str:
    """One output line read back as pycocoevalcap does: split at spaces, punctuation tokens dropped."""
    return " ".join(w for w in line.rstrip().split(" ") if w not in PTB_PUNCTUATION)


def _read_back(tokens: List[str], n: int) -> List[str]:
    """The jar's output file for ``tokens`` read back as pycocoevalcap does (by "\\n", so a token holding one, a tag
    over two lines, is split there)."""
    lines, line = [], []
    for token in tokens:
        if token == "\n":
            lines.append(_as_written(" ".join(line)))
            line = []
        else:
            line.append(token)
    lines.append(_as_written(" ".join(line)))
    return [_kept(line) for line in "\n".join(lines).split("\n")[:n]]
