"""Many cases on one command line: ``--task`` takes several files and globs, ``--tasks-from``
a list (docs/cli.md, "Many cases").

A shell expands ``--task cases/*.md`` into ``--task a.md b.md ...``: the commands that take
``--task`` (``TaskCommand``, ``TaskGroup``) give every word after it that is not an option to
``--task`` as well. A quoted glob (``--task 'cases/*.md'``) is expanded here, sorted; one that
matches nothing is refused. ``--tasks-from FILE`` (``-`` for stdin) names one file a line,
blank lines and ``#`` comments skipped, relative to the current folder.
"""

from __future__ import annotations

import glob
import sys

import click

from yyb.errors import UsageError

OPTION = "--task"
GLOB_CHARACTERS = frozenset("*?[")


def spread(args: list[str], name: str = OPTION) -> list[str]:
    """``args`` with every word after ``name`` that is not an option given its own ``name``:
    ``--task a b --models m`` becomes ``--task a --task b --models m`` (``--`` ends it)."""
    out, i = [], 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return out + args[i:]
        out.append(arg)
        i += 1
        if arg == name and i < len(args):
            out.append(args[i])
            i += 1
            while i < len(args) and not args[i].startswith("-"):
                out += [name, args[i]]
                i += 1
    return out


class TaskCommand(click.Command):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, spread(args))


class TaskGroup(click.Group):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, spread(args))


tasks_from_option = click.option(
    "--tasks-from",
    metavar="FILE",
    help="A file naming one case a line (- for stdin; blank lines and # comments skipped).",
)


def task_files(tasks: tuple[str, ...], tasks_from: str | None) -> list[str]:
    """The case files ``--task`` and ``--tasks-from`` name, in order, each once, quoted globs
    expanded (sorted).

    Raises:
        UsageError: a glob that matches nothing; an unreadable ``--tasks-from`` file.
    """
    named = list(tasks)
    if tasks_from is not None:
        named += _listed(tasks_from)
    found: list[str] = []
    for name in named:
        if GLOB_CHARACTERS & set(name) and not _exists(name):
            matched = sorted(glob.glob(name))
            if not matched:
                raise UsageError(f"--task {name}: the pattern matches no file")
            found += matched
        else:
            found.append(name)
    return list(dict.fromkeys(found))


def _exists(path: str) -> bool:
    import os

    return os.path.exists(path)


def _listed(path: str) -> list[str]:
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--tasks-from {path}: {getattr(exc, 'strerror', None) or exc}") from None
    lines = (line.strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("#")]
