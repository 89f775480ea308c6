"""How an error reaches the user: ``yyb: error:`` lines on stderr, one exit code."""

from __future__ import annotations

import sys

from yyb.errors import InvalidArgument, NotFastForward, StoreNotFound, YybError
from yyb.store.location import ENV_STORE

# A library parameter -> the option that gives it, where the option is not named after it.
OPTIONS = {
    "output_path": "--output",
    "held": "--checkpoint",
    "selected": "--steps",
    "config_path": "--config",
}


def fail(message: str, code: int) -> int:
    """Print ``message`` as ``yyb: error:`` lines on stderr; return ``code``."""
    for line in message.splitlines() or [""]:
        sys.stderr.write(f"yyb: error: {line}\n")
    sys.stderr.flush()
    return code


def worded(exc: YybError) -> str:
    """``exc`` in the command line's words: a refused argument named by its option."""
    if isinstance(exc, InvalidArgument):
        option = OPTIONS.get(exc.argument, "--" + exc.argument.replace("_", "-"))
        return f"{option}: {exc.reason}"
    if isinstance(exc, StoreNotFound) and not exc.named:
        return f"{exc.message}; name one with --store DIR or {ENV_STORE}"
    if isinstance(exc, NotFastForward):  # every command that imports refs takes --force
        return f"{exc.message}; --force moves it anyway"
    if getattr(exc, "missing", False):  # no grant at all (yyb.plans.grant.GrantError)
        return f"{exc.message}; grant it with 'yyb authorize --plan PLAN --expires +24h'"
    return exc.message
