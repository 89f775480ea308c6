"""`yyb run`: dispatch the attempts of a plan, each once, and retain their evidence."""

from __future__ import annotations

import os
import signal
import sys

import click

from yyb.cli.context import claim_scratch, load_config, open_store, plan_option
from yyb.cli.plans import load_plan
from yyb.errors import UsageError


def _ensure_in_store(store, records: dict[str, dict]) -> None:
    """A plan loaded from its file must also be in this store, blobs included."""
    missing = [oid for oid in records if not store.objects.contains(oid)]
    for oid in missing:
        if store.objects.put_record(records[oid]) != oid:  # pragma: no cover - load() checked
            raise UsageError(f"record {oid} does not hash to its name")
    for value in records.values():
        for role in ("prompt", "task", "workflow"):
            target = value.get("links", {}).get(role)
            if isinstance(target, str) and not store.objects.contains(target):
                raise UsageError(
                    f"the plan's {role} blob {target} is not in the store "
                    f"{store.path}; plan it against this store first"
                )


def _dry_run(ctx, plan_oid: str, plan: dict, records: dict[str, dict]) -> int:
    """What ``yyb run`` would dispatch; reads the store if there is one and writes nothing."""
    from yyb.errors import StoreNotFound
    from yyb.evidence import names

    try:
        store = open_store(ctx)
    except StoreNotFound:
        store = None
    chosen = {
        oid: records.get(oid) or (store and store.objects.get_record(oid))
        for oid in plan["links"]["attempts"]
    }
    pending = [
        oid
        for oid in chosen
        if store is None or store.refs.read(names.attempt(plan_oid, oid, "intent")) is None
    ]
    for oid in sorted(pending, key=lambda o: chosen[o]["ordinal"]):
        a = chosen[oid]
        click.echo(
            f"would dispatch {a['ordinal']:>4} {a.get('case_id') or '-'} "
            f"{a['model']['resolved']} attempt {a['attempt']}"
        )
    click.echo(f"already dispatched: {len(chosen) - len(pending)}")
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
@click.pass_context
def run(ctx, plan_name, dry_run, jobs, keep_workspaces, executor, scheduler):
    """Run every attempt of a plan that has not been dispatched yet.

    Each candidate works in a private snapshot under the sandbox; its evidence is retained
    under refs/runs/<plan>/<attempt>/. An attempt whose dispatch intent exists is never
    dispatched again. Ctrl-C stops in-flight attempts (retained as cancelled).

    With --executor dask, candidates run on the workers of the Dask cluster at --scheduler;
    this process stays the only writer of the store (docs/dask.md).
    """
    from yyb.attempts import run as attempts
    from yyb.store import gc

    gc.auto_threshold(dict(os.environ))  # a bad setting is refused before anything runs
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
    if executor == "dask":  # distributed takes a quarter second to import: meanwhile, prepare
        import threading

        threading.Thread(target=_import_quietly, args=("distributed",), daemon=True).start()
    plan_oid, records = load_plan(ctx, plan_name)
    plan = records[plan_oid]
    if dry_run:
        return _dry_run(ctx, plan_oid, plan, records)
    store = open_store(ctx, create=True)
    claim_scratch(store)
    _ensure_in_store(store, records)
    chosen = {
        oid: records.get(oid) or store.objects.get_record(oid) for oid in plan["links"]["attempts"]
    }
    config = load_config(ctx)
    run_ctx = attempts.prepare(
        store, config, plan_oid, plan, chosen, dict(os.environ), candidates_here=executor == "local"
    )
    run_ctx.keep_workspaces = keep_workspaces
    if sys.stderr.isatty():
        run_ctx.progress = lambda r: click.echo(
            f"[{r.ordinal}] {r.case_id or '-'} {r.model}: {r.terminal_class} ({r.wall_ms} ms)",
            err=True,
        )

    def stop(signum, frame):
        run_ctx.cancel.set()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        if executor == "dask":
            results, lost = _run_on_dask(run_ctx, scheduler, jobs)
        else:
            lost = None
            results = attempts.run_plan(run_ctx, jobs or 1)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    _summary(results)
    if lost is not None:
        left = sum(1 for r in results if r.reason == f"not dispatched: {lost}")
        click.echo(
            f"yyb: {lost}; {left} attempts not dispatched: run again to dispatch them", err=True
        )
    if run_ctx.signer is not None:  # signed evidence comes with a signed checkpoint of its log
        from yyb.cli.translog import take

        record = take(store, run_ctx.signer)
        click.echo(f"checkpoint: {record['size']} updates, root {record['root']}", err=True)
    packed = gc.auto(store, dict(os.environ))
    if packed is not None:
        merged = f", {packed.packs_removed} packs merged into one" if packed.packs_removed else ""
        click.echo(
            f"yyb: packed {packed.packed} objects{merged} (automatic gc; "
            f"{gc.AUTO_ENV}=0 turns it off)",
            err=True,
        )
    if run_ctx.cancel.is_set():
        return 130
    return 1 if lost is not None else 0


def _import_quietly(name: str) -> None:
    """Import ``name`` ahead of its use; a failure is left to the importer that needs it."""
    import importlib

    try:
        importlib.import_module(name)
    except ImportError:
        pass


def _run_on_dask(run_ctx, scheduler: str, jobs: int | None):
    """Run the plan on the Dask cluster at ``scheduler``; say on stderr which workers were
    probed and, at the end, what each did. Returns (results, why the cluster was lost or
    None)."""
    from yyb.attempts import run as attempts
    from yyb.attempts.dask_run import DaskExecutor

    with DaskExecutor(scheduler, dict(os.environ), quiet=True) as executor:
        threads = executor.probe(run_ctx)
        for _, found in sorted(executor.workers.items()):
            click.echo(
                f"dask worker {found.name} on {found.host}: {found.nthreads} threads, "
                f"sandbox {found.bwrap} verified",
                err=True,
            )
        shown = run_ctx.progress
        if shown is not None:  # each attempt's line, then where the cluster stands

            def progress(result) -> None:
                shown(result)
                click.echo(f"  dask: {executor.tally.brief()}", err=True)

            run_ctx.progress = progress
        results = attempts.run_plan(run_ctx, jobs or threads, executor)
        for line in executor.tally.lines():
            click.echo(line, err=True)
        return results, executor.stopped()


def _summary(results) -> None:
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
