"""`yyb import swe-bench` and `yyb validate --gold` on instances built from local repositories.

Two clones of the mathkit package stand for two projects, one cloned as ``<owner>__<name>``
and one as ``<name>``. Three instances are sound; a fourth has a gold patch that does not fix
its FAIL_TO_PASS tests, which gold validation must flag.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import Yyb
from tests.swebench.conftest import PASS_TO_PASS, make_package, tool_paths
from yyb.evidence import names, records
from yyb.store.repo import Store

NOT_A_FIX = b"""diff --git a/README.md b/README.md
--- a/README.md
+++ b/README.md
@@ -1 +1,2 @@
 mathkit: small sums.
+Means are exact now.
"""


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """(root, store path, import result, the task files by instance id)."""
    root = tmp_path_factory.mktemp("swe")
    repos = root / "repos"
    acme = make_package(repos / "acme__mathkit")
    other = make_package(repos / "numkit")
    lines = [
        acme.instance("acme__mathkit-1"),
        dict(
            acme.instance("acme__mathkit-2"),
            FAIL_TO_PASS=acme.fail_to_pass[:1],
            PASS_TO_PASS=PASS_TO_PASS,
        ),  # lists as JSON lists
        other.instance("other__numkit-3", repo="other/numkit"),
        acme.instance("acme__mathkit-4", patch=NOT_A_FIX.decode()),
    ]
    data = root / "instances.jsonl"
    data.write_text("".join(json.dumps(line) + "\n" for line in lines))
    store_path = str(root / "store")
    Store.init(store_path)
    yyb = Yyb(store_path)
    out = yyb(
        "import",
        "swe-bench",
        str(data),
        "--repos",
        str(repos),
        "--out",
        str(root / "cases"),
        "--python",
        sys.executable,
        *(arg for path in tool_paths() for arg in ("--tool-path", path)),
    )
    tasks = {Path(p).stem: p for p in out.lines}
    return root, store_path, out, tasks


def test_the_import_writes_a_case_per_instance_and_a_configuration(imported):
    root, _, out, tasks = imported
    assert out.exit_code == 0, out.stderr
    assert sorted(tasks) == [f"acme__mathkit-{n}" for n in (1, 2, 4)] + ["other__numkit-3"]
    config = json.loads((root / "cases" / "yylo-benchmark.config.json").read_text())
    assert config["repositories"] == {
        "acme__mathkit": "../repos/acme__mathkit",
        "other__numkit": "../repos/numkit",
    }
    assert config["evaluators"]["swe-acme__mathkit"]["kind"] == "tests"
    assert config["evaluators"]["swe-acme__mathkit"]["command"][0] == sys.executable
    # The tests kind protects pytest's configuration and the tests itself: nothing to list.
    assert "protected_paths" not in config["evaluators"]["swe-acme__mathkit"]
    task = Path(tasks["acme__mathkit-1"]).read_bytes()
    assert task.endswith(b"\n---\nmean() floors its result, and mean([]) divides by zero.\n")
    assert b"diff --git" not in task  # the patches stay in hidden/, named by their sha256
    hidden = root / "cases" / "hidden" / "acme__mathkit-1"
    assert sorted(p.name for p in hidden.iterdir()) == ["gold.patch", "test.patch"]


def test_imported_cases_are_valid_and_bind_their_hidden_tests(imported):
    root, store_path, _, tasks = imported
    yyb = Yyb(store_path)
    config = str(root / "cases" / "yylo-benchmark.config.json")
    for path in tasks.values():
        out = yyb("--config", config, "validate", "--task", path, "--write", "--json")
        assert out.exit_code == 0, out.stderr
    record = Store.open(store_path).objects.get_record(json.loads(out.stdout)["record"])
    assert record["tests"]["pass_to_pass"] == PASS_TO_PASS
    test_patch = (root / "cases" / "hidden" / "acme__mathkit-4" / "test.patch").read_bytes()
    assert Store.open(store_path).objects.get(record["links"]["test_patch"]).body == test_patch


def test_the_gold_patch_never_enters_a_plan(imported):
    from yyb import config as configuration
    from yyb.plans import build

    root, _, _, tasks = imported
    config = configuration.load(str(root / "cases" / "yylo-benchmark.config.json"))
    plan = build.task_plan(config, list(tasks.values()), "zz/m", 1, "1")
    golds = [(root / "cases" / "hidden" / i / "gold.patch").read_bytes() for i in tasks]
    tests = [(root / "cases" / "hidden" / i / "test.patch").read_bytes() for i in tasks]
    bodies = [body for _, body in plan.bodies]
    assert not any(gold in body for gold in golds for body in bodies)
    assert all(any(test == body for body in bodies) for test in tests)  # evaluators read it


def test_gold_validation_passes_sound_cases_and_flags_one_whose_gold_does_not_fix(imported):
    root, store_path, _, tasks = imported
    yyb = Yyb(store_path)
    config = str(root / "cases" / "yylo-benchmark.config.json")
    sound = [tasks[i] for i in ("acme__mathkit-1", "acme__mathkit-2", "other__numkit-3")]
    out = yyb("--config", config, "validate", "--gold", *(a for t in sound for a in ("--task", t)))
    assert out.exit_code == 0, out.stdout + out.stderr
    assert [line.split()[:4] for line in out.lines] == [
        [i, "ok", "gold=pass", "empty=fail"]
        for i in ("acme__mathkit-1", "acme__mathkit-2", "other__numkit-3")
    ]
    out = yyb("--config", config, "validate", "--gold", "--task", tasks["acme__mathkit-4"])
    assert out.exit_code == 1
    assert out.stdout.startswith("acme__mathkit-4 NOT-DISCRIMINATING gold=fail empty=fail ")
    assert "the gold patch does not resolve the case" in out.stdout
    assert "1 case(s) not discriminating: acme__mathkit-4" in out.stderr
    store = Store.open(store_path)
    oid = store.refs.read(names.validation("acme__mathkit-4"))
    record = store.objects.get_record(oid)
    assert record["schema_version"] == records.CASE_VALIDATION
    assert record["discriminating"] is False
    assert {c["name"] for c in record["runs"]["gold"]["checks"] if not c["passed"]} == {
        "tests/test_ops.py::test_mean",
        "tests/test_mean.py::TestMean::test_empty_raises",
        "tests/test_mean.py::TestMean::test_values[values0-1.5]",
    }
    assert store.objects.get(record["links"]["gold_patch"]).body == NOT_A_FIX
    assert Yyb(store_path)("doctor").exit_code == 0


@pytest.mark.parametrize(
    "record, message",
    [
        ({"repo": "acme/mathkit"}, "instance_id: missing"),
        ({"FAIL_TO_PASS": "not json"}, "FAIL_TO_PASS: a string that is not a JSON list"),
        ({"FAIL_TO_PASS": "[]"}, "FAIL_TO_PASS: lists no test"),
        ({"PASS_TO_PASS": [1]}, "PASS_TO_PASS: must be a list of test ids"),
        ({"base_commit": "abc"}, "base_commit: must be a full commit id"),
        ({"test_patch": "no diff here"}, "test_patch: not a patch"),
        ({"repo": "acme/elsewhere"}, "repo: acme/elsewhere is not cloned under"),
        ({"base_commit": "0" * 40}, "repo: base_commit: commit 0000"),
    ],
)
def test_bad_instances_are_one_line_errors_and_nothing_is_written(
    tmp_path, package_template, record, message
):
    repos = tmp_path / "repos"
    repos.mkdir()
    (repos / "acme__mathkit").symlink_to(package_template.repo)
    value = dict(package_template.instance("acme__mathkit-1"), **record)
    if record == {"repo": "acme/mathkit"}:
        del value["instance_id"]
    data = tmp_path / "in.json"
    data.write_text(json.dumps([value]))
    out = Yyb(str(tmp_path / "store"))(
        "import", "swe-bench", str(data), "--repos", str(repos), "--out", str(tmp_path / "o")
    )
    assert out.exit_code == 2
    assert out.stderr.startswith(f"yyb: error: {data}: record 1: {message}"), out.stderr
    assert len(out.stderr.splitlines()) == 1 and not (tmp_path / "o").exists()


def test_an_import_never_replaces_a_file_with_other_content(tmp_path, package_template):
    repos = tmp_path / "repos"
    repos.mkdir()
    (repos / "mathkit").symlink_to(package_template.repo)
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps(package_template.instance("acme__mathkit-1")) + "\n")
    yyb = Yyb(str(tmp_path / "store"))
    args = ("import", "swe-bench", str(data), "--repos", str(repos), "--out", str(tmp_path / "o"))
    assert yyb(*args).exit_code == 0
    assert yyb(*args).exit_code == 0  # again: the same bytes, nothing to do
    (tmp_path / "o" / "hidden" / "acme__mathkit-1" / "gold.patch").write_text("edited\n")
    out = yyb(*args)
    assert out.exit_code == 2 and "gold.patch exists with other content" in out.stderr


def test_a_validation_is_signed_and_links_the_one_before(imported, tmp_path, monkeypatch):
    from yyb import signing

    root, _, _, tasks = imported
    store_path = str(tmp_path / "store")  # every validation in it signed
    key = str(tmp_path / "signing.key")
    public = signing.generate_key(key)
    monkeypatch.setenv(signing.KEY_ENV, key)
    yyb = Yyb(store_path)
    config = str(root / "cases" / "yylo-benchmark.config.json")
    for _ in range(2):
        out = yyb("--config", config, "validate", "--gold", "--task", tasks["other__numkit-3"])
        assert out.exit_code == 0, out.stderr
    ref = names.validation("other__numkit-3")
    store = Store.open(store_path)
    newest = store.objects.get_record(store.refs.read(ref))
    assert store.objects.get_record(newest["links"]["previous"])["discriminating"] is True
    checked = yyb("verify-chain", "--trusted-key", public, ref)
    assert checked.exit_code == 0, checked.stdout + checked.stderr
