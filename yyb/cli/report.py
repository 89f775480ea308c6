"""`yyb report`: the per-experiment or longitudinal report, stored as a report layer and printed."""

from __future__ import annotations

import sys

import click

from yyb.cli.context import check_gate, gate_options, open_store
from yyb.cli.plans import plan_oid as resolve_plan
from yyb.errors import UsageError
from yyb.reports.gates import Gate

EXPORTS = ("csv", "parquet", "junit")  # yyb/reports/export.py
BINARY = ("parquet",)


@click.command("report")
@click.option(
    "--plan",
    "plan_name",
    metavar="PLAN",
    help="A plan file, or a plan oid or ref in the store (the per-experiment report).",
)
@click.option(
    "--longitudinal",
    is_flag=True,
    help="Every retained attempt in the store, in cohorts under compatibility keys.",
)
@click.option("--case", "case_id", metavar="ID", help="Longitudinal: only this case.")
@click.option("--model", metavar="M", help="Longitudinal: only this resolved model.")
@click.option(
    "--grader-version",
    metavar="V",
    help="Only attempts that evaluator version V graded (V, or ID@V), with its verdicts.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown", "html", "csv", "parquet", "junit"]),
    default="text",
    show_default=True,
    help="csv, parquet and junit (--plan only): one row or test case per attempt "
    '(docs/reports.md, "Exports"); parquet needs --output or a redirected stdout.',
)
@click.option("--json", "as_json", is_flag=True, help="The same as --format json.")
@click.option("--output", metavar="FILE", help="Write to FILE (never overwritten).")
@click.option(
    "--no-layer",
    is_flag=True,
    help="Only read the store: print the report without storing it as a layer.",
)
@click.option(
    "--verify-objects",
    is_flag=True,
    help="Gate on every reachable object re-verified, as 'yyb doctor --plan' does (slower).",
)
@gate_options
@click.pass_context
def report(
    ctx,
    plan_name,
    longitudinal,
    case_id,
    model,
    grader_version,
    fmt,
    as_json,
    output,
    no_layer,
    verify_objects,
    fail_under,
    rate_kind,
    max_invalid,
):
    """Report from retained evidence and store the report as a layer.

    With --plan: one experiment; exits 1 when its chain is incomplete (the report still
    prints, marked incomplete), 0 otherwise. The gate checks every attempt's chain and links,
    each record read proved by its hash; --verify-objects adds doctor's full object walk.
    With --longitudinal: every retained attempt of every plan in the store, pooled only under
    identical compatibility keys. --no-layer stores nothing (for a read-only store).
    """
    from yyb.plans import planfile

    if as_json:
        if fmt not in ("text", "json"):
            raise UsageError(f"--json and --format {fmt} ask for two formats; give one")
        fmt = "json"
    if longitudinal == (plan_name is not None):
        raise UsageError("give exactly one of --plan PLAN and --longitudinal")
    if not longitudinal and (case_id or model):
        raise UsageError("--case and --model filter the longitudinal report only")
    if longitudinal and verify_objects:
        raise UsageError("--verify-objects applies to a per-experiment report (--plan) only")
    gate = Gate(fail_under, rate_kind, max_invalid)
    if longitudinal and gate.set:
        raise UsageError("--fail-under and --max-invalid gate a per-experiment report only")
    if longitudinal and fmt in EXPORTS:
        raise UsageError(f"--format {fmt} exports a per-experiment report (--plan) only")
    if fmt in BINARY and output is None and sys.stdout.isatty():
        raise UsageError(f"--format {fmt} is binary: give --output FILE or redirect stdout")
    if output is not None:
        planfile.check_output_free(output)
    if longitudinal:
        data, code, oid = _longitudinal(ctx, case_id, model, grader_version, fmt, not no_layer)
    else:
        data, code, oid = _experiment(
            ctx, plan_name, grader_version, fmt, verify_objects, not no_layer, gate
        )
    _emit(data, output, oid)
    return code


def _renderer(fmt: str, formats: dict):
    if fmt in EXPORTS:
        from yyb.reports import export

        return export.FORMATS
    if fmt == "html":
        from yyb.reports import html

        html.require()
        return html.FORMATS
    return formats


def _experiment(
    ctx, plan_name, grader_version, fmt, verify_objects, write, gate
) -> tuple[str, int, str | None]:
    from yyb.reports import build, layer, render

    formats = _renderer(fmt, render.FORMATS)
    plan_oid = resolve_plan(ctx, plan_name)
    store = open_store(ctx)
    if not store.objects.contains(plan_oid):
        raise UsageError(f"plan {plan_oid} is not in the store {store.path}")
    document, facts = build.build(store, plan_oid, grader_version, verify_objects)
    stored = _stored(layer.store_layer, store, plan_oid, document, write=write)
    data = formats[fmt](document, stored)
    if document["status"] != "complete":
        click.echo(
            "yyb: warning: the experiment's chain is incomplete; the figures are incomplete",
            err=True,
        )
        return data, 1, stored["oid"]
    return data, check_gate(store, plan_oid, gate, document), stored["oid"]


def _longitudinal(ctx, case_id, model, grader_version, fmt, write) -> tuple[str, int, str | None]:
    from yyb.reports import longitudinal, longitudinal_render

    formats = longitudinal_render.FORMATS
    if fmt == "html":
        from yyb.reports import html

        html.require()
        formats = html.LONGITUDINAL_FORMATS
    store = open_store(ctx)
    document, facts = longitudinal.build_longitudinal(store, case_id, model, grader_version)
    stored = _stored(longitudinal.store_layer, store, document, facts, write=write)
    return formats[fmt](document, stored), 0, stored["oid"]


def _stored(store_layer, *args, write: bool) -> dict:
    """The layer ``store_layer`` stored (signed when a key is configured); a store that
    refuses the write says --no-layer helps."""
    import os

    from yyb import signing
    from yyb.errors import StoreIOError

    signer = signing.configured_signer(dict(os.environ)) if write else None
    try:
        stored = store_layer(*args, write=write, signer=signer)
    except StoreIOError as exc:
        raise StoreIOError(
            exc.path, f"{exc.reason} (--no-layer reports without storing a layer)"
        ) from None
    if signer is not None:  # a signed layer comes with a signed checkpoint of the log
        signing.checkpoint(args[0], signer)
    return stored


def _emit(data: str | bytes, output: str | None, layer_oid: str | None) -> None:
    from yyb.store import file

    raw = data if isinstance(data, bytes) else data.encode()
    if output is not None:
        file.write_new(output, raw)
        stored = f"layer {layer_oid}" if layer_oid else "no layer stored"
        click.echo(f"report written to {output} ({stored})", err=True)
    elif isinstance(data, bytes):
        sys.stdout.flush()
        sys.stdout.buffer.write(raw)
        sys.stdout.buffer.flush()
    else:
        sys.stdout.write(data)
