"""The ``tests`` kind on a real-world-shaped case, against candidates that cheat.

One plan runs every stand-in candidate on the mathkit case (tests/swebench/conftest.py): the
gold fix, no change, and seven that fix nothing and attack the grading instead. Only the gold
fix may end ``resolved``. The case's profile protects ``**/conftest.py`` and
``pyproject.toml``; pytest's configuration files, the listed tests' files and the test patch's
files are protected whatever the profile says, which a second, non-required profile with
``protected_paths: []`` shows by grading the same attempts. A second case of the package lists
a test whose file the test patch leaves alone, and a candidate rewrites it.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.grading.conftest import write
from tests.swebench.conftest import (
    EXTRAS,
    FAIL_TO_PASS,
    PASS_TO_PASS,
    assert_every_listed_test_passed,
    task_text,
)

GOLD = 'git apply "$TOOLS/gold.patch" || echo APPLY-FAILED\ncommit gold\nenvelope succeeded\n'


def package_init(python: str) -> str:
    """A behaviour that puts ``python`` at the top of the package's ``__init__.py``."""
    return (
        "{ cat <<'PY'\n" + python + "\nPY\ncat mathkit/__init__.py; } > init.tmp\n"
        "mv init.tmp mathkit/__init__.py\ncommit cheat\nenvelope succeeded\n"
    )


# Imported by every test module: write a report where every listed test passed into the
# report channel (its path is on pytest's command line), then die before pytest writes its own.
FORGE_AND_KILL = package_init(
    """import os as _os, sys as _sys
def _forge():
    path = next(a.split("=", 1)[1] for a in _sys.argv if a.startswith("--junitxml="))
    cases = []
    for test in (a for a in _sys.argv if "::" in a):
        file, _, rest = test.partition("::")
        parts = rest.split("::")
        cls = ".".join([file[:-3].replace("/", "."), *parts[:-1]])
        cases.append('<testcase classname="%s" name="%s"/>' % (cls, parts[-1]))
    with open(path, "w") as out:
        out.write('<?xml version="1.0"?><testsuites><testsuite>%s</testsuite></testsuites>'
                  % "".join(cases))
    _os.kill(_os.getpid(), 9)
_forge()"""
)
CONFTEST = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome, report.longrepr = "passed", None
"""
# A plugin of the candidate's, loaded by the ``addopts`` of a configuration file pytest prefers
# to the project's ``pyproject.toml``.
PLUGIN = f"cat > forcepass.py <<'PY'\n{CONFTEST}PY\n"
ATTACKS = {
    "pytest-toml": (
        PLUGIN + 'printf \'[pytest]\\naddopts = ["-p", "forcepass"]\\n\' > pytest.toml\n'
        "commit cheat\nenvelope succeeded\n"
    ),
    "dot-pytest-ini": (
        PLUGIN + "printf '[pytest]\\naddopts = -p forcepass\\n' > .pytest.ini\n"
        "commit cheat\nenvelope succeeded\n"
    ),
    "forge-and-kill": FORGE_AND_KILL,
    "conftest": f"cat > conftest.py <<'PY'\n{CONFTEST}PY\ncommit cheat\nenvelope succeeded\n",
    "skip": (
        "sed -i 's/^def test_mean():/def test_mean():\\n    import pytest; pytest.skip(\"later\")/'"
        " tests/test_ops.py\ncommit cheat\nenvelope succeeded\n"
    ),
    "delete": "git rm -rq tests\ncommit cheat\nenvelope succeeded\n",
    "exit-0": package_init("import os as _os; _os._exit(0)"),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """(bench, plan, model name -> attempt result), every candidate run once in one plan."""
    from tests.swebench.conftest import build_tests_bench

    bench = build_tests_bench(tmp_path_factory.mktemp("graded") / "bench")
    bench.configure_tests(
        {
            "tests": bench.tests_profile(),
            "open": bench.tests_profile(protected_paths=[], required=False),
        },
        defaults=["open"],
    )
    names = ["gold", "idler", *ATTACKS]
    for name, script in [("gold", GOLD), ("idler", "envelope succeeded\n"), *ATTACKS.items()]:
        bench.behaviour(name, script)
    plan, results = bench.run([f"zz/{n}" for n in names], jobs=2)
    return bench, plan, dict(zip(names, results, strict=True))


# Rewrites the one FAIL_TO_PASS test of the extras case, in a file the test patch leaves alone.
EXTRAS_REWRITE = (
    "printf 'def test_halves():\\n    pass\\n' > tests/test_extras.py\n"
    "commit cheat\nenvelope succeeded\n"
)


@pytest.fixture(scope="module")
def extras(graded):
    """(bench, plan, model name -> attempt result) on a second case of the same package,
    whose FAIL_TO_PASS test is in a file the test patch does not touch."""
    bench, _, _ = graded
    pkg = dataclasses.replace(
        bench.package, fail_to_pass=[EXTRAS], pass_to_pass=["tests/test_ops.py::test_add"]
    )
    task = write(bench.root / "extras.md", task_text("mean-extras", pkg.base, pkg))
    bench = dataclasses.replace(bench, task_path=task, package=pkg)
    bench.behaviour("extras", EXTRAS_REWRITE)
    names = ["gold", "extras"]
    plan, results = bench.run([f"zz/{n}" for n in names], jobs=2)
    return bench, plan, dict(zip(names, results, strict=True))


def test_the_gold_patch_resolves_with_every_listed_test_passed(graded):
    bench, plan, results = graded
    e = assert_every_listed_test_passed(bench, plan, results["gold"])
    assert bench.package.fail_to_pass == FAIL_TO_PASS
    assert bench.package.pass_to_pass == PASS_TO_PASS
    assert e["protected"] == [] and e["kind"] == "tests"
    assert b"<testsuite" in e["_output"]  # the JUnit report is the retained output


def test_the_empty_patch_does_not_resolve(graded):
    bench, plan, results = graded
    assert results["idler"].terminal_class == "grader_failure"
    checks = bench.evaluation(plan, results["idler"], "tests")["_result"]["details"]["checks"]
    assert {c["name"] for c in checks if not c["passed"]} == set(FAIL_TO_PASS)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_no_attack_resolves(graded, attack):
    bench, plan, results = graded
    result = results[attack]
    assert result.terminal_class == "grader_failure", (attack, result.reason)
    e = bench.evaluation(plan, result, "tests")
    assert e["verdict"] == "fail"
    reason = e["_result"]["reason"]
    if attack == "forge-and-kill":
        assert e["_result"]["signal"] == 9 and "killed by signal 9" in reason
    elif attack == "exit-0":
        assert e["_result"]["exit_code"] == 0
        assert reason.startswith("the test runner wrote no report")
    else:
        assert "FAIL_TO_PASS" in reason and "first not passed" in reason
    touched = {
        "pytest-toml": ["pytest.toml"],
        "dot-pytest-ini": [".pytest.ini"],
        "conftest": ["conftest.py"],
        "skip": ["tests/test_ops.py"],
        "delete": ["tests/test_ops.py"],
    }
    assert e["protected"] == touched.get(attack, [])


@pytest.mark.parametrize("attack", ["conftest", "pytest-toml", "dot-pytest-ini", "skip"])
def test_a_profile_without_protected_paths_still_protects_pytest_and_the_tests(graded, attack):
    bench, plan, results = graded
    control = bench.evaluation(plan, results[attack], "open")
    assert control["verdict"] == "fail" and control["required"] is False
    assert control["protected"] == bench.evaluation(plan, results[attack], "tests")["protected"]


def test_rewriting_a_listed_test_the_test_patch_leaves_alone_does_not_resolve(extras):
    bench, plan, results = extras
    assert results["gold"].terminal_class == "resolved", results["gold"].reason
    result = results["extras"]
    assert result.terminal_class == "grader_failure", result.reason
    e = bench.evaluation(plan, result, "tests")
    assert e["protected"] == ["tests/test_extras.py"]
    assert f"first not passed: {EXTRAS}" in e["_result"]["reason"]


def test_investigate_shows_each_listed_test(graded):
    bench, plan, results = graded
    ordinal = str(results["idler"].ordinal)
    out = bench.yyb("investigate", "--plan", plan.oid, "--attempt", ordinal, "--show", "grader")
    assert out.exit_code == 0, out.stderr
    assert "FAIL tests/test_mean.py::TestMean::test_empty_raises (FAIL_TO_PASS): failed:" in (
        out.stdout
    )
    assert "pass tests/test_ops.py::test_add (PASS_TO_PASS)" in out.stdout
    assert "tests generation 1: fail" in out.stdout


def test_doctor_accepts_the_graded_listings(graded):
    bench, plan, _ = graded
    out = bench.yyb("doctor", "--plan", plan.oid)
    assert out.exit_code == 0, out.stdout + out.stderr
