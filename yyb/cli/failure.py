"""How an error reaches the user: ``yyb: error:`` lines on stderr, one exit code."""

from __future__ import annotations

import sys


def fail(message: str, code: int) -> int:
    """Print ``message`` as ``yyb: error:`` lines on stderr; return ``code``."""
    for line in message.splitlines() or [""]:
        sys.stderr.write(f"yyb: error: {line}\n")
    sys.stderr.flush()
    return code
