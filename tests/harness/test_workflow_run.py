"""A workflow plan runs end to end through a stand-in Workflow Runner."""

from __future__ import annotations

import json
import os

from yyb import config as configuration
from yyb.attempts import run as attempts_run
from yyb.example import build
from yyb.plans import build as plans
from yyb.store.repo import Store

RUNNER = """#!/bin/sh
# A stand-in Workflow Runner: WORKFLOW VARIABLES MODEL ENVELOPE
model=$(sed -n 's/.*"candidate_model": "\\([^"]*\\)".*/\\1/p' "$2")
echo "runner got model=$model and workflow $(head -c 40 "$1")"
cat "$2"
printf '%s' "{\\"schema_version\\": \\"juno_execution_envelope.v1\\", \\"provider\\": \\"${model%%/*}\\", \\"model\\": \\"${model#*/}\\", \\"status\\": \\"succeeded\\", \\"cost\\": {\\"completeness\\": \\"unavailable\\", \\"currency\\": \\"USD\\", \\"micros\\": null}, \\"started_ms\\": 0, \\"ended_ms\\": 0, \\"elapsed_ms\\": 0}" > "$4"
"""  # noqa: E501


def test_workflow_attempts_run_with_the_planned_variables(tmp_path):
    paths = build(str(tmp_path / "ex"))
    tools = tmp_path / "ex" / "tools"
    runner = tools / "runner.sh"
    runner.write_text(RUNNER)
    runner.chmod(0o755)
    data = json.loads(open(paths["config"]).read())
    data["harnesses"] = {
        "candidate": {
            "kind": "workflow_runner",
            "argv": [str(runner), "{workflow_file}", "{variables_file}", "{model}", "{envelope}"],
        }
    }
    with open(paths["config"], "w") as handle:
        json.dump(data, handle)
    flow = tmp_path / "flow.yaml"
    flow.write_text("steps:\n  - run: yy pi\n")
    config = configuration.load(paths["config"])
    plan = plans.workflow_plan(
        config,
        str(flow),
        "example/fixer,example/idler",
        1,
        "candidate_model",
        ["run_date=2026-08-31", "n=5"],
    )
    store, _ = Store.init(str(tmp_path / "store"))
    plans.write(store, plan)
    chosen = {oid: plan.records[oid] for oid in plan.attempt_oids}
    ctx = attempts_run.prepare(store, config, plan.oid, plan.experiment, chosen, dict(os.environ))
    results = attempts_run.run_plan(ctx)
    assert [r.terminal_class for r in results] == ["resolved", "resolved"]
    terminal = store.objects.get_record(results[0].terminal)
    stdout = store.objects.get(terminal["links"]["stdout"]).body.decode()
    assert "runner got model=example/fixer and workflow steps:" in stdout
    variables = json.loads(stdout[stdout.index("{") :])
    assert variables == {"run_date": "2026-08-31", "n": 5, "candidate_model": "example/fixer"}
    assert terminal["candidate_cost"] == {
        "completeness": "unavailable",
        "currency": "USD",
        "micros": None,
    }
