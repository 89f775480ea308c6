"""`yyb investigate`: one bounded question about one attempt, from retained evidence only."""

from __future__ import annotations

import sys

import click

from yyb.cli.context import open_store, plan_option
from yyb.cli.plans import plan_oid as resolve_plan
from yyb.errors import UsageError
from yyb.evidence import records


@click.command("investigate")
@plan_option
@click.option(
    "--attempt",
    "attempt_name",
    required=True,
    metavar="ID",
    help="The attempt plan's oid, an unambiguous prefix of it, or its ordinal.",
)
@click.option(
    "--show",
    type=click.Choice(["timeline", "terminal", "grader", "patch", "outputs"]),
    default="terminal",
    show_default=True,
    help="The question to answer.",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(min=256),
    default=16384,
    show_default=True,
    help="Print at most this many bytes (a marker shows what was cut).",
)
@click.pass_context
def investigate(ctx, plan_name, attempt_name, show, max_bytes):
    """Answer one bounded question about one attempt, with zero dispatch.

    timeline: its records in order with times; terminal: why its class is what it is;
    grader: each evaluation generation's verdict and output; patch: its diff; outputs: the
    candidate's stdout and stderr.
    """
    from yyb.evidence.attempt import AttemptHandle
    from yyb.reports import investigate as answers

    plan_oid = resolve_plan(ctx, plan_name)
    store = open_store(ctx)
    if not store.objects.contains(plan_oid):
        raise UsageError(f"plan {plan_oid} is not in the store {store.path}")
    plan = store.objects.get_record(plan_oid)
    if plan.get("schema_version") != records.PLAN:
        raise UsageError(f"{plan_name} is not an experiment plan")
    attempt_oid = answers.resolve_attempt(plan, attempt_name)
    handle = AttemptHandle.read(store, plan_oid, attempt_oid, plan)
    sys.stdout.buffer.write(answers.answer(store, handle, show, max_bytes))
    return 0
