"""Flickr8k-Expert correlations of the text metrics (PAC-S repository protocol: every expert rating is its own
row, candidates that are also references already removed in the CLIPScore-format file, one pycocoevalcap call
over all rows), printed next to the published values.

    python benchmarks/reproduce_flickr8k_expert.py ../shared/data/benchmarks/flickr8k/flickr8k_expert_clipscore_format.json
"""

import json
import sys

from scipy.stats import kendalltau

from capeval.core.scoring import load_scorer

PUBLISHED = {  # PAC-S repository, Flickr8k-Expert (tau-b, tau-c) x 100
    "bleu_1": (32.175, 32.324), "bleu_4": (30.599, 30.776), "meteor": (41.538, 41.822),
    "rouge_l": (32.139, 32.314), "cider": (43.602, 43.891),
}


def main(path: str) -> None:
    data = json.load(open(path))
    rows = [(j["caption"], entry["ground_truth"], j["rating"]) for entry in data.values()
            for j in entry["human_judgement"]]
    candidates = [r[0] for r in rows]
    references = [r[1] for r in rows]
    human = [r[2] for r in rows]
    table = {}
    for scorer_name in ("bleu", "meteor", "rouge_l", "cider"):
        result = load_scorer(scorer_name).score(candidates, references=references)
        for key in PUBLISHED:
            if f"{key}_per_sample" in result:
                scores = result[f"{key}_per_sample"]
                table[key] = {"tau_b": 100 * kendalltau(scores, human, variant="b").statistic,
                              "tau_c": 100 * kendalltau(scores, human, variant="c").statistic,
                              "published_tau_b": PUBLISHED[key][0], "published_tau_c": PUBLISHED[key][1]}
    print(json.dumps({"rows": len(rows), "metrics": table}, indent=2))


if __name__ == "__main__":
    main(sys.argv[1])
