"""What every command shares: finding the store, printing findings."""

from __future__ import annotations

import click

from yyb.cli import locate
from yyb.cli.findings import emit_findings  # noqa: F401 - re-exported
from yyb.store.repo import Store


def store_path(ctx: click.Context) -> str:
    """The store named by the global options (``locate.store_path``)."""
    return locate.store_path(ctx.find_root().obj)


def open_store(ctx: click.Context, create: bool = False) -> Store:
    """Open the store named by the global options (``locate.open_store``)."""
    return locate.open_store(ctx.find_root().obj, create)


def config_path(ctx: click.Context) -> str:
    """The configuration named by the global options (``locate.config_path``)."""
    return locate.config_path(ctx.find_root().obj)


def load_config(ctx: click.Context):
    """The configuration named by --config, else the one at the top of the repository."""
    from yyb import config

    return config.load(config_path(ctx))


# The --plan option every experiment command takes.
plan_option = click.option(
    "--plan",
    "plan_name",
    required=True,
    metavar="PLAN",
    help="A plan file, or a plan oid or ref in the store.",
)


def output_option(help: str):
    """``--output FILE``: a file the command creates, never overwrites (the command checks it
    is free before doing any work, ``planfile.check_output_free``)."""
    return click.option("--output", metavar="FILE", type=click.Path(dir_okay=False), help=help)


def claim_scratch(store) -> None:
    """Remove run folders that processes now gone left behind (saying so on stderr), and tag
    this process's run folder with ``store`` so that its doctor can name it if it is left."""
    from yyb.harness import cgroups, scratch

    for path in scratch.sweep():
        click.echo(f"yyb: removed {path}, left by a yyb process that is gone", err=True)
    cgroups.sweep()
    scratch.run_folder(store.path)


def gate_options(command):
    """``--fail-under RATE``, ``--rate valid|intent-to-treat`` and ``--max-invalid N``: the
    gates of ``yyb run`` and ``yyb report`` (yyb/reports/gates.py; exit 3 when one fails)."""
    command = click.option(
        "--max-invalid",
        type=click.IntRange(0),
        metavar="N",
        help="Fail (exit 3) when the plan has more than N invalid attempts.",
    )(command)
    command = click.option(
        "--rate",
        "rate_kind",
        type=click.Choice(["valid", "intent-to-treat"]),
        default="valid",
        show_default=True,
        help="The rate --fail-under holds each model to.",
    )(command)
    return click.option(
        "--fail-under",
        type=click.FloatRange(0, 1),
        metavar="RATE",
        help="Fail (exit 3) when a model's resolved rate (--rate) is under RATE (0 to 1).",
    )(command)


def check_gate(store, plan_oid: str, gate, document: dict | None = None) -> int:
    """Print each line ``gate`` fails on stderr; ``GATE_FAILED`` when one does, else 0.
    ``document``: the plan's report, built here when not given."""
    from yyb.reports import gates

    if not gate.set:
        return 0
    if document is None:
        from yyb.reports import build

        document, _ = build.build(store, plan_oid)
    broken = gates.failures(document, gate)
    for line in broken:
        click.echo(f"yyb: {line}", err=True)
    return gates.GATE_FAILED if broken else 0
