"""`yyb export`: a run written in another tool's format (docs/export.md)."""

from __future__ import annotations

import sys

import click

from yyb.cli.context import open_store
from yyb.cli.output import emit_json, json_option
from yyb.cli.plans import plan_oid as resolve_plan
from yyb.errors import UsageError

SUFFIXES = {"json": ".json", "eval": ".eval"}


@click.group("export")
def export():
    """Write a plan's run in another tool's format."""


@export.command("inspect")
@click.argument("plan_name", metavar="PLAN")
@click.option("--output", metavar="FILE", help="Write to FILE (never overwritten).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(sorted(SUFFIXES)),
    help="json (one JSON object) or eval (Inspect's zip archive); default: FILE's suffix, "
    "else json.",
)
@click.option(
    "--grader-version",
    metavar="V",
    help="Only attempts that evaluator version V graded (V, or ID@V), with its verdicts.",
)
@json_option
@click.pass_context
def inspect_command(ctx, plan_name, output, fmt, grader_version, as_json):
    """Write PLAN's run as an Inspect AI eval log, one sample per attempt.

    PLAN is a plan file, or a plan oid or ref in the store. The log opens in 'inspect view'
    and inspect_ai.analysis; nothing is written to the store. Exits 1 when the experiment's
    chain is incomplete (the log is written, with status "error"), 0 otherwise. With
    --json (and --output), stdout says what was written: file, format, plan, status, samples.
    """
    from yyb.plans import planfile
    from yyb.reports import inspect_log

    fmt = _format(fmt, output)
    if as_json and output is None:
        raise UsageError("--json describes the file written: give --output FILE")
    if output is not None:
        planfile.check_output_free(output)
    elif fmt == "eval" and sys.stdout.isatty():
        raise UsageError("--format eval writes a zip archive: give --output FILE or redirect")
    oid = resolve_plan(ctx, plan_name)
    store = open_store(ctx)
    if not store.objects.contains(oid):
        raise UsageError(f"plan {oid} is not in the store {store.path}")
    log = inspect_log.eval_log(store, oid, grader_version)
    data = inspect_log.FORMATS[fmt](log)
    if output is not None:
        from yyb.store import file

        file.write_new(output, data)
        samples = len(log["samples"])
        if as_json:
            said = {"output": output, "format": fmt, "plan": oid, "status": log["status"]}
            emit_json({**said, "samples": samples})
        else:
            click.echo(f"inspect log written to {output} ({samples} samples)", err=True)
    else:
        sys.stdout.buffer.write(data)
    if log["status"] != "success":
        click.echo(f"yyb: warning: {log['error']['message']}", err=True)
        return 1
    return 0


def _format(fmt: str | None, output: str | None) -> str:
    """The format asked for, else the one FILE's suffix names, else json; a FILE whose
    suffix names the other format is refused (Inspect reads a log by its suffix)."""
    named = next((f for f, suffix in SUFFIXES.items() if (output or "").endswith(suffix)), None)
    if fmt is None:
        return named or "json"
    if named is not None and named != fmt:
        raise UsageError(f"--format {fmt} into {output}: Inspect reads a {SUFFIXES[fmt]} file")
    return fmt
