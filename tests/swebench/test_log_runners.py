"""The ``tests`` kind with a log runner, on a Django-shaped case graded by the lines it prints.

The stand-in repository is shaped the way SWE-bench's Django instances are: unittest test
classes run by ``tests/runtests.py``, which prints one ``name (module.Class) ... status``
line per test (the first line of a test's docstring as its name when it has one) the way
Django's runner does at ``--verbosity 2``; the case lists its tests in those names, as
SWE-bench lists Django's. A ``tests`` profile with ``runner: django`` grades it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.swebench import conftest as swebench
from tests.swebench.test_units import Ran
from yyb.evidence.records import TEST_RUNNERS
from yyb.grading import testsuite
from yyb.grading.outcome import Outcome
from yyb.store.schema import load_schema

RUNTESTS = '''"""Runs every unittest test class of tests/, printing Django's verbosity-2 lines."""
import importlib
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]


def outcome(cls, name):
    try:
        cls(name).debug()
    except unittest.SkipTest as exc:
        return f"skipped {str(exc)!r}"
    except AssertionError:
        return "FAIL"
    except Exception:
        return "ERROR"
    return "ok"


bad = 0
for path in sorted(HERE.glob("test_*.py")):
    module = importlib.import_module(path.stem)
    for cls in vars(module).values():
        if not (isinstance(cls, type) and issubclass(cls, unittest.TestCase)):
            continue
        for name in sorted(n for n in dir(cls) if n.startswith("test")):
            described = f"{name} ({module.__name__}.{cls.__name__})"
            doc = (getattr(cls, name).__doc__ or "").strip()
            if doc:
                print(described, file=sys.stderr)
                described = doc.splitlines()[0]
            status = outcome(cls, name)
            bad += status in ("FAIL", "ERROR")
            print(f"{described} ... {status}", file=sys.stderr)
sys.exit(1 if bad else 0)
'''
ADD = "def add(a, b):\n    return a + b\n\n\n"
OPS_BUGGY = ADD + "def mean(values):\n    return sum(values) // len(values)\n"
OPS_FIXED = (
    ADD + "def mean(values):\n    if not values:\n"
    '        raise ValueError("the mean of nothing")\n    return sum(values) / len(values)\n'
)
TEST_OPS = """import unittest

from mathkit.ops import add, mean


class OpsTests(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_mean(self):
        self.assertEqual(mean([2, 4]), 3)
"""
TEST_OPS_FIXED = (
    TEST_OPS
    + '''
    def test_halves(self):
        """Halves are kept as halves.

        mean() divided with // once."""
        self.assertEqual(mean([1, 2]), 1.5)

    def test_empty_raises(self):
        with self.assertRaises(ValueError):
            mean([])
'''
)
FAIL_TO_PASS = ["Halves are kept as halves.", "test_empty_raises (test_ops.OpsTests)"]
PASS_TO_PASS = ["test_add (test_ops.OpsTests)", "test_mean (test_ops.OpsTests)"]
# Replaces the runner, which the profile protects, with one that says every test passed.
RUNNER_REWRITE = (
    "printf 'print(\"x ... ok\")\\n' > tests/runtests.py\ncommit r\nenvelope succeeded\n"
)
GOLD = 'git apply "$TOOLS/gold.patch" || echo APPLY-FAILED\ncommit gold\nenvelope succeeded\n'


def forged_lines(after: bool) -> str:
    """A behaviour that makes ``mathkit`` print a passing line for each listed test where the
    runner prints its own: when the runner exits, after its own lines (``after``), or on
    import, ending the runner there; it fixes nothing."""
    listed = [*FAIL_TO_PASS, *PASS_TO_PASS]
    forged = "".join(f"    _sys.stderr.write({t + ' ... ok'!r} + '\\n')\n" for t in listed)
    python = f"import atexit as _atexit, os as _os, sys as _sys\n\n\ndef _forge():\n{forged}"
    if after:
        python += "\n\n_atexit.register(_forge)"
    else:
        python += "    _sys.stderr.flush()\n    _os._exit(0)\n\n\n_forge()"
    return f"cat > mathkit/__init__.py <<'PY'\n{python}\nPY\ncommit forge\nenvelope succeeded\n"


def make_djangoish(repo: Path) -> swebench.Package:
    base = {
        "mathkit/__init__.py": "",
        "mathkit/ops.py": OPS_BUGGY,
        "tests/runtests.py": RUNTESTS,
        "tests/test_ops.py": TEST_OPS,
    }
    fix = {"mathkit/ops.py": OPS_FIXED, "tests/test_ops.py": TEST_OPS_FIXED}
    commit, gold, tests = swebench.commit_case(repo, base, fix)
    return swebench.Package(repo, commit, gold, tests, FAIL_TO_PASS, PASS_TO_PASS)


def django_profile(bench: swebench.TestsBench, **fields) -> dict:
    return bench.tests_profile(
        grader_id="django-runtests",
        command=[sys.executable, "tests/runtests.py", "--verbosity", "2"],
        runner="django",
        protected_paths=["tests/runtests.py"],
        **fields,
    )


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """(bench, plan, model name -> attempt result), every candidate run once in one plan."""
    bench = swebench.build_tests_bench(tmp_path_factory.mktemp("djangoish"), make_djangoish)
    bench.configure_tests({"tests": django_profile(bench)})
    behaviours = {
        "gold": GOLD,
        "idler": "envelope succeeded\n",
        "forge": forged_lines(after=True),
        "forge-and-exit": forged_lines(after=False),
        "runner": RUNNER_REWRITE,
    }
    for name, script in behaviours.items():
        bench.behaviour(name, script)
    plan, results = bench.run([f"zz/{n}" for n in behaviours], jobs=2)
    return bench, plan, dict(zip(behaviours, results, strict=True))


def test_the_gold_patch_resolves_by_the_printed_lines(graded):
    bench, plan, results = graded
    e = swebench.assert_every_listed_test_passed(bench, plan, results["gold"])
    assert e["_result"]["details"]["reported"] == 4  # the log's tests: the listed four
    assert e["_output"] is None  # nothing on the report channel: the log is the evidence
    assert b"Halves are kept as halves. ... ok" in e["_log"]
    assert b'"runner": "django"' in e["_input"]


def test_the_empty_patch_fails_with_each_test_as_printed(graded):
    bench, plan, results = graded
    assert results["idler"].terminal_class == "grader_failure"
    e = bench.evaluation(plan, results["idler"], "tests")
    details = {c["name"]: c["detail"] for c in e["_result"]["details"]["checks"]}
    assert details == {
        FAIL_TO_PASS[0]: "failed",
        FAIL_TO_PASS[1]: "error",  # ZeroDivisionError, not the ValueError it asserts
        PASS_TO_PASS[0]: "passed",
        PASS_TO_PASS[1]: "passed",
    }
    assert e["verdict"] == "fail" and "2 of 4 listed tests passed" in e["_result"]["reason"]


def test_a_forged_ok_line_does_not_outweigh_the_runners_own(graded):
    bench, plan, results = graded
    assert results["forge"].terminal_class == "grader_failure", results["forge"].reason
    e = bench.evaluation(plan, results["forge"], "tests")
    log = e["_log"]
    # the runner's line, then the forged one: SWE-bench's parsers keep a test's last line
    runners = log.index(b"Halves are kept as halves. ... FAIL")
    assert runners < log.index(b"Halves are kept as halves. ... ok")
    assert "first not passed: Halves are kept as halves.: failed" in e["_result"]["reason"]


def test_forged_lines_with_the_runner_silenced_pass_the_documented_limit(graded):
    # docs/grading.md, "Log runners": the code under test prints into the log the runner is
    # graded by. Lines it forges for every listed test, when it then stops the runner before
    # it prints its own, cannot be told from the runner's; the JUnit runner's report channel
    # is spoilt by the same attack (test_tests_kind.py, forge-and-kill). This is why `junit`
    # is the default, and why an auditor reads the log (yyb investigate --show grader).
    bench, plan, results = graded
    result = results["forge-and-exit"]
    e = bench.evaluation(plan, result, "tests")
    assert result.terminal_class == "resolved" and e["verdict"] == "pass", result.reason
    assert b"... FAIL" not in e["_log"] and b"... ERROR" not in e["_log"]


def test_a_rewritten_runner_is_put_back(graded):
    bench, plan, results = graded
    result = results["runner"]
    assert result.terminal_class == "grader_failure", result.reason
    e = bench.evaluation(plan, result, "tests")
    assert e["protected"] == ["tests/runtests.py"]
    assert b"x ... ok" not in e["_log"]


TESTS = {"fail_to_pass": ["t.py::test_a"], "pass_to_pass": ["t.py::test_b"]}


@pytest.mark.parametrize(
    "log, exit_code, verdict, reason",
    [
        (b"PASSED t.py::test_a\nPASSED t.py::test_b\n", 0, "pass", "2 of 2"),
        (b"PASSED t.py::test_a\nFAILED t.py::test_b - no\n", 1, "fail", "t.py::test_b: failed"),
        (b"PASSED t.py::test_a\n", 0, "fail", "t.py::test_b: not in the log"),
        (b"", 4, "fail", "the test runner ran no test"),
        (b"\xff" * 1000, 0, "fail", "0 of 2"),
    ],
)
def test_the_verdict_rule_on_a_pytest_log(log, exit_code, verdict, reason):
    result = Outcome(exit_code=exit_code)
    out = testsuite.verdict(result, Ran(exit_code=exit_code), TESTS, log, "pytest-log")
    assert out.verdict == verdict and reason in out.reason, out.reason


def test_a_cut_log_says_so():
    result = Outcome(exit_code=0)
    out = testsuite.verdict(result, Ran(), TESTS, b"PASSED t.py::test_a\n", "pytest-log", True)
    assert out.verdict == "fail" and "the log was cut" in out.reason


def configuration_with(**fields) -> str:
    from yyb import config

    data = config.template("src")
    profile = {"kind": "tests", "grader_id": "g", "version": "1", "command": ["t"], **fields}
    data["evaluators"] = {"tests": profile}
    return json.dumps(data)


@pytest.mark.parametrize("runner", TEST_RUNNERS)
def test_the_configuration_takes_each_runner(runner):
    from yyb import config

    loaded = config.parse(configuration_with(runner=runner), "c")
    assert loaded.data["evaluators"]["tests"]["runner"] == runner


def test_the_configuration_refuses_an_unknown_runner():
    from yyb import config

    with pytest.raises(config.ConfigError) as caught:
        config.parse(configuration_with(runner="nose"), "c")
    assert [p for p, _ in caught.value.problems] == ["/evaluators/tests/runner"]


def test_the_schema_lists_the_runners_of_the_vocabulary():
    schema = load_schema("yylo_benchmark_config.v2")
    found = [
        branch["then"]["properties"]["runner"]["enum"]
        for branch in _branches(schema)
        if "runner" in branch["then"]["properties"]
    ]
    assert found == [list(TEST_RUNNERS)]


def _branches(node):
    """Every ``if``/``then`` branch anywhere in a schema."""
    if isinstance(node, dict):
        if "if" in node and "then" in node:
            yield node
        for value in node.values():
            yield from _branches(value)
    elif isinstance(node, list):
        for value in node:
            yield from _branches(value)


def test_an_imported_django_instance_runs_runtests_with_its_labels_on_its_environment(tmp_path):
    """A Django-shaped instance imported as ``django/django`` 5.0: its profile is SWE-bench's
    runtests.py command for that version with the test patch's module labels, read by the
    django runner, on an environment made from the recipe given; gold passes, empty fails."""
    from tests.conftest import Yyb

    pkg = make_djangoish(tmp_path / "repos" / "django")
    row = {
        "instance_id": "django__django-1",
        "repo": "django/django",
        "base_commit": pkg.base,
        "patch": pkg.gold.decode(),
        "test_patch": pkg.test_patch.decode(),
        "problem_statement": "mean floors\n",
        "FAIL_TO_PASS": json.dumps(pkg.fail_to_pass),
        "PASS_TO_PASS": json.dumps(pkg.pass_to_pass),
        "version": "5.0",
    }
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")
    recipe = {"django__django-1": {"python": "3.11", "requirements": [], "install": []}}
    (tmp_path / "envs.json").write_text(json.dumps(recipe))
    yyb = Yyb(str(tmp_path / "store"))
    out = tmp_path / "swe"
    done = yyb(
        "import", "swe-bench", str(tmp_path / "rows.jsonl"), "--repos", str(tmp_path / "repos"),
        "--out", str(out), "--environments", str(tmp_path / "envs.json"),
    )  # fmt: skip
    assert done.exit_code == 0, done.stderr
    config = json.loads((out / "yylo-benchmark.config.json").read_text())
    profile = config["evaluators"]["swe-django__django-5.0"]
    assert profile["runner"] == "django"
    assert profile["command"] == [
        "python", "tests/runtests.py", "--verbosity", "2", "--settings=test_sqlite",
        "--parallel", "1", "{labels}",
    ]  # fmt: skip
    task = str(out / "cases" / "django__django-1.md")
    checked = yyb(
        "--config", str(out / "yylo-benchmark.config.json"), "validate", "--gold", "--task", task
    )
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    assert "gold=pass empty=fail" in checked.stdout
    store = __import__("yyb.store.repo", fromlist=["Store"]).Store.open(str(tmp_path / "store"))
    record = store.objects.get_record(store.refs.read("refs/validations/django__django-1"))
    given = json.loads(store.objects.get(record["links"]["gold_input"]).body)
    assert given["command"][-1] == "test_ops"  # tests/test_ops.py as runtests.py's label
