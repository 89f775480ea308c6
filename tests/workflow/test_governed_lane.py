"""The governed lane as an operator meets it: the documented session runs as written, the
dispatch count is the number of dispatches made, and a live run without the boundary's
credential dispatches nothing."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.conftest import Yyb
from tests.workflow.conftest import build
from tests.workflow.test_misbehaving_boundaries import pin, steps_of

REPO = Path(__file__).resolve().parents[2]


def test_recover_counts_only_the_dispatches_it_made(governed):
    pin(governed, "garbage", "first")  # the step ran; its answer was lost
    plan = governed.plan("zz/good")
    stopped = governed.run(plan, "--json")
    assert stopped.exit_code == 1
    assert json.loads(stopped.stdout)["dispatch_count"] == 1  # it did dispatch
    recovered = governed.recover(plan, "--json")
    assert recovered.exit_code == 0 and steps_of(recovered)[0]["status"] == "concluded"
    assert json.loads(recovered.stdout)["dispatch_count"] == 0  # taken from the journal
    assert governed.recover(plan).stdout.splitlines()[-1] == "dispatch_count: 0"
    assert len(governed.lines("ledger")) == 1


def test_recover_counts_a_dispatch_through_the_gate(governed):
    pin(governed, "before-journal", "first")
    plan = governed.plan("zz/good")
    assert json.loads(governed.run(plan, "--json").stdout)["dispatch_count"] == 1
    recovered = governed.recover(plan, "--json")
    assert json.loads(recovered.stdout)["dispatch_count"] == 1


def test_a_live_run_without_the_boundary_credential_dispatches_nothing(governed, monkeypatch):
    plan = governed.plan("zz/good")
    monkeypatch.delenv("OPS_TOKEN")
    done = governed.run(plan)
    assert done.exit_code == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "OPS_TOKEN" in lines[0], done.stderr
    assert governed.lines("ledger") == [] and not governed.journal().exists()
    monkeypatch.setenv("OPS_TOKEN", "")  # set, but empty: no credential either
    assert governed.run(plan).exit_code == 2
    assert governed.lines("ledger") == []
    assert governed.run(plan, "--dry-run").exit_code == 0  # a dry run needs none


def test_plan_dry_run_is_an_affirmation_and_the_run_dry_run_follows(governed):
    out = governed.root / "governed-plan.json"
    made = governed.make_plan(out, "--steps", "first,second", "--models", "zz/good", "--dry-run")
    assert made.exit_code == 0, made.stderr
    assert "dispatch_count: 0" in made.stdout and out.exists()
    done = governed.run(str(out), "--dry-run")
    assert done.exit_code == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "dispatch_count: 0"
    assert governed.lines("ledger") == []


def session(doc: Path, heading: str) -> list[list[str]]:
    """The commands of the first ``sh`` block under ``heading`` in ``doc``, as written."""
    block = doc.read_text().split(f"\n## {heading}\n", 1)[1].split("```sh\n", 1)[1]
    block = block.split("```", 1)[0].replace("\\\n", " ")
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


SESSIONS = {
    "README": ("README.md", "The governed lane"),
    "workflow.md": ("docs/workflow.md", "An operator's session"),
}


@pytest.mark.parametrize("where", sorted(SESSIONS))
def test_the_documented_governed_commands_run_as_written(tmp_path, monkeypatch, where):
    """Every command of the documented sequence, in order, from the project's folder: the
    governed configuration beside the workflow, the isolated one it was migrated from."""
    from yyb import config as isolated

    g = build(tmp_path / "bench", monkeypatch, judged=True)
    cfg = json.loads(g.config_path.read_text())
    cfg["project"] = "."
    cfg["boundary"]["journal"] = str(g.root / "state" / "journal")
    cfg["lock_store"] = str(g.root / "state" / "locks")
    cfg["tool_paths"] = [str(g.root / "tools")]
    (g.project / "juno-benchmark.config.json").write_text(json.dumps(cfg, indent=2))
    (g.project / "yylo-benchmark.config.json").write_text(
        json.dumps(isolated.template("bench", yylo_version="test"))
    )
    monkeypatch.chdir(g.project)
    commands = session(REPO / SESSIONS[where][0], SESSIONS[where][1])
    assert ["workflow", "run"] in [c[3:5] for c in commands]
    yyb = Yyb(g.store_path)
    for command in commands:
        assert command[0] == "yyb", command
        done = yyb(*command[1:])
        assert done.exit_code == 0, (command, done.stdout, done.stderr)
    ledger = [line.split()[:2] for line in g.lines("ledger")]
    assert ledger == [
        ["first", "zai/glm-alpha"],
        ["second", "zai/glm-alpha"],
        ["first", "zai/glm-beta"],
        ["second", "zai/glm-beta"],
    ]  # the live run, once; a dry run or a recovery dispatched nothing
