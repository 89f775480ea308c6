"""A cost claimed by an envelope the controller refused is never counted, also in terminals
written when the controller still copied the claim."""

from __future__ import annotations

import pytest

from tests.reports.fabricate import Spec, fabricate
from yyb.evidence import cost
from yyb.reports import build, layer, render
from yyb.store import schema

HONEST, IMPOSTOR = "m/honest", "m/impostor"
GENUINE_ZERO = {"completeness": "genuine_zero", "currency": "USD", "micros": 0}
REJECTED = "the envelope observed m/someone-else, not the planned m/impostor"


def claims_zero(ordinal: int):
    """Cases c0 and c1, the honest model's attempts first: it resolves both at a complete
    cost; the impostor answers for another model, claiming a genuine zero."""
    if ordinal % 2 == 0:
        return "resolved", "pass", 1000
    return "harness_failure", None, 1000, REJECTED, GENUINE_ZERO


def test_an_old_terminal_keeping_a_rejected_claim_counts_as_unavailable(disk_store):
    plan = fabricate(disk_store, Spec([HONEST, IMPOSTOR], ["c0", "c1"], outcome=claims_zero))
    report, _ = build.build(disk_store, plan)
    assert report["status"] == "complete"
    honest, impostor = report["models"]
    assert impostor["cost"]["candidate"]["completeness"] == "unavailable"
    assert impostor["cost"]["candidate"]["micros"] is None
    assert impostor["cost"]["candidate"]["counts"]["unavailable"] == 2
    assert impostor["cost"]["total"] == cost.unknown()
    assert honest["cost"]["candidate"]["completeness"] == "complete"
    # Only what is known adds up, and the total says something is missing.
    totals = report["totals"]["cost"]["candidate"]
    known = honest["cost"]["candidate"]["micros"]
    assert (totals["completeness"], totals["micros"]) == ("partial", known)
    notes = [row.get("cost_note") for row in report["attempts"]]
    assert notes == [None, f"envelope rejected ({REJECTED})"] * 2
    text = render.text(report, layer.unstored(None))
    assert f"attempt 1 (m/impostor, c0): cost unavailable: envelope rejected ({REJECTED})" in text
    markdown = render.markdown(report, layer.unstored(None))
    assert "**Candidate costs not counted**" in markdown
    for part in layer.rows_records(plan, report["attempts"]):
        schema.validate(part, layer.ROWS)


def claims_too_much(ordinal: int):
    """The impostor's refused envelopes claim more than the attempt's ceiling."""
    over = {"completeness": "complete", "currency": "USD", "micros": 9_000_000}
    return ("resolved", "pass", 1000) if ordinal % 2 == 0 else claims_zero(ordinal)[:4] + (over,)


def test_a_rejected_claim_above_the_ceiling_is_no_spend(disk_store):
    plan = fabricate(disk_store, Spec([HONEST, IMPOSTOR], ["c0"], outcome=claims_too_much))
    report, _ = build.build(disk_store, plan)
    terminal = disk_store.objects.get_record(report["attempts"][1]["terminal"])
    assert terminal["spend"]["over_ceiling_micros"] == 7_000_000  # as an older yyb flagged it
    assert [m["over_ceiling"] for m in report["models"]] == [0, 0]
    assert "spend ceiling" not in render.text(report, layer.unstored(None))


def test_the_html_page_says_why_a_cost_is_unavailable(disk_store):
    pytest.importorskip("matplotlib")
    from yyb.reports import html

    plan = fabricate(disk_store, Spec([HONEST, IMPOSTOR], ["c0", "c1"], outcome=claims_zero))
    report, _ = build.build(disk_store, plan)
    page = html.document(report, layer.unstored(None))
    assert "<h2>Candidate costs not counted</h2>" in page
    assert f"cost unavailable: envelope rejected ({REJECTED})" in page
