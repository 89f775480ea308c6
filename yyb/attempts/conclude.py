"""Conclude: grade what the candidate left (generation 1) and decide the terminal record."""

from __future__ import annotations

from yyb.attempts.dispatch import inputs
from yyb.attempts.metering import metered_cost
from yyb.evidence import cost, names
from yyb.evidence import plan as planned
from yyb.evidence.attempt import AttemptHandle
from yyb.evidence.kinds.attempt import (
    CandidateCost,
    DispatchIntent,
    Execution,
    Identity,
    Runtime,
    Terminal,
    TerminalExit,
    TerminalLinks,
    TerminalSpend,
)
from yyb.evidence.kinds.gateway import GatewayMeter
from yyb.evidence.record import ABSENT
from yyb.evidence.records import TerminalClass
from yyb.evidence.terminal import INDETERMINATE, Facts, decide, identities
from yyb.evidence.verdict import conclude as verdict_of
from yyb.grading import evaluate
from yyb.grading.invocation import Controls


def conclude(ctx, attempt_oid: str, execution_oid: str, execution: Execution) -> Terminal:
    """The terminal record of an executed attempt, grading it first when it ran cleanly.

    Generation 1 evaluations retained before an interruption are reused, never run twice.
    """
    facts = Facts(**execution.facts.to_value())
    links = {
        k: v
        for k, v in execution.links.to_value().items()
        if k not in ("plan", "attempt", "listing")
    }
    links["execution"] = execution_oid
    if facts.ran_cleanly:
        _grade(ctx, attempt_oid, execution, facts, links)
        facts.cancelled = ctx.cancel.is_set()  # stopped while grading: still in flight
    cls, reason = decide(facts)
    return terminal_record(ctx, attempt_oid, cls, reason, links, facts, execution)


def early(ctx, attempt_oid: str, facts: Facts, links: dict) -> Terminal:
    """The terminal record of an attempt that ended before its candidate ran."""
    cls, reason = decide(facts)
    return terminal_record(ctx, attempt_oid, cls, reason, links, facts)


def indeterminate(ctx, attempt_oid: str, note: str = "") -> Terminal:
    """The terminal of an attempt dispatched by an earlier run that left no execution: it
    may or may not have run, so it is a harness_failure and is never dispatched again."""
    links = {"intent": ctx.read(attempt_oid, "intent")}
    spent = None
    kept = ctx.store.refs.read(names.calls(ctx.plan_oid, attempt_oid))
    if kept is not None:  # its calls to the gateway, kept as each ended: evidence still
        meter = GatewayMeter.read(ctx.store.objects, kept)
        links["gateway"], spent = kept, metered_cost(meter.cost.micros, meter.cost.completeness)
        note += f"; the gateway kept the {meter.calls} calls it made"
    facts = Facts(environment=None)
    reason = INDETERMINATE + note
    return terminal_record(ctx, attempt_oid, "harness_failure", reason, links, facts, spent=spent)


def _grade(ctx, attempt_oid: str, execution: Execution, facts: Facts, links: dict) -> None:
    """Generation 1 of every selected evaluator; their conjunction decides the verdict."""
    attempt = ctx.attempts[attempt_oid]
    case, prompt, _ = inputs(ctx, attempt)
    truth = evaluate.Truth(
        links["manifest"],
        execution.links.listing,
        links.get("patch"),
        links.get("stdout"),
        links.get("stderr"),
        prompt or b"",
        receipt=links.get("receipt"),
    )
    names = identities(execution.identity.to_value())
    handle = AttemptHandle.read(ctx.store, ctx.plan_oid, attempt_oid, ctx.plan, attempt)
    controls = Controls(ctx.protected(), ctx.cancel, ctx.environ, ctx.signer, ctx.judges)
    histories, receipts = {}, []
    for profile in planned.first_generation_profiles(ctx.plan, case):
        retained = handle.generations(profile)
        if retained:  # graded before an interruption: reuse, never grade generation 1 twice
            receipts.append(retained[0][0])
            histories[profile] = [record for _, record in retained]
            continue
        oid, receipt = evaluate.evaluate(ctx.store, handle, profile, truth, names, controls)
        receipts.append(oid)
        histories[profile] = [receipt]
    if not histories:
        facts.verdict, facts.verdict_reason = "pass", "no evaluator is selected for this attempt"
        return
    verdict, reason = verdict_of(histories)
    facts.safety_failed = verdict == "safety"
    facts.verdict = "fail" if verdict == "safety" else verdict
    facts.verdict_reason = reason
    links["evaluations"] = tuple(receipts)


def terminal_record(
    ctx,
    attempt_oid: str,
    cls: TerminalClass,
    reason: str,
    links: dict,
    facts: Facts,
    execution: Execution | None = None,
    spent: CandidateCost | None = None,
) -> Terminal:
    """The terminal: one class and reason, the identity, runtime, exit and cost it rests on
    (``spent``: the cost of an attempt without an execution, when the gateway metered it).

    A reported cost above the attempt's ceiling is flagged in ``spend`` (and in the reason);
    it does not change the class, which says what the candidate did.
    """
    attempt = ctx.attempts[attempt_oid]
    if execution is None:
        # Nothing ran: the intent's time stands for the runtime, so a rerun after a crash
        # writes the very same terminal (same oid, same signature) instead of a second one.
        now = DispatchIntent.read(ctx.store.objects, links["intent"]).time_ms
        identity = Identity(
            requested=attempt["model"]["requested"],
            resolved=attempt["model"]["resolved"],
            observed=None,
        )
        runtime = Runtime(wall_ms=0, started_ms=now, ended_ms=now)
        outputs, spent = {}, spent or CandidateCost(**cost.unknown())
    else:
        identity, runtime = execution.identity, execution.runtime
        outputs, spent = execution.outputs, execution.candidate_cost
    ceiling = planned.ceiling(attempt)
    over = cost.over_ceiling(spent.to_value(), ceiling)
    metered = execution.metered if execution is not None else ABSENT
    if over is not None:
        said = "metered" if "gateway" in links else "reported"
        reason += f"; the {said} cost exceeds the attempt's ceiling of {ceiling} micro-USD"
    if metered and metered.ceiling_reached:
        reason += "; the gateway refused calls once the attempt's spend ceiling was reached"
    if metered and metered.disagreements:
        reason += "; the envelope disagrees with the gateway, whose observations stand: "
        reason += "; ".join(metered.disagreements)
    return Terminal(
        class_=cls,
        reason=reason,
        plan=ctx.plan_oid,
        attempt=attempt_oid,
        ordinal=attempt["ordinal"],
        identity=identity,
        runtime=runtime,
        exit=TerminalExit(
            code=facts.exit_code,
            signal=facts.signal,
            timed_out=facts.timed_out,
            cleanup_confirmed=facts.cleanup_confirmed,
        ),
        outputs=outputs,
        candidate_cost=spent,
        links=TerminalLinks(
            plan=ctx.plan_oid, attempt=attempt_oid, **{k: v for k, v in links.items() if v}
        ),
        spend=ABSENT
        if ceiling is None
        else TerminalSpend(ceiling_micros=ceiling, over_ceiling_micros=over),
        metered=metered,
    )
