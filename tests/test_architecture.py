"""The architecture contract: ``longdoc``'s packages form layers, and no import runs upward or in a cycle.

Every import counts, those inside functions too (a deferred import is still a dependency). Layers,
top to bottom (a module may import its own layer and the ones below):

- ``bench``, ``explore``, ``fetch``: measurements that build whatever they time, the explorer, the model fetcher
- ``experiments.papers``: one module per paper (rows, claims, protocols)
- ``experiments.families``: retrieval, matching, generative, pre-training
- ``experiments``: the study kernel (study, systems, settings, fitting, cache, records, verdicts, report)
- ``train``, ``index``, ``analysis``, ``plots``
- ``eval``
- ``models``, ``data``
- ``losses``, ``text``, ``io``, ``types``, ``progress``, ``seeding``, ``sharding``, ``distributed`` (pure functions and plumbing)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lib" / "longdoc"
LAYERS = [
    {"bench", "explore", "fetch"},
    {"experiments.papers"},
    {"experiments.families"},
    {"experiments"},
    {"train", "index", "analysis", "plots"},
    {"eval"},
    {"models", "data"},
    {"losses", "text", "io", "types", "progress", "seeding", "sharding", "distributed"},
]


def unit(module: str) -> str:
    """The architectural unit of ``longdoc.<...>``: its package (experiments split into kernel, families, papers)."""
    parts = module.split(".")[1:]
    if not parts:
        return ""
    if parts[0] == "experiments" and len(parts) > 1 and parts[1] in ("families", "papers"):
        return f"experiments.{parts[1]}"
    return parts[0]


def layer(name: str) -> int:
    for depth, units in enumerate(LAYERS):
        if name in units:
            return depth
    raise AssertionError(f"longdoc.{name} is in no layer of tests/test_architecture.py: add it to LAYERS")


def module_name(path: Path) -> str:
    parts = ("longdoc", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> list[tuple[str, str, str]]:
    """``(importing module, imported module, "file:line")`` for every ``longdoc`` import."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = module_name(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("longdoc"):
                modules = [
                    f"{node.module}.{a.name}"
                    for a in node.names
                    if (PACKAGE / Path(*node.module.split(".")[1:], a.name)).with_suffix(".py").exists()
                ]  # ``from package import module`` depends on the module (the package's __init__ runs for any)
                targets = modules + ([node.module] if len(modules) < len(node.names) else [])
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("longdoc")]
            else:
                continue
            where = f"{path.relative_to(PACKAGE.parent).as_posix()}:{node.lineno}"
            found += [(importer, target, where) for target in targets]
    return found


def test_every_package_has_a_layer():
    units = {unit(module_name(path)) for path in PACKAGE.rglob("*.py")} - {""}
    for name in units:
        layer(name)


def test_no_import_runs_upward():
    upward = [
        f"{where}: {importer} imports {target} ({unit(importer)} is below {unit(target)})"
        for importer, target, where in imports()
        if unit(importer) and unit(target) and layer(unit(target)) < layer(unit(importer))
    ]
    assert not upward, "imports that run upward:\n" + "\n".join(upward)


def test_the_package_graph_has_no_cycle():
    graph: dict[str, set[str]] = {}
    for importer, target, _ in imports():
        a, b = unit(importer), unit(target)
        if a and b and a != b:
            graph.setdefault(a, set()).add(b)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    cycles = sorted(a for a in graph if reaches(a, a, {a}))
    assert not cycles, f"packages on an import cycle: {cycles}"


def test_no_module_is_on_an_import_cycle():
    """Within a package too: two modules that import each other (even inside a function, or through a
    private name) are one concept split in two, or a shared piece that belongs below both."""
    modules = {module_name(path) for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for importer, target, _ in imports():
        while target not in modules and "." in target:  # ``from module import name``: the module
            target = target.rsplit(".", 1)[0]
        if target != importer:
            graph.setdefault(importer, set()).add(target)
    cycles = [sorted(c) for c in strongly_connected(graph) if len(c) > 1]
    assert not cycles, f"modules on an import cycle: {cycles}"


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit on a deep package)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
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
                components.append(component)
    return components


def test_the_cycle_check_finds_a_cycle_through_a_third_module():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert sorted(map(sorted, strongly_connected(graph))) == [["a", "b", "c"], ["d"]]


def test_the_kernel_knows_no_family_and_no_paper():
    """The study kernel dispatches on what a row's spec does; it never names a family or a paper."""
    leaks = [
        f"{where}: {importer} imports {target}"
        for importer, target, where in imports()
        if unit(importer) == "experiments" and unit(target) in ("experiments.families", "experiments.papers")
    ]
    assert not leaks, "\n".join(leaks)


@pytest.mark.parametrize("pure", ["losses"])
def test_losses_are_pure_tensor_functions(pure):
    leaks = [
        f"{where}: {importer} imports {target}"
        for importer, target, where in imports()
        if unit(importer) == pure and unit(target) != pure
    ]
    assert not leaks, "\n".join(leaks)
