"""One object as a bundle's reader yields it, and what the pack form reads it through: shared
by reader.py and pack_form.py, so that neither imports the other back."""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol

from yyb.errors import CorruptBundle

# Objects up to this size are inflated in memory; larger ones spill to a temporary file.
SPILL = 16 << 20


class Source(Protocol):
    """The bundle being read, as the pack form reads it (``reader.Reader``)."""

    size: int  # of the file
    offset: int  # where its objects begin
    handle: BinaryIO
    digest: Any  # a hashlib.sha256() of every byte read so far
    spans: list[tuple[bytes, int, int]] | None  # filled with each object's place as it is read

    def fail(self, reason: str, oid: str | None = None, code: str = "corrupt") -> CorruptBundle:
        """The error for a bundle that is not what it must be."""
        ...


@dataclass
class Entry:
    """One object read from a bundle, already proved to hash to ``oid``."""

    oid: str
    kind: str
    size: int
    # the stored bytes, when small (or, for a pack read in place, the file's mapping)
    data: bytes | mmap.mmap | None
    spill: BinaryIO | None = None  # else the stored bytes in a temporary file, at offset 0
    start: int = 0  # where the body begins in ``data`` (or in ``spill``)

    def stored(self) -> bytes | None:
        """The stored bytes (header and body) when they are in memory, else None."""
        if self.data is None or isinstance(self.data, mmap.mmap):
            return None
        return self.data

    def body(self) -> bytes:
        """The body (the stored bytes after the header), read into memory."""
        if self.data is not None:
            return self.data[self.start : self.start + self.size]
        self.spill.seek(self.start)
        return self.spill.read(self.size)
