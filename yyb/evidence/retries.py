"""Retry plans: which attempts a retry may run again, a plan's family, and the checks of a
retry's links that `yyb doctor --plan` makes (docs/plans.md, "Retries").

A retry plan runs again, as new attempts, exactly the cells of its parent whose terminal the
infrastructure caused (``retryable``), and copies every field and link that defines the
measurement (all but ``OWN_FIELDS`` and ``OWN_LINKS``) from the parent, so a retry measures
what its parent measured. Its plan links the parent as ``links.retry_of``; each of its attempt
plans links the attempt it retries. Nothing of the parent changes: the family (a plan and
its ``retry_of`` ancestors) is read from the links alone.
"""

from __future__ import annotations

from yyb.errors import CorruptRef, YybError
from yyb.evidence import invalidity, names
from yyb.evidence.attempt import AttemptHandle
from yyb.evidence.check import check_attempt
from yyb.evidence.plan import ceiling
from yyb.evidence.record import kind_of
from yyb.evidence.records import ATTEMPT_PLAN, PLAN, VALID_CLASSES
from yyb.evidence.terminal import gradeable
from yyb.store.fsck import Finding, error

# The experiment plan's fields that are a retry plan's own: every other field of the parent
# (kind, cases, models, attempts per cell, tool policy, timeout, excluded paths, harness,
# evaluators, comparison, workflow, environments, versions, and any field added later) defines
# the measurement and is copied as it is (an absent field stays absent).
OWN_FIELDS = ("attempt_count", "budget", "links")
# The links that are a retry plan's own; every other link of the parent (its cases, workflow,
# environments, and any role added later) defines the measurement and is copied as it is.
OWN_LINKS = ("attempts", "retry_of")
# The attempt plan's fields a retry attempt shares with the attempt it retries.
CELL = ("kind", "case_id", "model", "attempt", "budget")

# A family longer than this is not a family but a loop or an attack.
MAX_FAMILY = 10_000


def graded(handle: AttemptHandle) -> bool:
    """Whether the attempt's outcome is its grading's (as the report decides it): its
    candidate finished cleanly and it has evaluations. Such an attempt is invalid, if it is,
    because of its grading, whatever its terminal class: a regrade's job, never a retry's."""
    if handle.terminal is None or not handle.histories():
        return False
    return gradeable(handle.terminal.record, handle.attempt["model"]) is None


def retryable(handle: AttemptHandle) -> bool:
    """Whether a retry may run the attempt's cell again: its terminal is invalid, not because
    of its grading, and its class (with the execution's facts) makes that the
    infrastructure's doing (``invalidity.of_terminal``; docs/reports.md, "Invalidity and its
    causes"). An attempt without a terminal, a valid one and a graded one are not."""
    if handle.terminal is None or graded(handle):
        return False
    terminal_class = handle.terminal.record["class"]
    if terminal_class in VALID_CLASSES:
        return False
    facts = handle.execution.record["facts"] if handle.execution is not None else None
    return invalidity.of_terminal(terminal_class, facts) == "infrastructure"


def parent(plan: dict) -> str | None:
    """The plan a retry plan retries, None for a plan that retries nothing."""
    return plan.get("links", {}).get("retry_of")


def family(store, plan_oid: str, plan: dict) -> list[tuple[str, dict]]:
    """The plan and its ``retry_of`` ancestors, the root first, as (oid, record).

    Raises:
        ObjectMissing, CorruptObject: an ancestor that cannot be read.
        CorruptRef: an ancestor that is not an experiment plan, or the links loop.
    """
    found = [(plan_oid, plan)]
    seen = {plan_oid}
    while (above := parent(found[-1][1])) is not None:
        if above in seen or len(found) >= MAX_FAMILY:
            raise CorruptRef(names.plan(plan_oid), f"its retry_of links loop at {above}")
        seen.add(above)
        record = store.objects.get_record(above)
        if kind_of(record) != PLAN:
            raise CorruptRef(names.plan(plan_oid), f"retry_of {above} is not an experiment plan")
        found.append((above, record))
    return list(reversed(found))


def check_links(store, plan_oid: str, plan: dict) -> list[Finding]:
    """What is wrong with the retry links of ``plan`` and of each retry among its ancestors
    (none for a plan that retries nothing): each parent is a stored, logged experiment plan
    with the same measurement; each retry attempt names an attempt of its parent with the
    same cell and ceiling, whose terminal is retryable; no cell is retried twice in one plan;
    the budget is the sum of the retried ceilings."""
    findings: list[Finding] = []
    child_oid, child = plan_oid, plan
    seen = {plan_oid}
    while (above := parent(child)) is not None:
        record = _parent_record(store, child_oid, above, findings)
        if record is None:
            break
        findings += _check_retry(store, child_oid, child, above, record)
        if above in seen or len(seen) >= MAX_FAMILY:
            findings.append(error("retry-loop", child_oid, f"its retry_of links loop at {above}"))
            break
        seen.add(above)
        child_oid, child = above, record
    return findings


def _parent_record(store, child_oid: str, above: str, findings: list[Finding]) -> dict | None:
    """The parent ``above`` of ``child_oid`` as a stored experiment plan, else None with a
    finding saying why."""
    try:
        record = store.objects.get_record(above)
    except YybError as exc:
        findings.append(error("retry-parent", child_oid, f"retry_of {above}: {exc}"))
        return None
    if kind_of(record) != PLAN:
        findings.append(error("retry-parent", child_oid, f"retry_of {above} is not a plan"))
        return None
    if store.refs.read(names.plan(above)) != above:
        findings.append(
            error("retry-parent", child_oid, f"retry_of {above}: refs/plans/<oid> does not name it")
        )
    return record


def _check_retry(store, oid: str, plan: dict, parent_oid: str, above: dict) -> list[Finding]:
    findings = [
        error("retry-measurement", oid, f"its {name} differs from its parent {parent_oid}'s")
        for name in sorted(set(plan) | set(above))
        if name not in OWN_FIELDS and plan.get(name) != above.get(name)
    ]
    findings += [
        error("retry-measurement", oid, f"its links.{name} differ from its parent's")
        for name in sorted(set(plan["links"]) | set(above["links"]))
        if name not in OWN_LINKS and plan["links"].get(name) != above["links"].get(name)
    ]
    retried: dict[str, str] = {}  # parent attempt -> the retry attempt that retries it
    total = 0
    for attempt_oid in plan["links"]["attempts"]:
        try:
            attempt = store.objects.get_record(attempt_oid)
        except YybError as exc:
            findings.append(error("retry-attempt", attempt_oid, f"attempt plan: {exc}"))
            continue
        total += ceiling(attempt) or 0
        target = attempt.get("links", {}).get("retry_of")
        problem = _target_problem(store, parent_oid, above, attempt, target, retried)
        if problem is not None:
            findings.append(error("retry-attempt", attempt_oid, problem))
        elif target is not None:
            retried[target] = attempt_oid
    spend = plan.get("budget")
    if spend is not None and spend.get("total_micros") != total:
        findings.append(
            error(
                "retry-budget",
                oid,
                f"its budget is {spend.get('total_micros')} micro-USD, "
                f"the retried ceilings add up to {total}",
            )
        )
    return findings


def _target_problem(
    store, parent_oid: str, above: dict, attempt: dict, target, retried: dict[str, str]
) -> str | None:
    """Why the retry attempt ``attempt`` does not retry ``target`` as a retry must, or None."""
    if target is None:
        return "an attempt of a retry plan without links.retry_of"
    if target not in above["links"]["attempts"]:
        return f"retry_of {target} is not an attempt of the retried plan {parent_oid}"
    if target in retried:
        return f"retry_of {target}, which attempt {retried[target]} of this plan retries already"
    try:
        original = store.objects.get_record(target)
    except YybError as exc:
        return f"retry_of {target}: {exc}"
    if kind_of(original) != ATTEMPT_PLAN:
        return f"retry_of {target} is not an attempt plan"
    for name in CELL:
        if attempt.get(name) != original.get(name):
            theirs = original.get(name)
            return f"its {name} is {attempt.get(name)!r}, the retried attempt's {theirs!r}"
    check = check_attempt(store, parent_oid, above, target, original, thorough=False)
    if not check.complete:
        return f"retries {target}, whose chain is not complete"
    if not retryable(check.handle):
        terminal_class = check.handle.terminal.record["class"]
        return f"retries {target}, whose {terminal_class} terminal is not retryable"
    return None
