"""Every evaluate module's ``Examples:`` block runs as a doctest, offline on tiny random weights, and its metric
card shows the same example; the hub models the example loads (its result's provenance) are in the card's Space
YAML ``models``.

The examples load ``evaluate.load("capeval/<name>")``; here that id is pointed at the module folder of this
checkout (nothing else in the example changes). Model scores differ on tiny weights, so the examples print them
with ELLIPSIS; weight-free values are printed exactly.
"""

import ast
import doctest
import re

import pytest
import yaml

from capeval.modules import available_modules

MODULES = available_modules()
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _script_examples(name):
    """The text after ``Examples:`` in the module's inputs description: built from its scorer's card for a metric
    (``capeval.evaluate_module.inputs_description``), the script's ``_KWARGS_DESCRIPTION`` for a measurement (read
    without importing it)."""
    if MODULES[name].parent.name == "metrics":
        from capeval.core.scoring import get_scorer_spec
        from capeval.evaluate_module import inputs_description

        docstring = inputs_description(get_scorer_spec(name))
    else:
        tree = ast.parse((MODULES[name] / f"{name}.py").read_text())
        (value,) = [node.value for node in tree.body if isinstance(node, ast.Assign)
                    and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["_KWARGS_DESCRIPTION"]]
        docstring = "".join(_literal_parts(value))  # the init options between them are generated
    _, sep, examples = docstring.partition("Examples:\n")
    assert sep, f"{name}: no Examples: block"
    return examples


def _literal_parts(node):
    """The string literals of a ``"..." + f(...) + "..."`` expression, in order."""
    if isinstance(node, ast.BinOp):
        return _literal_parts(node.left) + _literal_parts(node.right)
    return [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else []


def _card_examples(name):
    """The ``>>>`` code blocks of the metric card's Examples section."""
    card = (MODULES[name] / "README.md").read_text()
    section = re.search(r"^#{2,3} Examples\n(.*?)(?=^#{1,3} )", card, re.S | re.M)
    assert section, f"{name}: the card has no Examples section"
    return [block for block in re.findall(r"```python\n(.*?)```", section.group(1), re.S) if ">>>" in block]


def _parse(name, text):
    return doctest.DocTestParser().get_doctest(text, {}, name, str(MODULES[name] / f"{name}.py"), 0)


def _normalized(text):
    return [line.strip() for line in text.strip().splitlines()]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_examples_need_no_skip_and_match_the_card(name):
    test = _parse(name, _script_examples(name))
    assert test.examples, f"{name}: the Examples block has no doctest"
    skipped = [e.source for e in test.examples if e.options.get(doctest.SKIP)]
    assert not skipped, f"{name}: +SKIP left in an example that runs offline: {skipped}"
    loads = [e.source for e in test.examples if f'evaluate.load("capeval/{name}"' in e.source]
    assert loads, f"{name}: the example does not load the module as evaluate.load('capeval/{name}')"
    assert [_normalized(block) for block in _card_examples(name)] == [_normalized(_script_examples(name))]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_examples_run_offline_on_tiny_weights(name, tiny_hub, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    test = _parse(name, _script_examples(name))
    local = repr(str(MODULES[name]))
    for example in test.examples:
        example.source = example.source.replace(f'"capeval/{name}"', local)
    report = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    runner.run(test, out=report.append, clear_globs=False)
    assert runner.failures == 0 and runner.tries == len(test.examples), "".join(report)
    provenance = test.globs.get("result", {}).get("provenance") or {}
    loaded = {w["source"].split("@")[0] for w in provenance.get("weights", [])}
    card = yaml.safe_load((MODULES[name] / "README.md").read_text().split("---\n")[1])
    assert loaded <= set(card.get("models", [])), loaded - set(card.get("models", []))
    assert bool(loaded) == (MODULES[name].parent.name == "metrics")
