"""Longest matches of several regular expressions at once, as a lexer generator's scanner finds them.

:class:`LongestMatch` compiles expressions (Python ``re`` syntax: literals, escapes, character classes, groups
without flags, alternation and greedy repeats) into one automaton, determinized as the text is read. From a
position, :meth:`LongestMatch.ends` walks it once and returns where each expression's longest match ends; Python's
``re`` would stop at the first alternative that matches instead. Over one scan of a text (one ``failed`` set), the
walks take time linear in the text: a walk records the (state, position) pairs from which no expression matched any
further, and a later walk that reaches one of them stops there (maximal munch in linear time).
"""

from __future__ import annotations

import bisect
import threading
from typing import Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

_ESCAPES = {"t": 9, "n": 10, "v": 11, "f": 12, "r": 13, "a": 7}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_MAX_CHAR = 0x10FFFF

# A parsed expression: ("set", ranges) | ("cat", [nodes]) | ("alt", [nodes]) | ("repeat", node, low, high or None)
Node = tuple


class _Parser:
    """The subset of Python's regular-expression syntax that :class:`LongestMatch` compiles."""

    def __init__(self, pattern: str):
        self.pattern, self.at = pattern, 0

    def parse(self) -> Node:
        node = self._alternation()
        if self.at != len(self.pattern):
            self._refuse("an unbalanced ')'")
        return node

    def _refuse(self, what: str) -> None:
        raise ValueError(f"{what} at {self.at} of {self.pattern!r}: not supported by LongestMatch")

    def _peek(self) -> str:
        return self.pattern[self.at] if self.at < len(self.pattern) else ""

    def _alternation(self) -> Node:
        options = [self._sequence()]
        while self._peek() == "|":
            self.at += 1
            options.append(self._sequence())
        return options[0] if len(options) == 1 else ("alt", options)

    def _sequence(self) -> Node:
        items = []
        while self._peek() not in ("", "|", ")"):
            items.append(self._repeated(self._atom()))
        return ("cat", items)

    def _atom(self) -> Node:
        ch = self._peek()
        self.at += 1
        if ch == "(":
            if self.pattern.startswith("?:", self.at):
                self.at += 2
            elif self.pattern.startswith("?P<", self.at):
                self.at = self.pattern.index(">", self.at) + 1
            elif self._peek() == "?":
                self._refuse("a look-around or flag group")
            node = self._alternation()
            if self._peek() != ")":
                self._refuse("an unclosed '('")
            self.at += 1
            return node
        if ch == "[":
            return self._class()
        if ch == ".":
            return ("set", _ranges([(0, 9), (11, _MAX_CHAR)]))
        if ch == "\\":
            code = self._escape()
            return ("set", ((code, code),))
        if ch in "*+?{^$":
            self._refuse(f"{ch!r}")
        return ("set", ((ord(ch), ord(ch)),))

    def _escape(self) -> int:
        """The character after a backslash (consumed)."""
        ch = self._peek()
        self.at += 1
        if ch in _HEX_ESCAPES:
            digits = self.pattern[self.at:self.at + _HEX_ESCAPES[ch]]
            self.at += _HEX_ESCAPES[ch]
            return int(digits, 16)
        if ch in _ESCAPES:
            return _ESCAPES[ch]
        if ch == "" or ch.isalnum():
            self._refuse(f"the escape \\{ch}")
        return ord(ch)

    def _class(self) -> Node:
        negate = self._peek() == "^"
        self.at += negate
        ranges: List[Tuple[int, int]] = []
        first = True
        while True:
            ch = self._peek()
            if ch == "":
                self._refuse("an unclosed '['")
            if ch == "]" and not first:
                self.at += 1
                break
            first = False
            low = self._class_char()
            if self._peek() == "-" and self.pattern[self.at + 1:self.at + 2] not in ("]", ""):
                self.at += 1
                ranges.append((low, self._class_char()))
            else:
                ranges.append((low, low))
        ranges = _ranges(ranges)
        return ("set", _complement(ranges) if negate else ranges)

    def _class_char(self) -> int:
        ch = self._peek()
        self.at += 1
        return self._escape() if ch == "\\" else ord(ch)

    def _repeated(self, atom: Node) -> Node:
        ch = self._peek()
        if ch == "*":
            low, high = 0, None
        elif ch == "+":
            low, high = 1, None
        elif ch == "?":
            low, high = 0, 1
        elif ch == "{":
            close = self.pattern.index("}", self.at)
            low_text, comma, high_text = self.pattern[self.at + 1:close].partition(",")
            low = int(low_text or 0)
            high = int(high_text) if high_text else (None if comma else low)
            self.at = close
        else:
            return atom
        self.at += 1
        if self._peek() in ("?", "+"):
            self._refuse("a lazy or possessive repeat")
        return ("repeat", atom, low, high)


def _ranges(ranges: Sequence[Tuple[int, int]]) -> Tuple[Tuple[int, int], ...]:
    """Sorted, merged inclusive code point ranges."""
    merged: List[List[int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], high)
        else:
            merged.append([low, high])
    return tuple((low, high) for low, high in merged)


def _complement(ranges: Tuple[Tuple[int, int], ...]) -> Tuple[Tuple[int, int], ...]:
    out, start = [], 0
    for low, high in ranges:
        if low > start:
            out.append((start, low - 1))
        start = high + 1
    if start <= _MAX_CHAR:
        out.append((start, _MAX_CHAR))
    return tuple(out)


class _CharSet:
    """Membership in sorted inclusive ranges."""

    def __init__(self, ranges: Tuple[Tuple[int, int], ...]):
        self.lows = [low for low, _ in ranges]
        self.highs = [high for _, high in ranges]

    def __contains__(self, ch: str) -> bool:
        code = ord(ch)
        k = bisect.bisect_right(self.lows, code) - 1
        return k >= 0 and code <= self.highs[k]


class LongestMatch:
    """One automaton for ``patterns`` (each must not match the empty string); expression ``k`` is reported as
    ``k``. States are numbered as they are first reached (0: no expression can go on); the transitions found are
    kept, at most ``max_transitions`` of them (then forgotten and found again)."""

    def __init__(self, patterns: Sequence[str], max_transitions: int = 1_000_000):
        self._sets: List[_CharSet] = []
        self._set_ids: Dict[Tuple[Tuple[int, int], ...], int] = {}
        self._consume: List[Optional[Tuple[int, int]]] = []  # NFA state -> (char set, next state)
        self._epsilon: List[List[int]] = []                   # NFA state -> states reached without reading
        self._final: Dict[int, int] = {}                      # NFA state -> expression
        self._closure_cache: Dict[int, FrozenSet[int]] = {}
        starts = []
        for k, pattern in enumerate(patterns):
            final = self._new_state()
            self._final[final] = k
            starts.append(self._build(_Parser(pattern).parse(), final))
        self._ids: Dict[FrozenSet[int], int] = {}
        self._members: List[FrozenSet[int]] = []
        self._transitions: List[Dict[str, int]] = []
        self.accepting: List[Tuple[int, ...]] = []
        self._max_transitions, self._count = max_transitions, 0
        self._lock = threading.Lock()  # new states and transitions are added under it; reading needs none
        self._state(frozenset())
        start = frozenset().union(*(self._closure(s) for s in starts))
        self.start = self._state(start)
        if self.accepting[self.start]:
            raise ValueError(f"patterns {list(self.accepting[self.start])} match the empty string")

    # -- construction ---------------------------------------------------------------------------------------------
    def _new_state(self) -> int:
        self._consume.append(None)
        self._epsilon.append([])
        return len(self._consume) - 1

    def _build(self, node: Node, following: int) -> int:
        """The entry state of ``node``'s automaton, which goes on to ``following``."""
        kind = node[0]
        if kind == "set":
            ranges = node[1]
            if ranges not in self._set_ids:
                self._set_ids[ranges] = len(self._sets)
                self._sets.append(_CharSet(ranges))
            state = self._new_state()
            self._consume[state] = (self._set_ids[ranges], following)
            return state
        if kind == "cat":
            for item in reversed(node[1]):
                following = self._build(item, following)
            return following
        if kind == "alt":
            state = self._new_state()
            self._epsilon[state] = [self._build(option, following) for option in node[1]]
            return state
        _, item, low, high = node
        if high is None:
            loop = self._new_state()
            self._epsilon[loop] = [self._build(item, loop), following]
            following = loop
        else:
            for _ in range(high - low):
                optional = self._new_state()
                self._epsilon[optional] = [self._build(item, following), following]
                following = optional
        for _ in range(low):
            following = self._build(item, following)
        return following

    def _closure(self, state: int) -> FrozenSet[int]:
        """The states that read a character or accept, reached from ``state`` without reading."""
        found = self._closure_cache.get(state)
        if found is not None:
            return found
        seen, stack, out = {state}, [state], set()
        while stack:
            s = stack.pop()
            if self._consume[s] is not None or s in self._final:
                out.add(s)
            for t in self._epsilon[s]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        found = self._closure_cache[state] = frozenset(out)
        return found

    def _state(self, members: FrozenSet[int]) -> int:
        found = self._ids.get(members)
        if found is None:
            found = self._ids[members] = len(self._members)
            self._members.append(members)
            self._transitions.append({})
            self.accepting.append(tuple(sorted(self._final[s] for s in members if s in self._final)))
        return found

    def _step(self, state: int, ch: str) -> int:
        """The state after reading ``ch`` in ``state`` (found and kept)."""
        with self._lock:
            reached: Set[int] = set()
            for s in self._members[state]:
                edge = self._consume[s]
                if edge is not None and ch in self._sets[edge[0]]:
                    reached |= self._closure(edge[1])
            target = self._state(frozenset(reached))
            if self._count >= self._max_transitions:
                for transitions in self._transitions:
                    transitions.clear()
                self._count = 0
            self._transitions[state][ch] = target
            self._count += 1
            return target

    # -- matching -------------------------------------------------------------------------------------------------
    def ends(self, text: str, pos: int, failed: Set[int]) -> Dict[int, int]:
        """Expression -> the end of its longest match from ``pos`` (only those that match). ``failed`` holds this
        text's (state, position) pairs that lead to no match: pass one set per text (it grows with the scan)."""
        transitions, accepting = self._transitions, self.accepting
        stride, state, found, since_match = len(text) + 1, self.start, {}, []
        for i in range(pos, len(text)):
            ch = text[i]
            following = transitions[state].get(ch)
            state = self._step(state, ch) if following is None else following
            if not state:
                break
            key = state * stride + i + 1
            if key in failed:
                break
            matched = accepting[state]
            if matched:
                for k in matched:
                    found[k] = i + 1
                since_match.clear()
            else:
                since_match.append(key)
        if since_match:
            failed.update(since_match)
        return found
