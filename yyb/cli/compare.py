"""`yyb compare PLAN_A PLAN_B`: two experiments case by case (docs/reports.md, "Comparing two
runs")."""

from __future__ import annotations

import click

from yyb.cli.context import open_store
from yyb.cli.plans import plan_oid as resolve_plan
from yyb.errors import UsageError


@click.command("compare")
@click.argument("first", metavar="PLAN_A")
@click.argument("second", metavar="PLAN_B")
@click.option(
    "--grader-version",
    metavar="V",
    help="Only attempts that evaluator version V graded (V, or ID@V), on both sides.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "json"]),
    default="text",
    show_default=True,
)
@click.option("--json", "as_json", is_flag=True, help="The same as --format json.")
@click.option("--output", metavar="FILE", help="Write to FILE (never overwritten).")
@click.pass_context
def compare(ctx, first, second, grader_version, fmt, as_json, output):
    """Compare two experiments case by case: what each case's outcome, verdicts, cost, tokens
    and runtime were on each side, the cases that flipped, and the paired test, after the
    compatibility-key parts in which the two sides differ.

    PLAN_A and PLAN_B: plan files, or plan oids or refs in the store. Stores nothing.
    Exits 1 when either plan's chain is incomplete (the comparison still prints, marked),
    2 for bad input, else 0.
    """
    from yyb.plans import planfile
    from yyb.reports import compare as comparing
    from yyb.reports import compare_render
    from yyb.store import file

    if output is not None:
        planfile.check_output_free(output)
    oids = [resolve_plan(ctx, name) for name in (first, second)]
    if oids[0] == oids[1]:
        raise UsageError(f"PLAN_A and PLAN_B are the same plan {oids[0]}")
    store = open_store(ctx)
    for oid in oids:
        if not store.objects.contains(oid):
            raise UsageError(f"plan {oid} is not in the store {store.path}")
    document = comparing.compare(store, oids[0], oids[1], grader_version)
    data = compare_render.FORMATS["json" if as_json else fmt](document)
    if output is not None:
        file.write_new(output, data.encode())
        click.echo(f"comparison written to {output}", err=True)
    else:
        click.echo(data, nl=False)
    if document["status"] != "complete":
        click.echo("yyb: warning: a plan's chain is incomplete; so are its figures", err=True)
        return 1
    return 0
