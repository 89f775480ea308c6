"""Listed test ids pytest does not collect: cut at their first space, or naming nothing.

A published instance whose PASS_TO_PASS holds ``test_same[ones`` (the id
``test_same[ones and ones]`` cut at its first space) makes pytest refuse the whole session
(exit status 4): no listed test runs, and the gold patch looks as if it fixed nothing.
``yyb import swe-bench --check-ids`` collects the listed tests' files at the base with the
test patch applied, in the sandbox, and repairs such an id to the one collected id it begins,
or refuses an id that names nothing; gold validation of a case imported without the check
names the ids pytest does not know instead of counting every listed test as not passed.
"""

from __future__ import annotations

import json
import sys

import pytest
import yaml

from tests.conftest import Yyb
from tests.swebench.conftest import PASS_TO_PASS, SPACED, make_package, tool_paths

TRUNCATED = SPACED.split(" ")[0]  # tests/test_extras.py::test_same[ones
NOTHING = "tests/test_ops.py::test_nothing"


@pytest.fixture(scope="module")
def clones(tmp_path_factory):
    root = tmp_path_factory.mktemp("ids")
    package = make_package(root / "repos" / "acme__mathkit")
    return root, package


def import_(root, name: str, instance: dict, *extra: str):
    data = root / f"{name}.jsonl"
    data.write_text(json.dumps(instance) + "\n")
    tools = (arg for path in tool_paths() for arg in ("--tool-path", path))
    args = ["--repos", str(root / "repos"), "--out", str(root / name), "--python", sys.executable]
    out = Yyb(str(root / "store"))("import", "swe-bench", str(data), *args, *tools, *extra)
    return data, out


def listed(root, name: str, instance_id: str) -> dict:
    text = (root / name / "cases" / f"{instance_id}.md").read_text()
    return yaml.safe_load(text.split("---\n")[1])["fields"]["benchmark"]["tests"]


def test_a_truncated_id_is_repaired_to_the_one_collected_test_it_begins(clones):
    root, package = clones
    instance = package.instance("acme__mathkit-5", PASS_TO_PASS=[*PASS_TO_PASS, TRUNCATED])
    data, out = import_(root, "repaired", instance, "--check-ids")
    assert out.exit_code == 0, out.stderr
    assert out.stderr.splitlines()[0] == (
        f"yyb: {data}:1: PASS_TO_PASS: {TRUNCATED!r} repaired to {SPACED!r}, the one "
        "collected test whose id it begins"
    )
    tests = listed(root, "repaired", "acme__mathkit-5")
    assert tests["pass_to_pass"] == [*PASS_TO_PASS, SPACED]
    assert tests["fail_to_pass"] == package.fail_to_pass


def test_an_id_that_names_no_test_is_refused_naming_it_and_nothing_is_written(clones):
    root, package = clones
    instance = package.instance("acme__mathkit-6", FAIL_TO_PASS=[*package.fail_to_pass, NOTHING])
    data, out = import_(root, "refused", instance, "--check-ids")
    assert out.exit_code == 2
    assert out.stderr.splitlines() == [
        f"yyb: error: {data}:1: FAIL_TO_PASS: 1 listed id(s) not collected at the base with the "
        f"test patch applied: {NOTHING!r} refused: no collected test has this id or one it begins"
    ]
    assert not (root / "refused").exists()


def test_unchecked_ids_are_imported_as_given_and_gold_validation_names_the_unknown(clones):
    root, package = clones
    instance = package.instance("acme__mathkit-7", PASS_TO_PASS=[*PASS_TO_PASS, TRUNCATED])
    _, out = import_(root, "unchecked", instance)  # offline: nothing collected, nothing run
    assert out.exit_code == 0, out.stderr
    assert listed(root, "unchecked", "acme__mathkit-7")["pass_to_pass"][-1] == TRUNCATED
    config = str(root / "unchecked" / "yylo-benchmark.config.json")
    task = str(root / "unchecked" / "cases" / "acme__mathkit-7.md")
    out = Yyb(str(root / "store"))("--config", config, "validate", "--gold", "--task", task)
    assert out.exit_code == 1
    assert out.stdout.startswith("acme__mathkit-7 NOT-DISCRIMINATING gold=fail empty=fail ")
    assert (
        "the test runner ran no test (exit status 4): 1 listed id(s) are not tests it collects "
        f"at the base with the test patch applied: {TRUNCATED!r} (cut short? it begins "
        f"{SPACED!r})"
    ) in out.stdout
    assert " of 6 listed tests passed" not in out.stdout


@pytest.mark.parametrize(
    ("test_id", "repaired", "reason"),
    [
        ("a.py::t[x", "a.py::t[x y]", "repaired to 'a.py::t[x y]'"),
        ("a.py::t", None, "refused: it begins 2 collected test ids ('a.py::t[x y]', ...)"),
        ("a.py::u", None, "refused: no collected test has this id or one it begins"),
    ],
)
def test_an_unknown_id_is_repaired_only_when_it_begins_exactly_one_collected_id(
    test_id, repaired, reason
):
    from yyb.grading import collection

    collected = collection.Collected(frozenset({"a.py::t[x y]", "a.py::t[z]"}))
    listed_ids = ["a.py::t[z]", test_id, "test_get (views.ViewTests)"]
    (unknown,) = collection.resolve(listed_ids, collected)
    assert (unknown.test_id, unknown.repaired) == (test_id, repaired)
    assert unknown.reason.startswith(reason)
