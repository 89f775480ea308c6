"""`yyb run`: dispatch the attempts of a plan, each once, and retain their evidence."""

from __future__ import annotations

import os
import signal
import sys

import click

from yyb.cli.context import (
    check_gate,
    claim_scratch,
    gate_options,
    load_config,
    open_store,
    plan_option,
)
from yyb.cli.plans import load_plan
from yyb.cli.plans import plan_oid as plan_oid_of
from yyb.cli.progress import Progress, json_event, mode_for, progress_option
from yyb.errors import UsageError
from yyb.reports.gates import Gate


def _dry_run(ctx, plan_oid: str, records: dict[str, dict]) -> int:
    """What ``yyb run`` would dispatch; reads the store if there is one and writes nothing."""
    from yyb.attempts import runner
    from yyb.errors import StoreNotFound

    try:
        store = open_store(ctx)
    except StoreNotFound:
        store = None
    pending, dispatched = runner.undispatched(store, plan_oid, records)
    for a in pending:
        click.echo(
            f"would dispatch {a['ordinal']:>4} {a.get('case_id') or '-'} "
            f"{a['model']['resolved']} attempt {a['attempt']}"
        )
    click.echo(f"already dispatched: {dispatched}")
    click.echo("dispatch_count: 0")
    return 0


@click.command("run")
@plan_option
@click.option("--dry-run", is_flag=True, help="Show what would be dispatched; dispatch nothing.")
@click.option(
    "--jobs",
    type=click.IntRange(1, 1024),
    default=None,
    help="Attempts running at once [default: 1; with dask, the workers' threads].",
)
@click.option("--keep-workspaces", is_flag=True, help="Keep each attempt's folders.")
@click.option(
    "--executor",
    type=click.Choice(["local", "dask"]),
    default="local",
    show_default=True,
    help="Where candidates run: this machine, or the workers of a Dask cluster.",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    envvar="YYB_DASK_SCHEDULER",
    help="The Dask scheduler's address (tcp://host:port), with --executor dask "
    "[env: YYB_DASK_SCHEDULER].",
)
@click.option(
    "--replay",
    "replay_name",
    metavar="PLAN",
    help="Answer the candidates' model calls from those a run of PLAN recorded at the "
    "gateway, by request hash, spending nothing; a call with no recorded answer is refused "
    "(docs/gateway.md).",
)
@progress_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Stream one JSON object per event on stdout, then the summary (no table).",
)
@gate_options
@click.pass_context
def run(
    ctx,
    plan_name,
    dry_run,
    jobs,
    keep_workspaces,
    executor,
    scheduler,
    replay_name,
    progress_mode,
    as_json,
    fail_under,
    rate_kind,
    max_invalid,
):
    """Run every attempt of a plan that has not been dispatched yet.

    Each candidate works in a private snapshot under the sandbox; its evidence is retained
    under refs/runs/<plan>/<attempt>/. An attempt whose dispatch intent exists is never
    dispatched again. Ctrl-C stops in-flight attempts (retained as cancelled).

    With --executor dask, candidates run on the workers of the Dask cluster at --scheduler;
    this process stays the only writer of the store (docs/dask.md).

    With --replay PLAN (a plan whose candidates reached their models through the gateway),
    the gateway answers from PLAN's recorded calls and reads no provider key.
    """
    from yyb.attempts import runner
    from yyb.store import gc

    gc.auto_threshold(dict(os.environ))  # a bad setting is refused before anything is read
    _check_executor(ctx, executor, scheduler, keep_workspaces)
    plan_oid, records = load_plan(ctx, plan_name)
    if dry_run:
        return _dry_run(ctx, plan_oid, records)
    store = open_store(ctx, create=True)
    claim_scratch(store)
    replay = plan_oid_of(ctx, replay_name) if replay_name is not None else None
    options = runner.RunOptions(jobs, keep_workspaces, executor, scheduler, replay=replay)

    def stop(signum, frame):
        options.cancel.set()

    total = len(records[plan_oid]["links"]["attempts"])
    shown = Progress(mode_for(progress_mode, sys.stderr), total)
    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        outcome = runner.run(
            store, load_config(ctx), plan_oid, records, options, dict(os.environ),
            _shown(shown, as_json),
        )  # fmt: skip
    finally:
        shown.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if as_json:
        click.echo(json_event("summary", **summary_of(plan_oid, outcome.results)))
    else:
        print_summary(outcome.results)
    if outcome.cancelled:
        return 130
    if outcome.lost is not None:
        return 1
    return check_gate(store, plan_oid, Gate(fail_under, rate_kind, max_invalid))


def _check_executor(ctx, executor: str, scheduler: str | None, keep_workspaces: bool) -> None:
    """The flags of ``yyb run`` that only make sense together."""
    if executor == "dask" and not scheduler:
        raise UsageError("--executor dask needs --scheduler ADDRESS (or YYB_DASK_SCHEDULER)")
    if (
        executor == "local"
        and scheduler
        and ctx.get_parameter_source("scheduler").name == "COMMANDLINE"
    ):
        raise UsageError("--scheduler is for --executor dask")
    if keep_workspaces and executor == "dask":
        raise UsageError("--keep-workspaces keeps local folders; a dask worker keeps none")


def _shown(shown: Progress, as_json: bool):
    """How the run's events are told: attempts started and finished through ``shown`` (or
    as JSON lines on stdout), and, always on stderr, the Dask workers probed, their tally and
    a lost cluster, the checkpoint and the automatic gc. Events come from the run's threads:
    one lock keeps their lines whole."""
    import threading

    from yyb.attempts import runner

    lock = threading.Lock()

    def show(event) -> None:
        with lock:
            if as_json:
                _as_json(event)
            elif isinstance(event, runner.AttemptStarted):
                shown.started(event.ordinal, event.model, event.case_id)
            elif isinstance(event, runner.AttemptFinished):
                shown.finished(event.result)
                if event.cluster is not None:
                    shown.note(f"  dask: {event.cluster}")
            else:
                for line in _said(event):
                    shown.note(line)

    return show


def _said(event) -> list[str]:
    """The lines of a run event other than an attempt's."""
    from yyb.attempts import runner

    if isinstance(event, runner.WorkerVerified):
        return [
            f"dask worker {event.name} on {event.host}: {event.threads} threads, "
            f"sandbox {event.sandbox} verified"
        ]
    if isinstance(event, runner.ClusterTally):
        return list(event.lines)
    if isinstance(event, runner.ClusterLost):
        return [
            f"yyb: {event.why}; {event.left} attempts not dispatched: run again to dispatch them"
        ]
    if isinstance(event, runner.LogCheckpointed):
        return [f"checkpoint: {event.size} updates, root {event.root}"]
    if isinstance(event, runner.StorePacked):
        merged = f", {event.packs_removed} packs merged into one" if event.packs_removed else ""
        return [
            f"yyb: packed {event.packed} objects{merged} (automatic gc; "
            f"{event.setting}=0 turns it off)"
        ]
    return []


def _as_json(event) -> None:
    """One JSON line on stdout for ``event`` (``yyb run --json``; docs/cli.md)."""
    import dataclasses

    from yyb.attempts import runner

    if isinstance(event, runner.AttemptFinished):
        fields = {"result": dataclasses.asdict(event.result), "cluster": event.cluster}
        click.echo(json_event("attempt_finished", **fields))
        return
    names = {
        runner.AttemptStarted: "attempt_started",
        runner.WorkerVerified: "worker_verified",
        runner.ClusterTally: "cluster_tally",
        runner.ClusterLost: "cluster_lost",
        runner.LogCheckpointed: "log_checkpointed",
        runner.StorePacked: "store_packed",
    }
    click.echo(json_event(names[type(event)], **dataclasses.asdict(event)))


def summary_of(plan_oid: str, results) -> dict:
    """The summary ``yyb run --json`` ends with: every attempt's result in plan order, the
    terminals' tally and the dispatch count."""
    import dataclasses

    ordered = sorted(results, key=lambda r: r.ordinal)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.terminal_class] = counts.get(r.terminal_class, 0) + 1
    return {
        "plan": plan_oid,
        "results": [dataclasses.asdict(r) for r in ordered],
        "terminals": dict(sorted(counts.items())),
        "dispatch_count": sum(1 for r in results if r.status == "ran"),
    }


def print_summary(results) -> None:
    """The run's table on stdout: one row per attempt in plan order, the terminals' tally
    and the dispatch count (``yyb run`` and ``yyb example`` print it)."""
    out = sys.stdout
    width_case = max([len(r.case_id or "-") for r in results] + [4])
    width_model = max([len(r.model) for r in results] + [5])
    out.write(
        f"{'#':>5}  {'case':<{width_case}}  {'model':<{width_model}}  "
        f"{'terminal':<19}  {'wall_ms':>8}  status\n"
    )
    for r in sorted(results, key=lambda r: r.ordinal):
        out.write(
            f"{r.ordinal:>5}  {(r.case_id or '-'):<{width_case}}  {r.model:<{width_model}}"
            f"  {r.terminal_class:<19}  {r.wall_ms:>8}  {r.status}\n"
        )
    counts: dict[str, int] = {}
    for r in results:
        counts[r.terminal_class] = counts.get(r.terminal_class, 0) + 1
    out.write("terminals: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + "\n")
    out.write(f"dispatch_count: {sum(1 for r in results if r.status == 'ran')}\n")


@click.command("recover")
@plan_option
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@click.pass_context
def recover(ctx, plan_name, as_json):
    """Reconcile an interrupted run without dispatching anything.

    Per attempt: a retained terminal is verified and reused; an attempt dispatched without a
    terminal is closed as an indeterminate harness_failure (never dispatched again); an attempt
    never dispatched is left for 'yyb run'.
    """
    import json

    from yyb.attempts import run as attempts

    plan_oid, records = load_plan(ctx, plan_name)
    plan = records[plan_oid]
    store = open_store(ctx)
    claim_scratch(store)
    chosen = {
        oid: records.get(oid) or store.objects.get_record(oid) for oid in plan["links"]["attempts"]
    }
    results = attempts.recover(store, plan_oid, plan, chosen, dict(os.environ))
    if as_json:
        click.echo(
            json.dumps(
                {"plan": plan_oid, "dispatch_count": 0, "attempts": [vars(r) for r in results]},
                indent=2,
            )
        )
        return 0
    actions = {
        "reused": "terminal verified and reused",
        "closed": "closed as indeterminate",
        "not dispatched": "left for yyb run",
    }
    for r in sorted(results, key=lambda r: r.ordinal):
        click.echo(
            f"{r.ordinal:>5}  {r.attempt[:12]}  {r.model}  {r.terminal_class}  "
            f"{actions.get(r.status, r.status)}"
        )
    click.echo("dispatch_count: 0")
    return 0
