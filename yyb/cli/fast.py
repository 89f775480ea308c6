"""The plumbing's common command lines, run without click.

Shell pipelines call ``cat-object`` and ``hash-object`` thousands of times, and importing click
and the command group costs more than the work. ``run`` recognises only the plain spellings of
those commands (the global ``--store``/``--config``, the documented flags each given as its own
word, operands that do not start with ``-``) and runs them through the same code as the click
commands (``yyb.cli.objects``); for anything else, help and mistakes included, it returns None
and click parses the line, so errors read the same either way.
"""

from __future__ import annotations

import os

from yyb.cli.failure import fail, worded
from yyb.cli.locate import OPTION_ENV
from yyb.cli.objects import CAT_MODES
from yyb.errors import YybError

GLOBAL_OPTIONS = {"--store": "store_path", "--config": "config_path"}
CAT_FLAGS = dict(
    zip(
        ["-t", "-s", "-e", "-p", "--json", "--raw", "--batch", "--batch-check"],
        CAT_MODES,
        strict=True,
    )
)


def run(args: list[str]) -> int | None:
    """Run ``args`` when it is a command line this path knows; its exit code, else None."""
    parsed = _global(args)
    if parsed is None:
        return None
    options, command, rest = parsed
    call = {"cat-object": _cat_object, "hash-object": _hash_object, "doctor": _doctor}.get(command)
    if call is None:
        return None
    try:
        return call(options, rest)
    except YybError as exc:
        return fail(worded(exc), exc.exit_code)
    except KeyboardInterrupt:
        return fail("interrupted", 130)


def _global(args: list[str]) -> tuple[dict, str, list[str]] | None:
    options: dict = {}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        name, equals, value = args[i].partition("=")
        if name not in GLOBAL_OPTIONS:
            return None
        if not equals:
            if i + 1 == len(args):
                return None
            value = args[i + 1]
            i += 1
        if not value or value.startswith("-"):
            return None
        options[GLOBAL_OPTIONS[name]] = value
        i += 1
    if i == len(args):
        return None
    for key, env in OPTION_ENV.items():
        if key not in options:
            options[key] = os.environ.get(env) or None
    return options, args[i], args[i + 1 :]


def _cat_object(options: dict, rest: list[str]) -> int | None:
    modes, buffer, names = set(), False, []
    for word in rest:
        if word in CAT_FLAGS:
            modes.add(CAT_FLAGS[word])
        elif word == "--buffer":
            buffer = True
        elif word.startswith("-") or names:
            return None
        else:
            names.append(word)
    if len(modes) != 1:
        return None
    (mode,) = modes
    if (mode in ("batch", "batch-check")) == bool(names):
        return None
    from yyb.cli import locate, objects

    return objects.cat_object(locate.open_store(options), mode, names[0] if names else None, buffer)


def _hash_object(options: dict, rest: list[str]) -> int | None:
    write = from_stdin = stdin_paths = nul = False
    kind, files = "blob", []
    words = iter(rest)
    for word in words:
        if word == "-w":
            write = True
        elif word == "--stdin":
            from_stdin = True
        elif word == "--stdin-paths":
            stdin_paths = True
        elif word == "-z":
            nul = True
        elif word == "-t":
            kind = next(words, None)
            if kind not in ("blob", "record"):
                return None
        elif word.startswith("-") or os.path.isdir(word):
            return None  # click says what is wrong with it
        else:
            files.append(word)
    if (from_stdin and stdin_paths) or (stdin_paths and files):
        return None
    if not (from_stdin or stdin_paths or files):
        return None
    from yyb.cli import locate, objects

    return objects.hash_objects(
        lambda: locate.open_store(options), write, kind, from_stdin, stdin_paths, nul, files
    )


def _doctor(options: dict, rest: list[str]) -> int | None:
    """``doctor`` of the whole store, with or without ``--json`` (anything else: click)."""
    if rest not in ([], ["--json"]):
        return None
    from yyb.cli import locate
    from yyb.cli.findings import store_doctor

    return store_doctor(locate.open_store(options), rest == ["--json"])
