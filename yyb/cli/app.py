"""The click command group: every command, loaded lazily from ``COMMANDS``, and the
translation of click's errors into one stderr line and an exit code."""

from __future__ import annotations

import importlib

import click

from yyb import __version__
from yyb.cli.commands import COMMANDS
from yyb.cli.failure import fail, worded
from yyb.cli.locate import OPTION_ENV
from yyb.errors import YybError


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attribute = target.split(":")
        return getattr(importlib.import_module(module), attribute)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--store",
    "store_path",
    metavar="DIR",
    envvar=OPTION_ENV["store_path"],
    help="The object store (default: $YYB_STORE, else a per-repository folder under "
    "$XDG_STATE_HOME/yyb/stores).",
)
@click.option(
    "--config",
    "config_path",
    metavar="FILE",
    envvar=OPTION_ENV["config_path"],
    help="The configuration (default: yylo-benchmark.config.json at the repository top).",
)
@click.version_option(__version__, prog_name="yyb")
@click.pass_context
def cli(ctx: click.Context, store_path: str | None, config_path: str | None) -> None:
    """yyb: coding-agent runs as evidence anyone can re-verify offline.

    Exit codes: 0 ok, 1 a check failed or a named thing is missing, 2 bad input or usage.
    """
    ctx.obj = {"store_path": store_path, "config_path": config_path}


def run(argv: list[str]) -> int:
    """Run one command line through click; every YybError becomes one stderr line and its
    exit code, returned."""
    try:
        result = cli.main(args=argv, prog_name="yyb", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except YybError as exc:
        return fail(worded(exc), exc.exit_code)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else "", err=True)
        return 2
    except click.UsageError as exc:
        hint = (
            f" (see 'yyb {exc.ctx.command_path.partition(' ')[2]} --help')".replace(
                "yyb  --help", "yyb --help"
            )
            if exc.ctx
            else ""
        )
        return fail(exc.format_message() + hint, 2)
    except click.ClickException as exc:
        return fail(exc.format_message(), exc.exit_code)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except (click.Abort, KeyboardInterrupt):
        return fail("interrupted", 130)
