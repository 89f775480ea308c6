"""`yyb report`: the per-experiment report, stored as a report layer and printed."""

from __future__ import annotations

import sys

import click

from yyb.cli.context import open_store, plan_option
from yyb.cli.plans import load_plan
from yyb.errors import UsageError


@click.command("report")
@plan_option
@click.option(
    "--grader-version",
    metavar="V",
    help="Only attempts that evaluator version V graded (V, or ID@V), with its verdicts.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
)
@click.option("--output", metavar="FILE", help="Write to FILE (never overwritten).")
@click.pass_context
def report(ctx, plan_name, grader_version, fmt, output):
    """Report one experiment from retained evidence and store it as a report layer.

    Exits 1 when the experiment's chain is incomplete (the report still prints, marked
    incomplete), 0 otherwise.
    """
    from yyb.plans import planfile
    from yyb.reports import build, layer, render
    from yyb.store import file

    if output is not None:
        planfile.check_output_free(output)
    plan_oid, _ = load_plan(ctx, plan_name)
    store = open_store(ctx)
    if not store.objects.contains(plan_oid):
        raise UsageError(f"plan {plan_oid} is not in the store {store.path}")
    document, facts = build.build(store, plan_oid, grader_version)
    stored = layer.store_layer(store, plan_oid, document, facts)
    data = render.FORMATS[fmt](document, stored)
    if output is not None:
        file.write_new(output, data.encode())
        click.echo(f"report written to {output} (layer {stored['oid']})", err=True)
    else:
        sys.stdout.write(data)
    if document["status"] != "complete":
        click.echo(
            "yyb: warning: the experiment's chain is incomplete; the figures are incomplete",
            err=True,
        )
        return 1
    return 0
