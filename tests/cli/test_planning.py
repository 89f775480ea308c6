"""Planning from the command line: zero dispatch, clear errors, nothing written on bad input."""

from __future__ import annotations

import json
import os

import pytest

from yyb.store.repo import Store


def count_objects(path: str) -> int:
    if not os.path.exists(path):
        return 0
    return len(list(Store.open(path).objects.iter_oids()))


def test_plan_show_authorize(project, tmp_path):
    out = str(tmp_path / "plan.json")
    result = project.yyb(
        "plan",
        "--task",
        str(project.task()),
        "--models",
        ":mini,vendor/big",
        "--attempts",
        "2",
        "--max-usd",
        "1",
        "--output",
        out,
        "--dry-run",
    )
    assert result.exit_code == 0, result.stderr
    assert "dispatch_count: 0" in result.lines
    oid = result.lines[0].split()[1]
    shown = project.yyb("plan", "show", out)
    assert shown.exit_code == 0 and shown.lines[0] == f"plan {oid}"
    assert "model :mini -> vendor/mini-1" in shown.lines
    assert len([line for line in shown.lines if "fix-add" in line]) == 4
    as_json = json.loads(project.yyb("plan", "show", f"plans/{oid}", "--json").stdout)
    assert as_json["plan"] == oid and len(as_json["attempts"]) == 4
    granted = project.yyb("authorize", "--plan", out, "--expires", "+1h")
    assert granted.exit_code == 0
    store = Store.open(project.store_path)
    record = store.objects.get_record(store.refs.read(f"grants/{oid}"))
    assert record["plan"] == oid
    assert project.yyb("doctor").exit_code == 0


def test_workflow_plan_cli(project, tmp_path):
    flow = tmp_path / "flow.yaml"
    flow.write_text("steps: []\n")
    out = str(tmp_path / "wf.json")
    result = project.yyb(
        "plan",
        "--workflow",
        str(flow),
        "--models",
        "vendor/a",
        "--controlled-model-variable",
        "candidate_model",
        "--var",
        "run_date=2026-08-31",
        "--output",
        out,
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["comparison"] == "model_only" and summary["dispatch_count"] == 0


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--models", "vendor/a"], "--task FILE"),
        (["--task", "{task}", "--output", "{out}"], "--models"),
        (["--task", "{task}", "--models", "vendor/a"], "--output"),
        (["--task", "{task}", "--models", ":nope", "--output", "{out}"], "unknown model"),
        (["--task", "{task}", "--models", "vendor/a,vendor/a", "--output", "{out}"], "once"),
        (
            ["--task", "{task}", "--models", "vendor/a", "--attempts", "0", "--output", "{out}"],
            "at least 1",
        ),
        (
            ["--task", "{task}", "--models", "vendor/a", "--max-usd", "-1", "--output", "{out}"],
            "positive",
        ),
        (["--task", "{bad}", "--models", "vendor/a", "--output", "{out}"], "grader_profile"),
        (
            ["--task", "{task}", "--models", "vendor/a", "--output", "{existing}"],
            "never overwritten",
        ),
        (["--workflow", "{badyaml}", "--models", "vendor/a", "--output", "{out}"], "YAML"),
        (
            ["--task", "{task}", "--models", "vendor/a", "--var", "a=1", "--output", "{out}"],
            "workflow plans",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(project, tmp_path, args, needle):
    existing = tmp_path / "existing.json"
    existing.write_text("{}")
    badyaml = tmp_path / "bad.yaml"
    badyaml.write_text("a: [\n")
    names = {
        "task": str(project.task()),
        "bad": str(project.task("bad.md", grader_profile="nope")),
        "out": str(tmp_path / "out.json"),
        "existing": str(existing),
        "badyaml": str(badyaml),
    }
    result = project.yyb("plan", *[a.format(**names) for a in args])
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert len(result.stderr.splitlines()) == 1 and needle in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert count_objects(project.store_path) == 0
    assert not os.path.exists(tmp_path / "out.json")
    assert existing.read_text() == "{}"


def test_an_edited_plan_file_is_refused(project, tmp_path):
    out = tmp_path / "plan.json"
    assert (
        project.yyb(
            "plan", "--task", str(project.task()), "--models", "vendor/a", "--output", str(out)
        ).exit_code
        == 0
    )
    out.write_text(out.read_text().replace('"attempts_per_cell": 1', '"attempts_per_cell": 2'))
    for args in (["plan", "show", str(out)], ["authorize", "--plan", str(out), "--expires", "1h"]):
        result = project.yyb(*args)
        assert result.exit_code == 2 and "was edited" in result.stderr


def test_invalid_config_lists_every_problem(project, tmp_path):
    data = project.config()
    data["workspace"]["attempts_root"] = 1
    data["tool_policy"]["network"] = "maybe"
    project.set_config(data)
    result = project.yyb("validate", "--task", str(project.task()))
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and all(line.startswith("yyb: error: config ") for line in lines)
