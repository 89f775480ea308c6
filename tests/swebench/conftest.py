"""A real-world-shaped case: a small Python package with a pytest suite, in a Git repository.

``make_package`` builds the repository the way a SWE-bench instance comes from a project: a
base commit with a bug, and a later fix commit whose diff splits into the gold patch (the
package) and the test patch (the tests it adds or changes, hidden from candidates). The test
runner is this interpreter with its pytest: its environment (the venv and the installation it
was made from) is given to sandboxed processes as the tool policy's read-only paths.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import git
from tests.grading.conftest import DISPATCHER, Bench, write
from yyb.store.repo import Store

PYPROJECT = """[project]
name = "mathkit"
version = "0.1"

[tool.pytest.ini_options]
testpaths = ["tests"]
"""
INIT = "from mathkit.ops import add, mean\n"
OPS_BUGGY = """def add(a, b):
    return a + b


def mean(values):
    return sum(values) // len(values)
"""
OPS_FIXED = """def add(a, b):
    return a + b


def mean(values):
    if not values:
        raise ValueError("the mean of nothing")
    return sum(values) / len(values)
"""
TEST_OPS = """from mathkit import add, mean


def test_add():
    assert add(2, 3) == 5


def test_mean():
    assert mean([2, 4]) == 3
"""
# A test at the base that fails there and that the fix commit leaves as it is: listed, its
# file is the benchmark's though the test patch does not touch it.
# Its ``test_same`` ids hold spaces, which some published lists cut at the first one.
TEST_EXTRAS = """import pytest

from mathkit import mean


def test_halves():
    assert mean([1, 2]) == 1.5


@pytest.mark.parametrize("values", [[1, 1], [2, 2]], ids=["ones and ones", "twos and twos"])
def test_same(values):
    assert mean(values) == values[0]
"""
EXTRAS = "tests/test_extras.py::test_halves"
SPACED = "tests/test_extras.py::test_same[ones and ones]"
# What the fix commit does to the tests: one more assertion in an existing test, a new file.
TEST_OPS_FIXED = TEST_OPS + "    assert mean([1, 2]) == 1.5\n"
TEST_MEAN = """import pytest

from mathkit import mean


class TestMean:
    def test_empty_raises(self):
        with pytest.raises(ValueError):
            mean([])

    @pytest.mark.parametrize("values,expected", [([1, 2], 1.5), ([3], 3)])
    def test_values(self, values, expected):
        assert mean(values) == expected
"""
FAIL_TO_PASS = [
    "tests/test_ops.py::test_mean",
    "tests/test_mean.py::TestMean::test_empty_raises",
    "tests/test_mean.py::TestMean::test_values[values0-1.5]",
]
PASS_TO_PASS = [
    "tests/test_ops.py::test_add",
    "tests/test_mean.py::TestMean::test_values[values1-3]",
]
PROTECTED = ["**/conftest.py", "pyproject.toml"]


def tool_paths() -> list[str]:
    """What a sandboxed ``sys.executable -m pytest`` needs: the venv and its base install."""
    return sorted({os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)})


def command(python: str = sys.executable) -> list[str]:
    """The mathkit profile's pytest command, run by ``python``."""
    return [
        python,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "--junitxml={junit}",
        "{tests}",
    ]


@dataclass
class Package:
    """The repository, its base commit, and the instance's patches and test lists."""

    repo: Path
    base: str
    gold: bytes
    test_patch: bytes
    fail_to_pass: list[str] = field(default_factory=lambda: list(FAIL_TO_PASS))
    pass_to_pass: list[str] = field(default_factory=lambda: list(PASS_TO_PASS))

    def instance(self, instance_id: str, repo: str = "acme/mathkit", **fields) -> dict:
        """A SWE-bench instance record of this package (lists as JSON strings, as published)."""
        record = {
            "instance_id": instance_id,
            "repo": repo,
            "base_commit": self.base,
            "patch": self.gold.decode(),
            "test_patch": self.test_patch.decode(),
            "problem_statement": "mean() floors its result, and mean([]) divides by zero.\n",
            "FAIL_TO_PASS": json.dumps(self.fail_to_pass),
            "PASS_TO_PASS": json.dumps(self.pass_to_pass),
            "version": "0.1",
            "hints_text": "",
        }
        record.update(fields)
        return record


def commit_case(repo: Path, base: dict[str, str], fix: dict[str, str]) -> tuple[str, bytes, bytes]:
    """A new repository at ``repo`` whose base commit holds the files ``base`` (path -> text)
    and whose next commit writes ``fix``: (the base commit, the fix's diff of ``mathkit`` as
    the gold patch, its diff of ``tests`` as the test patch)."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    messages = ("mathkit", "mean: true division, and refuse an empty list")
    for files, message in zip((base, fix), messages, strict=True):
        for path, text in files.items():
            write(repo / path, text)
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", message)
    commit = git(repo, "rev-parse", "HEAD~1")
    gold = git(repo, "diff", commit, "HEAD", "--", "mathkit") + "\n"
    tests = git(repo, "diff", commit, "HEAD", "--", "tests") + "\n"
    return commit, gold.encode(), tests.encode()


def make_package(repo: Path) -> Package:
    base = {
        "pyproject.toml": PYPROJECT,
        "README.md": "mathkit: small sums.\n",
        "mathkit/__init__.py": INIT,
        "mathkit/ops.py": OPS_BUGGY,
        "tests/test_ops.py": TEST_OPS,
        "tests/test_extras.py": TEST_EXTRAS,
    }
    fix = {
        "mathkit/ops.py": OPS_FIXED,
        "tests/test_ops.py": TEST_OPS_FIXED,
        "tests/test_mean.py": TEST_MEAN,
    }
    return Package(repo, *commit_case(repo, base, fix))


@pytest.fixture(scope="session")
def package_template(tmp_path_factory) -> Package:
    return make_package(tmp_path_factory.mktemp("template") / "mathkit")


def task_text(case_id: str, base: str, pkg: Package, profile: str = "tests") -> str:
    import hashlib

    def digest(name: str) -> str:
        return hashlib.sha256((pkg.repo.parent / name).read_bytes()).hexdigest()

    return f"""---
id: {case_id}
title: mean floors
tags: [benchmark-case]
fields:
  benchmark:
    repository: src
    base_commit: {base}
    case_version: "1"
    category: bugfix
    grader_profile: {profile}
    tests:
      test_patch: hidden/test.patch
      test_patch_sha256: {digest("hidden/test.patch")}
      fail_to_pass: {json.dumps(pkg.fail_to_pass)}
      pass_to_pass: {json.dumps(pkg.pass_to_pass)}
      gold_patch: hidden/gold.patch
      gold_patch_sha256: {digest("hidden/gold.patch")}
---
mean() floors its result, and mean([]) divides by zero. Fix mathkit.
"""


@dataclass
class TestsBench(Bench):
    """The grading bench (tests/grading/conftest.py) on the mathkit package."""

    package: Package | None = None

    def tests_profile(self, **fields) -> dict:
        spec = {
            "kind": "tests",
            "grader_id": "pytest-junit",
            "version": "1",
            "command": command(),
            "timeout_ms": 60_000,
            "purpose": "correctness",
            "required": True,
            "protected_paths": list(PROTECTED),
        }
        spec.update(fields)
        return spec

    def configure_tests(self, evaluators: dict | None = None, defaults=None) -> dict:
        data = self.configure(evaluators or {"tests": self.tests_profile()}, defaults)
        data["tool_policy"]["read_only_paths"] += tool_paths()
        self.config_path.write_text(json.dumps(data, indent=2))
        self.config_data = data
        return data


def build_tests_bench(root: Path, make=make_package) -> TestsBench:
    """The bench on the package ``make`` builds (a ``Package``) under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    pkg = make(root / "repo")
    tools = root / "tools"
    write(tools / "agent.sh", DISPATCHER.replace("@TOOLS@", str(tools)), executable=True)
    write(tools / "gold.patch", pkg.gold)
    write(root / "hidden" / "test.patch", pkg.test_patch)
    write(root / "hidden" / "gold.patch", pkg.gold)
    task = write(root / "task.md", task_text("mean-floors", pkg.base, pkg))
    store_path = str(root / "store")
    Store.init(store_path)
    bench = TestsBench(root, pkg.repo, tools, store_path, task, pkg.base, package=pkg)
    return bench


def assert_every_listed_test_passed(bench: TestsBench, plan, result) -> dict:
    """The ``tests`` evaluation of ``result``, a resolved attempt whose every listed test
    passed, in list order."""
    assert result.terminal_class == "resolved", result.reason
    e = bench.evaluation(plan, result, "tests")
    checks = e["_result"]["details"]["checks"]
    pkg = bench.package
    assert [(c["name"], c["list"], c["passed"]) for c in checks] == [
        *((t, "FAIL_TO_PASS", True) for t in pkg.fail_to_pass),
        *((t, "PASS_TO_PASS", True) for t in pkg.pass_to_pass),
    ]
    return e


@pytest.fixture
def tests_bench(tmp_path: Path) -> TestsBench:
    return build_tests_bench(tmp_path / "bench")
