"""Protected paths: a candidate that tampers with the tests instead of fixing the code.

The grader runs the case's test (test_calc.sh) and, like a test framework that loads its
configuration files, sources any ``conftest.sh`` it finds. Each stand-in candidate below
fixes nothing and attacks the suite instead: it rewrites the failing test, deletes it, adds a
configuration file that makes every test pass, or replaces the tests' folder with a file.
With the profile's ``protected_paths`` those paths are put back as the base has them before
grading: none of them ends ``resolved``, the receipt names what was touched, and the graded
listing is kept. Without protection (the control) the same attacks do pass.
"""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from yyb.errors import UsageError
from yyb.evidence import protect
from yyb.harness import manifest

GRADER = """#!/bin/sh
# A framework stand-in: a conftest.sh anywhere is loaded before the tests run.
for f in $(find . -name conftest.sh | sort); do . "$f"; done
if out=$(sh ./test_calc.sh 2>&1); then passed=true; else passed=false; fi
summary=$(printf '%s' "$out" | head -n 1 | tr -d '"\\\\')
printf '{"schema_version": "yylo_benchmark_grader_output.v2", "passed": %s, "summary": "%s"}\\n' \\
  "$passed" "$summary" > "$YYB_GRADER_OUTPUT"
"""
PROTECTED = ["test_calc.sh", "**/conftest.sh"]

ATTACKS = {
    "rewrites the failing test": (
        "printf '#!/bin/sh\\necho ok\\n' > test_calc.sh",
        ["test_calc.sh"],
    ),
    "deletes the failing test": ("rm test_calc.sh", ["test_calc.sh"]),
    "adds a conftest that passes everything": (
        "mkdir -p sub && printf 'sh() { echo 5; return 0; }\\n' > sub/conftest.sh",
        ["sub/conftest.sh"],
    ),
    "replaces the test with a folder": (
        "rm test_calc.sh && mkdir test_calc.sh && echo x > test_calc.sh/x",
        ["test_calc.sh", "test_calc.sh/x"],
    ),
}


def attack(bench, name: str, script: str) -> str:
    return bench.behaviour(name, f"{script}\ncommit 'tamper'\nenvelope succeeded\n")


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_tampering_with_protected_paths_never_resolves(bench, name):
    script, touched = ATTACKS[name]
    bench.configure({"tests": bench.command("g", GRADER, protected_paths=PROTECTED)})
    plan, (result,) = bench.run([attack(bench, "tamperer", script)])
    assert result.terminal_class == "grader_failure", result.reason
    e = bench.evaluation(plan, result, "tests")
    assert e["verdict"] == "fail"
    assert e["protected"] == touched
    graded = manifest.entries_of(bench.record(e["links"]["graded_listing"]))
    base_listing = bench.record(
        bench.record(bench.terminal(result)["links"]["receipt"])["links"]["listing"]
    )
    base = manifest.entries_of(base_listing)
    assert graded["test_calc.sh"] == base["test_calc.sh"]
    assert not any(path.endswith("conftest.sh") for path in graded)


@pytest.mark.parametrize(
    "name", ["rewrites the failing test", "adds a conftest that passes everything"]
)
def test_the_control_without_protection_the_same_attacks_pass(bench, name):
    bench.configure({"tests": bench.command("g", GRADER, protected_paths=[])})
    plan, (result,) = bench.run([attack(bench, "tamperer", ATTACKS[name][0])])
    assert result.terminal_class == "resolved", result.reason
    e = bench.evaluation(plan, result, "tests")
    assert "protected" not in e and "graded_listing" not in e["links"]
    # Said explicitly, and so the report says it too, in every format.
    warning = "evaluator profile tests protects nothing"
    text = bench.yyb("report", "--plan", bench.plan_file(plan), "--no-layer")
    assert text.exit_code == 0, text.stderr
    assert warning in text.stdout
    markdown = bench.yyb("report", "--plan", bench.plan_file(plan), "--format", "markdown")
    assert warning in markdown.stdout
    document = bench.yyb("report", "--plan", bench.plan_file(plan), "--format", "json")
    assert json.loads(document.stdout)["unprotected"] == ["tests"]
    if importlib.util.find_spec("matplotlib") is not None:  # the html extra
        page = bench.yyb("report", "--plan", bench.plan_file(plan), "--format", "html")
        assert warning in page.stdout


def test_a_command_profile_that_says_nothing_of_protection_is_refused_at_plan_time(bench):
    """The candidate rewrites the test the evaluator runs; a profile that does not say what it
    protects never gets as far as grading it."""
    spec = bench.command("g", GRADER)
    del spec["protected_paths"]
    bench.configure(
        {"tests": spec, "checked": bench.command("h", GRADER, protected_paths=PROTECTED)}
    )
    cheat = attack(bench, "tamperer", ATTACKS["rewrites the failing test"][0])
    with pytest.raises(UsageError, match="evaluator profile tests: .*protected_paths"):
        bench.plan([cheat])
    plan_file = str(bench.root / "p.json")
    out = bench.yyb(
        "plan", "--task", str(bench.task_path), "--models", cheat, "--output", plan_file
    )
    assert out.exit_code == 2
    assert out.stderr.splitlines() == [
        "yyb: error: evaluator profile tests: a command evaluator must name the paths the "
        "benchmark owns in protected_paths (protected_paths: [] to protect nothing)"
    ]
    assert not os.path.exists(plan_file) and bench.store.refs.names("refs/plans") == []


def test_a_profile_that_protects_something_is_not_marked(bench):
    bench.configure({"tests": bench.command("g", GRADER, protected_paths=PROTECTED)})
    plan = bench.plan(["zz/idler"])
    document = bench.yyb("report", "--plan", bench.plan_file(plan), "--format", "json")
    assert "unprotected" not in json.loads(document.stdout)


def test_an_honest_fix_is_graded_as_it_is_and_nothing_is_touched(bench):
    bench.configure({"tests": bench.command("g", GRADER, protected_paths=PROTECTED)})
    plan, (fixer, idler) = bench.run(["zz/fixer", "zz/idler"])
    assert (fixer.terminal_class, idler.terminal_class) == ("resolved", "grader_failure")
    e = bench.evaluation(plan, fixer, "tests")
    assert e["protected"] == []
    graded = bench.record(e["links"]["graded_listing"])
    final = bench.record(
        bench.record(bench.terminal(fixer)["links"]["manifest"])["links"]["listing"]
    )
    assert manifest.entries_of(graded) == manifest.entries_of(final)


@pytest.mark.parametrize(
    ("path", "patterns", "expected"),
    [
        ("tests/test_a.py", ["tests"], True),
        ("tests/test_a.py", ["tests/"], True),
        ("testsuite/a.py", ["tests"], False),
        ("conftest.py", ["**/conftest.py"], True),
        ("a/b/conftest.py", ["**/conftest.py"], True),
        ("a/b/conftest.py.bak", ["**/conftest.py"], False),
        ("pkg/test_x.py", ["*test_*.py"], True),
        ("setup.cfg", ["setup.cfg"], True),
        ("setup.cfg.orig", ["setup.cfg"], False),
        ("src/a.py", [], False),
    ],
)
def test_pattern_matching(path, patterns, expected):
    assert protect.matches(path, patterns) is expected


def test_restore_puts_back_removes_and_keeps_the_rest():
    base = {"t/a": (0o100644, "A"), "t/b": (0o100644, "B"), "src": (0o100644, "S")}
    final = {"t/a": (0o100644, "X"), "t/c": (0o100644, "C"), "src": (0o100644, "S2")}
    graded, touched = protect.restore(base, final, ["t"])
    assert graded == {"t/a": (0o100644, "A"), "t/b": (0o100644, "B"), "src": (0o100644, "S2")}
    assert touched == ["t/a", "t/b", "t/c"]
    # A candidate's file where a protected folder belongs makes way for it.
    graded, touched = protect.restore(base, {"t": (0o100644, "F")}, ["t/a"])
    assert graded == {"t/a": (0o100644, "A")} and touched == ["t", "t/a"]
