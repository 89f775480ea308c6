"""Bundles: refs, their update chains and every object they reach, in one self-checking file.

The format is specified in docs/format.md ("Bundles"). Reading never trusts a declared size:
each object is inflated in bounded chunks, capped at its declared length, and hashed against
its name; bodies past ``SPILL`` bytes go to a temporary file, so memory stays bounded.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from yyb.errors import (
    CorruptBundle,
    CorruptObject,
    InvalidBundle,
    InvalidRefName,
    NotFastForward,
    ObjectMissing,
    UsageError,
)
from yyb.store import file
from yyb.store.fsck import _check_body, inspect
from yyb.store.objects import MAX_HEADER, MAX_RECORD, is_oid, parse_header
from yyb.store.refs import REF_UPDATE, check_ref_name
from yyb.store.repo import Store

MAGIC = b"yyb-bundle 1\n"
HASH_LINE = b"hash sha256\n"
CAPABILITIES = ("zlib", "ref-logs")
LOG_PREFIX = "logs/"
TRAILER = 32
CHUNK = 64 << 10
# Objects up to this size are inflated in memory; larger ones spill to a temporary file.
SPILL = 16 << 20
MAX_LINE = 4096
MAX_REFS = 100_000
# A stored length has at most 20 digits (the object header's own limit) plus its header.
MAX_DIGITS = 20


@dataclass
class Header:
    """What a bundle's text header says: its capabilities, refs and their log heads."""

    capabilities: tuple[str, ...]
    refs: dict[str, str]  # full ref name -> oid
    logs: dict[str, str] = field(default_factory=dict)  # full ref name -> log head oid


@dataclass
class Entry:
    """One object read from a bundle, already proved to hash to ``oid``."""

    oid: str
    kind: str
    size: int
    data: bytes | None  # the stored bytes, when small
    spill: BinaryIO | None = None  # else the stored bytes in a temporary file, at offset 0
    start: int = 0  # where the body begins

    def body(self) -> bytes:
        if self.data is not None:
            return self.data[self.start :]
        self.spill.seek(self.start)
        return self.spill.read(self.size)


@dataclass
class Summary:
    """What a verified bundle holds."""

    header: Header
    objects: int
    # ref -> the update records of its chain in the bundle (newest first)
    chains: dict[str, list[str]]


# --- writing --------------------------------------------------------------------------------


def ref_tips(store: Store, names: list[str]) -> Header:
    """The refs to bundle: each name's full ref, its value and its log head.

    Raises:
        InvalidRefName, RefNotFound: a name that is no ref with a value.
    """
    from yyb.errors import RefNotFound

    refs, logs = {}, {}
    for name in names:
        full = check_ref_name(name)
        value = store.refs.read(full)
        if value is None:
            raise RefNotFound(full)
        refs[full] = value
        head = store.refs.log_head(full)
        if head is not None:
            logs[full] = head
    return Header(CAPABILITIES, refs, logs)


def _reachable(store: Store, header: Header) -> list[str]:
    """Every oid reachable from the refs and log heads, each checked as fsck checks it."""
    seen: set[str] = set()
    stack = sorted(set(header.refs.values()) | set(header.logs.values()))
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        found = inspect(store, oid)
        for finding in found.findings:
            if finding.code == "missing":
                raise ObjectMissing(oid)
            raise CorruptObject(oid, finding.detail, finding.code)
        stack.extend(t for t in found.links if t not in seen)
    return sorted(seen)


class _HashingWriter:
    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.digest = hashlib.sha256()

    def write(self, data: bytes) -> None:
        self.digest.update(data)
        self.handle.write(data)


def create(store: Store, path: str, header: Header) -> int:
    """Write a bundle of ``header``'s refs to ``path`` (which must not exist).

    Returns the number of objects written. A failure leaves no file at ``path``.

    Raises:
        UsageError: ``path`` exists. ObjectMissing, CorruptObject: the store cannot supply
        an intact object. StoreIOError: the file system refused.
    """
    if os.path.lexists(path):
        raise UsageError(f"refusing to overwrite {path}")
    oids = _reachable(store, header)
    folder = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=file.TEMP_PREFIX)
        with os.fdopen(fd, "wb") as handle:
            out = _HashingWriter(handle)
            out.write(render_header(header))
            for oid in oids:
                _write_object(store, out, oid)
            out.write(b"end %d\n" % len(oids))
            handle.write(out.digest.digest())
            handle.flush()
            os.fchmod(handle.fileno(), 0o644)
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)  # never replaces an existing file, unlike rename
        except FileExistsError:
            raise UsageError(f"refusing to overwrite {path}") from None
        file.fsync_dir(folder)
    except OSError as exc:
        raise file.io_error(path, exc) from exc
    finally:
        file.discard(tmp)
    return len(oids)


def render_header(header: Header) -> bytes:
    lines = [MAGIC, HASH_LINE, ("capabilities " + " ".join(header.capabilities)).encode() + b"\n"]
    for name in sorted(header.refs):
        lines.append(f"{header.refs[name]} {name}\n".encode())
        if name in header.logs:
            lines.append(f"{header.logs[name]} {LOG_PREFIX}{name}\n".encode())
    lines.append(b"\n")
    return b"".join(lines)


def _write_object(store: Store, out: _HashingWriter, oid: str) -> None:
    kind, size, stream = store.objects.open_body(oid)
    with stream:
        head = b"%s %d\x00" % (kind.encode(), size)
        length = len(head) + size
        squeeze = zlib.compressobj(6)
        digest = hashlib.sha256(head)
        if size <= SPILL:
            body = stream.read(size)
            digest.update(body)
            packed = squeeze.compress(head) + squeeze.compress(body) + squeeze.flush()
            _check_read(oid, digest, len(body), size)
            out.write(b"%s %d %d\n" % (oid.encode(), length, len(packed)))
            out.write(packed)
            return
        with tempfile.TemporaryFile() as spill:
            spill.write(squeeze.compress(head))
            read = 0
            while chunk := stream.read(min(CHUNK, size - read)):
                read += len(chunk)
                digest.update(chunk)
                spill.write(squeeze.compress(chunk))
            spill.write(squeeze.flush())
            _check_read(oid, digest, read, size)
            out.write(b"%s %d %d\n" % (oid.encode(), length, spill.tell()))
            spill.seek(0)
            while chunk := spill.read(CHUNK):
                out.write(chunk)


def _check_read(oid: str, digest, got: int, size: int) -> None:
    """The object changed or was damaged between the reachability walk and now."""
    if got != size or digest.hexdigest() != oid:
        raise CorruptObject(oid, "changed while it was being bundled")


# --- reading --------------------------------------------------------------------------------


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

    def header(self) -> Header:
        """Read and check the text header.

        Raises:
            InvalidBundle: not a bundle, an unknown version, hash or capability, a bad ref line.
        """
        first = self.handle.read(len(MAGIC))
        if first != MAGIC:
            if first.startswith(b"yyb-bundle "):
                raise InvalidBundle(self.path, "an unknown bundle format version")
            raise InvalidBundle(self.path, "it does not start with 'yyb-bundle 1'")
        self.digest.update(first)
        self.offset = len(first)
        if self._line("the hash line") + b"\n" != HASH_LINE:
            raise InvalidBundle(self.path, "unknown hash algorithm (only sha256 is known)")
        caps = self._line("the capabilities line").decode("ascii", "replace").split(" ")
        if caps[0] != "capabilities":
            raise InvalidBundle(self.path, "the third line is not 'capabilities ...'")
        unknown = [c for c in caps[1:] if c not in CAPABILITIES]
        if unknown:
            raise InvalidBundle(self.path, f"unknown capability {unknown[0]!r}")
        if "zlib" not in caps[1:]:
            raise InvalidBundle(self.path, "the 'zlib' capability is required")
        result = Header(tuple(caps[1:]), {})
        while line := self._line("the ref list"):
            if len(result.refs) + len(result.logs) >= 2 * MAX_REFS:
                raise InvalidBundle(self.path, f"more than {MAX_REFS} refs")
            self._ref_line(line, result)
        for name in result.logs:
            if name not in result.refs:
                raise InvalidBundle(self.path, f"a log head for {name}, which is not a bundled ref")
        if "ref-logs" in result.capabilities and set(result.logs) != set(result.refs):
            missing = sorted(set(result.refs) - set(result.logs))[0]
            raise InvalidBundle(self.path, f"ref {missing} has no log head line")
        names = sorted(result.refs)
        for a, b in zip(names, names[1:], strict=False):
            if b.startswith(a + "/"):
                raise InvalidBundle(self.path, f"ref {a} cannot exist beside ref {b}")
        return result

    def _ref_line(self, line: bytes, result: Header) -> None:
        text = line.decode("utf-8", "replace")
        oid, _, name = text.partition(" ")
        if not is_oid(oid):
            raise InvalidBundle(self.path, f"a ref line that does not start with an oid: {text!r}")
        target = result.refs
        if name.startswith(LOG_PREFIX):
            if "ref-logs" not in result.capabilities:
                raise InvalidBundle(self.path, "a log head line without the ref-logs capability")
            name, target = name[len(LOG_PREFIX) :], result.logs
        try:
            ok = name.startswith("refs/") and check_ref_name(name) == name
        except InvalidRefName as exc:
            raise InvalidBundle(self.path, f"bad ref name {name!r}: {exc.reason}") from None
        if not ok:
            raise InvalidBundle(self.path, f"bad ref name {name!r}: not a full name under refs/")
        if name in target:
            raise InvalidBundle(self.path, f"ref {name} is listed twice")
        target[name] = oid

    def objects(self) -> Iterator[Entry]:
        """Yield each object after proving its bytes hash to its name; check the trailer last.

        A spilled entry's temporary file is closed when the next entry is read.

        Raises:
            CorruptBundle: any framing, size, compression, hash, duplicate or trailer problem.
        """
        seen: set[str] = set()
        while True:
            line = self._line("an object frame")
            if line.startswith(b"end "):
                count = line[4:]
                if not count.isdigit() or int(count) != len(seen):
                    raise self.fail(f"the end line counts {count!r} objects, {len(seen)} were read")
                break
            oid, length, clen = self._frame(line)
            if oid in seen:
                raise self.fail("the object appears twice", oid, "duplicate")
            seen.add(oid)
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

    def _frame(self, line: bytes) -> tuple[str, int, int]:
        parts = line.split(b" ")
        ok = (
            len(parts) == 3
            and is_oid(parts[0].decode("ascii", "replace"))
            and all(p.isdigit() and len(p) <= MAX_DIGITS + 1 for p in parts[1:])
        )
        if not ok:
            raise self.fail(f"a malformed object frame at byte {self.offset - len(line) - 1}")
        oid = parts[0].decode("ascii")
        length, clen = int(parts[1]), int(parts[2])
        if length > MAX_HEADER + 10**MAX_DIGITS:
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
        except zlib.error as exc:
            if spill is not None:
                spill.close()
            raise self.fail(f"invalid zlib data ({exc})", oid, "zlib") from None
        except BaseException:
            if spill is not None:
                spill.close()
            raise
        if produced != length:
            if spill is not None:
                spill.close()
            raise self.fail(f"inflates to {produced} bytes, not the declared {length}", oid, "size")
        got = digest.hexdigest()
        if got != oid:
            if spill is not None:
                spill.close()
            raise self.fail(f"its bytes hash to {got}", oid, "hash-mismatch")
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


def read_header(path: str) -> Header:
    """The header of the bundle at ``path`` (nothing else is checked)."""
    with Reader(path) as reader:
        return reader.header()


def verify(path: str) -> Summary:
    """Check a bundle on its own: trailer, every object, every record, every link, each chain.

    Raises:
        InvalidBundle (exit 2), CorruptBundle (exit 1): the first problem found.
    """
    present: set[str] = set()
    links: dict[str, tuple[str, ...]] = {}
    updates: dict[str, dict] = {}
    with Reader(path) as reader:
        header = reader.header()
        for entry in reader.objects():
            present.add(entry.oid)
            if entry.kind != "record":
                continue
            found = _check_body(entry.oid, "record", entry.body(), entry.oid)
            for finding in found.findings:
                raise reader.fail(f"{finding.code}: {finding.detail}", entry.oid, finding.code)
            if found.links:
                links[entry.oid] = found.links
            value = found.value
            if value.get("schema_version") == REF_UPDATE:
                updates[entry.oid] = {
                    "ref": value.get("ref"),
                    "old": value.get("old"),
                    "new": value.get("new"),
                    "previous": value.get("links", {}).get("previous"),
                }
    _check_links(path, header, present, links)
    chains = {name: _check_chain(path, name, header, updates) for name in header.logs}
    return Summary(header, len(present), chains)


def _check_links(path: str, header: Header, present: set[str], links: dict) -> None:
    """Everything the refs and log heads reach is in the bundle."""
    roots = sorted(set(header.refs.values()) | set(header.logs.values()))
    seen: set[str] = set()
    stack = [(oid, None) for oid in roots]
    while stack:
        oid, parent = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        if oid not in present:
            if parent is None:
                raise CorruptBundle(
                    path, "a ref names it but it is not in the bundle", oid, "missing"
                )
            raise CorruptBundle(path, f"linked by {parent} but not in the bundle", oid, "missing")
        stack.extend((t, oid) for t in links.get(oid, ()) if t not in seen)


def _check_chain(path: str, name: str, header: Header, updates: dict) -> list[str]:
    """The bundled update chain of ``name``: newest first, consistent, ending at its value."""
    chain: list[str] = []
    oid, expected = header.logs[name], header.refs[name]
    while oid is not None:
        record = updates.get(oid)
        if record is None or record["ref"] != name:
            raise CorruptBundle(path, f"not an update of {name}, yet in its chain", oid, "chain")
        if record["new"] != expected:
            raise CorruptBundle(
                path, f"sets {name} to {record['new']}, the chain expects {expected}", oid, "chain"
            )
        if oid in chain:
            raise CorruptBundle(path, f"the chain of {name} loops", oid, "chain")
        chain.append(oid)
        expected = record["old"]
        oid = record["previous"]
    if expected is not None:
        raise CorruptBundle(
            path, f"the oldest update of {name} does not start from nothing", chain[-1], "chain"
        )
    return chain


# --- importing ------------------------------------------------------------------------------


@dataclass
class Move:
    """What an import does to one ref: ``how`` is adopt, update or none."""

    ref: str
    old: str | None
    new: str
    how: str
    old_head: str | None = None


def plan_moves(store: Store, summary: Summary, force: bool) -> list[Move]:
    """Decide every ref move before anything is written.

    A ref is adopted with its bundled chain when it is new or the bundled chain contains the
    store's log head (a fast-forward); it is left alone when it already holds the value;
    anything else is refused unless ``force``, which appends an ordinary update instead.

    Raises:
        NotFastForward: a ref whose move is not a fast-forward, without ``force``.
    """
    moves = []
    for name, new in sorted(summary.header.refs.items()):
        current = store.refs.read(name)
        head = store.refs.log_head(name)
        chain = summary.chains.get(name)
        bundled_head = summary.header.logs.get(name)
        if current == new and head == bundled_head:
            how = "none"
        elif chain is not None and (head in chain or (head is None and current is None)):
            how = "adopt"
        elif current == new:
            how = "none"  # the same value reached by another history: nothing to move
        elif current is None or force:
            how = "update"
        else:
            raise NotFastForward(name, current, new)
        moves.append(Move(name, current, new, how, head))
    return moves


def unbundle(store: Store, path: str, force: bool = False) -> list[Move]:
    """Import a bundle: verify all of it, decide every ref move, write objects, move refs.

    Nothing is written unless the whole bundle verifies and every ref move is allowed.

    Raises:
        InvalidBundle, CorruptBundle, NotFastForward, RefMismatch, StoreIOError.
    """
    summary = verify(path)
    moves = plan_moves(store, summary, force)
    batch: list[tuple[str, bytes]] = []
    with Reader(path) as reader:
        if reader.header() != summary.header:
            raise reader.fail("the file changed while it was being imported")
        for entry in reader.objects():
            if store.objects.contains(entry.oid):
                continue
            if entry.spill is not None and entry.kind == "blob":
                entry.spill.seek(entry.start)
                got = store.objects.put_blob_file(entry.spill, entry.size)
                if got != entry.oid:
                    raise reader.fail("the file changed while it was being imported", entry.oid)
                continue
            batch.append((entry.kind, entry.body()))
            if len(batch) >= 256:
                store.objects.put_many(batch)
                batch = []
        # The trailer has now been checked again: only then do the last objects land.
        store.objects.put_many(batch)
    for move in moves:
        if move.how == "adopt":
            store.refs.adopt(move.ref, summary.header.logs[move.ref], move.old, move.old_head)
        elif move.how == "update":
            store.refs.update(move.ref, move.new, old=move.old, reason=f"unbundle {path}")
    return moves


def transfer(source: Store, target: Store, names: list[str], force: bool = False) -> list[Move]:
    """Copy refs and what they reach from ``source`` to ``target`` through a bundle file."""
    header = ref_tips(source, names)
    folder = os.path.join(target.path, "tmp") if target.path else None
    with tempfile.TemporaryDirectory(dir=folder, prefix=file.TEMP_PREFIX) as scratch:
        path = os.path.join(scratch, "transfer.bundle")
        create(source, path, header)
        return unbundle(target, path, force)
