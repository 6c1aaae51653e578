"""A small THumB-shaped release on which CIDEr is constant (an undefined correlation), shared by the tests of the
benchmark runner and the leaderboard on degenerate input."""

import json

WORDS = ["dog", "cat", "car", "tree", "boat", "bird", "fish", "lamp"]


def degenerate_rows():
    """8 images × 3 candidates sharing only "a" with their references: "a" is in every image's references (IDF 0),
    so CIDEr is 0 on every row (undefined correlation) while BLEU-1 and ROUGE-L vary with the candidate's length.
    Rows are (candidate, references, image, human rating)."""
    rows = []
    for i, word in enumerate(WORDS):
        refs = [f"a {word} here", f"a {word} there"]
        for k in range(3):
            candidate = " ".join(["a"] + [f"zz{i}{k}{j}" for j in range(k + 1)])
            rows.append((candidate, refs, f"img{i}.jpg", float((i + 2 * k) % 4 + 1)))
    return rows


def write_raw_thumb(folder, ratings):
    """A raw THumB release (``THumB-1.0.jsonl`` + ``references.json``) of :func:`degenerate_rows` with the given
    human_score values."""
    (folder / "thumb").mkdir(parents=True)
    lines, refs = [], []
    for k, ((candidate, references, image, _), rating) in enumerate(zip(degenerate_rows(), ratings)):
        lines.append(json.dumps({"seg_id": k, "hyp": candidate, "image": image, "human_score": rating}))
        refs.append(json.dumps({"seg_id": k, "refs": references}))
    (folder / "thumb" / "THumB-1.0.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "thumb" / "references.json").write_text("\n".join(refs) + "\n")
