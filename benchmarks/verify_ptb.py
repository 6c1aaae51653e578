"""Whole-corpus check of the pure-Python PTB tokenizer (``capeval.text.ptb``) against pycocoevalcap's Java one
(``stanford-corenlp-3.4.1.jar`` through ``capeval.text.coco_jars.ptb_tokenize_blocks``): every caption, reference and
generated description in ``../shared/data``, tokenized in blocks of ``--block`` lines the way production does (one
file and lexer per block; a line's tokens may depend on the next line), compared line by line. Prints the counts of
equal and different texts per source, the first differences, and both tokenizers' throughput.

    python benchmarks/verify_ptb.py [--data-dir ../shared/data] [--block 5000] [--examples 10]
"""

import argparse
import csv
import json
import resource
import sys
import time
from pathlib import Path
from typing import Dict, Iterable, List, Sequence

from capeval.text.coco_jars import ptb_tokenize_blocks
from capeval.text.ptb import tokenize_block


def shared_texts(data_dir: Path) -> Dict[str, List[str]]:
    """Every caption-like text in ``data_dir`` (``../shared/data``), in file order, by source. The Flickr8k
    Expert/CrowdFlower annotation files name their captions by id: those captions are the token file's lines."""
    bench = data_dir / "benchmarks"
    sources: Dict[str, List[str]] = {}
    with open(bench / "flickr8k/Flickr8k.token.txt", encoding="utf-8", newline="\n") as handle:
        captions = dict(line.rstrip("\n").split("\t", 1) for line in handle if line.strip())
    sources["flickr8k/Flickr8k.token.txt"] = list(captions.values())
    for name in ("ExpertAnnotations.txt", "CrowdFlowerAnnotations.txt"):
        with open(bench / "flickr8k" / name, encoding="utf-8") as handle:
            sources[f"flickr8k/{name}"] = [captions[row[1]] for row in csv.reader(handle, delimiter="\t") if row]
    expert = json.loads((bench / "flickr8k/flickr8k_expert_clipscore_format.json").read_text(encoding="utf-8"))
    sources["flickr8k/flickr8k_expert_clipscore_format.json"] = [
        text for entry in expert.values()
        for text in [*entry["ground_truth"], *(j["caption"] for j in entry["human_judgement"])]]
    sources.update(_parquet_texts(bench / "composite/composite_candidates_refs_ratings.parquet", "composite"))
    pascal = json.loads((bench / "pascal50s/pascal50s_pairs_5refs.json").read_text(encoding="utf-8"))
    sources["pascal50s/pascal50s_pairs_5refs.json"] = [
        text for pairs in pascal.values() for pair in pairs for text in [*pair["captions"], *pair["references"]]]
    sources.update(_parquet_texts(bench / "pascal50s/pascal50s_pairs_48refs.parquet", "pascal50s"))
    sources.update(_mat_texts(bench / "pascal50s"))
    with open(bench / "thumb/THumB-1.0.jsonl", encoding="utf-8") as handle:
        sources["thumb/THumB-1.0.jsonl"] = [json.loads(line)["hyp"] for line in handle if line.strip()]
    with open(bench / "thumb/references.json", encoding="utf-8") as handle:  # JSON lines
        sources["thumb/references.json"] = [ref for line in handle if line.strip() for ref in json.loads(line)["refs"]]
    reformulations = json.loads((bench / "reformulations/full_reformulation_dataset.json").read_text(encoding="utf-8"))
    sources["reformulations"] = [text for row in reformulations for text in (row["question"], row["answer"])]
    polaris = json.loads((bench / "polaris_val/polaris_val_subset.json").read_text(encoding="utf-8"))
    sources["polaris_val (candidates)"] = [row["mt"] for row in polaris]
    sources["polaris_val (explanations)"] = [text for row in polaris for text in row["explanation"].values()]
    for path in sorted((data_dir / "judges/fleur").glob("*.txt")):
        lines = path.read_text(encoding="utf-8").split("\n")
        sources[f"judges/fleur/{path.name}"] = [line[len("caption : "):] for line in lines
                                                if line.startswith("caption : ")]
    for path in sorted((data_dir / "images").glob("*/*.json")):
        sources[f"images/{path.parent.name}/{path.name}"] = list(_strings(json.loads(path.read_text("utf-8"))))
    return sources


def _parquet_texts(path: Path, name: str) -> Dict[str, List[str]]:
    import pyarrow.parquet as pq

    table = pq.read_table(path).to_pylist()
    texts = [ref for row in table for ref in row["references"]]
    texts += [row[key] for row in table for key in ("candidate", "candidate_a", "candidate_b") if key in row]
    generated = [text for row in table for text in row["caption"].values()]
    return {f"{name}/{path.name}": texts, f"{name}/{path.name} (LLaVA descriptions)": generated}


def _mat_texts(folder: Path) -> Dict[str, List[str]]:
    from scipy.io import loadmat

    out = {}
    for file, key in (("pascal50S.mat", "refs"), ("pascal_cands.mat", "cands")):
        entries = loadmat(str(folder / file))[key][0]
        out[f"pascal50s/{file}"] = [str(s) for entry in entries for s in _strings(entry["sent"].tolist())]
    return out


def _strings(value) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)
    elif hasattr(value, "tolist"):
        yield from _strings(value.tolist())


BLOCK = 5000  # lines per block: thousands of captions per tokenizer call, as in a COCO evaluation


def blocks_of(texts: Sequence[str], size: int = BLOCK) -> List[List[str]]:
    """``texts`` in consecutive blocks of at most ``size`` lines (one jar file and lexer each)."""
    return [list(texts[start:start + size]) for start in range(0, len(texts), size)]


def compare_with_jar(blocks: Sequence[Sequence[str]], examples: int = 10) -> dict:
    """Both tokenizers on the same blocks (the jar in one JVM): ``equal`` and ``different`` text counts, the first
    ``examples`` differences as ``(text, jar, python)``, ``equal_by_block`` (each block's count of equal texts) and
    each tokenizer's wall and CPU seconds (``jar_s``, ``jar_cpu_s``: the JVM's, all its threads; ``python_s``,
    ``python_cpu_s``)."""
    start, children = time.perf_counter(), _children_cpu()
    expected = ptb_tokenize_blocks(blocks)
    jar_s, jar_cpu_s = time.perf_counter() - start, _children_cpu() - children
    start, cpu = time.perf_counter(), time.process_time()
    got = [tokenize_block(block) for block in blocks]
    python_s, python_cpu_s = time.perf_counter() - start, time.process_time() - cpu
    equal_by_block, found = [], []
    for block, want, have in zip(blocks, expected, got):
        same = [a == b for a, b in zip(want, have)]
        equal_by_block.append(sum(same))
        found += [(text, a, b) for text, a, b, ok in zip(block, want, have, same) if not ok][:examples - len(found)]
    equal = sum(equal_by_block)
    return {"equal": equal, "different": sum(len(block) for block in blocks) - equal, "examples": found,
            "equal_by_block": equal_by_block, "jar_s": jar_s, "jar_cpu_s": jar_cpu_s, "python_s": python_s,
            "python_cpu_s": python_cpu_s}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--block", type=int, default=BLOCK, help=f"lines per tokenizer block (default {BLOCK})")
    parser.add_argument("--examples", type=int, default=10, help="differences to print (default 10)")
    args = parser.parse_args(argv)
    if not args.data_dir.is_dir():
        parser.error(f"--data-dir {args.data_dir} does not exist")
    if args.block < 1:
        parser.error("--block must be at least 1")
    sources = shared_texts(args.data_dir)
    names: List[str] = []
    blocks: List[List[str]] = []
    for name, texts in sources.items():
        for block in blocks_of(texts, args.block):
            names.append(name)
            blocks.append(block)
    result = compare_with_jar(blocks, examples=args.examples)
    counts = {name: [0, 0] for name in sources}
    for name, block, equal in zip(names, blocks, result["equal_by_block"]):
        counts[name][0] += equal
        counts[name][1] += len(block)
    width = max(len(name) for name in sources)
    for name, (equal, total) in counts.items():
        print(f"{name:<{width}}  {equal:>7,} of {total:>7,} equal")
    total = result["equal"] + result["different"]
    distinct = len({text for block in blocks for text in block})
    print(f"{'all':<{width}}  {result['equal']:>7,} of {total:>7,} equal, {result['different']:,} different "
          f"({distinct:,} distinct texts)")
    print(f"jar, one JVM for {len(blocks)} blocks: {result['jar_s']:.2f} s wall ({total / result['jar_s']:,.0f} "
          f"texts/s), {result['jar_cpu_s']:.2f} s CPU; python: {result['python_s']:.2f} s wall "
          f"({total / result['python_s']:,.0f} texts/s), {result['python_cpu_s']:.2f} s CPU "
          f"({total / result['python_cpu_s']:,.0f} texts per CPU second)")
    for text, jar, python in result["examples"]:
        print(f"DIFFERENT {text!r}\n    jar:    {jar!r}\n    python: {python!r}")
    return 0 if result["different"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
