"""`yyb regrade` and `yyb rejudge`: new evaluation generations, zero candidate dispatch."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading

import click

from yyb.cli.context import claim_scratch, load_config, open_store, plan_option
from yyb.cli.plans import load_plan
from yyb.cli.progress import Steps, mode_for, progress_option
from yyb.errors import UsageError


def _key_path() -> tuple[str, ...]:
    """The configured signing key's path, which graders and judges must not see."""
    from yyb import signing

    key = signing.configured_key_path(dict(os.environ))
    return (key,) if key else ()


def _reevaluate(ctx, verb: str, plan_name: str, profile: str, dry_run: bool, as_json: bool, mode):
    from yyb.grading import regrade
    from yyb.grading.invocation import Controls
    from yyb.harness.sandbox import protected_roots

    plan_oid, records = load_plan(ctx, plan_name)
    plan = records[plan_oid]
    store = open_store(ctx)
    if not dry_run:
        claim_scratch(store)
    if not store.objects.contains(plan_oid):
        raise UsageError(f"plan {plan_oid} is not in the store {store.path}")
    attempts = {oid: store.objects.get_record(oid) for oid in plan["links"]["attempts"]}
    try:
        config = load_config(ctx)
    except UsageError:
        config = None  # regrading needs no configuration; without one, fewer roots are masked
    cancel = threading.Event()
    shown = Steps(mode_for(mode, sys.stderr), len(attempts))
    shown.show()
    previous = {
        s: signal.signal(s, lambda *_: cancel.set()) for s in (signal.SIGINT, signal.SIGTERM)
    }
    judges = None
    try:
        judges = None if dry_run else _judge_gateway(store, plan, profile)
        rows = regrade.reevaluate(
            store,
            plan_oid,
            plan,
            attempts,
            regrade.Request(profile, verb, dry_run),
            Controls(
                protected_roots(store.path, config, plan, _key_path()),
                cancel,
                dict(os.environ),
                gateway=judges,
            ),
            lambda row: _tell(shown, row),
        )
    finally:
        shown.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if judges is not None:
            judges.gateway.stop()
    _print_rows(rows, as_json, plan_oid, profile)
    if cancel.is_set():
        return 130
    refused = sum(1 for r in rows if r.action == "refused")
    if refused:
        click.echo(
            f"yyb: {refused} attempt(s) refused: their chains do not verify "
            "(yyb doctor --plan names the problems)",
            err=True,
        )
        return 1
    return 0


def _tell(shown: Steps, row) -> None:
    """One attempt's row as a step of the pass (only an evaluation takes time)."""
    said = f"{row.action} {row.verdict}" if row.verdict else row.action
    shown.step(
        f"#{row.ordinal} {row.case_id or '-'} {row.model}: {said}",
        timed=row.action == "evaluated",
    )


def _print_rows(rows, as_json: bool, plan_oid: str, profile: str) -> None:
    """The pass's table (or its JSON) on stdout."""
    if as_json:
        click.echo(
            json.dumps(
                {
                    "plan": plan_oid,
                    "profile": profile,
                    "dispatch_count": 0,
                    "attempts": [vars(r) for r in rows],
                },
                indent=2,
            )
        )
    else:
        out = sys.stdout
        out.write(f"{'#':>5}  {'case':<12}  {'model':<24}  {'action':<15}  gen  verdict  current\n")
        for r in rows:
            out.write(
                f"{r.ordinal:>5}  {(r.case_id or '-'):<12}  {r.model:<24}  "
                f"{r.action:<15}  {r.generation or '-':>3}  {r.verdict or '-':<7}  "
                f"{r.current or '-'}{'  (' + r.reason + ')' if r.action in SAID else ''}"
                "\n"
            )
        out.write("dispatch_count: 0\n")


def _judge_gateway(store, plan: dict, profile: str):
    """A gateway for the judges of a gateway plan (docs/gateway.md, "Judges"), started when
    ``profile`` is a judge's; None otherwise.

    Raises:
        UsageError: a provider's credential variable is unset.
    """
    from yyb.attempts import metering
    from yyb.harness import scratch

    spec = plan["evaluators"]["catalog"].get(profile) or {}
    if not metering.uses_gateway(plan) or spec.get("kind") != "llm_judge":
        return None
    folder = metering.socket_folder(scratch.run_folder(store.path))
    gateway = metering.start(store, plan, dict(os.environ), folder)
    return metering.JudgeAccess(store, plan, gateway)


# Rows whose reason the table shows.
SAID = ("skipped", "refused")


_options = [
    plan_option,
    click.option(
        "--profile",
        required=True,
        metavar="ID",
        help="An evaluator profile in the plan's evaluator catalog.",
    ),
    click.option("--dry-run", is_flag=True, help="Show what would be evaluated."),
    click.option("--json", "as_json", is_flag=True, help="One JSON document."),
    progress_option,
]


def _with_options(func):
    for option in reversed(_options):
        func = option(func)
    return func


@click.command("regrade")
@_with_options
@click.pass_context
def regrade_command(ctx, plan_name, profile, dry_run, as_json, progress_mode):
    """Append the next generation of a command evaluator to every graded attempt.

    Reads retained evidence only and never starts a candidate (dispatch_count: 0).
    """
    return _reevaluate(ctx, "regrade", plan_name, profile, dry_run, as_json, progress_mode)


@click.command("rejudge")
@_with_options
@click.pass_context
def rejudge_command(ctx, plan_name, profile, dry_run, as_json, progress_mode):
    """Append the next generation of an LLM-judge evaluator to every graded attempt.

    Reads retained evidence only and never starts a candidate (dispatch_count: 0).
    """
    return _reevaluate(ctx, "rejudge", plan_name, profile, dry_run, as_json, progress_mode)
