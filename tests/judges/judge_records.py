"""The answers a judge cache file holds, as the official scripts put them into the explanation turn."""

import json


def official_answers(record, official_text):
    """``(caption, answer)`` of each entry of the judge cache ``record`` whose answer holds a score, in file order:
    ``answer`` is ``official_text(raw score, first digit probabilities, second or None)`` + ``"</s>"`` (the scripts
    write ``str(score) + '</s>'`` as the assistant's turn, then the conversation's separator)."""
    for line in record.read_text().splitlines():
        entry = json.loads(line)
        outputs = entry["outputs"]
        if outputs["score"] is None:
            continue
        probabilities = outputs["digit_probabilities"]
        first = [probabilities["first"][str(d)] for d in range(10)]
        second = probabilities["second"] and [probabilities["second"][str(d)] for d in range(10)]
        yield entry["inputs"]["caption"], official_text(outputs["raw_score"], first, second) + "</s>"
