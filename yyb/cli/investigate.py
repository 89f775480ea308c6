"""`yyb investigate`: one bounded question about one attempt, from retained evidence only."""

from __future__ import annotations

import sys

import click

from yyb.cli.context import open_store, plan_option
from yyb.cli.output import emit_json, json_option
from yyb.cli.plans import plan_oid as resolve_plan


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
@json_option
@click.pass_context
def investigate(ctx, plan_name, attempt_name, show, max_bytes, as_json):
    """Answer one bounded question about one attempt, with zero dispatch.

    timeline: its records in order with times; terminal: why its class is what it is;
    grader: each evaluation generation's verdict and output; patch: its diff; outputs: the
    candidate's stdout and stderr.
    """
    from yyb.reports import investigate as answers

    plan_oid = resolve_plan(ctx, plan_name)
    store = open_store(ctx)
    answer = answers.investigate(store, plan_oid, attempt_name, show, max_bytes)
    if not as_json:
        sys.stdout.buffer.write(answer)
        return 0
    attempt = answers.resolve_attempt(store.objects.get_record(plan_oid), attempt_name)
    text = answer.decode("utf-8", "replace")
    emit_json({"plan": plan_oid, "attempt": attempt, "show": show, "answer": text})
    return 0
