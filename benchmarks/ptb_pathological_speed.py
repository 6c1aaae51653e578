"""Speed of the pure-Python PTB tokenizer (``capeval.text.ptb.tokenize_block``) on pathological captions and on
ordinary ones (#40 item 2).

- **Pathological**: one caption of ``--length`` characters (default 100,000) made of one unit repeated: emoji,
  astral letters (each a UTF-16 surrogate pair, as the jar reads them), symbols, ``a's``, quotes, URLs, ``@``
  handles, tags, ``n't``. Target: each in under 2 s, in time linear in the length (``--length`` 10,000 and 100,000
  show the ratio). The jar is itself quadratic on most of them; its output is checked at 2,000 characters by
  ``tests/text/test_ptb_longest_match.py``.
- **Ordinary**: every caption of ``Flickr8k.token.txt`` (``--data-dir``, ``../shared/data``), in blocks of 5,000 as
  a COCO evaluation tokenizes them, the line cache emptied before each repeat; tokens per CPU second, best of
  ``--repeats``.

Times are this process's CPU seconds (``time.process_time``; wall seconds too), so that other jobs on the cores
matter less.

    python benchmarks/ptb_pathological_speed.py [--length 100000] [--data-dir ../shared/data] [--repeats 3]
"""

import argparse
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence

from capeval.core.caches import LruCache
from capeval.text import ptb

PATHOLOGICAL: Dict[str, str] = {
    "emoji": "😀", "astral letters (surrogate pairs)": "𝔸", "symbols": "→", "mixed symbols": "°§¶©★", "a's": "a's",
    "quotes": "'a", "URLs": "www.a.com/", "@ handles": "@a", "tags": "<a", "n't": "n't"}


def run_of(unit: str, length: int) -> str:
    """``unit`` repeated to exactly ``length`` characters."""
    return (unit * (length // len(unit) + 1))[:length]


def time_pathological(tokenize: Callable[[List[str]], List[str]], length: int) -> Dict[str, tuple]:
    """Class -> (CPU seconds, wall seconds) to tokenize one caption of ``length`` characters."""
    tokenize(["a warm-up caption, to compile the tokenizer."])
    out = {}
    for name, unit in PATHOLOGICAL.items():
        text = run_of(unit, length)
        start, cpu = time.perf_counter(), time.process_time()
        tokenize([text])
        out[name] = (time.process_time() - cpu, time.perf_counter() - start)
    return out


def flickr8k_blocks(data_dir: Path, size: int = 5000) -> List[List[str]]:
    with open(data_dir / "benchmarks/flickr8k/Flickr8k.token.txt", encoding="utf-8") as handle:
        captions = [line.rstrip("\n").split("\t", 1)[1] for line in handle if line.strip()]
    return [captions[start:start + size] for start in range(0, len(captions), size)]


def time_ordinary(module, blocks: Sequence[Sequence[str]], repeats: int) -> tuple:
    """(tokens, best CPU seconds) over ``blocks``, the module's line cache emptied before each repeat."""
    best, tokens = float("inf"), 0
    for _ in range(repeats):
        module._CACHE = LruCache(200_000)
        cpu = time.process_time()
        lines = [module.tokenize_block(block) for block in blocks]
        best = min(best, time.process_time() - cpu)
        tokens = sum(len(line.split()) for block in lines for line in block)
    return tokens, best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--length", type=int, default=100_000, help="characters per pathological caption")
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of the ordinary captions (best counts)")
    args = parser.parse_args(argv)
    if args.length < 1 or args.repeats < 1:
        parser.error("--length and --repeats must be at least 1")
    slowest = 0.0
    for name, (cpu, wall) in time_pathological(ptb.tokenize_block, args.length).items():
        slowest = max(slowest, cpu)
        print(f"{name:<34} {args.length:>9,} characters: {cpu:6.2f} s CPU, {wall:6.2f} s wall")
    if args.data_dir.is_dir():
        blocks = flickr8k_blocks(args.data_dir)
        tokens, cpu = time_ordinary(ptb, blocks, args.repeats)
        captions = sum(map(len, blocks))
        print(f"Flickr8k, {captions:,} captions, {tokens:,} tokens: {cpu:.2f} s CPU (best of {args.repeats}), "
              f"{tokens / cpu:,.0f} tokens/s, {captions / cpu:,.0f} captions/s")
    else:
        print(f"no {args.data_dir}: ordinary captions not timed")
    return 0 if slowest < 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
