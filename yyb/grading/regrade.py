"""Regrade and rejudge: a new generation of one evaluator over retained evidence only.

Nothing here starts a candidate: the candidate's result is rebuilt from the store, and only
the evaluator runs. Each attempt that finished cleanly gets exactly the next generation of the
profile; attempts whose candidate did not finish cleanly have nothing to grade.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from yyb import signing
from yyb.errors import UsageError, YybError
from yyb.evidence import names
from yyb.evidence.attempt import AttemptHandle
from yyb.evidence.check import AttemptCheck, check_attempt
from yyb.evidence.kinds.grading import ReevaluationPass, ReevaluationPassLinks
from yyb.evidence.records import DETERMINISTIC
from yyb.evidence.terminal import gradeable, identities
from yyb.evidence.verdict import conclude
from yyb.grading import evaluate
from yyb.grading.invocation import Controls

Verb = Literal["regrade", "rejudge"]
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


@dataclass(frozen=True)
class Request:
    """One regrade or rejudge pass: the profile it brings to its next generation, which verb
    asked for it, and whether it only says what it would do."""

    profile: str
    verb: Verb
    dry_run: bool = False


def current_verdict(handle: AttemptHandle) -> tuple[str, str]:
    """The attempt's current verdict over every generation of every profile it has."""
    return conclude(handle.histories())


def reevaluate(
    store,
    plan_oid: str,
    plan: dict,
    attempts: dict[str, dict],
    request: Request,
    controls: Controls,
    progress: Callable[[Row], None] | None = None,
) -> list[Row]:
    """Append the next generation of ``request.profile`` to every gradeable attempt of the
    plan; the receipts are signed with the key ``controls.environ`` configures (none for a
    dry run, whatever ``controls.signer`` says).

    Raises:
        UsageError: the profile is not in the plan's catalog, or is of the other kind, or
            a signing key is named but missing.
        LockHeld: another regrade or rejudge of this plan is running.
    """
    profile, verb = request.profile, request.verb
    spec = evaluate.profile_spec(plan, profile)
    if spec["kind"] not in KINDS_OF[verb]:
        other = "rejudge" if verb == "regrade" else "regrade"
        raise UsageError(f"{profile} is a {spec['kind']} evaluator: use yyb {other}")
    signer = None if request.dry_run else signing.configured_signer(dict(controls.environ))
    controls = replace(controls, signer=signer)
    rows = []
    cancel = controls.cancel
    with store.exclusive(f"reevaluate-{plan_oid}"):
        # Each attempt's chain is read once, by the check a new generation rests on; the
        # pass's goals, the evaluation and the current verdict all come from that one read.
        # An attempt with no retained evidence has not run yet: there is nothing to check.
        order = sorted(attempts, key=lambda a: attempts[a]["ordinal"])
        retained = {
            oid
            for oid in attempts
            if store.refs.read(names.attempt(plan_oid, oid, "evidence")) is not None
        }
        # The first retained attempt is checked first, and its base begins building while
        # the other chains are checked: it is the first evaluated, unless an interrupted pass
        # evaluated it already (its base is then built in the background for nothing).
        leading = next((oid for oid in order if oid in retained), None)
        early = {}
        if leading is not None:
            early[leading] = check_attempt(store, plan_oid, plan, leading, attempts[leading])
            if not request.dry_run:
                _warm(store, plan, request.profile, early[leading])
        checks = {
            oid: early[oid]
            if oid in early
            else check_attempt(store, plan_oid, plan, oid, attempts[oid])
            for oid in attempts
            if oid in retained
        }
        goals, pass_oid = _goals(store, plan_oid, checks, request)
        # The bases of the attempts to evaluate, in order: each is built while the one
        # before it is evaluated (the first as soon as it is known), not at its own turn.
        upcoming = [] if request.dry_run else [a for a in order if a in goals and a in checks]
        after = dict(zip(upcoming, upcoming[1:], strict=False))
        if upcoming and upcoming[0] not in early:
            _warm(store, plan, request.profile, checks[upcoming[0]])
        for attempt_oid in order:
            check = checks.get(attempt_oid)
            if check is None:
                planned = AttemptHandle(plan_oid, plan, attempt_oid, attempts[attempt_oid])
                row = _row(planned, "skipped", reason="no retained evidence (not run yet)")
            else:
                if attempt_oid in after:
                    _warm(store, plan, request.profile, checks[after[attempt_oid]])
                row = _one(store, check, request, goals.get(attempt_oid), controls)
            rows.append(row)
            if progress:
                progress(row)
        if pass_oid is not None and not (cancel is not None and cancel.is_set()):
            ref = names.reevaluation_pass(plan_oid, profile)
            store.refs.update(ref, None, old=pass_oid, reason=f"{verb} pass complete")
    return rows


def _warm(store, plan: dict, profile: str, check: AttemptCheck) -> None:
    """Begin building the base ``check``'s attempt is evaluated on; what fails here is left
    for its evaluation, which meets it again and says why."""
    try:
        evaluate.warm_profile(store, plan, profile, check.handle)
    except YybError:
        return


def _goals(
    store, plan_oid: str, checks: dict[str, AttemptCheck], request: Request
) -> tuple[dict[str, int], str | None]:
    """The generation this pass brings each gradeable attempt to, and the pass record's oid.

    A pass records its goals (``yylo_benchmark_reevaluation_pass.v2`` under
    ``refs/runs/<plan>/passes/<profile>``) before it evaluates anything and deletes the ref
    when it is done. A pass that finds such a ref was interrupted before: it resumes those
    goals instead of starting another generation.
    """
    profile, verb = request.profile, request.verb
    ref = names.reevaluation_pass(plan_oid, profile)
    existing = store.refs.read(ref)
    if existing is not None:
        return dict(store.objects.get_record(existing)["goals"]), existing
    goals = {}
    for attempt_oid, check in checks.items():
        handle = check.handle
        if handle.evidence is None or handle.terminal is None:
            continue
        if gradeable(handle.terminal.record, handle.attempt["model"]) is not None:
            continue
        goals[attempt_oid] = handle.next_generation(profile)
    if request.dry_run or not goals:
        return goals, None
    record = ReevaluationPass(
        plan=plan_oid,
        profile=profile,
        verb=verb,
        goals=goals,
        links=ReevaluationPassLinks(plan=plan_oid),
    )
    oid = store.objects.put_record(record.to_value())
    store.refs.update(ref, oid, old=None, reason=f"{verb} pass started")
    return goals, oid


def _row(
    handle: AttemptHandle,
    action: str,
    generation: int | None = None,
    verdict: str | None = None,
    current: str | None = None,
    reason: str = "",
) -> Row:
    return Row(
        handle.oid,
        handle.ordinal,
        handle.case_id,
        handle.model,
        action,
        generation,
        verdict,
        current,
        reason,
    )


def _one(store, check: AttemptCheck, request: Request, goal: int | None, controls: Controls) -> Row:
    """Evaluate one checked attempt for the pass (or say why not)."""
    handle = check.handle

    def row(*args, **kwargs) -> Row:
        return _row(handle, *args, **kwargs)

    # Only evidence whose whole chain verifies is graded again: a new generation must never
    # lend a verdict to records that doctor --plan would reject.
    errors = [f for f in check.findings if f.level == "error"]
    if errors or handle.terminal is None or handle.evidence is None:
        detail = errors[0].detail if errors else "its chain is incomplete"
        return row("refused", reason=f"its chain does not verify: {detail}")
    why_not = gradeable(handle.terminal.record, handle.attempt["model"])
    if why_not is not None:
        return row("skipped", reason=why_not)
    previous = handle.generations(request.profile)
    generation = handle.next_generation(request.profile)
    if goal is None or generation > goal:
        done = previous[-1].record if previous else None
        return row(
            "skipped",
            done and done["generation"],
            done and done["verdict"],
            reason="already evaluated in this pass" if done else "not in this pass",
        )
    if request.dry_run:
        return row("would evaluate", generation, reason="dry run")
    if controls.cancel is not None and controls.cancel.is_set():
        return row("skipped", reason="interrupted")
    truth = evaluate.Truth.retained(store, handle)
    blind = identities(handle.terminal.record["identity"])
    held = evaluate.evaluate(
        store, handle, request.profile, truth, blind, controls, generation=generation
    )
    current, reason = current_verdict(handle.with_generation(request.profile, held))
    return row("evaluated", generation, held.record["verdict"], current, reason)
