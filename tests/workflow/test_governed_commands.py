"""The governed lane's checking commands and its refusals: one stderr line, exit 2, nothing
written; setup and readiness report without dispatching; credentials are checked by name and
their values never printed."""

from __future__ import annotations

import json

import pytest

from tests.conftest import git


def test_migrate_config_inspects_and_writes_a_template_only_for_isolated_input(governed, tmp_path):
    from yyb import config

    isolated = tmp_path / "isolated.json"
    isolated.write_text(json.dumps(config.template("src", yylo_version="9.9")))
    before = isolated.read_bytes()
    out = tmp_path / "governed.json"
    done = governed.yyb(
        "workflow", "migrate-config", "--input", str(isolated), "--output", str(out), "--json"
    )
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["kind"] == "isolated"
    assert isolated.read_bytes() == before
    template = json.loads(out.read_text())
    assert template["schema_version"] == "juno_benchmark_config.v1"
    assert template["yylo_version"] == "9.9"
    # Never overwritten.
    again = governed.yyb(
        "workflow", "migrate-config", "--input", str(isolated), "--output", str(out)
    )
    assert again.exit_code == 2 and "exists" in again.stderr
    # A governed file inspected: what it lacks, and no template from it.
    ours = governed.yyb(
        "workflow", "migrate-config", "--input", str(governed.config_path), "--json"
    )
    assert json.loads(ours.stdout) | {"input": None} == {
        "input": None,
        "kind": "governed",
        "lacks": [],
        "schema_version": "juno_benchmark_config.v1",
        "dispatch_count": 0,
    }
    # A governed file relabelled as v2 is not a migration.
    relabelled = tmp_path / "relabelled.json"
    value = json.loads(governed.config_path.read_text())
    relabelled.write_text(json.dumps(dict(value, schema_version="yylo_benchmark_config.v2")))
    done = governed.yyb(
        "workflow",
        "migrate-config",
        "--input",
        str(relabelled),
        "--output",
        str(tmp_path / "t.json"),
    )
    assert done.exit_code == 2 and "relabelled" in done.stderr
    assert not (tmp_path / "t.json").exists()
    loaded = governed.yyb("--config", str(relabelled), "workflow", "setup")
    assert loaded.exit_code == 2 and "isolated" in loaded.stderr


def test_setup_and_readiness_report_without_dispatching(governed, monkeypatch):
    done = governed.yyb(
        "workflow",
        "setup",
        "--workflow",
        str(governed.workflow),
        "--steps-file",
        str(governed.policy),
    )
    assert done.exit_code == 0, done.stdout
    assert "dispatch_count: 0" in done.stdout
    ready = governed.yyb("workflow", "readiness", "--models", "zz/good,zz/bad", "--json")
    assert ready.exit_code == 0
    assert {m: v["ready"] for m, v in json.loads(ready.stdout).items()} == {
        "zz/good": True,
        "zz/bad": True,
    }
    # A resource another live process holds is not lockable; once it is gone, it is again.
    from yyb.workflow import locks

    ledger = str(governed.resources["ledger"])
    with locks.acquire(str(governed.root / "state" / "locks"), "file", ledger):
        held = governed.yyb(
            "workflow", "readiness", "--models", "zz/good", "--steps-file", str(governed.policy)
        )
    assert held.exit_code == 1 and f"file:{ledger} is held" in held.stdout
    free = governed.yyb(
        "workflow", "readiness", "--models", "zz/good", "--steps-file", str(governed.policy)
    )
    assert free.exit_code == 0, free.stdout
    monkeypatch.delenv("OPS_TOKEN")
    missing = governed.yyb("workflow", "readiness", "--models", "zz/good,bad-selector")
    assert missing.exit_code == 1
    assert "credentials not set: OPS_TOKEN" in missing.stdout
    assert "'bad-selector' is not provider/model" in missing.stdout
    assert "s3cret" not in missing.stdout + missing.stderr
    # A file edited but not committed is not the tracked file.
    governed.policy.write_text(governed.policy.read_text() + "\n# edited\n")
    edited = governed.yyb("workflow", "setup", "--steps-file", str(governed.policy))
    assert edited.exit_code == 1 and "differs from the project's HEAD" in edited.stdout
    assert not governed.journal().exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--steps", "notify"], "not an agent dispatch"),
        (["--steps", "first,nope"], "not in"),
        (["--steps", "first,first"], "each step once"),
        (["--models", "zz/good,zz/good"], "each model once"),
        (["--models", "good"], "not provider/model"),
        (["--attempts", "0"], "at least 1"),
        (["--var", "novalue"], "NAME=VALUE"),
    ],
)
def test_a_plan_that_cannot_be_made_is_refused(governed, tmp_path, args, message):
    base = {"--steps": "first,second", "--models": "zz/good", "--attempts": "1"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    extra = [item for pair in base.items() for item in pair]
    out = tmp_path / "p.json"
    done = governed.make_plan(out, *extra)
    assert done.exit_code == 2, done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and message in lines[0], lines
    assert not out.exists()


def test_a_plan_no_longer_current_is_refused(governed):
    plan = governed.plan("zz/good", steps="first")
    (governed.project / "README.md").write_text("moved on\n")
    git(governed.project, "add", "-A")
    git(governed.project, "commit", "-qm", "later")
    done = governed.run(plan)
    assert done.exit_code == 2 and "not the planned" in done.stderr
    assert governed.lines("ledger") == []


def test_a_policy_that_names_unknown_steps_or_fields_is_refused(governed, tmp_path):
    policy = governed.project / ".juno_task" / "specs" / "benchmark" / "bad.yaml"
    policy.write_text("steps:\n  first: {retry_safe: maybe}\n")
    git(governed.project, "add", "-A")
    git(governed.project, "commit", "-qm", "bad policy")
    done = governed.make_plan(
        tmp_path / "p.json", "--steps", "first", "--models", "zz/good", policy=policy
    )
    assert done.exit_code == 2 and "retry_safe must be true or false" in done.stderr
