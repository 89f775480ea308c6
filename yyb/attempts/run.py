"""Running the attempts of a plan: a flat orchestrator of dispatch, execute, conclude, publish.

Each attempt's records live under ``refs/runs/<plan>/<attempt>/`` (``yyb.evidence.names``):
``intent`` (durable before the candidate starts; its compare-and-swap creation is what makes
a dispatch happen at most once), ``execution``, ``terminal`` and ``evidence``. docs/attempts.md
walks through the chain.
"""

from __future__ import annotations

import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor

from yyb.attempts.conclude import conclude, early, indeterminate
from yyb.attempts.context import (  # noqa: F401  (the library's entry points, re-exported)
    Result,
    RunContext,
    authorize,
    prepare,
    run_lock,
)
from yyb.attempts.dispatch import dispatch
from yyb.attempts.execute import Early, execute
from yyb.attempts.publish import publish
from yyb.attempts.recover import reconcile, recover  # noqa: F401
from yyb.attempts.remote import Refused
from yyb.evidence import plan as planned
from yyb.evidence.kinds.attempt import Execution, Terminal
from yyb.harness import scratch, worktree
from yyb.harness.environment import Folders


class Spend:
    """Reported candidate spend per model in this run, against the models' ceilings.

    A model's ceiling is the sum of its attempts' ceilings; once its reported spend reaches
    it, its remaining attempts are not dispatched. Unknown costs add nothing (they are not 0,
    but nothing can be known of them).
    """

    def __init__(self, attempts: dict[str, dict]) -> None:
        self.ceilings: dict[str, int] = {}
        for attempt in attempts.values():
            ceiling = planned.ceiling(attempt)
            if ceiling is not None:
                model = attempt["model"]["resolved"]
                self.ceilings[model] = self.ceilings.get(model, 0) + ceiling
        self.spent: dict[str, int] = {}
        self.lock = threading.Lock()

    def add(self, model: str, record: Terminal | Execution | None) -> None:
        """Count what ``record`` (the attempt's terminal or execution) reports it spent."""
        micros = record.candidate_cost.micros if record is not None else None
        if micros:
            with self.lock:
                self.spent[model] = self.spent.get(model, 0) + micros

    def exhausted(self, model: str) -> bool:
        ceiling = self.ceilings.get(model)
        with self.lock:
            return ceiling is not None and self.spent.get(model, 0) >= ceiling


def run_attempt(
    ctx: RunContext, attempt_oid: str, spend: Spend | None = None, executor=None
) -> Result:
    """Dispatch one attempt (unless already dispatched) and publish its terminal.

    ``executor`` (default: ``LOCAL``) runs the dispatched attempt's candidate (``Local``
    says how). One that raises ``Refused`` lost the run or refused its return: the attempt is
    closed as an indeterminate harness failure, as recovery closes one, and never dispatched
    again. One that has ``stopped()`` gets no more attempts: they stay undispatched.
    """
    spend = spend or Spend({})
    step = start_attempt(ctx, attempt_oid, spend, executor or LOCAL)
    return step if isinstance(step, Result) else finish_attempt(ctx, attempt_oid, step)


def start_attempt(ctx: RunContext, attempt_oid: str, spend: Spend, executor) -> Result | tuple:
    """``run_attempt`` up to a retained execution: its (oid, record), whose spend is counted
    already, or the attempt's ``Result`` when it ends sooner."""
    attempt = ctx.attempts[attempt_oid]
    model = attempt["model"]["resolved"]
    known = reconcile(ctx, attempt_oid)
    if known is not None:
        spend.add(model, _terminal(ctx, known))
        return known
    if ctx.cancel.is_set():
        reason = "not dispatched: the run was interrupted"
        return Result.without_terminal(attempt_oid, attempt, reason, "skipped")
    if spend.exhausted(model):
        reason = f"not dispatched: the reported spend of {model} reached its ceiling"
        return Result.without_terminal(attempt_oid, attempt, reason, "skipped")
    stopped = executor.stopped()
    if stopped is not None:
        return Result.without_terminal(
            attempt_oid, attempt, f"not dispatched: {stopped}", "skipped"
        )
    intent_oid = dispatch(ctx, attempt_oid)
    if intent_oid is None:  # another process dispatched it first
        reason = "dispatched by another run"
        return Result.without_terminal(attempt_oid, attempt, reason, "skipped")
    if ctx.started is not None:
        ctx.started(attempt)
    try:
        executed = executor(ctx, attempt_oid, intent_oid)
    except Refused as exc:
        terminal = indeterminate(ctx, attempt_oid, f"; {exc.reason}")
        return publish(ctx, attempt_oid, terminal, None, "ran")
    if isinstance(executed, Early):
        terminal = early(ctx, attempt_oid, executed.facts, executed.links)
        return publish(ctx, attempt_oid, terminal, None, "ran")
    spend.add(model, executed[1])  # the terminal's cost is the execution's
    return executed


def finish_attempt(ctx: RunContext, attempt_oid: str, executed: tuple) -> Result:
    """Grade a retained execution (generation 1), then decide and publish the terminal."""
    execution_oid, execution = executed
    terminal = conclude(ctx, attempt_oid, execution_oid, execution)
    return publish(ctx, attempt_oid, terminal, execution.links.listing, "ran")


class Local:
    """The local executor, and the shape of every executor: called as
    ``executor(ctx, attempt_oid, intent_oid)`` for a dispatched attempt, it runs the candidate
    and returns what ``execute`` returns, the execution ref created; ``stopped()`` is None
    while it can take attempts, else why not (in words). ``remote``: its candidates run on
    other machines, so run_plan grades apart from its dispatch slots (``_pipeline``)."""

    remote = False

    def __call__(self, ctx: RunContext, attempt_oid: str, intent_oid: str):
        # Kept workspaces outlive the run, so they are not in its run folder, which goes with it.
        root = (
            tempfile.mkdtemp(prefix="yyb-attempt-")
            if ctx.keep_workspaces
            else scratch.folder("attempt", ctx.store.path)
        )
        try:
            return execute(ctx, attempt_oid, intent_oid, Folders(root))
        finally:
            if not ctx.keep_workspaces:
                worktree.remove(root)  # any depth: a candidate chose it

    def stopped(self) -> str | None:
        return None


LOCAL = Local()


def _terminal(ctx: RunContext, result: Result) -> Terminal | None:
    if not result.terminal:
        return None
    return Terminal.read(ctx.store.objects, result.terminal)


def run_plan(ctx: RunContext, jobs: int = 1, executor=None) -> list[Result]:
    """Run every attempt of the plan in plan order with at most ``jobs`` at once, each
    candidate run by ``executor`` (``run_attempt``; default: in this process).

    A plan with a budget runs only under a grant that authorizes it, checked here whoever
    calls. One process at a time runs a plan (``locks/run-<plan>.lock``): a second one is
    refused at once rather than mistaking the first one's in-flight attempts for interrupted
    ones.

    Raises:
        GrantError: the plan has a budget and no valid grant.
        LockHeld: another live process is running this plan.
    """
    authorize(ctx.store, ctx.plan_oid, ctx.plan, ctx.offline)
    order = sorted(ctx.attempts, key=lambda oid: ctx.attempts[oid]["ordinal"])
    spend = Spend(ctx.attempts)
    executor = executor or LOCAL
    with ctx.store.exclusive(run_lock(ctx.plan_oid)):
        if executor.remote:
            return _pipeline(ctx, order, spend, executor, jobs)
        if jobs <= 1:
            return [run_attempt(ctx, oid, spend, executor) for oid in order]
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            return list(pool.map(lambda oid: run_attempt(ctx, oid, spend, executor), order))


def _pipeline(ctx: RunContext, order: list[str], spend: Spend, executor, jobs: int) -> list:
    """An executor whose candidates run elsewhere (``remote``): each of the ``jobs`` slots
    hands a returned execution to a grading thread here and takes the next attempt at once,
    so a remote worker does not wait while its last attempt is graded."""
    with ThreadPoolExecutor(max_workers=jobs) as graders:

        def start(oid: str):
            step = start_attempt(ctx, oid, spend, executor)
            return (
                step if isinstance(step, Result) else graders.submit(finish_attempt, ctx, oid, step)
            )

        with ThreadPoolExecutor(max_workers=jobs) as slots:
            started = list(slots.map(start, order))
        return [s if isinstance(s, Result) else s.result() for s in started]
