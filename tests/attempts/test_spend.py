"""Spend the plan bounds: the ceiling reaches the harness, an overrun is flagged, a model
whose ceiling is spent is not dispatched again; and no dispatch without a grant."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import Yyb
from yyb.attempts import run as attempts_run
from yyb.evidence import names
from yyb.plans.grant import GrantError

# Reports 999 USD whatever its ceiling ($YYB_MAX_COST_MICROS, which it echoes).
SPENDER = """
echo "ceiling $YYB_MAX_COST_MICROS"
sed -i 's/\\$1 - \\$2/$1 + $2/' calc.sh
commit_all "fix"
cat > "$ENVELOPE" <<EOF
{"schema_version": "juno_execution_envelope.v1", "provider": "stand", "model": "$NAME",
 "status": "succeeded", "cost": {"completeness": "complete", "currency": "USD",
 "micros": 999000000}, "started_ms": 0, "ended_ms": 0, "elapsed_ms": 0}
EOF
"""


def test_an_overrun_is_flagged_and_stops_the_models_dispatch(bench):
    model = bench.behaviour("spender", SPENDER)
    plan, results = bench.run([model, "stand/fixer"], attempts=2)
    spent = [r for r in results if r.model == model]
    ran, skipped = spent[0], spent[1]
    terminal = bench.terminal(ran)
    attempt = bench.record(ran.attempt)
    ceiling = attempt["budget"]["ceiling_micros"]
    assert bench.linked(ran, "stdout").decode().strip() == f"ceiling {ceiling}"
    assert terminal["class"] == "resolved"  # the class says what the candidate did
    assert terminal["spend"] == {
        "ceiling_micros": ceiling,
        "over_ceiling_micros": 999_000_000 - ceiling,
    }
    assert "exceeds the attempt's ceiling" in terminal["reason"]
    # 999 USD is past the model's whole ceiling (the sum of its attempts' ones): no more.
    assert skipped.status == "skipped" and "reached its ceiling" in skipped.reason
    assert bench.store.refs.read(names.attempt(plan.oid, skipped.attempt, "intent")) is None
    # The other model spends nothing and runs all its attempts, with no flag.
    others = [r for r in results if r.model == "stand/fixer"]
    assert [r.status for r in others] == ["ran", "ran"]
    assert bench.terminal(others[0])["spend"]["over_ceiling_micros"] is None
    # A later run still counts the spend of reused terminals: nothing more is dispatched.
    again = bench.execute(plan)
    assert [r.status for r in again if r.model == model] == ["reused", "skipped"]

    report = bench.yyb("report", "--plan", plan.oid, "--no-layer", "--format", "json")
    by_model = {m["model"]: m for m in json.loads(report.stdout)["models"]}
    assert by_model[model]["over_ceiling"] == 1 and by_model["stand/fixer"]["over_ceiling"] == 0
    text = bench.yyb("report", "--plan", plan.oid, "--no-layer").stdout
    assert f"!! {model}: 1 attempt(s) reported a cost above" in text


def test_the_library_refuses_to_dispatch_without_a_grant(bench):
    """run_plan itself checks the grant, whoever calls it: no intent is written."""
    plan = bench.plan(["stand/fixer"])
    context = bench.context(plan)
    bench.store.refs.update(names.grant(plan.oid), None, reason="withdrawn")
    with pytest.raises(GrantError, match="no grant"):
        attempts_run.run_plan(context)
    # A context built by hand, skipping prepare, is refused the same way.
    bare = attempts_run.RunContext(
        bench.store, bench.config(), plan.oid, plan.experiment, context.attempts
    )
    with pytest.raises(GrantError):
        attempts_run.run_plan(bare)
    assert bench.store.refs.names(under=names.runs(plan.oid)) == []


def test_a_dry_run_writes_nothing(bench, tmp_path):
    plan_file = bench.plan_file(["stand/fixer"], attempts=2)
    store = bench.store_path

    def files():
        return sorted(os.path.join(d, f) for d, _, names_ in os.walk(store) for f in names_)

    before = files()
    done = bench.yyb("run", "--plan", plan_file, "--dry-run")
    assert done.exit_code == 0 and done.lines[-1] == "dispatch_count: 0"
    assert len([line for line in done.lines if line.startswith("would dispatch")]) == 2
    assert files() == before
    # Against a store that does not exist yet: it is not created.
    elsewhere = str(tmp_path / "nowhere")
    dry = Yyb(elsewhere)(
        "--config", str(bench.config_path), "run", "--plan", plan_file, "--dry-run"
    )
    assert dry.exit_code == 0 and not os.path.exists(elsewhere)
