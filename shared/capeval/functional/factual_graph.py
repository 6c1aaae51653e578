"""The FACTUAL parser's output as FactualSceneGraph 0.7.3's ``SceneGraphParser.parse`` returns it.

The model decodes strings such as ``"(car, is, red), (car, on, street), (car, is, red), (sky"``; the official
parser turns each into its graph text before any metric reads it (``_parse_batch``): an echoed prompt is removed,
brackets and commas are spaced out, a fact cut off by the output length is dropped (or, when it is the only one,
cut to its first field), duplicates are removed and the facts are sorted:
``"( car , is , red ) , ( car , on , street )"``. CAPTURE, ``spice_factual`` and ``soft_spice`` read these texts.
"""

from __future__ import annotations

PROMPT_ECHO = "Generate Scene Graph:"


def spaced_graph(text: str) -> str:
    """Brackets and commas spaced out, runs of whitespace collapsed (``space_out_symbols_in_graph``)."""
    return " ".join(text.replace("(", " ( ").replace(")", " ) ").replace(",", " , ").split())


def graph_text(raw_output: str) -> str:
    """The official graph text of one decoded parser output (``clean_graph_string`` of the spaced output)."""
    text = spaced_graph(raw_output.replace(PROMPT_ECHO, "").strip())
    facts = text.split(") ,")
    if not text.endswith(")"):
        facts = facts[:-1] if len(facts) > 1 else [facts[0].split(",")[0]]
    unique = {fact.strip().strip("()").strip() for fact in facts} - {""}
    return " , ".join(f"( {fact} )" for fact in sorted(unique))
