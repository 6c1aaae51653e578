"""The fast loop, ``python -m pytest -m "not slow" tests``: the marker is registered, and the loop keeps the architecture
test, a scorer contract of every family and a test of every test folder, whatever tests/conftest.py names. The README's
two test commands are the ones `.ci/run` and CONTRIBUTING.md run."""

import ast
import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
ARCHITECTURE = "tests/test_architecture.py"
CONTRACT = "tests/core/test_scorer_contract.py"


def functions_of(module: str):
    """The node ids of the test functions a module defines (without their parameters)."""
    tree = ast.parse((REPO / module).read_text())
    return [f"{module}::{node.name}" for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test")]


def modules():
    return sorted(path.relative_to(REPO).as_posix() for path in TESTS.rglob("test_*.py"))


def family_of(spec) -> str:
    return spec.load_factory().__module__.split(".")[1]


def test_the_slow_marker_is_registered(pytestconfig):
    assert "slow" in [line.split(":")[0].strip() for line in pytestconfig.getini("markers")]


def test_every_test_folder_keeps_a_fast_test(fast_loop):
    folders = {}
    for module in modules():
        folders.setdefault(module.rsplit("/", 1)[0], []).extend(functions_of(module))
    assert len(folders) > 10
    only_slow = sorted(folder for folder, functions in folders.items() if all(map(fast_loop.is_slow, functions)))
    assert not only_slow, f"no test of these folders is in the fast loop: {only_slow}"


def test_the_architecture_test_stays_in_the_fast_loop(fast_loop):
    functions = functions_of(ARCHITECTURE)
    assert len(functions) > 5 and not any(map(fast_loop.is_slow, functions))


def test_every_family_keeps_a_whole_scorer_contract_in_the_fast_loop(fast_loop):
    from capeval.core.scoring import scorers

    specs = scorers()
    families = {family_of(spec) for spec in specs.values()}
    assert len(families) >= 8
    functions = functions_of(CONTRACT)
    covered = {family_of(spec) for name, spec in specs.items()
               if not any(fast_loop.is_slow(f"{function}[{name}]") for function in functions)}
    assert covered == families, f"no scorer of {sorted(families - covered)} keeps its whole contract in the fast loop"


def test_the_named_tests_exist(fast_loop):
    from capeval.core.scoring import scorers

    for entry in fast_loop.fast_tests:
        module, _, function = entry.partition("::")
        assert (REPO / module).is_file(), f"FAST_TESTS names a missing module: {entry}"
        assert not function or f"{module}::{function}" in functions_of(module), f"no such test: {entry}"
    for module, parameters in fast_loop.slow_parameters.items():
        assert (REPO / module).is_file() and set(parameters) <= set(scorers()), (module, parameters)


def test_the_marker_expression_runs_the_named_tests_only(fast_loop):
    """The real hooks, in a fresh pytest with ``--strict-markers``: the architecture test and the contract's fast
    scorers stay; a module without a fast test, the other tests of a module with one, and slow parameters go."""
    node_entry = next(entry for entry in fast_loop.fast_tests if "::" in entry)
    node_module = node_entry.split("::")[0]
    unnamed = next(module for module in modules() if not any(e.startswith(module) for e in fast_loop.fast_tests))
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "--strict-markers", "-m", "not slow",
                          "-p", "no:cacheprovider", ARCHITECTURE, CONTRACT, node_module, unnamed],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    collected = [line for line in run.stdout.splitlines() if "::" in line]
    assert set(functions_of(ARCHITECTURE)) <= {node.split("[")[0] for node in collected}
    assert {node.split("[")[0] for node in collected if node.startswith(CONTRACT)} == set(functions_of(CONTRACT))
    slow_parameter = f"[{fast_loop.slow_parameters[CONTRACT][0]}]"
    assert [node for node in collected if node.endswith("[clip_s]")]
    assert not [node for node in collected if node.startswith(unnamed) or node.endswith(slow_parameter)]
    assert {node.split("[")[0] for node in collected if node.startswith(node_module)} == {node_entry}


def test_ci_and_contributing_run_the_readme_test_commands():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"```bash\n(python -m pytest [^\n]*)\n```", readme)
    (full,) = [command for command in commands if "not slow" not in command]
    (fast,) = [command for command in commands if '-m "not slow"' in command]
    assert full in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    contributing = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert f"`{full}`" in contributing and f"`{fast}`" in contributing
