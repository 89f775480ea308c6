"""`yyb doctor --plan`: re-verify one experiment end to end from retained evidence.

Each attempt's chain is checked by ``check.check_attempt``; then every object reachable from
the plan and its run refs is checked as fsck checks it (hash, canonical form, schema), the
refs' update chains included, and those refs are held to the transparency log (``check_log``).
A plan with no attempt or with any attempt short of a complete chain is incomplete, never
complete.
"""

from __future__ import annotations

from collections.abc import Callable

from yyb.errors import YybError
from yyb.evidence import names, retries
from yyb.evidence.check import check_attempt
from yyb.evidence.record import kind_of
from yyb.evidence.records import PLAN
from yyb.store import fanout, heap
from yyb.store.fsck import Finding, error
from yyb.store.fsck.verify_chain import verify_many
from yyb.store.log import audit as logaudit
from yyb.store.refs.store import REF_UPDATE


def check_plan(store, plan_oid: str, plan: dict | None = None) -> tuple[dict | None, list[Finding]]:
    """The experiment plan of ``plan_oid`` (None when it is not one) and what is wrong with it;
    ``plan`` is its record when the caller has read it already."""
    findings: list[Finding] = []
    if plan is None:
        try:
            plan = store.objects.get_record(plan_oid)
        except YybError as exc:
            findings.append(error("unreadable", plan_oid, f"plan: {exc}"))
    if plan is not None and kind_of(plan) != PLAN:
        findings.append(error("wrong-record", plan_oid, "not an experiment plan"))
        plan = None
    if plan is not None and store.refs.read(names.plan(plan_oid)) != plan_oid:
        findings.append(error("unlogged-plan", plan_oid, "refs/plans/<oid> does not name it"))
    return plan, findings


def check_log(store, plan_oid: str) -> list[Finding]:
    """The refs an experiment's checks read (its plan ref and its run refs) replayed from the
    transparency log: each logged update chains from the one before, the log heads and values
    are the newest logged ones, every update of their chains is logged (logaudit.audit_refs).
    One search of the log, whatever else it holds."""
    return logaudit.audit_refs(store, [names.plan(plan_oid), names.runs(plan_oid)])


def checked_with_log(
    store, plan_oid: str, attempts: list[str], function: Callable, args: tuple
) -> tuple[list, list[Finding]]:
    """``[function(*args, part) for part in parts of attempts]`` (fanout.map_chunks), each
    part's run refs held to the log by the same process right after, with the refs and
    update records the part read remembered; and the findings of ``check_log``, the same
    as it would make. ``function`` must only read."""
    found = logaudit.scope(store, [names.plan(plan_oid), names.runs(plan_oid)])
    folder = names.runs(plan_oid) + "/"
    wanted = set(attempts)
    mine: dict[str, list[str]] = {}
    rest: list[str] = []  # the plan ref, and run refs of no attempt of the plan
    for ref in found.refs:
        attempt = ref[len(folder) :].split("/", 1)[0] if ref.startswith(folder) else None
        if attempt in wanted:
            mine.setdefault(attempt, []).append(ref)
        else:
            rest.append(ref)
    parts = fanout.map_chunks(_with_log, (store, found, mine, function, args), attempts)
    logged = [finding for _, part in parts for finding in part]
    logged += logaudit.audit_scoped(store, found, rest)
    return [result for result, _ in parts], list(dict.fromkeys(logged))


def _with_log(store, found, mine: dict, function: Callable, args: tuple, attempts: list):
    refs = list(dict.fromkeys(ref for oid in attempts for ref in mine.get(oid, ())))
    with store.refs.memoized(found.listed), store.objects.memoized([REF_UPDATE]):
        return function(*args, attempts), logaudit.audit_scoped(store, found, refs)


def refused(plan_oid: str, findings: list[Finding]) -> set[str]:
    """The attempts whose run refs ``findings`` (of ``check_log``) fault: whatever their
    chains say, the log does not bear those refs out, so no such chain is complete."""
    folder = names.runs(plan_oid) + "/"
    return {
        f.subject[len(folder) :].split("/", 1)[0]
        for f in findings
        if f.level == "error" and f.subject.startswith(folder)
    }


def summary(plan_oid: str, attempts: int, complete: int, findings: list[Finding]) -> dict:
    errors = any(f.level == "error" for f in findings)
    status = "complete" if attempts and complete == attempts and not errors else "incomplete"
    return {"plan": plan_oid, "attempts": attempts, "complete": complete, "status": status}


def _check_chunk(store, plan_oid: str, plan: dict, attempts: list[str]) -> tuple[list, list]:
    findings, complete = [], []
    for attempt_oid in attempts:
        check = check_attempt(store, plan_oid, plan, attempt_oid)
        findings += check.findings
        if check.complete:
            complete.append(attempt_oid)
    return findings, complete


@heap.without_gc
def verify_experiment(store, plan_oid: str) -> tuple[list[Finding], dict]:
    """(findings, summary) for the experiment of ``plan_oid``; summary counts complete chains."""
    plan, findings = check_plan(store, plan_oid)
    if plan is None:
        return findings, summary(plan_oid, 0, 0, findings)
    findings += retries.check_links(store, plan_oid, plan)
    attempts = plan["links"]["attempts"]
    complete: list[str] = []
    parts, logged = checked_with_log(
        store, plan_oid, attempts, _check_chunk, (store, plan_oid, plan)
    )
    for part, done in parts:
        findings += part
        complete += done
    faulted = refused(plan_oid, logged)
    findings += logged + verify_objects(store, plan_oid)
    count = sum(1 for oid in complete if oid not in faulted)
    return findings, summary(plan_oid, len(attempts), count, findings)


def _walk_chunk(store, seen: set[str], refs: list[str]) -> list[Finding]:
    return list(verify_many(store, refs, set(seen)))


def verify_objects(store, plan_oid: str) -> list[Finding]:
    """Object-level checks (as fsck makes them) of everything reachable from the plan and its
    run refs, the refs' update chains included.

    The plan's own graph (attempt plans, cases) is walked first; the run refs are then walked
    in parts, by worker processes for a large experiment, each part skipping what the plan's
    walk verified. An object shared by two parts is verified by both; a finding about it is
    reported once.
    """
    seen: set[str] = set()
    findings = list(verify_many(store, [plan_oid], seen))
    refs = store.refs.names(under=names.runs(plan_oid))
    for part in fanout.map_chunks(_walk_chunk, (store, seen), refs, scale=5):  # ~5 per attempt
        findings += part
    return list(dict.fromkeys(findings))
