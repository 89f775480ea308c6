"""Recovery: an attempt already dispatched is never dispatched again; reuse, convert or close.

- a terminal: checked to be this attempt's and reused; a signature or evidence that a crash
  cut short is completed;
- a terminal whose ref update a crash cut short (while signing it): that terminal is published;
- an execution record without a terminal: the retained evidence proves the terminal, which is
  published from it (grading what was not graded yet);
- an intent alone: closed as an indeterminate harness_failure;
- nothing: the attempt may be dispatched.
"""

from __future__ import annotations

from yyb import signing
from yyb.attempts.conclude import conclude, indeterminate
from yyb.attempts.context import Result, RunContext, run_lock
from yyb.attempts.publish import evidence, publish, seal
from yyb.errors import CorruptRef
from yyb.evidence.kinds.attempt import Execution, Terminal
from yyb.evidence.record import Record


def reconcile(ctx: RunContext, attempt_oid: str) -> Result | None:
    """What the store already holds for the attempt, completed; None when never dispatched."""
    attempt = ctx.attempts[attempt_oid]
    store, refs = ctx.store, ctx.store.refs
    terminal_oid = ctx.read(attempt_oid, "terminal")
    if terminal_oid is not None:
        value = store.objects.get_record(terminal_oid)
        if not _belongs(ctx, attempt_oid, value, Terminal):
            raise CorruptRef(
                ctx.ref(attempt_oid, "terminal"),
                f"names terminal {terminal_oid} of another attempt; run 'yyb doctor --plan'",
            )
        terminal = Terminal.from_stored(value)
        seal(store, terminal_oid, ctx.signer)
        if ctx.read(attempt_oid, "evidence") is None:
            evidence(ctx, attempt_oid, terminal_oid, terminal, _listing(store, terminal))
        return Result.of(attempt_oid, attempt, terminal_oid, terminal, "reused")
    # A terminal whose publishing a crash cut short (while it was being signed) was decided
    # already: publish that one, never decide another.
    terminal = _pending(ctx, ctx.ref(attempt_oid, "terminal"), attempt_oid)
    if terminal is not None:
        return publish(ctx, attempt_oid, terminal, _listing(store, terminal), "reused")
    if ctx.read(attempt_oid, "intent") is None:
        return None
    execution_ref = ctx.ref(attempt_oid, "execution")
    execution_oid = refs.read(execution_ref)
    pending = refs.pending(execution_ref) if execution_oid is None else None
    if pending is not None and store.objects.contains(pending):
        # The execution record is durable; only its ref update was cut short: finish it.
        refs.update(execution_ref, pending, old=None, reason="finish an interrupted update")
        execution_oid = pending
    if execution_oid is not None:
        value = store.objects.get_record(execution_oid)
        if _belongs(ctx, attempt_oid, value, Execution):
            execution = Execution.from_stored(value)
            terminal = conclude(ctx, attempt_oid, execution_oid, execution)
            return publish(ctx, attempt_oid, terminal, execution.links.listing, "converted")
    # A crash may have left a lock on the execution ref, which nothing will update again:
    # remove it if its holder is gone, and say so in the terminal.
    holder = refs.break_abandoned_lock(execution_ref)
    note = ""
    if holder is not None:
        note = f"; replaced the abandoned lock on {execution_ref} left by pid {holder['pid']}"
    return publish(ctx, attempt_oid, indeterminate(ctx, attempt_oid, note), None, "closed")


def _belongs(ctx: RunContext, attempt_oid: str, value: dict, kind: type[Record]) -> bool:
    """Whether a stored value is a record of ``kind`` of this attempt of this plan."""
    return (
        kind.holds(value)
        and value.get("attempt") == attempt_oid
        and value.get("plan") == ctx.plan_oid
    )


def _pending(ctx: RunContext, name: str, attempt_oid: str) -> Terminal | None:
    """The terminal record of this attempt that a cut-short update of ``name`` was
    publishing, or None."""
    pending = ctx.store.refs.pending(name)
    if pending is None or not ctx.store.objects.contains(pending):
        return None
    value = ctx.store.objects.get_record(pending)
    if not _belongs(ctx, attempt_oid, value, Terminal):
        return None
    return Terminal.from_stored(value)


def _listing(store, terminal: Terminal) -> str | None:
    """The listing of the execution a terminal rests on (None when nothing ran)."""
    if not terminal.links.execution:
        return None
    return Execution.read(store.objects, terminal.links.execution).links.listing


def recover(
    store,
    plan_oid: str,
    plan: dict,
    attempts: dict[str, dict],
    environ: dict[str, str] | None = None,
) -> list[Result]:
    """Reconcile every attempt of the plan without dispatching anything.

    Raises:
        LockHeld: a run of this plan is in progress.
        UsageError: a signing key is named but missing.
    """
    environ = dict(environ or {})  # judges that finish an interrupted grading need secrets
    ctx = RunContext(store, None, plan_oid, plan, attempts, environ=environ)
    ctx.signer = signing.configured_signer(environ)
    results = []
    with store.exclusive(run_lock(plan_oid)):
        for attempt_oid in sorted(attempts, key=lambda a: attempts[a]["ordinal"]):
            known = reconcile(ctx, attempt_oid)
            if known is None:
                reason = "never dispatched; left for yyb run"
                known = Result.without_terminal(
                    attempt_oid, attempts[attempt_oid], reason, "not dispatched"
                )
            results.append(known)
    return results
