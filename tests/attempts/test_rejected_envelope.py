"""An envelope the controller refused is no evidence: its identity, status and cost count for
nothing, however cheap it claims the run was."""

from __future__ import annotations

from yyb.evidence import cost
from yyb.reports import build, layer, render

# Fixes the bug, then answers for another model of its provider, at no cost.
IMPOSTOR = """sed -i 's/\\$1 - \\$2/$1 + $2/' calc.sh
commit_all
envelope succeeded stand someone-else
"""
REJECTED = "the envelope observed stand/someone-else, not the planned stand/impostor"


def test_a_rejected_envelope_claiming_a_genuine_zero_cost_leaves_the_cost_unavailable(bench):
    model = bench.behaviour("impostor", IMPOSTOR)
    plan, [result] = bench.run([model])
    assert (result.terminal_class, result.reason) == ("harness_failure", REJECTED)
    terminal = bench.terminal(result)
    # What it claimed stays on record, linked; nothing derived from it is.
    claimed = bench.record(terminal["links"]["envelope"])
    assert (claimed["model"], claimed["cost"]["completeness"]) == ("someone-else", "genuine_zero")
    assert terminal["candidate_cost"] == cost.unknown()
    assert terminal["identity"]["observed"] is None
    execution = bench.record(terminal["links"]["execution"])
    assert execution["facts"]["envelope_status"] is None
    assert bench.doctor_errors() == []

    report, _ = build.build(bench.store, plan.oid)
    assert report["status"] == "complete"
    (summary,) = report["models"]
    for part in ("candidate", "total"):
        assert summary["cost"][part]["completeness"] == "unavailable", part
        assert summary["cost"][part]["micros"] is None, part
    (row,) = report["attempts"]
    assert row["cost_note"] == f"envelope rejected ({REJECTED})"
    text = render.text(report, layer.unstored(None))
    assert "$0.000000" not in text
    assert f"cost unavailable: envelope rejected ({REJECTED})" in text
