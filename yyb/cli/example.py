"""`yyb example`: a whole benchmark run on a built-in example, start to finish, resumable.

The folder is the example's once it holds its marker (``MARKER``, written first into an empty
folder, naming the store): run again on such a folder, the example resumes its plan as
``yyb run`` would, reusing every attempt an earlier run finished.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import click

from yyb.cli.output import emit_json, json_option
from yyb.cli.progress import Progress, mode_for, progress_option
from yyb.errors import UsageError

MARKER = ".yyb-example"
FORMAT = "yyb-example.v1"
PLAN_FILE = "plan.json"
STOPS = (signal.SIGINT, signal.SIGTERM)  # each stops the run as Ctrl-C does


@dataclass
class Begun:
    """An example ready to run: its folder, store, configuration and plan."""

    root: str
    store: object
    config: object
    plan_oid: str
    records: dict[str, dict]
    finished: int = 0  # attempts an earlier run finished


def _silent(*_args, **_kwargs) -> None:
    """Says nothing: with --json, stdout holds the one document."""


@click.command("example")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    help="Where to create the example (default: a new temporary folder); a folder an "
    "earlier 'yyb example' left is resumed.",
)
@click.option("--attempts", type=click.IntRange(1, 20), default=3, show_default=True)
@click.option("--jobs", type=click.IntRange(1, 16), default=2, show_default=True)
@progress_option
@json_option
@click.pass_context
def example(ctx, directory, attempts, jobs, progress_mode, as_json):
    """Build a repository with a bug, plan two stand-in agents x N attempts, run, verify.

    One agent fixes the bug, the other does nothing; a pinned grader runs the test on a
    rebuild of each final workspace. Prints the outcome and where the evidence is. Run again
    with the --dir of an interrupted example, it resumes: finished attempts are reused, the
    rest run. Exit 0 when the example came out as it should, 1 when not, 130 interrupted.
    With --json, one object: root, store, resumed (attempts an earlier run finished), the
    run's summary as 'yyb run --json' ends with, report (status, layer, models), problems,
    ok, resume (how to go on when interrupted, else null).
    """
    from yyb.cli.run import print_summary, summary_of

    say = _silent if as_json else click.echo
    root = os.path.abspath(directory or tempfile.mkdtemp(prefix="yyb-example-"))
    given = ctx.find_root().obj.get("store_path")
    earlier = _earlier(root)
    if earlier is None:
        begun = _begin(root, given or os.path.join(root, "store"), attempts, say)
    else:
        begun = _resume(ctx, root, given or earlier, attempts, say)
    results, cancelled = _run(begun, jobs, mode_for(progress_mode, sys.stderr))
    if not as_json:
        click.echo()
        print_summary(results)
    hint = _resume_hint(begun) if cancelled else None
    if cancelled:
        click.echo(f"yyb: interrupted; to resume: {hint}", err=True)
    told = None if cancelled else _conclude(begun, results, say)
    if as_json:
        emit_json(
            {
                "root": root,
                "store": begun.store.path,
                "resumed": begun.finished,
                **summary_of(begun.plan_oid, results),
                "report": told and told["report"],
                "problems": told and told["problems"],
                "ok": bool(told and told["ok"]),
                "resume": hint,
            }
        )
    return 130 if cancelled else 0 if told["ok"] else 1


def _earlier(root: str) -> str | None:
    """The store of the example an earlier run left in ``root``; None when ``root`` is new
    or empty.

    Raises:
        UsageError: ``root`` holds something else.
    """
    if not os.path.isdir(root) or not os.listdir(root):
        return None
    try:
        with open(os.path.join(root, MARKER), encoding="utf-8") as handle:
            marker = json.load(handle)
    except (OSError, ValueError):
        marker = None
    if not isinstance(marker, dict) or marker.get("format") != FORMAT:
        raise UsageError(f"--dir {root} is not empty and holds no example to resume")
    if not os.path.exists(os.path.join(root, PLAN_FILE)):
        raise UsageError(
            f"--dir {root} holds an example stopped before its plan was written: "
            "remove the folder and run again"
        )
    return marker["store"]


def _begin(root: str, store_path: str, attempts: int, say: Callable = click.echo) -> Begun:
    """A new example in the empty folder ``root``: marked first, then built and planned."""
    from yyb import config as configuration
    from yyb.example import build
    from yyb.plans import build as plans
    from yyb.plans import planfile
    from yyb.store import file
    from yyb.store.repo import Store

    os.makedirs(root, exist_ok=True)
    marker = {"format": FORMAT, "store": os.path.abspath(store_path)}
    file.write_new(os.path.join(root, MARKER), (json.dumps(marker) + "\n").encode())
    paths = build(root)
    store, _ = Store.init(store_path)
    config = configuration.load(paths["config"])
    say(f"example repository  {paths['repo']} (base {paths['base'][:12]})")
    say(f"case                {paths['task']}")
    plan = plans.task_plan(config, [paths["task"]], ":fixer,:idler", attempts, "2")
    plans.write(store, plan)
    plan_file = os.path.join(root, PLAN_FILE)
    planfile.write_new(plan_file, planfile.render(plan.oid, plan.records))
    say(
        f"plan                {plan.oid} ({plan.experiment['attempt_count']} attempts, {plan_file})"
    )
    return Begun(root, store, config, plan.oid, plan.records)


def _resume(ctx, root: str, store_path: str, attempts: int, say: Callable = click.echo) -> Begun:
    """The example an earlier run left in ``root``, as it planned it.

    Raises:
        UsageError: --attempts asks for another plan than the one there.
    """
    from yyb import config as configuration
    from yyb.attempts.runner import ensure_in_store
    from yyb.plans import planfile
    from yyb.store.repo import Store

    plan_oid, records = planfile.load(os.path.join(root, PLAN_FILE))
    per_cell = records[plan_oid]["attempts_per_cell"]
    if ctx.get_parameter_source("attempts").name == "COMMANDLINE" and attempts != per_cell:
        raise UsageError(
            f"--dir {root} holds an example planned with {per_cell} attempt(s) per agent: "
            "resume it without --attempts, or use another folder"
        )
    store, _ = Store.init(store_path)
    ensure_in_store(store, records)  # a store made again: the plan's records, not its blobs
    config = configuration.load(os.path.join(root, "repo", configuration.CONFIG_NAME))
    done = sum(
        store.refs.read(f"refs/runs/{plan_oid}/{oid}/terminal") is not None
        for oid in records[plan_oid]["links"]["attempts"]
    )
    total = len(records[plan_oid]["links"]["attempts"])
    say(f"resuming the example in {root}: {done} of {total} attempts finished")
    say(f"plan                {plan_oid} ({total} attempts, {root}/{PLAN_FILE})")
    return Begun(root, store, config, plan_oid, records, done)


def _run(begun: Begun, jobs: int, mode: str) -> tuple[list, bool]:
    """Run the plan's attempts not finished yet, under a fresh grant; Ctrl-C (or SIGTERM)
    stops those in flight (kept as cancelled) and dispatches no more. Returns (every
    attempt's result, whether it was interrupted)."""
    from yyb.attempts import run as attempts_run
    from yyb.evidence import names
    from yyb.plans import grant

    store, plan_oid, records = begun.store, begun.plan_oid, begun.records
    experiment = records[plan_oid]
    now = grant.now_ms()
    store.refs.update(
        names.grant(plan_oid),
        store.objects.put_record(grant.grant_for(plan_oid, experiment, now + 3_600_000, now)),
        reason="example",
    )
    chosen = {oid: records[oid] for oid in experiment["links"]["attempts"]}
    run_ctx = attempts_run.prepare(
        store, begun.config, plan_oid, experiment, chosen, dict(os.environ)
    )
    shown = Progress(mode, len(chosen))
    shown.done = begun.finished  # reused: told in the table, not as progress
    run_ctx.progress = shown.finished
    run_ctx.started = lambda a: shown.started(
        a["ordinal"], a["model"]["resolved"], a.get("case_id")
    )
    stop = {s: signal.signal(s, lambda *_: run_ctx.cancel.set()) for s in STOPS}
    try:
        results = attempts_run.run_plan(run_ctx, jobs)
    finally:
        shown.close()
        for sig, handler in stop.items():
            signal.signal(sig, handler)
    return results, run_ctx.cancel.is_set()


def _resume_hint(begun: Begun) -> str:
    """How to go on: this command again (the marker names the store), or ``yyb run`` on the
    example's plan."""
    from yyb.config import CONFIG_NAME

    config = os.path.join(begun.root, "repo", CONFIG_NAME)
    return (
        f"yyb example --dir {begun.root} (or yyb --store {begun.store.path} "
        f"--config {config} run --plan {os.path.join(begun.root, PLAN_FILE)})"
    )


def _conclude(begun: Begun, results, say: Callable = click.echo) -> dict:
    """Verify the store, report the plan (a signed layer when a key is configured) and say
    where the evidence is. Returns the report's gist, the problems doctor found and ``ok``:
    whether each agent came out as it should."""
    from yyb import signing
    from yyb.reports import build as report_build
    from yyb.reports import layer as report_layer
    from yyb.reports import render
    from yyb.store.fsck import fsck

    store, plan_oid = begun.store, begun.plan_oid
    signer = signing.configured_signer(dict(os.environ))
    problems = [f for f in fsck(store) if f.level == "error"]
    report, _ = report_build.build(store, plan_oid)
    stored = report_layer.store_layer(store, plan_oid, report, signer=signer)
    if signer is not None:  # signed evidence comes with a signed checkpoint of its log
        signing.checkpoint(store, signer)
    say()
    say(f"report ({report['status']}; layer {stored['oid'][:12]}):")
    for entry in report["models"]:
        itt = render.rate_text(entry["intent_to_treat"], "-")
        say(
            f"  {entry['model']:<14} valid resolved rate {render.rate_text(entry)}; "
            f"intent-to-treat {itt}"
        )
    say()
    say(f"doctor: {len(problems)} problem(s) in {store.path}")
    say(f"evidence: refs/runs/{plan_oid}/<attempt>/(intent|terminal|evidence)")
    say(f"  yyb --store {store.path} show-ref refs/runs/{plan_oid}")
    say(f"  yyb --store {store.path} doctor --plan {plan_oid[:12]}")
    say(f"  yyb --store {store.path} report --plan {plan_oid[:12]}")
    by_model: dict[str, set[str]] = {}
    for r in results:
        if r.terminal_class != "cancelled":  # an interruption's, not the agent's
            by_model.setdefault(r.model, set()).add(r.terminal_class)
    expected = {"example/fixer": {"resolved"}, "example/idler": {"grader_failure"}}
    kept = ("model", "attempts", "valid", "resolved", "invalid")
    return {
        "report": {
            "status": report["status"],
            "layer": stored["oid"],
            "models": [{k: entry[k] for k in kept} for entry in report["models"]],
        },
        "problems": len(problems),
        "ok": by_model == expected and report["status"] == "complete" and not problems,
    }
