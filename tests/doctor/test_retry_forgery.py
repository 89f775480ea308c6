"""`yyb doctor --plan` on forged retry plans: each record built by hand, stored, then checked."""

from __future__ import annotations

from dataclasses import replace

from tests.plans.retried import Holes, holes_fixture  # noqa: F401 (the holes fixture)
from yyb.evidence import names
from yyb.evidence.kinds.plan import AttemptPlan
from yyb.plans import planfile


def forge(holes: Holes, parent: str, targets: list[str], **changes) -> str:
    """Store a retry plan of ``parent`` whose attempts retry ``targets`` (as ``yyb plan
    --retry-of`` would write one, without its checks), ``changes`` made to its plan record."""
    store = holes.bench.store
    attempts = []
    for ordinal, target in enumerate(targets):
        stored = AttemptPlan.from_stored(store.objects.get_record(target))
        forged = replace(stored, ordinal=ordinal, links=replace(stored.links, retry_of=target))
        attempts.append(store.objects.put_record(forged.to_value()))
    original = store.objects.get_record(parent)
    ceilings = [store.objects.get_record(a)["budget"]["ceiling_micros"] for a in attempts]
    total = sum(ceilings)
    value = {k: v for k, v in original.items() if k != "links"}
    value.update(
        attempt_count=len(attempts),
        budget={
            "currency": "USD",
            "total_micros": total,
            "per_attempt_micros": total // len(attempts),
            "remainder_micros": total % len(attempts),
        },
        links={"cases": original["links"]["cases"], "attempts": attempts, "retry_of": parent},
    )
    value.update(changes)
    oid = store.objects.put_record(value)
    store.refs.update(names.plan(oid), oid, old=None, reason="plan")
    return oid


def findings(holes: Holes, oid: str) -> list[str]:
    done = holes.yyb("doctor", "--plan", oid)
    assert done.exit_code == 1, done.stdout + done.stderr
    return [line for line in done.lines if " retry-" in line]


def test_retrying_a_resolved_attempt_is_a_finding(holes):
    resolved = holes.attempts[2]
    oid = forge(holes, holes.plan.oid, [resolved])
    [line] = findings(holes, oid)
    assert line.startswith("error retry-attempt ")
    assert f"retries {resolved}, whose resolved terminal is not retryable" in line
    report = holes.yyb("report", "--plan", oid, "--no-layer")
    assert report.exit_code == 1  # the family's gate refuses it too


def test_pointing_at_another_plans_attempt_is_a_finding(holes, tmp_path):
    out = str(tmp_path / "retry.json")
    made = holes.yyb("plan", "--retry-of", holes.plan.oid, "--output", out)
    assert made.exit_code == 0, made.stderr
    real, records = planfile.load(out)
    theirs = records[real]["links"]["attempts"][0]  # an attempt of the retry, not of the root
    oid = forge(holes, holes.plan.oid, [theirs])
    lines = findings(holes, oid)
    assert any(
        f"retry_of {theirs} is not an attempt of the retried plan {holes.plan.oid}" in line
        for line in lines
    ), lines
    clean = holes.yyb("doctor", "--plan", real)
    assert [line for line in clean.lines if " retry-" in line] == []


def test_a_cell_retried_twice_in_one_plan_is_a_finding(holes):
    cancelled = holes.attempts[0]
    oid = forge(holes, holes.plan.oid, [cancelled, cancelled])
    [line] = findings(holes, oid)
    assert f"retry_of {cancelled}, which attempt" in line and "retries already" in line


def test_a_changed_measurement_is_a_finding(holes):
    plan = holes.bench.store.objects.get_record(holes.plan.oid)
    oid = forge(holes, holes.plan.oid, holes.attempts[:2], timeout_ms=plan["timeout_ms"] + 1)
    [line] = findings(holes, oid)
    assert line.startswith(f"error retry-measurement {oid}: its timeout_ms differs")


def test_a_wrong_budget_is_a_finding(holes):
    oid = forge(
        holes,
        holes.plan.oid,
        holes.attempts[:2],
        budget={
            "currency": "USD",
            "total_micros": 10**9,
            "per_attempt_micros": 5 * 10**8,
            "remainder_micros": 0,
        },
    )
    [line] = findings(holes, oid)
    assert line.startswith(f"error retry-budget {oid}: ")
