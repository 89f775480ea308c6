"""--json of investigate, import swe-bench and workflow plan/authorize on real runs."""

from __future__ import annotations

import json
import sys

from tests.cli.test_json_refs import answer
from tests.conftest import Yyb
from tests.grading.conftest import build_bench
from tests.swebench.conftest import make_package, tool_paths
from tests.workflow.conftest import build as build_governed
from yyb.evidence import names
from yyb.store.repo import Store


def test_investigate_answers_as_its_text(tmp_path):
    bench = build_bench(tmp_path / "bench")
    bench.configure()
    plan, [result] = bench.run(["zz/fixer"])
    for show in ("terminal", "timeline", "patch"):
        asked = ("investigate", "--plan", plan.oid, "--attempt", "0", "--show", show)
        text = bench.yyb(*asked)
        done = bench.yyb(*asked, "--json")
        assert done.exit_code == text.exit_code == 0, done.stderr
        found = answer(done)
        assert found == {
            "plan": plan.oid,
            "attempt": result.attempt,
            "show": show,
            "answer": text.stdout,
        }
    bad = bench.yyb("investigate", "--plan", plan.oid, "--attempt", "7", "--json")
    assert bad.exit_code == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1


def test_import_swe_bench_lists_each_case(tmp_path):
    repos = tmp_path / "repos"
    package = make_package(repos / "acme__mathkit")
    data = tmp_path / "instances.jsonl"
    data.write_text(json.dumps(package.instance("acme__mathkit-1")) + "\n")
    yyb = Yyb(str(tmp_path / "store"))
    Store.init(yyb.store_path)
    tools = [arg for path in tool_paths() for arg in ("--tool-path", path)]
    command = ("import", "swe-bench", str(data), "--repos", str(repos), "--python")
    text = yyb(*command, sys.executable, "--out", str(tmp_path / "a"), *tools)
    done = yyb(*command, sys.executable, "--out", str(tmp_path / "b"), *tools, "--json")
    assert done.exit_code == text.exit_code == 0, done.stderr
    found = answer(done)
    [task] = found["tasks"]
    assert task["instance_id"] == "acme__mathkit-1"
    assert task["task"] == text.lines[0].replace(str(tmp_path / "a"), str(tmp_path / "b"))
    assert found["config"].startswith(str(tmp_path / "b")) and found["repairs"] == []
    assert f"configuration {found['config']}" in done.stderr


def test_workflow_plan_and_authorize(tmp_path, monkeypatch):
    governed = build_governed(tmp_path / "governed", monkeypatch)
    out = tmp_path / "plan.json"
    options = ("--steps", "first,second", "--models", "zz/good", "--json")
    done = governed.make_plan(out, *options)
    assert done.exit_code == 0, done.stderr
    made = answer(done)
    oid = json.loads(out.read_text())["plan"]
    assert made == {"plan": oid, "output": str(out), "step_attempts": 2, "dispatch_count": 0}
    granted = governed.yyb("workflow", "authorize", "--plan", str(out), "--json")
    assert granted.exit_code == 0, granted.stderr
    found = answer(granted)
    store = Store.open(governed.store_path)
    grant = store.refs.read(names.governed_authorization(oid))
    record = store.objects.get_record(grant)
    assert found == {"plan": oid, "authorization": grant, "expires_ms": record["expires_ms"]}
    assert record["plan"] == oid and record["expires_ms"] - record["created_ms"] == 86_400_000
    again = governed.make_plan(out, *options)  # --output exists: bad input, no JSON
    assert again.exit_code == 2 and again.stdout == ""
