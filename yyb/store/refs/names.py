"""What a ref may be called: ``refs/`` and components of ``[A-Za-z0-9._+=@-]``, never a lock's.

Apart from the ref store so that what only checks a name (the store's lock names, a bundle's
header, the viewer's links) does not import the update protocol.
"""

from __future__ import annotations

import functools
import re

from yyb.errors import InvalidRefName

LOCK_SUFFIX = ".lock"
MAX_REF_LENGTH = 1024
_COMPONENT = re.compile(r"[A-Za-z0-9_+=@-][A-Za-z0-9._+=@-]{0,254}")
_FULL_NAME = re.compile(r"refs(?:/[A-Za-z0-9_+=@-][A-Za-z0-9._+=@-]{0,254})+")


@functools.lru_cache(maxsize=65536)
def check_ref_name(name: str) -> str:
    """Return the full name (``refs/...``) of a valid ref name, or raise InvalidRefName.

    A name not starting with ``refs/`` is taken relative to ``refs/``. Each ``/``-separated
    component is 1-255 characters from ``A-Za-z0-9._+=@-``, does not start with ``.``, is not
    ``..`` and does not end in ``.lock``.
    """
    if (
        type(name) is str
        and _FULL_NAME.fullmatch(name)
        and len(name) <= MAX_REF_LENGTH
        and ".lock/" not in name + "/"
    ):
        return name  # the common case, decided by one regular expression
    return check_ref_name_carefully(name)


def check_ref_name_carefully(name: str) -> str:
    """check_ref_name one rule at a time, so that a refusal names the rule it broke."""
    if not isinstance(name, str) or not name:
        raise InvalidRefName(str(name), "empty")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        raise InvalidRefName(name, "control characters are not allowed")
    if name.startswith("/"):
        raise InvalidRefName(name, "absolute paths are not allowed")
    full = name if name.startswith("refs/") else f"refs/{name}"
    if len(full) > MAX_REF_LENGTH:
        raise InvalidRefName(name, f"longer than {MAX_REF_LENGTH} characters")
    parts = full.split("/")
    if len(parts) < 2:
        raise InvalidRefName(name, "a ref needs a name below refs/")
    for part in parts[1:]:
        if part in ("", ".", ".."):
            raise InvalidRefName(name, "empty, '.' or '..' components are not allowed")
        if part.endswith(LOCK_SUFFIX):
            raise InvalidRefName(name, "components may not end in .lock")
        if not _COMPONENT.fullmatch(part):
            raise InvalidRefName(
                name, "components use only A-Z a-z 0-9 . _ + = @ - and do not start with '.'"
            )
    return full
