"""The package's shape: no import cycles (imports inside functions included), imports go one way
(surfaces → families / statistics → backbones/functional → core), the statistics import only core and functional,
the surfaces stack as report ← suite ← cli (nothing but the cli imports the cli), product code never imports the test
builders, and every family folder registers itself through ``registration.py`` (discovered, never imported by
core)."""

import ast
import importlib
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "shared" / "capeval"
FAMILIES = ("clip_s", "polos", "text", "blip2", "ensembeval", "hice_s", "detail", "vcrscore", "image_roundtrip",
            "judges")
SURFACES = ("cli", "evaluate_module", "demo", "distributed", "modules", "bench", "integrations", "benchmarks",
            "meta_eval", "testing", "report", "suite", "cocoevalcap")
# layer of each top-level part of the package; a module may import only its own layer or lower ones
LAYERS = {"core": 0,
          "functional": 1, "backbones": 1, "statistics": 2, **{f: 2 for f in FAMILIES}, **{s: 3 for s in SURFACES}}
# low-level parts and the only other parts they may import
ONLY_IMPORTS = {"statistics": ("core", "functional")}
# surfaces built on one another, lowest first: each may import the ones before it, never one after it
SURFACE_ORDER = ("report", "suite", "cli")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> Dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imports_of(path: Path, modules: Dict[str, Path]) -> List[Tuple[str, int]]:
    """Every capeval module ``path`` imports (at any depth: top level, functions, methods), with its line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names if alias.name.startswith("capeval")]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: relative import"
            if not (node.module or "").startswith("capeval"):
                continue
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                found.append((target if target in modules else node.module, node.lineno))
    return found


def import_graph() -> Dict[str, Set[str]]:
    modules = all_modules()
    graph = {}
    for name, path in modules.items():
        targets = {target for target, _ in imports_of(path, modules)}
        unknown = sorted(t for t in targets if t not in modules)
        assert not unknown, f"{name} imports modules that do not exist: {unknown}"
        graph[name] = targets - {name}
    return graph


def strongly_connected_components(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Tarjan's algorithm (iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    on_stack: Set[str] = set()
    stack: List[str] = []
    components = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return components


def part_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "core"  # the root package only re-exports core names


def test_cycle_finder_finds_a_cycle_through_a_function_level_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert [c for c in strongly_connected_components(graph) if len(c) > 1] == [["a", "b", "c"]]


def test_no_import_cycles_including_imports_inside_functions():
    cycles = [c for c in strongly_connected_components(import_graph()) if len(c) > 1]
    assert cycles == []


def test_every_part_of_the_package_has_a_layer():
    parts = {part_of(name) for name in all_modules()}
    assert parts <= set(LAYERS), f"place {sorted(parts - set(LAYERS))} in a layer (and in CONTRIBUTING.md)"


def test_imports_go_one_way():
    modules = all_modules()
    upward = []
    for name, path in modules.items():
        for target, line in imports_of(path, modules):
            source_part, target_part = part_of(name), part_of(target)
            if LAYERS.get(target_part, 0) > LAYERS.get(source_part, 0):
                upward.append(f"{path.relative_to(PACKAGE)}:{line} ({source_part}) imports {target} ({target_part})")
    assert upward == []


def forbidden_imports(allowed) -> List[str]:
    """``path:line (part) imports target (part)`` for every import where ``allowed(source_part, target_part)`` is
    false."""
    modules = all_modules()
    return [f"{path.relative_to(PACKAGE)}:{line} ({part_of(name)}) imports {target} ({part_of(target)})"
            for name, path in modules.items() for target, line in imports_of(path, modules)
            if not allowed(part_of(name), part_of(target))]


def test_low_level_parts_import_only_what_they_may():
    def allowed(source: str, target: str) -> bool:
        return source not in ONLY_IMPORTS or target in (source, *ONLY_IMPORTS[source])

    assert forbidden_imports(allowed) == []


def test_surfaces_stack_report_then_suite_then_cli():
    def allowed(source: str, target: str) -> bool:
        if target == "cli":
            return source == "cli"
        if source in SURFACE_ORDER and target in SURFACE_ORDER:
            return SURFACE_ORDER.index(target) <= SURFACE_ORDER.index(source)
        return True

    assert forbidden_imports(allowed) == []


def test_product_code_never_imports_the_tiny_test_builders():
    modules = all_modules()
    offending = [f"{path.relative_to(PACKAGE)}:{line}" for name, path in modules.items()
                 if part_of(name) != "testing"
                 for target, line in imports_of(path, modules) if target.startswith("capeval.testing")]
    assert offending == []


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_is_discovered_through_its_registration_module(family):
    from capeval.core.discovery import registration_modules

    assert (PACKAGE / family / "registration.py").is_file()
    assert f"capeval.{family}.registration" in registration_modules()


def test_registration_modules_load_no_model_code():
    """Registries are data: a registration module names factories as "module:attr" strings, so registering every
    family imports no scorer module."""
    import subprocess
    import sys

    code = ("import sys; from capeval.core.discovery import load_registrations; load_registrations(); "
            "print(sorted(m for m in sys.modules if m.startswith('capeval.') and m.endswith('.scorer')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_registries_are_data_with_a_tiny_builder_for_every_weight():
    from capeval.core.hub import registered_weights
    from capeval.core.scoring import scorers
    from capeval.core.training import trainers
    from capeval.testing import TINY_BUILDERS

    assert set(TINY_BUILDERS) == set(registered_weights())
    assert all(isinstance(spec.factory, str) and ":" in spec.factory for spec in scorers().values())
    assert all(":" in spec.configure and ":" in spec.run for spec in trainers().values())


def test_the_public_names_the_readme_shows_still_work():
    import capeval
    from capeval.core.record_sources import iter_records
    from capeval.core.scoring import load_scorer, scorers

    assert capeval.load_scorer is load_scorer and capeval.scorers is scorers
    assert capeval.iter_records is iter_records
    for alias in ("capeval.scoring", "capeval.streaming"):  # capeval 0.1's alias modules: gone before a release
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(alias)
    with pytest.raises(AttributeError):
        capeval.no_such_name


def test_the_suite_engine_and_plan_name_no_metric():
    """Groups, compositions and corpus levels are registry data (#36): the engine and its plan hold no registered
    scorer's or group's name, nor a key prefix such as ``bleu_``, in any string or identifier."""
    from capeval.core.scoring import groups, scorers

    names = {*scorers(), *groups(), "bleu_"}
    for module in ("engine.py", "plan.py"):
        tree = ast.parse((PACKAGE / "suite" / module).read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
                      and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        strings = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
                   and isinstance(node.value, str) and id(node) not in docstrings]
        identifiers = [node.id for node in ast.walk(tree) if isinstance(node, ast.Name)]
        named = sorted({name for name in names for text in strings + identifiers
                        if text == name or text.lower() == name or text.startswith("bleu_")})
        assert not named, f"suite/{module} names metrics {named}"
