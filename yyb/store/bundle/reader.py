"""Reading the bytes of a bundle: its header, its objects, its trailer, in one pass.

The grammar is docs/format.md, "Bundles", enforced exactly: one spelling for every number,
ref lines sorted with each log head right after its ref, objects sorted by oid. A version 1
bundle frames each object (read here); a version 2 bundle carries a pack (``pack_form``).
Reading never trusts a declared size: a frame is inflated in bounded chunks, capped at its
declared length, and hashed against its name; bodies past ``SPILL`` bytes go to a temporary
file, so memory stays bounded.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from yyb.errors import CorruptBundle, CorruptObject, InvalidBundle, InvalidRefName
from yyb.store.bundle import pack_form
from yyb.store.bundle.entry import SPILL, Entry
from yyb.store.objects.format import MAX_HEADER, MAX_RECORD, is_oid, parse_header
from yyb.store.refs.names import check_ref_name

MAGIC = b"yyb-bundle "
# The version a writer writes unless told otherwise: 2, the pack form.
VERSION = 2
HASH_LINE = b"hash sha256\n"
# The capabilities of each version, all required: object data is zlib frames (1) or a pack
# (2), and every ref comes with its update chain.
CAPABILITIES = {1: ("zlib", "ref-logs"), 2: ("pack", "ref-logs")}
LOG_PREFIX = "logs/"
TRAILER = 32
CHUNK = 64 << 10
MAX_LINE = 4096
MAX_REFS = 100_000
# A number is ASCII decimal without sign or leading zeros, at most 21 digits: a stored length
# is a header of at most 28 bytes plus a body of at most 20 digits' worth of bytes.
NUMBER = rb"(0|[1-9][0-9]{0,20})"
_FRAME = re.compile(rb"([0-9a-f]{64}) " + NUMBER + rb" " + NUMBER)
_END = re.compile(rb"end " + NUMBER)
MAX_LENGTH = MAX_HEADER + 10**20


@dataclass
class Header:
    """What a bundle's text header says: its capabilities, refs and their log heads."""

    capabilities: tuple[str, ...]
    refs: dict[str, str]  # full ref name -> oid
    logs: dict[str, str] = field(default_factory=dict)  # full ref name -> log head oid
    version: int = VERSION


def render_header(header: Header) -> bytes:
    lines = [
        b"%s%d\n" % (MAGIC, header.version),
        HASH_LINE,
        ("capabilities " + " ".join(header.capabilities)).encode() + b"\n",
    ]
    for name in sorted(header.refs):
        lines.append(f"{header.refs[name]} {name}\n".encode())
        lines.append(f"{header.logs[name]} {LOG_PREFIX}{name}\n".encode())
    lines.append(b"\n")
    return b"".join(lines)


class Reader:
    """Reads one bundle front to back, hashing every byte for the trailer."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self.handle = open(path, "rb")
            self.size = os.fstat(self.handle.fileno()).st_size
        except OSError as exc:
            raise InvalidBundle(path, exc.strerror or str(exc)) from None
        self.digest = hashlib.sha256()
        self.offset = 0
        self.version = 0  # known once the header is read
        # the pack form's objects as they lie in the file once read: (raw oid, where the
        # stored bytes start, where they stop), in order; None for the frame form
        self.spans: list[tuple[bytes, int, int]] | None = None

    def close(self) -> None:
        self.handle.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def fail(self, reason: str, oid: str | None = None, code: str = "corrupt") -> CorruptBundle:
        return CorruptBundle(self.path, reason, oid, code)

    def _read(self, n: int, what: str, oid: str | None = None) -> bytes:
        data = self.handle.read(n)
        if len(data) < n:
            raise self.fail(
                f"truncated in {what} at byte {self.offset + len(data)}", oid, "truncated"
            )
        self.digest.update(data)
        self.offset += n
        return data

    def _line(self, what: str) -> bytes:
        data = self.handle.readline(MAX_LINE + 1)
        if not data.endswith(b"\n"):
            if len(data) > MAX_LINE:
                raise self.fail(f"{what} at byte {self.offset} is longer than {MAX_LINE} bytes")
            raise self.fail(
                f"truncated in {what} at byte {self.offset + len(data)}", None, "truncated"
            )
        self.digest.update(data)
        self.offset += len(data)
        return data[:-1]

    # --- the header -------------------------------------------------------------------------

    def header(self) -> Header:
        """Read and check the text header.

        Raises:
            InvalidBundle: not a bundle, an unknown version, hash or capability, a missing
            capability, a bad ref or log head line, or lines out of order.
        """
        first = self.handle.read(len(MAGIC) + 2)
        versions = {b"%s%d\n" % (MAGIC, v): v for v in CAPABILITIES}
        if first not in versions:
            if first.startswith(MAGIC):
                known = " and ".join(str(v) for v in CAPABILITIES)
                raise InvalidBundle(
                    self.path, f"an unknown bundle format version (this yyb reads {known})"
                )
            raise InvalidBundle(self.path, "it does not start with 'yyb-bundle <version>'")
        self.version = versions[first]
        self.digest.update(first)
        self.offset = len(first)
        if self._line("the hash line") + b"\n" != HASH_LINE:
            raise InvalidBundle(self.path, "unknown hash algorithm (only sha256 is known)")
        result = Header(self._capabilities(), {}, version=self.version)
        pending = None  # a ref whose log head line must come next
        while line := self._line("the ref list"):
            if len(result.refs) >= MAX_REFS and pending is None:
                raise InvalidBundle(self.path, f"more than {MAX_REFS} refs")
            is_log, name, oid = self._ref_line(line)
            if pending is not None:
                if not is_log or name != pending:
                    raise InvalidBundle(self.path, f"ref {pending} has no log head line after it")
                result.logs[name], pending = oid, None
                continue
            if is_log:
                raise InvalidBundle(self.path, f"the log head line of {name} is not after its ref")
            last = next(reversed(result.refs), None)
            if last is not None and name <= last:
                raise InvalidBundle(
                    self.path, f"ref {name} comes after {last} (each ref once, sorted by name)"
                )
            parts = name.split("/")
            for folder in ("/".join(parts[:i]) for i in range(2, len(parts))):
                if folder in result.refs:
                    raise InvalidBundle(self.path, f"ref {folder} cannot exist beside ref {name}")
            result.refs[name], pending = oid, name
        if pending is not None:
            raise InvalidBundle(self.path, f"ref {pending} has no log head line after it")
        return result

    def _capabilities(self) -> tuple[str, ...]:
        words = self._line("the capabilities line").decode("ascii", "replace").split(" ")
        if words[0] != "capabilities":
            raise InvalidBundle(self.path, "the third line is not 'capabilities ...'")
        words = words[1:]
        known = CAPABILITIES[self.version]
        for word in words:
            if word not in known:
                raise InvalidBundle(
                    self.path, f"unknown capability {word!r} in a version {self.version} bundle"
                )
            if words.count(word) > 1:
                raise InvalidBundle(self.path, f"the capability {word!r} is listed twice")
        for word in known:
            if word not in words:
                raise InvalidBundle(
                    self.path, f"the {word!r} capability is required (version {self.version})"
                )
        return tuple(words)

    def _ref_line(self, line: bytes) -> tuple[bool, str, str]:
        """(whether it is a log head line, the full ref name, the oid) of one header line."""
        text = line.decode("utf-8", "replace")
        oid, _, name = text.partition(" ")
        if not is_oid(oid):
            raise InvalidBundle(self.path, f"a ref line that does not start with an oid: {text!r}")
        is_log = name.startswith(LOG_PREFIX)
        if is_log:
            name = name[len(LOG_PREFIX) :]
        try:
            ok = name.startswith("refs/") and check_ref_name(name) == name
        except InvalidRefName as exc:
            raise InvalidBundle(self.path, f"bad ref name {name!r}: {exc.reason}") from None
        if not ok:
            raise InvalidBundle(self.path, f"bad ref name {name!r}: not a full name under refs/")
        return is_log, name, oid

    # --- the objects ------------------------------------------------------------------------

    def objects(self, private: bool = False) -> Iterator[Entry]:
        """Yield each object after proving its bytes hash to its name; check the trailer last.

        A spilled entry's temporary file is closed when the next entry is read. With
        ``private`` every entry's bytes are a copy of its own, hashed after copying (an import
        writes them); else an entry may only be read before the next one is.

        Raises:
            CorruptBundle: any framing, order, size, compression, hash, duplicate, count or
            trailer problem.
        """
        if self.version == 2:
            yield from pack_form.entries(self, private)
            return
        yield from self._frames()

    def _frames(self) -> Iterator[Entry]:
        count, last = 0, ""
        while True:
            line = self._line("an object frame")
            if line.startswith(b"end"):
                self._end(line, count)
                break
            oid, length, clen = self._frame(line)
            if oid == last:
                raise self.fail("the object appears twice", oid, "duplicate")
            if oid < last:
                raise self.fail(
                    f"out of order: it comes after {last} (sorted by oid)", oid, "order"
                )
            last, count = oid, count + 1
            entry = self._inflate(oid, length, clen)
            try:
                yield entry
            finally:
                if entry.spill is not None:
                    entry.spill.close()
        expected = self.digest.digest()
        trailer = self.handle.read(TRAILER)
        if len(trailer) < TRAILER:
            raise self.fail("truncated in the trailer", None, "truncated")
        if trailer != expected:
            raise self.fail(
                "the trailer is not the SHA-256 of the bytes before it", None, "trailer"
            )
        if self.handle.read(1):
            raise self.fail("bytes after the trailer", None, "trailing-bytes")

    def _end(self, line: bytes, count: int) -> None:
        match = _END.fullmatch(line)
        if match is None:
            raise self.fail(f"a malformed end line {line[:40]!r} (expected 'end <count>')")
        if int(match.group(1)) != count:
            raise self.fail(
                f"the end line counts {match.group(1).decode()} objects, {count} were read"
            )

    def _frame(self, line: bytes) -> tuple[str, int, int]:
        match = _FRAME.fullmatch(line)
        if match is None:
            raise self.fail(
                f"a malformed object frame at byte {self.offset - len(line) - 1} (expected "
                "'<oid> <length> <clen>', decimal numbers without sign or leading zeros)"
            )
        oid = match.group(1).decode("ascii")
        length, clen = int(match.group(2)), int(match.group(3))
        if length > MAX_LENGTH:
            raise self.fail(f"a declared length of {length} bytes", oid, "giant")
        if clen > self.size - self.offset:
            raise self.fail(
                f"declares {clen} compressed bytes, only {self.size - self.offset} remain",
                oid,
                "truncated",
            )
        return oid, length, clen

    def _inflate(self, oid: str, length: int, clen: int) -> Entry:
        inflater = zlib.decompressobj()
        digest = hashlib.sha256()
        parts: list[bytes] = []
        spill = tempfile.TemporaryFile() if length > SPILL else None
        prefix = b""
        produced = 0
        left = clen

        def take(out: bytes) -> None:
            nonlocal produced, prefix
            produced += len(out)
            if produced > length:
                raise self.fail(f"inflates past its declared {length} bytes", oid, "bomb")
            digest.update(out)
            if len(prefix) < MAX_HEADER:
                prefix += out[: MAX_HEADER - len(prefix)]
                _early_header(self, oid, prefix, length)
            if spill is not None:
                spill.write(out)
            else:
                parts.append(out)

        try:
            while left:
                chunk = self._read(min(CHUNK, left), "compressed data", oid)
                left -= len(chunk)
                if inflater.eof:
                    raise self.fail("bytes after the end of its zlib stream", oid, "framing")
                take(inflater.decompress(chunk, length - produced + 1))
                while inflater.unconsumed_tail:
                    take(inflater.decompress(inflater.unconsumed_tail, length - produced + 1))
                if inflater.unused_data:
                    raise self.fail("bytes after the end of its zlib stream", oid, "framing")
            if not inflater.eof:
                raise self.fail("its zlib stream is incomplete", oid, "truncated")
            if produced != length:
                raise self.fail(
                    f"inflates to {produced} bytes, not the declared {length}", oid, "size"
                )
            got = digest.hexdigest()
            if got != oid:
                raise self.fail(f"its bytes hash to {got}", oid, "hash-mismatch")
        except zlib.error as exc:
            if spill is not None:
                spill.close()
            raise self.fail(f"invalid zlib data ({exc})", oid, "zlib") from None
        except BaseException:
            if spill is not None:
                spill.close()
            raise
        kind, size, start = parse_header(prefix, oid)
        if spill is not None:
            spill.seek(0)
            return Entry(oid, kind, size, None, spill, start)
        return Entry(oid, kind, size, b"".join(parts), None, start)


def _early_header(reader: Reader, oid: str, prefix: bytes, length: int) -> None:
    """Once the object header is in, check it against the frame before inflating the rest."""
    if b"\x00" not in prefix:
        if len(prefix) >= MAX_HEADER or len(prefix) == length:
            raise reader.fail("a malformed object header", oid, "malformed")
        return
    try:
        kind, size, start = parse_header(prefix, oid)
    except CorruptObject as exc:
        raise reader.fail(exc.reason, oid, "malformed") from None
    if start + size != length:
        raise reader.fail(
            f"its header declares {size} body bytes, the frame {length - start}", oid, "size"
        )
    if kind == "record" and size > MAX_RECORD:
        raise reader.fail(f"a {size}-byte record exceeds the {MAX_RECORD}-byte limit", oid, "giant")
