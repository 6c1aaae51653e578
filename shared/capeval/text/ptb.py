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
their output is the same, others split), the fast paths and the regular expressions are written here and in
:mod:`capeval.text.ptb_patterns`. Its character tables (which characters the jar treats as letters, digits and
symbols, fixed by the Unicode version compiled into the 2014 jar) were measured by running every Basic Multilingual
Plane character through it; they are facts about its behaviour.

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
from capeval.text.ptb_patterns import (
    ABBREVIATIONS, ACRONYM, AFTER_LOWER, APOSTROPHE, APOSTROPHE_LIKE, BEFORE_NAME, BEFORE_NUMBER, CAPS_AND, CLITIC,
    COMPOUND, CURRENCY, DIGIT, DIGIT_CHARS, FILE_EXTENSIONS, HYPHENATED, IN_SENTENCE, LETTER, LETTER_CHARS,
    LETTER_OR_DIGIT, MARK_CHARS, NEG_CLITIC, NOT_N_STEM, PUNCTUATION, QUOTE_MARKS, SENTENCE_STARTS, SGML, SPACE,
    SPACE_OR_NL, SPLIT_WORDS, SYMBOLS, URL_END, URL_PATH, WORD, char_class, nocase, words_of)

# pycocoevalcap's PUNCTUATIONS: the tokens it drops (compared after lower-casing, so -lrb- and the like stay)
PTB_PUNCTUATION = frozenset(["''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-", ".", "?", "!", ",", ":", "-",
                             "--", "...", ";"])
# Characters other than "\n" that the jar ends a line at: pycocoevalcap would pair the following lines' tokens with
# the wrong images, so capeval refuses them ("\n" is replaced by a space, as pycocoevalcap does).
LINE_BREAKS = ("\r", "\x0b", "\x0c", "\x85", "\u2028", "\u2029")


# ---------------------------------------------------------------------------------------------------------------
# Token rewrites
# ---------------------------------------------------------------------------------------------------------------
BRACKETS = {"(": "-LRB-", ")": "-RRB-", "{": "-LCB-", "}": "-RCB-", "[": "-LSB-", "]": "-RSB-"}
_CLOSING_QUOTES = {"'": "'", "\x92": "'", "\u2019": "'", "\u203a": "'", "\x91": "`", "\u2018": "`", "\u201b": "`",
                   "\u2039": "`", "\x93": "``", "\u201c": "``", "\xab": "``", "\x94": "''", "\u201d": "''",
                   "\xbb": "''"}
_FRACTIONS = {"\xbc": "1/4", "\xbd": "1/2", "\xbe": "3/4", "\u2153": "1/3", "\u2154": "2/3"}
_CURRENCIES = {"\xa2": "cents", "\xa3": "#", "\x80": "$", "\xa4": "$", "\u20a0": "$", "\u20ac": "$"}
_AMP_ENTITY = re.compile("&" + nocase("amp") + ";")


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
    return _Pattern(words_of(" ".join(SPLIT_WORDS)), make)


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
    regex = re.compile('"|&' + nocase("quot") + ";")
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
        _plain(nocase("c++") + "|[cCfF]#"),
        _plain(SGML, _nbsp),
        _fixed("[\\x96\\x97\\u2013\\u2014\\u2015]|&(?:" + words_of("MD mdash ndash") + ");", "--"),
        _fixed("&" + nocase("amp") + ";", "&"),
        _plain("&(?:" + words_of("HT TL UR LR QC QL QR odq cdq") + "|#[0-9]+);"),
        # words, and words before a clitic they are split from
        _plain(WORD, _no_soft_hyphens, after=CLITIC),
        _plain(NOT_N_STEM, _no_soft_hyphens, after=NEG_CLITIC),
        _plain(WORD, _no_soft_hyphens),
        # words that keep an apostrophe inside or at an edge
        *map(_plain, (
            f"{APOSTROPHE}[nN]{APOSTROPHE}?",                                           # rock 'n' roll
            f"[lLdDjJ]{APOSTROPHE}",                                                    # l' d' j'
            "(?:" + words_of("Dunkin somethin ol") + f"){APOSTROPHE}",
            f"{APOSTROPHE}" + nocase("em"),
            f"[A-HJ-XZn]{APOSTROPHE_LIKE}[{LETTER_CHARS}]{{2,}}",                                # O'Neil D'Angelo
            f"{APOSTROPHE}[2-9]0[sS]",                                                  # '90s
            f"{APOSTROPHE}" + nocase("til") + "[lL]?",
            f"[{LETTER_CHARS}]+[aeiouyAEIOUY]{APOSTROPHE_LIKE}[aeiouA-Z][{LETTER_CHARS}]*",   # Hawai'i ma'am
            f"{APOSTROPHE}" + nocase("cause"),
            nocase("cont'd") + "\\.?",
            words_of("'twas nor'easter c'mon e'er s'mores ev'ry li'l nat'l"),
            f"[oO]{APOSTROPHE_LIKE}[oO]")),
        _plain("[yY]" + APOSTROPHE, after=f"[{LETTER_CHARS}]"),                                  # y'all -> y' all
        # addresses
        _plain(nocase("http") + '[sS]?://[^ \\t\\n\\f\\r"<>|(){}]+' + URL_END),
        _plain(nocase("www.") + '(?:[^ \\t\\n\\f\\r"<>|.!?(){},]+\\.)+[a-zA-Z]{2,4}' + URL_PATH),
        _plain('(?:[^ \\t\\n\\f\\r"`\'<>|.!?(){}\\x2c-\\x5f$]+\\.)+(?:' + words_of("com net org edu") + ")" + URL_PATH),
        _plain("(?:&" + nocase("lt") + ';|<)?[a-zA-Z0-9][^ \\t\\n\\f\\r"<>|()\\xa0{}]*@'
               '(?:[^ \\t\\n\\f\\r"<>|(){}.\\xa0]+\\.)*[^ \\t\\n\\f\\r"<>|(){}.\\xa0]+(?:&' + nocase("gt") + ";|>)?"),
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
        _plain("-(?:" + words_of("RRB LRB RCB LCB RSB LSB") + ")-|" + nocase("C.D.s") + "|" + words_of("pro- anti-")
               + "|" + nocase("S") + "(?:&|&" + nocase("amp") + ";)(?:" + nocase("P-500") + "|" + nocase("Ls") + ")|"
               + nocase("Cap") + APOSTROPHE + nocase("n") + "|" + nocase("c") + APOSTROPHE + nocase("est"), _amp),
        _plain("[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}(?:\\\\?/[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}){1,2}"),      # a/b
        _plain("[A-Z]*\\$|#"),
        _plain(CURRENCY, lambda t: _CURRENCIES.get(t, t)),
        # abbreviations and acronyms
        _acronym_ending_sentence(),
        _plain(f"(?:{BEFORE_NUMBER})\\.", after=f"{SPACE_OR_NL}?{DIGIT}"),
        _plain("(?:" + nocase("pt") + "[eyEY]|" + nocase("co") + ")\\.",
               after=f"{SPACE}(?:" + words_of("ltd lim") + ")"),
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
        _fixed("<|&" + nocase("lt") + ";", "<"),
        _fixed(">|&" + nocase("gt") + ";", ">"),
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
        _plain(f"[{char_class(SYMBOLS)}]"),
        _fixed(SPACE + "+", None),
        _fixed("[\\x00\\x7f\\u200b\\u200e\\u200f\\ufeff]|&" + nocase("nbsp") + ";", None),
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
# Fast paths, used only where no token class can match longer: spaces from an ASCII one on (a no-break space may
# start an address); a run of words of letters (hyphenated or not) each followed by spaces, unless it holds a split
# word; a word of letters before a space, a line end, a comma, "'s" or a period that ends the text or precedes a
# space (unless the word is one letter, an abbreviation or a split word); any other word (letters and digits after a
# letter) before a space or a line end; ASCII digits not followed by a space and a digit; [,;:=?!] and "." before a
# space that is not followed by "." (". . ." is an ellipsis).
_SPLIT_HINT = re.compile("[nN][nN]|[tT][tT]|[mM][mM]")  # every split word holds one of these
_SPLIT_WORD = re.compile("(?<![A-Za-z])(?:" + words_of(" ".join(SPLIT_WORDS)) + ")(?![A-Za-z])")


@functools.lru_cache(maxsize=None)
def _fast_paths() -> Tuple["re.Pattern[str]", "re.Pattern[str]"]:
    """The word-run and single-token fast paths, compiled on first use."""
    word_run = re.compile("(?:[A-Za-z]+(?:-[A-Za-z]+)*[ \\t][ \\t\\xa0\\u2000-\\u200a\\u3000]*)+")
    fast = re.compile(
        "(?P<space>[ \\t][ \\t\\xa0\\u2000-\\u200a\\u3000]*)"
        "|(?P<word>[A-Za-z]+(?:-[A-Za-z]+)*)(?=[ \\t\\n]|\\Z|,(?:[ \\t\\n]|\\Z)|(?P<period>\\.(?:[ \\t\\n]|\\Z))"
        "|(?P<clitic>'s(?:[ \\t\\n]|\\Z)))"
        f"|(?P<other_word>[{LETTER_CHARS}{MARK_CHARS}][{LETTER_CHARS}{MARK_CHARS}{DIGIT_CHARS}]*)(?=[ \\t\\n]|\\Z)"
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
                    len(word) > 1 and lower not in ABBREVIATIONS)):
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
