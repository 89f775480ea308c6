"""The yyb command line: the one place that prints errors and chooses exit codes.

Subcommands load lazily so that plumbing pays only for what it uses.
"""

from __future__ import annotations

import importlib
import signal
import sys

import click

from yyb import __version__
from yyb.errors import YybError

# name -> "module:attribute", imported only when the command runs (or help lists it).
COMMANDS = {
    "hash-object": "yyb.cli.plumbing:hash_object",
    "cat-object": "yyb.cli.plumbing:cat_object",
    "update-ref": "yyb.cli.refs:update_ref",
    "show-ref": "yyb.cli.refs:show_ref",
    "rev-parse": "yyb.cli.refs:rev_parse",
    "log": "yyb.cli.refs:log",
    "verify-chain": "yyb.cli.check:verify_chain",
    "doctor": "yyb.cli.check:doctor",
    "store": "yyb.cli.store:store",
    "example": "yyb.cli.example:example",
    "init": "yyb.cli.plans:init",
    "validate": "yyb.cli.plans:validate",
    "import": "yyb.cli.swebench:import_group",
    "plan": "yyb.cli.plans:plan",
    "authorize": "yyb.cli.plans:authorize",
    "run": "yyb.cli.run:run",
    "recover": "yyb.cli.run:recover",
    "regrade": "yyb.cli.grading:regrade_command",
    "rejudge": "yyb.cli.grading:rejudge_command",
    "report": "yyb.cli.report:report",
    "investigate": "yyb.cli.investigate:investigate",
    "bundle": "yyb.cli.bundle:bundle",
    "push": "yyb.cli.bundle:push",
    "fetch": "yyb.cli.bundle:fetch",
    "key": "yyb.cli.signing:key",
    "sign": "yyb.cli.signing:sign",
    "workflow": "yyb.cli.workflow:workflow",
    "release-readiness": "yyb.cli.readiness:release_readiness",
    "checkpoint": "yyb.cli.translog:checkpoint",
    "log-proof": "yyb.cli.translog:log_proof",
    "verify-log": "yyb.cli.translog:verify_log",
    "gc": "yyb.cli.packs:gc_command",
    "count-objects": "yyb.cli.packs:count_objects",
    "verify-pack": "yyb.cli.packs:verify_pack",
}


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
    envvar="YYB_STORE",
    help="The object store (default: $YYB_STORE, else a per-repository folder under "
    "$XDG_STATE_HOME/yyb/stores).",
)
@click.option(
    "--config",
    "config_path",
    metavar="FILE",
    envvar="YYB_CONFIG",
    help="The configuration (default: yylo-benchmark.config.json at the repository top).",
)
@click.version_option(__version__, prog_name="yyb")
@click.pass_context
def cli(ctx: click.Context, store_path: str | None, config_path: str | None) -> None:
    """yyb: coding-agent runs as evidence anyone can re-verify offline.

    Exit codes: 0 ok, 1 a check failed or a named thing is missing, 2 bad input or usage.
    """
    ctx.obj = {"store_path": store_path, "config_path": config_path}


def _fail(message: str, code: int) -> int:
    for line in message.splitlines() or [""]:
        sys.stderr.write(f"yyb: error: {line}\n")
    sys.stderr.flush()
    return code


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; every YybError becomes one stderr line and its exit code."""
    # Behave like other Unix tools in pipelines: `yyb ... | head` ends quietly.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        result = cli.main(args=argv, prog_name="yyb", standalone_mode=False)
        code = result if isinstance(result, int) else 0
    except YybError as exc:
        code = _fail(exc.message, exc.exit_code)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else "", err=True)
        code = 2
    except click.UsageError as exc:
        hint = (
            f" (see 'yyb {exc.ctx.command_path.partition(' ')[2]} --help')".replace(
                "yyb  --help", "yyb --help"
            )
            if exc.ctx
            else ""
        )
        code = _fail(exc.format_message() + hint, 2)
    except click.ClickException as exc:
        code = _fail(exc.format_message(), exc.exit_code)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except (click.Abort, KeyboardInterrupt):
        code = _fail("interrupted", 130)
    sys.stdout.flush()
    sys.exit(code)
