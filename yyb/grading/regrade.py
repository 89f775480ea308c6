"""Regrade and rejudge: a new generation of one evaluator over retained evidence only.

Nothing here starts a candidate: the candidate's result is rebuilt from the store, and only
the evaluator runs. Each attempt that finished cleanly gets exactly the next generation of the
profile; attempts whose candidate did not finish cleanly have nothing to grade.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from yyb import signing
from yyb.errors import UsageError
from yyb.evidence import names
from yyb.evidence.chain import history
from yyb.evidence.check import check_attempt
from yyb.evidence.records import DETERMINISTIC, REEVALUATION_PASS
from yyb.evidence.terminal import gradeable, identities
from yyb.evidence.verdict import conclude
from yyb.grading import evaluate

KINDS_OF = {"regrade": DETERMINISTIC, "rejudge": ("llm_judge",)}


@dataclass
class Row:
    attempt: str
    ordinal: int
    case_id: str | None
    model: str
    action: str  # evaluated | would evaluate | skipped | refused
    generation: int | None
    verdict: str | None
    current: str | None
    reason: str


def current_verdict(store, plan_oid: str, plan: dict, attempt_oid: str) -> tuple[str, str]:
    """The attempt's current verdict over every generation of every profile it has."""
    histories = {}
    for profile in sorted(plan["evaluators"]["catalog"]):
        records = [r for _, r in history(store, plan_oid, attempt_oid, profile)]
        if records:
            histories[profile] = records
    return conclude(histories)


def reevaluate(
    store,
    plan_oid: str,
    plan: dict,
    attempts: dict[str, dict],
    profile: str,
    verb: str,
    protected: list[str],
    dry_run: bool = False,
    progress: Callable[[Row], None] | None = None,
    cancel=None,
    environ: dict | None = None,
) -> list[Row]:
    """Append the next generation of ``profile`` to every gradeable attempt of the plan.

    Raises:
        UsageError: the profile is not in the plan's catalog, or is of the other kind, or
            a signing key is named but missing.
        LockHeld: another regrade or rejudge of this plan is running.
    """
    spec = evaluate.profile_spec(plan, profile)
    if spec["kind"] not in KINDS_OF[verb]:
        other = "rejudge" if verb == "regrade" else "regrade"
        raise UsageError(f"{profile} is a {spec['kind']} evaluator: use yyb {other}")
    signer = None if dry_run else signing.configured_signer(environ or {})
    rows = []
    with store.exclusive(f"reevaluate-{plan_oid}"):
        goals, pass_oid = _goals(store, plan_oid, attempts, profile, verb, dry_run)
        for attempt_oid in sorted(attempts, key=lambda a: attempts[a]["ordinal"]):
            row = _one(
                store,
                plan_oid,
                plan,
                attempt_oid,
                attempts[attempt_oid],
                profile,
                protected,
                dry_run,
                cancel,
                goals.get(attempt_oid),
                environ,
                signer,
            )
            rows.append(row)
            if progress:
                progress(row)
        if pass_oid is not None and not (cancel is not None and cancel.is_set()):
            ref = names.reevaluation_pass(plan_oid, profile)
            store.refs.update(ref, None, old=pass_oid, reason=f"{verb} pass complete")
    return rows


def _goals(
    store, plan_oid: str, attempts: dict[str, dict], profile: str, verb: str, dry_run: bool
) -> tuple[dict[str, int], str | None]:
    """The generation this pass brings each gradeable attempt to, and the pass record's oid.

    A pass records its goals (``yylo_benchmark_reevaluation_pass.v2`` under
    ``refs/runs/<plan>/passes/<profile>``) before it evaluates anything and deletes the ref
    when it is done. A pass that finds such a ref was interrupted before: it resumes those
    goals instead of starting another generation.
    """
    ref = names.reevaluation_pass(plan_oid, profile)
    existing = store.refs.read(ref)
    if existing is not None:
        return dict(store.objects.get_record(existing)["goals"]), existing
    goals = {}
    for attempt_oid in attempts:
        evidence_oid = store.refs.read(names.attempt(plan_oid, attempt_oid, "evidence"))
        if evidence_oid is None:
            continue
        evidence = store.objects.get_record(evidence_oid)
        if gradeable(store.objects.get_record(evidence["links"]["terminal"])) is not None:
            continue
        done = history(store, plan_oid, attempt_oid, profile)
        goals[attempt_oid] = (done[-1][1]["generation"] if done else 0) + 1
    if dry_run or not goals:
        return goals, None
    record = {
        "schema_version": REEVALUATION_PASS,
        "plan": plan_oid,
        "profile": profile,
        "verb": verb,
        "goals": goals,
        "links": {"plan": plan_oid},
    }
    oid = store.objects.put_record(record)
    store.refs.update(ref, oid, old=None, reason=f"{verb} pass started")
    return goals, oid


def _one(
    store,
    plan_oid,
    plan,
    attempt_oid,
    attempt,
    profile,
    protected,
    dry_run,
    cancel,
    goal: int | None,
    environ: dict | None,
    signer,
) -> Row:
    def row(action, generation=None, verdict=None, current=None, reason=""):
        return Row(
            attempt_oid,
            attempt["ordinal"],
            attempt.get("case_id"),
            attempt["model"]["resolved"],
            action,
            generation,
            verdict,
            current,
            reason,
        )

    if store.refs.read(names.attempt(plan_oid, attempt_oid, "evidence")) is None:
        return row("skipped", reason="no retained evidence (not run yet)")
    # Only evidence whose whole chain verifies is graded again: a new generation must never
    # lend a verdict to records that doctor --plan would reject.
    check = check_attempt(store, plan_oid, plan, attempt_oid)
    errors = [f for f in check.findings if f.level == "error"]
    if errors or check.terminal is None or check.evidence_oid is None:
        detail = errors[0].detail if errors else "its chain is incomplete"
        return row("refused", reason=f"its chain does not verify: {detail}")
    evidence_oid, (_, terminal) = check.evidence_oid, check.terminal
    why_not = gradeable(terminal)
    if why_not is not None:
        return row("skipped", reason=why_not)
    previous = history(store, plan_oid, attempt_oid, profile)
    generation = previous[-1][1]["generation"] + 1 if previous else 1
    if goal is None or generation > goal:
        done = previous[-1][1] if previous else None
        return row(
            "skipped",
            done and done["generation"],
            done and done["verdict"],
            reason="already evaluated in this pass" if done else "not in this pass",
        )
    if dry_run:
        return row("would evaluate", generation, reason="dry run")
    if cancel is not None and cancel.is_set():
        return row("skipped", reason="interrupted")
    truth = evaluate.Truth.of(store, terminal, evidence_oid)
    blind = identities(terminal["identity"])
    _, receipt = evaluate.evaluate(
        store,
        plan_oid,
        plan,
        attempt_oid,
        attempt,
        profile,
        truth,
        blind,
        protected,
        generation=generation,
        cancel=cancel,
        environ=environ,
        signer=signer,
    )
    current, reason = current_verdict(store, plan_oid, plan, attempt_oid)
    return row("evaluated", generation, receipt["verdict"], current, reason)
