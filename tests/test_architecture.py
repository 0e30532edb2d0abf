"""The architecture contract: ``longdoc``'s packages form layers, and no import runs upward or in a cycle.

Every import counts, those inside functions too (a deferred import is still a dependency). Layers,
top to bottom (a module may import its own layer and the ones below):

- ``bench``, ``explore``, ``fetch``, ``run_notebook``: measurements that build whatever they time, the explorer, the model
  fetcher, the kernel-free notebook runner
- ``experiments.papers``: one module per paper (rows, claims, protocols)
- ``experiments.families``: retrieval, matching, generative, pre-training
- ``experiments``: the study kernel (study, systems, settings, fitting, cache, records, verdicts, report)
- ``train``, ``index``, ``analysis``, ``plots``
- ``eval``
- ``models``, ``data``
- ``losses``, ``text``, ``io``, ``store_files``, ``types``, ``progress``, ``seeding``, ``sharding``, ``distributed`` (pure functions and plumbing)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lib" / "longdoc"
LAYERS = [
    {"bench", "explore", "fetch", "run_notebook", "pack"},
    {"experiments.papers"},
    {"experiments.families"},
    {"experiments"},
    {"train", "index", "analysis", "plots"},
    {"eval"},
    {"models", "data"},
    {"losses", "text", "io", "store_files", "types", "progress", "seeding", "sharding", "distributed", "launch"},
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


# -- the code fingerprint: what is left out of it runs no model, times nothing and builds no row ---------
RUNS_A_MODEL = ("torch", "transformers", "faiss", "longdoc.index", "longdoc.losses", "longdoc.text", "longdoc.seeding")
RUNS_A_MODEL += ("longdoc.eval.probes",)
CONFIG_SOURCES = ("longdoc.models", "longdoc.train")  # only their configuration classes and the registry's lookup
LEFT_OUT_BECAUSE = {  # (module, import) -> why it still changes no artefact and no recorded number
    ("experiments/records.py", "torch"): "the record's environment: torch's thread count and GPU name",
    ("experiments/cache.py", "longdoc.models.weights"): "weights_version, a cache determinant: reads a file",
    ("pack.py", "torch"): "stores the weights in fp16: their digest is in the cache keys (weights_version)",
    ("pack.py", "longdoc.models.backbone"): "finds the backbone's folder and names its weights",
    ("experiments/preflight.py", "longdoc.models.weights"): "checks the weights resolve before any notebook",
    ("experiments/preflight.py", "torch"): "counts the GPUs torch sees (the device check) before any notebook",
    ("bench/gpu_hours.py", "longdoc.train.steps"): "epoch_steps: prices a pass's steps as the trainer counts them",
}


def presentation_problems(relative: str, source: str, claim_builder: bool = False) -> list[str]:
    """Why a module of ``cache.PRESENTATION_ONLY`` could change an artefact or a recorded number: it
    imports what runs a model, times something, or builds a table's row (``System(...)``)."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found = [(a.name, [a.name]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found = [(node.module, [a.name for a in node.names])]
        else:
            found = []
        for module, names in found:
            if (relative, module.split(".")[0]) in LEFT_OUT_BECAUSE or (relative, module) in LEFT_OUT_BECAUSE:
                continue
            if module.startswith(RUNS_A_MODEL):
                problems.append(f"line {node.lineno}: imports {module}")
            elif module.startswith(CONFIG_SOURCES) and any(
                not (n.endswith("Config") or n == "encoder_class") for n in names
            ):
                problems.append(f"line {node.lineno}: imports {names} from {module}")
        if isinstance(node, ast.Attribute) and node.attr in ("perf_counter", "process_time"):
            problems.append(f"line {node.lineno}: times with {node.attr}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "System":
            problems.append(f"line {node.lineno}: builds a row")
        called = isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", ""))
        if claim_builder and called in CACHE_WRITERS:  # the study runs fits (each keyed by its own determinants)
            problems.append(f"line {node.lineno}: makes a cached artefact")
    return problems


CACHE_WRITERS = ("cached_json", "cached_directory", "fit", "execute")  # calls that make an artefact


def test_claim_builders_only_word_claims():
    """A function marked ``@claim_builder`` is left out of the artefacts' key (``cache.split_source``): like
    a presentation module, its own code builds no row, runs no model, times nothing and makes no cached
    artefact (what it calls stays in the fingerprint, each fit keyed by its own determinants); and every
    function of a fingerprinted module that returns claims is marked, with no other decorator."""
    import sys
    import textwrap

    sys.path.insert(0, str(PACKAGE.parent))
    from longdoc.experiments.cache import _fingerprinted_sources, split_source

    problems, marked = [], 0
    for relative, source in _fingerprinted_sources():
        builders = split_source(source)[1]
        for builder in filter(None, builders.split(b"\0")):
            marked += 1
            text = textwrap.dedent(builder.decode())
            problems += [f"{relative} {p}" for p in presentation_problems(relative, text, claim_builder=True)]
        for node in ast.walk(ast.parse(source)):
            returns = getattr(node, "returns", None)
            if returns is not None and "Claim" in ast.unparse(returns):
                decorators = [ast.unparse(d) for d in node.decorator_list]
                if decorators != ["claim_builder"]:
                    problems.append(
                        f"{relative} line {node.lineno}: {node.name} returns claims, decorated {decorators}"
                    )
    assert marked >= 20 and not problems, "\n".join(problems)


def test_the_presentation_rule_sees_a_cached_artefact():
    found = presentation_problems("p.py", "x = cached_json('probe', f, a=1)\ny = spec.fit(study, 1e-5, 0)\n", True)
    assert [p.split(":")[0] for p in found] == ["line 1", "line 2"]


def test_what_the_code_fingerprint_leaves_out_changes_no_artefact():
    """``cache.PRESENTATION_ONLY`` (modules whose edits keep the cache) holds only code that runs no
    model, times nothing and builds no row: papers/ (rows, decoding times) and the benchmarks are in."""
    import sys

    sys.path.insert(0, str(PACKAGE.parent))
    from longdoc.experiments.cache import PRESENTATION_ONLY

    listed = [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).as_posix().startswith(PRESENTATION_ONLY)
    ]
    assert len(listed) >= len(PRESENTATION_ONLY)  # every entry names at least one file
    problems = [
        f"{path.relative_to(PACKAGE).as_posix()} {problem}"
        for path in listed
        for problem in presentation_problems(path.relative_to(PACKAGE).as_posix(), path.read_text())
    ]
    assert not problems, "in cache.PRESENTATION_ONLY but can change a result:\n" + "\n".join(problems)


def test_the_presentation_rule_sees_a_timer_a_model_and_a_row():
    source = "import time\nfrom longdoc.models.biencoder import BiEncoder, EncoderConfig\nt = time.perf_counter()\nSystem('x', s)\n"
    found = presentation_problems("plots.py", source)
    assert sorted(p.split(":")[0] for p in found) == ["line 2", "line 3", "line 4"]
    assert not presentation_problems("plots.py", "from longdoc.models.smith import SmithConfig\n")
