"""What a check finds: (level, code, subject, detail).

``error`` findings make ``yyb doctor`` exit 1; ``info`` findings (dangling objects, temp files
of interrupted writes, a lock younger than the grace period) are reported but do not fail the
check. The codes are listed in docs/cli.md.
"""

from __future__ import annotations

from collections import namedtuple


# A named tuple rather than a dataclass: doctor's start-up does not import dataclasses (and
# its inspect), about a tenth of `doctor` at 10,000 objects (docs/performance.md).
class Finding(namedtuple("Finding", "level code subject detail")):
    """One problem (``error``) or notice (``info``) about one subject of the store:
    ``level`` ("error" or "info"), ``code``, ``subject`` (an oid, a ref name or a path
    relative to the store) and ``detail``."""

    __slots__ = ()

    def line(self) -> str:
        """The finding as ``yyb doctor`` prints it: ``<level> <code> <subject>: <detail>``."""
        return f"{self.level} {self.code} {self.subject}: {self.detail}"

    def as_dict(self) -> dict:
        """The finding as a map of its four fields, its JSON form."""
        return {
            "level": self.level,
            "code": self.code,
            "subject": self.subject,
            "detail": self.detail,
        }


def error(code: str, subject: str, detail: str) -> Finding:
    """A finding that fails the check."""
    return Finding("error", code, subject, detail)


def info(code: str, subject: str, detail: str) -> Finding:
    """A finding reported that does not fail the check."""
    return Finding("info", code, subject, detail)
