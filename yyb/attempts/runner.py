"""A plan run from end to end, as ``yyb run`` runs it, telling its progress as typed events.

``run`` is the whole step: the plan's records made sure in the store, everything a live run
needs checked before any dispatch (``prepare``), the attempts run here or on a Dask cluster,
a signed checkpoint of the log when the evidence is signed, and the automatic gc. What it
has to say while it works it says as events (``Event``) to the caller's callback, which
decides how, and whether, to show them; it prints nothing and chooses no exit code.
"""

from __future__ import annotations

import importlib
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from yyb import signing
from yyb.attempts import metering
from yyb.attempts import run as attempts
from yyb.attempts.context import Result, RunContext, prepare
from yyb.attempts.dask_run import DaskExecutor
from yyb.errors import UsageError
from yyb.evidence import names
from yyb.harness import scratch
from yyb.store import gc

Executor = Literal["local", "dask"]
# The records of a plan whose links name blobs the run needs in the store.
BLOB_ROLES = ("prompt", "task", "workflow")


@dataclass(frozen=True)
class RunOptions:
    """How a plan runs: ``jobs`` at once (None: 1 here, the workers' threads on dask), on
    ``executor`` (with dask, the scheduler at ``scheduler``), each attempt's folders kept
    (``keep_workspaces``, local only); setting ``cancel`` stops in-flight attempts."""

    jobs: int | None = None
    keep_workspaces: bool = False
    executor: Executor = "local"
    scheduler: str | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    replay: str | None = None  # a plan whose recorded model calls answer this run's


@dataclass(frozen=True)
class AttemptFinished:
    """One attempt's result; on dask, ``cluster`` is where the cluster stands after it."""

    result: Result
    cluster: str | None = None


@dataclass(frozen=True)
class AttemptStarted:
    """An attempt dispatched: its candidate is about to start."""

    ordinal: int
    model: str
    case_id: str | None


@dataclass(frozen=True)
class WorkerVerified:
    """A Dask worker probed before any dispatch: where it runs, its threads, its sandbox."""

    name: str
    host: str
    threads: int
    sandbox: str


@dataclass(frozen=True)
class ClusterTally:
    """What each Dask worker did, at the end of the run, one line per worker."""

    lines: tuple[str, ...]


@dataclass(frozen=True)
class ClusterLost:
    """The Dask cluster was lost (``why``, in words): ``left`` attempts stay undispatched for
    the next run."""

    why: str
    left: int


@dataclass(frozen=True)
class LogCheckpointed:
    """The transparency log checkpointed and signed, as signed evidence needs."""

    size: int
    root: str


@dataclass(frozen=True)
class StorePacked:
    """The automatic gc packed ``packed`` loose objects (``packs_removed`` packs merged)."""

    packed: int
    packs_removed: int
    setting: str  # the environment variable that turns it off


Event = (
    AttemptStarted
    | AttemptFinished
    | WorkerVerified
    | ClusterTally
    | ClusterLost
    | LogCheckpointed
    | StorePacked
)


@dataclass(frozen=True)
class RunOutcome:
    """What a run did: each attempt's result, and why it stopped short if it did (``lost``:
    the Dask cluster, in words; ``cancelled``: the caller set ``cancel``)."""

    results: list[Result]
    lost: str | None = None
    cancelled: bool = False

    @property
    def left(self) -> int:
        """Attempts not dispatched because the cluster was lost (run again to dispatch them)."""
        if self.lost is None:
            return 0
        return sum(1 for r in self.results if r.reason == f"not dispatched: {self.lost}")


def ensure_in_store(store, records: dict[str, dict]) -> None:
    """Put a plan loaded from its file into ``store``; the blobs it links must be there.

    Raises:
        UsageError: a blob the plan links (its prompt, task or workflow) is not in the store.
    """
    missing = [oid for oid in records if not store.objects.contains(oid)]
    for oid in missing:
        if store.objects.put_record(records[oid]) != oid:  # pragma: no cover - load() checked
            raise UsageError(f"record {oid} does not hash to its name")
    for value in records.values():
        for role in BLOB_ROLES:
            target = value.get("links", {}).get(role)
            if isinstance(target, str) and not store.objects.contains(target):
                raise UsageError(
                    f"the plan's {role} blob {target} is not in the store "
                    f"{store.path}; plan it against this store first"
                )


def undispatched(store, plan_oid: str, records: dict[str, dict]) -> tuple[list[dict], int]:
    """What a run of the plan would dispatch, reading ``store`` (None: there is none yet)
    and writing nothing: the attempt plans without an intent, in plan order, and how many
    have one already."""
    chosen = {
        oid: records.get(oid) or (store and store.objects.get_record(oid))
        for oid in records[plan_oid]["links"]["attempts"]
    }
    pending = [
        oid
        for oid in chosen
        if store is None or store.refs.read(names.attempt(plan_oid, oid, "intent")) is None
    ]
    ordered = sorted((chosen[oid] for oid in pending), key=lambda a: a["ordinal"])
    return ordered, len(chosen) - len(pending)


def run(
    store,
    config,
    plan_oid: str,
    records: dict[str, dict],
    options: RunOptions,
    environ: dict[str, str],
    on_event: Callable[[Event], None] = lambda event: None,
) -> RunOutcome:
    """Run every attempt of plan ``plan_oid`` that has not been dispatched yet.

    Args:
        store: the store that keeps the evidence (the plan's records are put there).
        config: the configuration the run reads (harnesses, evaluators).
        plan_oid: the experiment plan.
        records: the plan's records by oid (its attempt plans among them, or in the store).
        options: how it runs (``RunOptions``).
        environ: the controller's environment (secrets, signing key, gc setting).
        on_event: called with each ``Event`` as it happens, from the run's threads.

    Returns:
        The results, and why the run stopped short if it did.

    Raises:
        UsageError: a blob of the plan is missing, or a setting is malformed.
        SandboxUnavailable, GrantError, LockHeld: as ``prepare`` and ``run_plan`` raise them.
    """
    gc.auto_threshold(environ)  # a bad setting is refused before anything runs
    if options.replay is not None and not metering.uses_gateway(records[plan_oid]):
        raise UsageError(
            "--replay answers model calls at the gateway: the plan's tool_policy.network "
            "is not gateway"
        )
    if options.replay is not None and options.executor != "local":
        raise UsageError("--replay runs with the local executor only")
    if options.executor == "dask":  # distributed takes a quarter second to import: prepare
        threading.Thread(target=_import_quietly, args=("distributed",), daemon=True).start()
    ensure_in_store(store, records)
    plan = records[plan_oid]
    chosen = {
        oid: records.get(oid) or store.objects.get_record(oid) for oid in plan["links"]["attempts"]
    }
    run_ctx = prepare(
        store, config, plan_oid, plan, chosen, environ, candidates_here=options.executor == "local"
    )
    run_ctx.keep_workspaces = options.keep_workspaces
    run_ctx.cancel = options.cancel
    run_ctx.progress = lambda result: on_event(AttemptFinished(result))
    run_ctx.started = lambda a: on_event(AttemptStarted(a["ordinal"], a["model"]["resolved"],
                                                        a.get("case_id")))  # fmt: skip
    lost = None
    if options.executor == "dask":
        results, lost = _run_on_dask(run_ctx, options, environ, on_event)
    else:
        results = _run_here(run_ctx, options, environ)
    outcome = RunOutcome(results, lost, run_ctx.cancel.is_set())
    if lost is not None:
        on_event(ClusterLost(lost, outcome.left))
    if run_ctx.signer is not None:  # signed evidence comes with a signed checkpoint of its log
        record = signing.checkpoint(store, run_ctx.signer)
        on_event(LogCheckpointed(record["size"], record["root"]))
    packed = gc.auto(store, environ)
    if packed is not None:
        on_event(StorePacked(packed.packed, packed.packs_removed, gc.AUTO_ENV))
    return outcome


def _run_here(run_ctx: RunContext, options: RunOptions, environ: dict) -> list[Result]:
    """Run the plan's attempts in this process, with the run's model gateway serving them
    while they run when the plan sends its calls through one (yyb/attempts/metering.py)."""
    if not metering.uses_gateway(run_ctx.plan):
        return attempts.run_plan(run_ctx, options.jobs or 1)
    replay = None if options.replay is None else metering.recorded(run_ctx.store, options.replay)
    folder = metering.socket_folder(scratch.run_folder(run_ctx.store.path))
    try:
        run_ctx.gateway = metering.start(run_ctx.store, run_ctx.plan, environ, folder, replay)
        run_ctx.journal = metering.Journal(run_ctx.store, run_ctx.plan_oid, run_ctx.gateway.prices)
        run_ctx.judges = metering.JudgeAccess(run_ctx.store, run_ctx.plan, run_ctx.gateway)
        try:
            return attempts.run_plan(run_ctx, options.jobs or 1)
        finally:
            run_ctx.gateway.stop()
            run_ctx.journal.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _import_quietly(name: str) -> None:
    """Import ``name`` ahead of its use; a failure is left to the importer that needs it."""
    try:
        importlib.import_module(name)
    except ImportError:
        pass


def _run_on_dask(
    run_ctx: RunContext, options: RunOptions, environ: dict, on_event: Callable[[Event], None]
) -> tuple[list[Result], str | None]:
    """Run the plan on the Dask cluster at ``options.scheduler``, telling which workers were
    probed and, at the end, what each did. Returns (results, why the cluster was lost)."""
    with DaskExecutor(options.scheduler, dict(environ), quiet=True) as executor:
        threads = executor.probe(run_ctx)
        for _, found in sorted(executor.workers.items()):
            on_event(WorkerVerified(found.name, found.host, found.nthreads, found.bwrap))
        run_ctx.progress = lambda result: on_event(AttemptFinished(result, executor.tally.brief()))
        results = attempts.run_plan(run_ctx, options.jobs or threads, executor)
        on_event(ClusterTally(tuple(executor.tally.lines())))
        return results, executor.stopped()
