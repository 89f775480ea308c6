"""Attempts run on another machine: what the controller ships, what comes back, and the checks
that stand between the two (docs/dask.md). No distributed engine is named here: ``dask_run``
carries shipments and returns; this module makes and judges them.

The controller stays the only writer of its store. It ships a worker the stored bytes of what
the attempt reads (plan, attempt plan, case and prompt, or workflow) and the base's snapshot
export (``snapshot.Shipped``); the worker runs the attempt exactly as ``execute`` does locally,
into a private store of its own that lives as long as the task, and returns every object that
store gained, rooted at the execution record. The controller proves each object's hash, each
record's canonical form and schema, and that everything the execution links to is either
returned or already in its store and belongs to this very dispatch, before it creates the
execution ref. A refused return is evidence of nothing: the attempt is closed as an
indeterminate harness failure, never run again.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from yyb.attempts.context import RunContext
from yyb.attempts.execute import Early, execute
from yyb.errors import YybError
from yyb.evidence.records import EXECUTION, INTENT, MANIFEST, RECEIPT
from yyb.evidence.terminal import Facts
from yyb.harness import scratch, worktree
from yyb.harness.environment import Folders
from yyb.harness.snapshot import Shipped
from yyb.store import objects as stored


class Refused(YybError):
    """What a worker returned cannot stand as the attempt's evidence (or it returned nothing)."""

    exit_code = 1

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Shipment:
    """Everything a worker needs to run one dispatched attempt."""

    plan_oid: str
    attempt_oid: str
    intent_oid: str
    objects: tuple[tuple[str, bytes], ...]  # (oid, stored bytes) the attempt reads
    snapshot: Shipped | None  # None: a workflow attempt (an empty repository)
    # Blobs of the base's files that the controller's store holds already: not sent back.
    held: tuple[str, ...] = ()


@dataclass(frozen=True)
class Returned:
    """A worker's answer: the execution record's oid and every object its run stored, or the
    facts of an attempt that ended before its candidate ran (``early``)."""

    execution: str | None
    objects: tuple[tuple[str, bytes], ...] = ()
    early: dict | None = None  # Facts fields
    worker: str = ""


@dataclass
class Worker:
    """Who runs shipments here: a name for receipts, what the sandbox probe verified, and the
    secrets the harness needs, from this machine's environment (never shipped)."""

    name: str
    verified: list[str]
    secrets: dict[str, str] = field(default_factory=dict)

    def executor(self) -> dict:
        return {"kind": "dask", "host": socket.gethostname(), "worker": self.name}


def ship(ctx: RunContext, attempt_oid: str, intent_oid: str) -> Shipment:
    """The shipment of a dispatched attempt, read from the controller's store.

    Raises:
        UsageError: the case's repository is not configured or lacks the base commit.
    """
    from yyb.errors import UsageError
    from yyb.harness import snapshot

    objects = ctx.store.objects
    attempt = ctx.attempts[attempt_oid]
    wanted = [ctx.plan_oid, attempt_oid]
    shipped, held = None, ()
    if attempt["kind"] == "workflow":
        wanted.append(attempt["links"]["workflow"])
    else:
        case_oid = attempt["links"]["case"]
        case = objects.get_record(case_oid)
        wanted += [case_oid, case["links"]["prompt"]]
        repo = ctx.config.repository_path(case["repository"])
        if repo is None:
            raise UsageError(f"repository {case['repository']!r} is not configured")
        shipped, blobs = snapshot.ship(repo, case["base_commit"], ctx.plan["excluded_paths"])
        held = tuple(oid for oid in blobs if objects.contains(oid))
    return Shipment(
        ctx.plan_oid,
        attempt_oid,
        intent_oid,
        tuple((oid, objects.read_raw(oid)) for oid in wanted),
        shipped,
        held,
    )


def run(shipment: Shipment, worker: Worker, cancel) -> Returned:
    """Run a shipped attempt here (the worker's side), into a private store in memory."""
    from yyb.store.repo import Store

    root = scratch.folder("worker")
    try:
        # In memory: what it gains is returned whole anyway, and kept durably only by the
        # controller, so writing (and fsyncing) it here first would buy nothing.
        store = Store.memory()
        values = land(store, shipment.objects, roots=())
        plan = values[shipment.plan_oid]
        attempt = values[shipment.attempt_oid]
        ctx = RunContext(
            store,
            None,
            shipment.plan_oid,
            plan,
            {shipment.attempt_oid: attempt},
            cancel=cancel,
            secrets=dict(worker.secrets),
            executor=worker.executor(),
            sandbox_verified=list(worker.verified),
        )
        folders = Folders(os.path.join(root, "attempt"))
        executed = execute(
            ctx,
            shipment.attempt_oid,
            shipment.intent_oid,
            folders,
            shipped=shipment.snapshot,
            retain=False,
        )
        if isinstance(executed, Early):
            reason = executed.facts.environment or executed.facts.invalid_case
            return Returned(None, early={"environment": reason}, worker=worker.name)
        execution_oid, _ = executed
        known = {oid for oid, _ in shipment.objects} | set(shipment.held)
        gained = tuple(
            (oid, store.objects.read_raw(oid))
            for oid in sorted(store.objects.iter_oids())
            if oid not in known
        )
        return Returned(execution_oid, gained, worker=worker.name)
    finally:
        worktree.remove(root)


def check(store, items, roots) -> tuple[dict[str, dict], list[tuple[str, bytes]]]:
    """Check ``items`` ((oid, stored bytes) pairs) against ``store``, writing nothing: each
    object's bytes must hash to its oid and each record be canonical and valid under its
    schema; every link reachable from ``roots`` must be among ``items`` or already in the
    store. Returns the records' values by oid and the (kind, body) pairs to write.

    Raises:
        Refused: naming the first object or link that does not check.
    """
    from yyb.store.fsck import check_body, reach

    bodies: dict[str, tuple[str, bytes]] = {}
    values: dict[str, dict] = {}
    links: dict[str, tuple[str, ...]] = {}
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], bytes)):
            raise Refused("an object of the return is not an (oid, bytes) pair")
        oid, raw = item
        try:
            kind, body = stored.split(raw, oid)
        except YybError as exc:
            raise Refused(f"object {oid}: {exc}") from None
        found = check_body(oid, kind, body)
        if found.findings:
            first = found.findings[0]
            raise Refused(f"object {oid}: {first.code}: {first.detail}")
        bodies[oid] = (kind, body)
        if kind == "record":
            values[oid] = found.value
            links[oid] = found.links
    for oid in sorted(reach(roots, links)):  # only returned records have links to follow
        if oid not in bodies and not store.objects.contains(oid):
            raise Refused(f"object {oid} is linked but neither returned nor stored")
    return values, list(bodies.values())


def land(store, items, roots) -> dict[str, dict]:
    """``check`` the items, then write them; return the records' values by oid.

    Raises:
        Refused: as ``check``; nothing is written then.
    """
    values, bodies = check(store, items, roots)
    store.objects.put_many(bodies)
    return values


def accept(ctx: RunContext, shipment: Shipment, returned) -> tuple[str, dict]:
    """The controller's side: check a worker's return, then write its objects and create
    the execution ref from nothing; return the execution (oid, record). Nothing is written
    for a return that does not check.

    Raises:
        Refused: the return is not this dispatch's execution, or does not check.
    """
    attempt_oid, intent_oid = shipment.attempt_oid, shipment.intent_oid
    if not isinstance(returned, Returned) or not returned.execution:
        raise Refused("the worker returned no execution")
    execution_oid = returned.execution
    values, bodies = check(ctx.store, returned.objects, roots=(execution_oid,))
    execution = values.get(execution_oid)
    if execution is None or execution.get("schema_version") != EXECUTION:
        raise Refused(f"{execution_oid} is not an execution record")
    links = execution["links"]
    mine = {"plan": ctx.plan_oid, "attempt": attempt_oid, "intent": intent_oid}
    for key, want in mine.items():
        got = links.get(key)
        if got != want or (key != "intent" and execution.get(key) != want):
            raise Refused(f"the execution names {key} {got}, not this dispatch's {want}")
    if ctx.store.objects.get_record(intent_oid).get("schema_version") != INTENT:
        raise Refused(f"{intent_oid} is not a dispatch intent")
    receipt = values.get(links.get("receipt"))
    if receipt is None or receipt.get("schema_version") != RECEIPT:
        raise Refused("the execution has no workspace receipt of this version among its objects")
    if receipt["links"]["intent"] != intent_oid or receipt["executor"]["kind"] != "dask":
        raise Refused("the workspace receipt belongs to another dispatch or executor")
    if receipt["executor"]["worker"] != returned.worker:
        raise Refused(f"the workspace receipt names worker {receipt['executor']['worker']}")
    shipped = shipment.snapshot
    said = (receipt["base_commit"], receipt["snapshot_commit"], receipt["excluded_paths"])
    want = (
        (shipped.base_commit, shipped.commit, list(ctx.plan["excluded_paths"]))
        if shipped is not None
        else ("", "", list(ctx.plan["excluded_paths"]))
    )
    if said != want:
        raise Refused("the workspace receipt describes another snapshot than the one shipped")
    post = values.get(links.get("manifest"))
    if post is None or post.get("schema_version") != MANIFEST:
        raise Refused("the execution has no post-execution manifest among its objects")
    if post["links"]["receipt"] != links["receipt"]:
        raise Refused("the manifest belongs to another workspace receipt")
    ctx.store.objects.put_many(bodies)
    ctx.store.refs.update(
        ctx.ref(attempt_oid, "execution"), execution_oid, old=None, reason="execution retained"
    )
    return execution_oid, execution


def early(returned, intent_oid: str) -> Early:
    """The ``Early`` of a return whose attempt ended before its candidate ran. A worker can
    only fail to prepare the environment: whether a case can be prepared is decided on the
    controller (``ship``), so no worker can turn an attempt into an excluded invalid case.

    Raises:
        Refused: the return claims anything but an environment failure.
    """
    facts = returned.early if isinstance(returned.early, dict) else {}
    reason = facts.get("environment")
    if set(facts) != {"environment"} or not isinstance(reason, str) or not reason:
        raise Refused("the worker's early return is not an environment failure")
    return Early(
        Facts(environment=f"on worker {returned.worker}: {reason}"), {"intent": intent_oid}
    )
