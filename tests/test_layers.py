"""The layer diagram of DESIGN.md, enforced on every import (lazy ones included)."""

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
        "yyb.attempts",
        "yyb.grading",
        "yyb.reports",
        "yyb.example",
        "yyb.swebench",
        "yyb.workflow",
        "yyb.readiness",
        "yyb.view",
    },
    {"yyb.cli", "yyb.__main__"},
]
PORCELAIN = 4
# Porcelain packages use evidence, not each other; the run orchestrator alone grades (it runs
# generation 1) and checks grants; the governed lane reads plan files as the isolated lane
# writes them, judges with its judges and reports with its statistics.
PORCELAIN_USES = {
    ("yyb.attempts", "yyb.grading"),
    ("yyb.attempts", "yyb.plans"),
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


def imports() -> dict[str, set[str]]:
    """module -> every yyb module it imports, at any depth of the file."""
    graph: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("yyb"):
                found.add(node.module)
                for alias in node.names:  # from yyb.store import codec: the module yyb.store.codec
                    candidate = f"{node.module}.{alias.name}"
                    if (ROOT.parent / (candidate.replace(".", "/") + ".py")).exists():
                        found.add(candidate)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("yyb")}
        graph[module] = found
    return graph


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
