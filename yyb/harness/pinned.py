"""Pinned executables: a file run only as the bytes its SHA-256 names.

The bytes are read once, hashed, and written to a private copy that is what runs, so a file
replaced between the check and the start is never what runs.
"""

from __future__ import annotations

import hashlib
import os


def pinned_bytes(path: str, expected: str) -> tuple[bytes | None, str | None]:
    """(the bytes at ``path``, None) when they hash to ``expected``; else (None, why not)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return None, f"{path} is missing or unreadable ({exc.strerror})"
    got = hashlib.sha256(data).hexdigest()
    if got != expected:
        return None, f"{path} does not match its bound sha256 (found {got})"
    return data, None


def verified_copy(path: str, expected: str, dest: str) -> str | None:
    """Copy ``path`` to ``dest`` if its bytes hash to ``expected``; else say why not."""
    data, problem = pinned_bytes(path, expected)
    if problem is not None:
        return problem
    with open(dest, "wb") as handle:
        handle.write(data)
    os.chmod(dest, 0o755)
    return None
