"""The layer diagram of DESIGN.md, enforced on every import (lazy ones included), and no import
cycle between modules."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "yyb"

# Lowest first. A module may import its own package and anything in a lower layer; packages
# of one layer may use each other (no cycle: the second test), except porcelain packages.
LAYERS = [
    {"yyb", "yyb.errors"},  # the version and the error tree
    {"yyb.store"},
    {"yyb.harness"},
    {"yyb.evidence", "yyb.signing", "yyb.config", "yyb.cases"},
    {
        "yyb.plans",
        "yyb.agents",
        "yyb.attempts",
        "yyb.grading",
        "yyb.reports",
        "yyb.example",
        "yyb.swebench",
        "yyb.workflow",
        "yyb.readiness",
        "yyb.view",
        "yyb.gateway",
    },
    {"yyb.cli", "yyb.__main__", "yyb.api"},  # yyb.api: the Python entry point beside the CLI
]
PORCELAIN = 4
# Porcelain packages use evidence, not each other; the run orchestrator alone grades (it runs
# generation 1) and checks grants; the governed lane reads plan files as the isolated lane
# writes them, judges with its judges and reports with its statistics.
PORCELAIN_USES = {
    ("yyb.attempts", "yyb.grading"),
    ("yyb.attempts", "yyb.plans"),
    # a plan binds an agent kind's adapter program and scratch paths; a run starts it; the
    # example's stand-in agent writes its envelope with the shipped helper.
    ("yyb.plans", "yyb.agents"),
    ("yyb.attempts", "yyb.agents"),
    # a run whose candidates reach their models through the gateway starts one and meters them.
    ("yyb.attempts", "yyb.gateway"),
    ("yyb.example", "yyb.agents"),
    ("yyb.workflow", "yyb.grading"),
    ("yyb.workflow", "yyb.plans"),
    ("yyb.workflow", "yyb.reports"),
    # release-readiness runs synthetic plans through the isolated lane, built like the example.
    ("yyb.readiness", "yyb.attempts"),
    ("yyb.readiness", "yyb.plans"),
    ("yyb.readiness", "yyb.example"),
    # the viewer shows the report layers as the reports render them.
    ("yyb.view", "yyb.reports"),
    # the SWE-bench import checks listed test ids by collecting them as the tests kind runs.
    ("yyb.swebench", "yyb.grading"),
}


def unit(module: str) -> str:
    """The package (or top-level module) a module belongs to, as LAYERS names them."""
    parts = module.split(".")
    if len(parts) >= 2 and (ROOT / parts[1]).is_dir():
        return ".".join(parts[:2])
    return module if module in {m for layer in LAYERS for m in layer} else parts[0]


def layer(name: str) -> int:
    return next(i for i, members in enumerate(LAYERS) if name in members)


def module_name(path: Path, root: Path = ROOT) -> str:
    """The dotted name of the module at ``path`` (a package is its ``__init__``)."""
    rel = path.relative_to(root.parent).with_suffix("")
    return ".".join(rel.parts).removesuffix(".__init__")


def _is_module(name: str, root: Path) -> bool:
    folder = root.parent / name.replace(".", "/")
    return folder.with_suffix(".py").exists() or (folder / "__init__.py").exists()


def _targets(node: ast.AST, package: str, root: Path) -> set[str]:
    """The modules of ``root``'s package one AST node imports: ``import x``, ``from x import
    y`` (the module x.y when there is one, else x), relative forms (``from . import y``,
    ``from .x import y``) and ``importlib.import_module("...")`` with a literal name."""
    top = root.name
    if isinstance(node, ast.ImportFrom):
        if node.level:
            parts = package.split(".")
            parts = parts[: len(parts) - (node.level - 1)]
            name = ".".join(parts + ([node.module] if node.module else []))
        else:
            name = node.module or ""
        if name != top and not name.startswith(top + "."):
            return set()
        found = {f"{name}.{a.name}" for a in node.names if _is_module(f"{name}.{a.name}", root)}
        # from yyb.store import codec needs the module yyb.store.codec; a name that is no
        # module (from yyb.store import Store) needs the package itself.
        return found if len(found) == len(node.names) else found | {name}
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name.split(".")[0] == top}
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        name = node.args[0].value
        if called == "import_module" and isinstance(name, str) and name.split(".")[0] == top:
            return {name}
    return set()


def imports(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> every module of ``root``'s package it imports, at any depth of the file
    (an import inside a function is a dependency all the same: laziness is for start-up time
    and must not hide a cycle)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            found |= _targets(node, package, root)
        graph[module] = found - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """Every set of modules that import each other round a cycle (the strongly connected
    components of more than one module, by Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next((t for t in targets if t in graph), None)
            if target is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set(stack[stack.index(node) :])
                    del stack[stack.index(node) :]
                    on_stack -= component
                    if len(component) > 1:
                        found.add(frozenset(component))
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                on_stack.add(target)
                work.append((target, iter(sorted(graph[target]))))
            elif target in on_stack:
                low[node] = min(low[node], index[target])
    return found


def violations(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, targets in graph.items():
        source = unit(module)
        for target in targets:
            into = unit(target)
            if into == source or layer(into) < layer(source):
                continue
            if layer(into) == layer(source) != PORCELAIN:
                continue
            if (source, into) in PORCELAIN_USES:
                continue
            wrong.append(f"{module} -> {target}")
    return wrong


def test_every_import_points_down_the_diagram():
    assert violations(imports()) == []


def test_no_import_cycle_between_packages():
    graph: dict[str, set[str]] = {}
    for module, targets in imports().items():
        source = unit(module)
        graph.setdefault(source, set()).update(unit(t) for t in targets if unit(t) != source)
    seen, active = set(), []

    def visit(node):
        assert node not in active, " -> ".join(active[active.index(node) :] + [node])
        if node in seen:
            return
        active.append(node)
        for target in sorted(graph.get(node, ())):
            visit(target)
        active.pop()
        seen.add(node)

    for node in sorted(graph):
        visit(node)


def test_the_check_catches_what_it_must():
    """Upward arrows and porcelain reaching into porcelain are caught; allowed ones are not."""
    graph = {
        "yyb.store.refs": {"yyb.attempts.run"},
        "yyb.grading.regrade": {"yyb.attempts.run", "yyb.evidence.names"},
        "yyb.reports.build": {"yyb.grading.evaluate"},
        "yyb.attempts.conclude": {"yyb.grading.evaluate", "yyb.evidence.chain"},
        "yyb.signing": {"yyb.evidence.records"},
    }
    assert violations(graph) == [
        "yyb.store.refs -> yyb.attempts.run",
        "yyb.grading.regrade -> yyb.attempts.run",
        "yyb.reports.build -> yyb.grading.evaluate",
    ]


def test_no_import_cycle_between_modules():
    found = cycles(imports())
    assert not found, sorted(sorted(c) for c in found)


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_cycle_check_fires_on_every_kind_of_import(tmp_path):
    """A tiny package whose modules import each other in every form the check reads."""
    root = _package(
        tmp_path / "yyb",
        {
            "__init__.py": "",
            "a.py": "from yyb import b\n",  # absolute, a module named in from-import
            "b.py": "from . import c\n",  # relative, the package's module
            "c.py": "def f():\n    from .d import x\n",  # relative and lazy
            "d.py": "import importlib\nimportlib.import_module('yyb.a')\nx = 1\n",
            "e.py": "import yyb.f\n",
            "f.py": "from yyb.e import *\n",
            "g.py": "from yyb import a\n",  # imports into a cycle, in none
            "pkg/__init__.py": "",
            "pkg/h.py": "from .. import g\nfrom ..pkg import i\n",
            "pkg/i.py": "import importlib\nimportlib.import_module('yyb.pkg.h')\n",
        },
    )
    assert cycles(imports(root)) == {
        frozenset({"yyb.a", "yyb.b", "yyb.c", "yyb.d"}),
        frozenset({"yyb.e", "yyb.f"}),
        frozenset({"yyb.pkg.h", "yyb.pkg.i"}),
    }
    acyclic = _package(tmp_path / "other" / "yyb", {"__init__.py": "", "a.py": "import yyb.b\n"})
    (acyclic / "b.py").write_text("from yyb import a as not_a_cycle_alone\n")
    assert cycles(imports(acyclic)) == {frozenset({"yyb.a", "yyb.b"})}
    (acyclic / "b.py").write_text("x = 1\n")
    assert cycles(imports(acyclic)) == set()
