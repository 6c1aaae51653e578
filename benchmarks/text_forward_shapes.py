"""CPU cost of the fixed text-forward shapes (``capeval.core.shapes.text_rows``): tokens per second of a full-size
random MPNet-base (all-mpnet-base-v2's architecture, random ids) for the rows each width runs in, under today's rule
(the most of 24, 16, 8, 4, 2, 1 rows within ``TEXT_TOKENS_CPU`` = 256 tokens) and the previous one (24, 16, 8 or 4 rows
within 1,536 tokens, at least 4), and the seconds a call holding one text of that width costs (one forward: the rest
of its rows are padding).

    python benchmarks/text_forward_shapes.py [--widths 8 16 32 64 96 128 192 384] [--repeats 3] [--threads 1]
"""

import argparse
import time

import torch
from transformers import MPNetConfig, MPNetModel

from capeval.core.shapes import text_rows


def previous_rows(width: int) -> int:
    """The rule before: the most of 24, 16, 8, 4 rows within 1,536 tokens, at least 4."""
    return next((rows for rows in (24, 16, 8) if rows * width <= 1536), 4)


def forward_seconds(model, rows: int, width: int, repeats: int) -> float:
    """Best of ``repeats`` forwards of ``rows`` × ``width`` random ids (the last position padding, as the encoders
    keep one)."""
    ids = torch.randint(5, model.config.vocab_size, (rows, width))
    mask = torch.ones(rows, width, dtype=torch.long)
    mask[:, -1] = 0
    best = float("inf")
    with torch.inference_mode():
        model(input_ids=ids, attention_mask=mask)  # warm-up
        for _ in range(repeats):
            start = time.perf_counter()
            model(input_ids=ids, attention_mask=mask)
            best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[8, 16, 32, 64, 96, 128, 192, 384])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = MPNetModel(MPNetConfig()).eval()  # 768 wide, 12 layers
    cpu = torch.device("cpu")
    print("width | rule | rows | tokens | tokens/s | one text: s")
    for width in args.widths:
        for rule, rows in (("now", text_rows(cpu, width)), ("before", previous_rows(width))):
            seconds = forward_seconds(model, rows, width, args.repeats)
            print(f"{width} | {rule} | {rows} | {rows * width} | {rows * width / seconds:.0f} | {seconds:.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
