"""The yyb command line: the one place that prints errors and chooses exit codes.

``main`` runs the plumbing's common forms (``cat-object``, ``hash-object``) without importing
click (``yyb.cli.fast``), because shell pipelines call them thousands of times; every other
command line goes through the click group in ``yyb.cli.app``, whose subcommands load lazily so
that each pays only for what it uses.
"""

from __future__ import annotations

# The C module under ``signal``: the Python one builds its enums, which would cost each command
# a few milliseconds before it starts.
import _signal
import sys

# The command table lives in a module of its own, so that the commands which read it do
# not import this package back.
from yyb.cli.commands import COMMANDS  # noqa: F401 - re-exported


def main(argv: list[str] | None = None) -> None:
    """Run the command line ``argv`` (default: the process's) and exit with its code."""
    # Behave like other Unix tools in pipelines: `yyb ... | head` ends quietly.
    _signal.signal(_signal.SIGPIPE, _signal.SIG_DFL)
    args = sys.argv[1:] if argv is None else list(argv)
    from yyb.cli import fast

    code = fast.run(args)
    if code is None:
        from yyb.cli import app

        code = app.run(args)
    sys.stdout.flush()
    sys.exit(code)
