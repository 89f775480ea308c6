"""Running and recovering a governed plan, one step attempt at a time, in plan order.

For each step attempt a run: holds the locks of the step's resources; writes the intent (its
dispatch number and dispatch id) durably; asks the boundary to dispatch; concludes a terminal
from the answer; releases the locks. A step attempt whose intent has no terminal is never
dispatched again by ``run``: ``recover`` asks the boundary's journal what happened first
(docs/workflow.md, "Recovery"). The first step that cannot be concluded stops the run, so
steps keep their order.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field

from yyb.errors import InvalidArgument, RefMismatch, UsageError
from yyb.evidence import names
from yyb.evidence.kinds.governed import (
    GovernedIntent,
    GovernedIntentLinks,
    GovernedModel,
    GovernedTerminal,
    GovernedTerminalLinks,
    ProductionAuthorization,
)
from yyb.evidence.record import ABSENT
from yyb.harness import envelope, scratch, worktree
from yyb.harness.redaction import Redactor
from yyb.workflow import boundary, files, judging, locks
from yyb.workflow.config import GovernedConfig
from yyb.workflow.plan import Plan


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class StepResult:
    attempt: str
    ordinal: int
    step: str
    model: str
    status: str  # concluded | retained | stopped | would_run
    terminal_class: str | None = None
    reason: str = ""
    judgement: str | None = None  # the newest judgement's verdict, when the step is judged
    replaced_locks: list = field(default_factory=list)
    dispatched: int = 0  # the dispatches this command asked the boundary for (0 or 1)


class Stopped(Exception):
    """A step attempt that cannot go on without a person (or a recovery)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def dispatch_id(plan_oid: str, attempt_oid: str, number: int) -> str:
    return hashlib.sha256(f"yyb-dispatch\0{plan_oid}\0{attempt_oid}\0{number}".encode()).hexdigest()


# -- authorization -------------------------------------------------------------------------


def authorize(store, plan: Plan, hours: float) -> str:
    """Record that ``plan`` may touch production for ``hours`` from now; return its oid."""
    if not 0 < hours <= 24 * 30:
        raise InvalidArgument("hours", "must be more than 0 and at most 720", hours)
    created = now_ms()
    value = ProductionAuthorization(
        plan=plan.oid, created_ms=created, expires_ms=created + int(hours * 3_600_000)
    )
    oid = store.objects.put_record(value.to_value())
    ref = names.governed_authorization(plan.oid)
    store.refs.update(ref, oid, old=store.refs.read(ref), reason="production authorization")
    return oid


def check_authorized(store, plan: Plan) -> None:
    oid = store.refs.read(names.governed_authorization(plan.oid))
    if oid is None:
        raise UsageError(
            "the plan is not authorized for production: run 'yyb workflow authorize' first"
        )
    value = store.objects.get_record(oid)
    if not ProductionAuthorization.holds(value) or value["plan"] != plan.oid:
        raise UsageError("the production authorization is for another plan")
    if ProductionAuthorization.from_stored(value).expires_ms <= now_ms():
        raise UsageError("the plan's production authorization has expired")


# -- the run -------------------------------------------------------------------------------


@dataclass
class Context:
    store: object
    cfg: GovernedConfig
    plan: Plan
    environ: dict
    lock_timeout_s: float = 0.0
    dispatch_timeout_s: float = boundary.DEFAULT_TIMEOUT_S


def order(plan: Plan) -> list[tuple[str, dict]]:
    return sorted(((o, plan.records[o]) for o in plan.attempts), key=lambda p: p[1]["ordinal"])


def refs_of(ctx: Context, attempt_oid: str) -> tuple[str | None, str | None]:
    read = ctx.store.refs.read
    return (
        read(names.governed_step(ctx.plan.oid, attempt_oid, "intent")),
        read(names.governed_step(ctx.plan.oid, attempt_oid, "terminal")),
    )


class MissingCredential(UsageError):
    """A credential the boundary needs is not set: a live dispatch would run without it."""

    def __init__(self, name: str):
        super().__init__(
            f"the boundary's credential {name} is not set in the environment; nothing was "
            "dispatched"
        )
        self.name = name


def check_credentials(ctx: Context) -> None:
    """Every credential the configuration names is set (and not empty) in the environment.

    Raises:
        MissingCredential: naming the first that is not.
    """
    for name in ctx.cfg.boundary.credentials:
        if not ctx.environ.get(name):
            raise MissingCredential(name)


def check_boundary(ctx: Context) -> None:
    """The boundary answers the identity the plan pinned (UsageError otherwise)."""
    try:
        identity = boundary.identify(ctx.cfg.boundary, ctx.environ)
    except boundary.BoundaryFailure as exc:
        raise UsageError(f"the boundary cannot be used: {exc.reason}") from None
    if identity != ctx.plan.value["boundary"]["identity"]:
        raise UsageError(
            f"the boundary says it is {identity!r}; the plan pins "
            f"{ctx.plan.value['boundary']['identity']!r}"
        )


def run(ctx: Context, dry_run: bool = False) -> list[StepResult]:
    """Run every step attempt without a terminal, in plan order, until one stops."""
    if not dry_run:
        check_authorized(ctx.store, ctx.plan)
        check_credentials(ctx)
        check_boundary(ctx)

    def interrupted(attempt_oid, step, intent_oid, result) -> None:
        raise Stopped(
            "it has an intent and no terminal: run 'yyb workflow recover' to ask the boundary "
            "what happened"
        )

    def fresh(attempt_oid, step, result) -> None:
        if dry_run:
            result.status = "would_run"
        else:
            _dispatch_step(ctx, attempt_oid, step, 1, None, result)

    return _walk(ctx, interrupted, fresh, judge=not dry_run)


def _walk(ctx: Context, interrupted, fresh, judge: bool = True) -> list[StepResult]:
    """Every step attempt in plan order: a retained terminal is reported (and, with
    ``judge``, judged if its policy asks and it is not yet), one with an intent and no
    terminal goes to ``interrupted``, one never started to ``fresh``; the walk ends at the
    first that stops."""
    results = []
    for attempt_oid, step in order(ctx.plan):
        result = _result(attempt_oid, step)
        intent_oid, terminal = refs_of(ctx, attempt_oid)
        try:
            if terminal is not None:
                result.status = "retained"
                result.terminal_class = GovernedTerminal.read(ctx.store.objects, terminal).class_
                if judge:
                    judge_if_due(ctx, attempt_oid, step, result)
            elif intent_oid is not None:
                interrupted(attempt_oid, step, intent_oid, result)
            else:
                fresh(attempt_oid, step, result)
        except Stopped as exc:
            result.status, result.reason = "stopped", exc.reason
        results.append(result)
        if result.status == "stopped":
            break
    return results


def _result(attempt_oid: str, step: dict) -> StepResult:
    return StepResult(
        attempt_oid, step["ordinal"], step["step"], step["model"]["resolved"], "concluded"
    )


def _leases(ctx: Context, attempt_oid: str, step: dict, number: int, result) -> list:
    """Hold every resource of the step (sorted, so two runs never wait on each other in a
    cycle), noting on ``result`` the abandoned locks replaced; Stopped when one is held."""
    held = []
    record = {"plan": ctx.plan.oid, "attempt": attempt_oid, "step": step["step"]}
    try:
        for resource in sorted(step["policy"]["resources"], key=lambda r: (r["type"], r["name"])):
            held.append(
                locks.acquire(
                    ctx.cfg.lock_store,
                    resource["type"],
                    resource["name"],
                    dict(record, dispatch=number),
                    ctx.lock_timeout_s,
                )
            )
    except locks.ResourceHeld as exc:
        for lease in held:
            lease.release()
        raise Stopped(str(exc)) from None
    result.replaced_locks += [lease.replaced for lease in held if lease.replaced]
    return held


def _dispatch_step(
    ctx: Context,
    attempt_oid: str,
    step: dict,
    number: int,
    recovery: dict | None,
    result,
    held: list | None = None,
    old: str | None = None,
) -> None:
    """Hold the step's resources (unless the caller holds them: ``held``), write the intent
    of dispatch ``number`` in place of ``old`` (the intent the caller found: none for a first
    dispatch), dispatch it and conclude its terminal. Stopped when another run wrote an
    intent meanwhile (nothing is dispatched then) or the answer cannot conclude it."""
    check_credentials(ctx)
    mine = held is None
    if mine:
        held = _leases(ctx, attempt_oid, step, number, result)
    try:
        the_id = dispatch_id(ctx.plan.oid, attempt_oid, number)
        ref = names.governed_step(ctx.plan.oid, attempt_oid, "intent")
        intent = GovernedIntent(
            plan=ctx.plan.oid,
            attempt=attempt_oid,
            step=step["step"],
            dispatch=number,
            dispatch_id=the_id,
            model=GovernedModel(**step["model"]),
            resources=tuple(step["policy"]["resources"]),
            created_ms=now_ms(),
            recovery=recovery,
            links=GovernedIntentLinks(
                plan=ctx.plan.oid, attempt=attempt_oid, previous=ABSENT if old is None else old
            ),
        )
        intent_oid = ctx.store.objects.put_record(intent.to_value())
        try:
            ctx.store.refs.update(ref, intent_oid, old=old, reason=f"dispatch {number}")
        except RefMismatch:
            raise Stopped(
                "another run wrote an intent for this step attempt meanwhile; nothing was "
                "dispatched here"
            ) from None
        workflow = ctx.plan.records[step["links"]["workflow"]]
        result.dispatched += 1
        answer = _ask(ctx, attempt_oid, step, the_id, workflow, held)
        if answer.get("status") == "refused":
            raise Stopped(f"the boundary refused dispatch {number}: {answer.get('reason')}")
        if answer.get("status") != "completed":
            raise Stopped(f"the boundary answered status {answer.get('status')!r}")
        try:
            done = boundary.completed(answer)
        except boundary.BoundaryFailure as exc:
            raise Stopped(exc.reason) from None
        conclude(ctx, attempt_oid, step, intent_oid, the_id, done, result)
    finally:
        if mine:
            for lease in held:
                lease.release()


def _ask(ctx: Context, attempt_oid: str, step: dict, the_id: str, workflow: dict, held) -> dict:
    """The boundary's answer to the dispatch; the locks' descriptors are inherited, so a
    resource stays locked while anything the dispatch started holds one, even if this
    process dies (docs/workflow.md, "Resource locks")."""
    folder = scratch.folder("dispatch")
    try:
        path = os.path.join(folder, "workflow.json")
        data = files.canonical(workflow["workflow"])
        with open(path, "wb") as handle:
            handle.write(data)
        request = {
            "dispatch_id": the_id,
            "plan": ctx.plan.oid,
            "attempt": attempt_oid,
            "step": step["step"],
            "model": step["model"],
            "workflow": path,
            "workflow_sha256": workflow["sha256"],
            "variables": ctx.plan.value["variables"],
            "resources": step["policy"]["resources"],
            "lock_fds": [lease.fd for lease in held],
        }
        try:
            return boundary.call(
                ctx.cfg.boundary,
                "dispatch",
                request,
                ctx.environ,
                ctx.dispatch_timeout_s,
                tuple(lease.fd for lease in held),
            ).value
        except boundary.BoundaryFailure as exc:
            raise Stopped(f"{exc.reason}; run 'yyb workflow recover'") from None
    finally:
        worktree.remove(folder)


def conclude(
    ctx: Context,
    attempt_oid: str,
    step: dict,
    intent_oid: str,
    the_id: str,
    done: boundary.Completed,
    result: StepResult,
    recovered: str | None = None,
) -> None:
    """Write the step attempt's terminal from what its dispatch completed with."""
    stamp = now_ms()
    requested = step["model"]["resolved"]
    # The credentials the boundary was given never reach the evidence, in any encoding.
    secrets = Redactor(
        {n: ctx.environ[n] for n in ctx.cfg.boundary.credentials if ctx.environ.get(n)}
    )
    done = boundary.Completed(
        done.exit_code,
        None if done.envelope is None else secrets.redact(done.envelope),
        None if done.output is None else secrets.redact(done.output),
    )
    cls, reason, observed = classify(done.envelope, done.exit_code, requested)
    links = GovernedTerminalLinks(
        plan=ctx.plan.oid,
        attempt=attempt_oid,
        intent=intent_oid,
        envelope=ABSENT if done.envelope is None else ctx.store.objects.put("blob", done.envelope),
        output=ABSENT if done.output is None else ctx.store.objects.put("blob", done.output),
    )
    terminal = GovernedTerminal(
        plan=ctx.plan.oid,
        attempt=attempt_oid,
        step=step["step"],
        dispatch_id=the_id,
        class_=cls,
        reason=reason,
        requested=requested,
        observed=observed,
        exit_code=done.exit_code,
        recovered=recovered,
        created_ms=stamp,
        links=links,
    )
    oid = ctx.store.objects.put_record(terminal.to_value())
    ctx.store.refs.update(
        names.governed_step(ctx.plan.oid, attempt_oid, "terminal"), oid, old=None, reason=cls
    )
    result.status, result.terminal_class, result.reason = "concluded", cls, reason
    judge_if_due(ctx, attempt_oid, step, result)


def judge_if_due(ctx: Context, attempt_oid: str, step: dict, result: StepResult) -> None:
    """The first judgement of a step attempt whose policy names a judge and that has none
    yet (a run killed between the terminal and the judgement judges it on its next pass)."""
    profile = judging.profile_of(step)
    if profile is None:
        return
    found = judging.newest(ctx.store, ctx.plan, attempt_oid, profile)
    if found is None:
        found = judging.judge_step(ctx.store, ctx.cfg, ctx.plan, attempt_oid, profile)
    result.judgement = found.verdict


def classify(data: bytes | None, exit_code: int | None, requested: str) -> tuple:
    """(terminal class, reason, observed identity) of a completed dispatch, from its envelope's
    bytes and exit status (docs/boundary.md, "What yyb concludes from a dispatch")."""
    value, problem = envelope.read(data, 0, 0)
    observed = envelope.observed(value) if value is not None else None
    if problem is not None:
        return "harness_failure", problem, observed
    if observed != requested:
        return "harness_failure", f"the envelope reports {observed}, not {requested}", observed
    if value["status"] == "succeeded" and exit_code == 0:
        return "resolved", "the step completed", observed
    if value["status"] == "succeeded":
        return "model_failure", f"the step exited with status {exit_code}", observed
    return "model_failure", f"the envelope reports {value['status']}", observed


# -- recovery ------------------------------------------------------------------------------


def recover(ctx: Context) -> list[StepResult]:
    """Settle every step attempt with an intent and no terminal, in plan order, by what the
    boundary's journal proves (a new dispatch where the gate allows one); stop at the first
    that a person must decide. Step attempts not started are left to ``run``."""
    check_boundary(ctx)

    def fresh(attempt_oid, step, result) -> None:
        result.status = "not_started"

    return _walk(ctx, lambda *args: _settle(ctx, *args), fresh)


def _settle(ctx: Context, attempt_oid: str, step: dict, intent_oid: str, result) -> None:
    intent = GovernedIntent.read(ctx.store.objects, intent_oid)
    if intent.dispatch_id != dispatch_id(ctx.plan.oid, attempt_oid, intent.dispatch):
        raise Stopped(f"the intent {intent_oid} does not name this step's dispatch")
    held = _leases(ctx, attempt_oid, step, intent.dispatch, result)
    try:
        _settle_held(ctx, attempt_oid, step, intent_oid, intent, held, result)
    finally:
        for lease in held:
            lease.release()


def _settle_held(ctx, attempt_oid, step, intent_oid, intent: GovernedIntent, held, result) -> None:
    """``_settle`` with the step's resources held from the question to any new dispatch."""
    the_id = intent.dispatch_id
    try:
        state, done = boundary.status(ctx.cfg.boundary, the_id, ctx.environ)
    except boundary.BoundaryFailure as exc:
        raise Stopped(f"the boundary cannot say what happened: {exc.reason}") from None
    if state == "completed":
        conclude(ctx, attempt_oid, step, intent_oid, the_id, done, result, recovered=state)
        return
    if state == "unknown":
        raise Stopped(
            f"dispatch {intent.dispatch} ({the_id}) was launched and never completed: what "
            "it did to its resources is unknown; a person must check them and decide"
        )
    # never_dispatched or resumable: nothing that could touch a resource started.
    rule = step["policy"]
    used = intent.dispatch - 1
    if not rule["retry_safe"]:
        raise Stopped(
            f"dispatch {intent.dispatch} is {state}, but step {step['step']!r} is not "
            "retry-safe in the policy: a person must decide whether to run it again"
        )
    if used >= rule["recovery_budget"]:
        raise Stopped(
            f"dispatch {intent.dispatch} is {state}, and the step's recovery budget "
            f"({rule['recovery_budget']}) is spent: a person must decide whether to run it again"
        )
    _dispatch_step(
        ctx,
        attempt_oid,
        step,
        intent.dispatch + 1,
        {"after": the_id, "state": state},
        result,
        held,
        intent_oid,
    )
