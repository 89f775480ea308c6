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
execution ref. It holds the return to what it knows without the worker's word: the worker the
scheduler says ran the task and what that worker's probe reported, and the plan's tool policy.
Anything the execution does not reach is dropped. A return is hostile input: whatever its
form, it is either accepted or refused, never a crash. A refused return is evidence of
nothing: the attempt is closed as an indeterminate harness failure, never run again.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field, fields

from yyb.attempts.context import RunContext
from yyb.attempts.execute import Early, confinement, execute
from yyb.errors import YybError
from yyb.evidence.kinds.attempt import DispatchIntent, Execution, WorkspaceReceipt
from yyb.evidence.kinds.harness import PostExecutionManifest
from yyb.evidence.terminal import Facts
from yyb.harness import scratch, worktree
from yyb.harness.environment import Folders
from yyb.harness.snapshot import Shipped
from yyb.store.objects import format as stored

MAX_NAME = 1024  # characters of a worker's name (its --name and its address)
MAX_REASON = 4096  # characters of an early return's reason, which a terminal's reason quotes


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


FIELDS = frozenset(f.name for f in fields(Returned))


@dataclass
class Worker:
    """Who runs shipments here: a name for receipts, what the sandbox probe verified, and the
    secrets the harness needs, from this machine's environment (never shipped)."""

    name: str
    verified: list[str]
    secrets: dict[str, str] = field(default_factory=dict)
    host: str = field(default_factory=socket.gethostname)

    def executor(self) -> dict:
        return {"kind": "dask", "host": self.host, "worker": self.name}


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
        values = land(store, shipment.objects)
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
            grades=False,
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


@dataclass
class Checked:
    """Objects that checked one by one: the records' values and links, and every object's
    (kind, body), by oid."""

    values: dict[str, dict] = field(default_factory=dict)
    bodies: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    links: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def reached(self, store, roots) -> list[tuple[str, bytes]]:
        """The (kind, body) of every object ``roots`` reach through the records' links, in
        oid order: what is to be written. An object nothing reaches is left out.

        Raises:
            Refused: a link reached is neither among the objects nor in ``store``.
        """
        from yyb.store.fsck import reach

        out = []
        for oid in sorted(reach(roots, self.links)):  # only these records have links to follow
            if oid in self.bodies:
                out.append(self.bodies[oid])
            elif not store.objects.contains(oid):
                raise Refused(f"object {oid} is linked but neither returned nor stored")
        return out


def check(items) -> Checked:
    """Check ``items`` ((oid, stored bytes) pairs), writing nothing: each object's bytes must
    hash to its oid and each record be canonical and valid under its schema.

    Raises:
        Refused: naming the first object that does not check.
    """
    from yyb.store.fsck import check_body

    checked = Checked()
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
        checked.bodies[oid] = (kind, body)
        if kind == "record":
            checked.values[oid] = found.value
            checked.links[oid] = found.links
    return checked


def land(store, items) -> dict[str, dict]:
    """``check`` the items, then write them all; return the records' values by oid.

    Raises:
        Refused: as ``check``; nothing is written then.
    """
    checked = check(items)
    store.objects.put_many(list(checked.bodies.values()))
    return checked.values


def well_formed(returned) -> Returned:
    """Refuse whatever is not a ``Returned`` whose fields have the types docs/dask.md gives
    them, looking at nothing else first: a worker's result is hostile input.

    Raises:
        Refused: naming the first field out of form.
    """
    if type(returned) is not Returned:
        raise Refused(f"the worker returned {_named(returned)}, not a Returned")
    state = vars(returned)
    if set(state) != FIELDS:
        raise Refused("the return's fields are not those of a Returned")
    worker, execution, facts, items = (
        state[n] for n in ("worker", "execution", "early", "objects")
    )
    if type(worker) is not str or not 0 < len(worker) <= MAX_NAME:
        raise Refused(f"the return's worker is not a name of at most {MAX_NAME} characters")
    if execution is None and facts is None:
        raise Refused("the return holds neither an execution nor an early end")
    if execution is not None and facts is not None:
        raise Refused("the return holds both an execution and an early end")
    if execution is not None and not (type(execution) is str and stored.is_oid(execution)):
        raise Refused("the return's execution is not an oid (64 lowercase hex digits)")
    if facts is not None and type(facts) is not dict:
        raise Refused(f"the return's early is {_named(facts)}, not a dict")
    if type(items) is not tuple:
        raise Refused(f"the return's objects are {_named(items)}, not a tuple")
    if facts is not None and items:
        raise Refused("the return holds objects beside an early end")
    for item in items:
        if type(item) is not tuple or len(item) != 2 or type(item[1]) is not bytes:
            raise Refused("an object of the return is not an (oid, bytes) pair")
        if not (type(item[0]) is str and stored.is_oid(item[0])):
            raise Refused("an object of the return is named by something other than an oid")
    return returned


def _quoted(text) -> str:
    """A worker's text in a reason: on one line, at most 100 characters of it."""
    return repr(text if len(text) <= 100 else text[:100] + "...")


def _named(value) -> str:
    return "None" if value is None else f"a value of type {type(value).__name__}"


def receive(ctx: RunContext, shipment: Shipment, returned, ran_on: Worker):
    """The controller's side: judge what the task of ``shipment`` returned, the task having
    run on ``ran_on`` (the worker the scheduler names, as its probe described it). Returns
    the execution (oid, record), its objects written and its ref created, or the ``Early``
    of an attempt that ended before its candidate ran. Nothing is written for a return that
    does not check.

    Raises:
        Refused: the return is malformed, is not this dispatch's execution, does not check,
            or contradicts the scheduler, the probe or the plan.
    """
    well_formed(returned)
    if returned.worker != ran_on.name:
        raise Refused(
            f"it says it comes from worker {_quoted(returned.worker)}, "
            f"but the task ran on {ran_on.name}"
        )
    if returned.execution is None:
        return early(returned, shipment.intent_oid)
    return _accept(ctx, shipment, returned, ran_on)


def _accept(ctx: RunContext, shipment: Shipment, returned: Returned, ran_on: Worker):
    """A well-formed return with an execution: check it, then write what the execution
    reaches and create the execution ref from nothing."""
    attempt_oid, intent_oid = shipment.attempt_oid, shipment.intent_oid
    execution_oid = returned.execution
    checked = check(returned.objects)
    bodies = checked.reached(ctx.store, (execution_oid,))
    values = checked.values
    found = values.get(execution_oid)
    if not Execution.holds(found):
        raise Refused(f"{execution_oid} is not an execution record")
    # Every value here checked against its schema (``check``): no second validation.
    execution = Execution.from_stored(found)
    links = execution.links
    mine = {"plan": ctx.plan_oid, "attempt": attempt_oid, "intent": intent_oid}
    for key, want in mine.items():
        got = getattr(links, key)
        if got != want or (key != "intent" and getattr(execution, key) != want):
            raise Refused(f"the execution names {key} {got}, not this dispatch's {want}")
    if not DispatchIntent.holds(ctx.store.objects.get_record(intent_oid)):
        raise Refused(f"{intent_oid} is not a dispatch intent")
    receipt = values.get(links.receipt)
    if not WorkspaceReceipt.holds(receipt):
        raise Refused("the execution has no workspace receipt of this version among its objects")
    _check_receipt(ctx, shipment, WorkspaceReceipt.from_stored(receipt), ran_on)
    post = values.get(links.manifest)
    if not PostExecutionManifest.holds(post):
        raise Refused("the execution has no post-execution manifest among its objects")
    if PostExecutionManifest.from_stored(post).links.receipt != links.receipt:
        raise Refused("the manifest belongs to another workspace receipt")
    ctx.store.objects.put_many(bodies)
    ctx.store.refs.update(
        ctx.ref(attempt_oid, "execution"), execution_oid, old=None, reason="execution retained"
    )
    return execution_oid, execution


def _check_receipt(
    ctx: RunContext, shipment: Shipment, receipt: WorkspaceReceipt, ran_on: Worker
) -> None:
    """The receipt must be this dispatch's, say it ran where the scheduler says it ran, with
    what that worker's probe verified, on the snapshot shipped, under the plan's sandbox.

    Raises:
        Refused: naming the first thing it says otherwise.
    """
    executor = receipt.executor
    if receipt.links.intent != shipment.intent_oid or executor.kind != "dask":
        raise Refused("the workspace receipt belongs to another dispatch or executor")
    if executor.worker != ran_on.name:
        raise Refused(f"the workspace receipt names worker {_quoted(executor.worker)}")
    if executor.host != ran_on.host:
        raise Refused(
            f"the workspace receipt names host {_quoted(executor.host)}, "
            f"but worker {ran_on.name}'s probe ran on {ran_on.host}"
        )
    shipped = shipment.snapshot
    said = (receipt.base_commit, receipt.snapshot_commit, receipt.excluded_paths)
    want = (
        (shipped.base_commit, shipped.commit, tuple(ctx.plan["excluded_paths"]))
        if shipped is not None
        else ("", "", tuple(ctx.plan["excluded_paths"]))
    )
    if said != want:
        raise Refused("the workspace receipt describes another snapshot than the one shipped")
    box = receipt.sandbox
    network, bounds = confinement(ctx.plan)
    if box.network != ("allowed" if network else "denied"):
        raise Refused(
            f"the workspace receipt says the network was {box.network}, "
            "against the plan's tool policy"
        )
    if box.limits != bounds:
        raise Refused("the workspace receipt's sandbox limits are not the plan's tool policy's")
    if box.verified != tuple(ran_on.verified):
        raise Refused(
            f"the workspace receipt's verified properties are not those worker "
            f"{ran_on.name}'s probe reported"
        )


def early(returned, intent_oid: str) -> Early:
    """The ``Early`` of a return whose attempt ended before its candidate ran. A worker can
    only fail to prepare the environment: whether a case can be prepared is decided on the
    controller (``ship``), so no worker can turn an attempt into an excluded invalid case.

    Raises:
        Refused: the return claims anything but an environment failure.
    """
    facts = returned.early if type(returned.early) is dict else {}
    reason = facts.get("environment") if set(facts) == {"environment"} else None
    if type(reason) is not str or not reason:
        raise Refused("the worker's early return is not an environment failure")
    if len(reason) > MAX_REASON:
        raise Refused(
            f"the worker's early return gives a reason of {len(reason)} characters, "
            f"more than {MAX_REASON}"
        )
    return Early(
        Facts(environment=f"on worker {returned.worker}: {reason}"), {"intent": intent_oid}
    )
