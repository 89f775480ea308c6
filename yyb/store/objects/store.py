"""Where objects live: the behaviour every object store shares, and the memory twin for tests
(the disk store of loose objects is ``loose.DiskObjects``)."""

from __future__ import annotations

import _thread
import hashlib
import io
import os
from abc import ABC, abstractmethod

from yyb.errors import (
    AmbiguousOid,
    ChecksumMismatch,
    CorruptObject,
    InvalidRecord,
    ObjectMissing,
)
from yyb.store.objects import codec
from yyb.store.objects.format import (
    MAX_RECORD,
    OID_HEX,
    StoredObject,
    check_prefix,
    check_record,
    hash_object,
    header,
    loose_path,
    parse_header,
    split,
)

TYPE_CHECKING = False  # typing is not imported at run time (docs/performance.md)
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any, BinaryIO

# 64 KiB reads: small enough to come from the heap, large enough that the loop costs nothing.
CHUNK = 64 << 10
# Bodies past this size are streamed, never held whole in memory.
STREAM_THRESHOLD = 16 << 20


def record_body(value: dict, validate: bool = True) -> bytes:
    """Check a record value (schema_version, links, its schema) and return its canonical body.

    Raises:
        InvalidRecord: the value cannot be a record.
        SchemaViolation: its schema refuses it.
    """
    body = codec.encode(value)
    if len(body) > MAX_RECORD:
        raise InvalidRecord(
            "$",
            f"the record is {len(body)} bytes; records are at most "
            f"{MAX_RECORD} (keep large data in blobs)",
        )
    version = check_record(value)
    if validate:
        from yyb.store import schema  # jsonschema: only writers of records pay for it

        schema.validate(value, version)
    return body


MAP_THRESHOLD = 64 << 20
MAP_SLICE = 16 << 20


def _hash_mapped(stream: BinaryIO, size: int, digest) -> bool:
    """Hash a large regular file through mmap, one slice at a time; False if not possible.

    Each slice is mapped, hashed without a copy into Python, and unmapped, so memory stays
    bounded. On success the stream's position is left after the ``size`` bytes it hashed.
    """
    import mmap

    try:
        fd = stream.fileno()
        start = stream.tell()
        info = os.fstat(fd)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False
    if not os.path.stat.S_ISREG(info.st_mode) or info.st_size < start + size:
        return False
    position, end = start, start + size
    while position < end:
        base = position - position % mmap.ALLOCATIONGRANULARITY
        length = min(MAP_SLICE, end - base)
        try:
            with mmap.mmap(fd, length, offset=base, prot=mmap.PROT_READ) as mapped:
                with memoryview(mapped) as view:
                    digest.update(view[position - base : length])
        except (OSError, ValueError):
            return False if position == start else _fail_mid_map()
        position = base + length
    stream.seek(end)
    return True


def _fail_mid_map() -> bool:
    raise CorruptObject(None, "the input changed while it was being hashed")


def hash_stream(
    kind: str, stream: BinaryIO, size: int, sink: BinaryIO | None = None, with_header: bool = True
) -> str:
    """Hash ``size`` body bytes from ``stream``, copying them to ``sink`` if given.

    The sink receives the stored bytes (header and body), or the body alone when
    ``with_header`` is false.

    Raises:
        CorruptObject: the stream ended before ``size`` bytes.
    """
    head = header(kind, size)
    digest = hashlib.sha256(head)
    if sink is not None and with_header:
        sink.write(head)
    if sink is None and size >= MAP_THRESHOLD and _hash_mapped(stream, size, digest):
        return digest.hexdigest()
    buffer = bytearray(min(CHUNK, max(size, 1)))
    view = memoryview(buffer)
    left = size
    while left:
        n = stream.readinto(view[: min(len(buffer), left)])
        if not n:
            raise CorruptObject(None, f"input ended {left} bytes before its declared size")
        digest.update(view[:n])
        if sink is not None:
            sink.write(view[:n])
        left -= n
    return digest.hexdigest()


def spool(stream: BinaryIO, folder: str | None = None) -> tuple[BinaryIO, int]:
    """Make a stream of unknown length measurable: return (seekable stream at 0, size).

    Small inputs stay in memory; past STREAM_THRESHOLD they spill to an unnamed temp file in
    ``folder``, so memory stays bounded whatever the input.
    """
    import io
    import tempfile

    head = stream.read(STREAM_THRESHOLD + 1)
    if len(head) <= STREAM_THRESHOLD:
        return io.BytesIO(head), len(head)
    spill = tempfile.TemporaryFile(dir=folder)
    spill.write(head)
    while chunk := stream.read(CHUNK):
        spill.write(chunk)
    size = spill.tell()
    spill.seek(0)
    return spill, size


def small_and_well_formed(data: bytes, oid: str, limit: int) -> bytes | None:
    """``data`` when it is at most ``limit`` bytes and splits into a header and a body."""
    if len(data) > limit:
        return None
    try:
        kind, size, start = parse_header(data, oid)
    except CorruptObject:
        return None
    return data if len(data) - start == size else None


class _Memoized:
    """``ObjectStore.memoized``'s context (contextlib is not imported by plumbing)."""

    def __init__(self, objects: ObjectStore, memo: tuple) -> None:
        self.objects, self.memo, self.outer = objects, memo, None

    def __enter__(self) -> None:
        self.outer, self.objects._memo = self.objects._memo, self.memo
        if self.outer is None:
            self.objects._passing(True)

    def __exit__(self, *exc: object) -> None:
        self.objects._memo = self.outer
        if self.outer is None:
            self.objects._passing(False)


class ObjectStore(ABC):
    """Common behaviour of every object store; subclasses provide the raw byte primitives."""

    # --- primitives -----------------------------------------------------------------------

    @abstractmethod
    def _read(self, oid: str) -> bytes | None: ...

    @abstractmethod
    def _write(self, oid: str, data: bytes) -> None: ...

    @abstractmethod
    def contains(self, oid: str) -> bool: ...

    def read_small(self, oid: str, limit: int = 1 << 20) -> bytes | None:
        """Whole stored bytes when small and well-formed; b"" when absent; None otherwise."""
        data = self._read(oid)
        return b"" if data is None else small_and_well_formed(data, oid, limit)

    def held_of(self, oids: Iterable[str]) -> set[str]:
        """Those of ``oids`` the store holds (``contains`` of each, in one pass)."""
        return {oid for oid in oids if self.contains(oid)}

    @abstractmethod
    def iter_oids(self) -> Iterator[str]: ...

    @abstractmethod
    def with_prefix(self, prefix: str) -> list[str]:
        """Every oid held that starts with ``prefix`` (checked hex), in no order."""

    # --- writing ---------------------------------------------------------------------------

    def put(self, kind: str, body: bytes) -> str:
        """Store a body of ``kind`` (records must already be canonical); return its oid."""
        oid = hash_object(kind, body)
        if not self.contains(oid):
            self._write(oid, header(kind, len(body)) + body)
        return oid

    def put_record(self, value: dict) -> str:
        """Validate and store a record value; return its oid."""
        return self.put("record", record_body(value))

    def put_many(self, items: list[tuple[str, bytes]]) -> list[str]:
        """Store many (kind, body) pairs; return their oids in order.

        Each object is as durable as with ``put``; a store may write them concurrently.
        """
        return [self.put(kind, body) for kind, body in items]

    def put_blob_file(self, stream: BinaryIO, size: int, replace: bool = False) -> str:
        """Store ``size`` bytes read from ``stream`` as a blob; return its oid. ``replace``:
        write its loose copy even if it exists (as ``replace`` does)."""
        body = stream.read(size)
        if replace:
            self.replace(hash_object("blob", body), header("blob", size) + body)
        return self.put("blob", body)

    def replace(self, oid: str, data: bytes) -> None:
        """Write ``data``, the stored bytes of ``oid``, as its loose copy in place of whatever
        stands there (a copy that does not verify), atomically: a reader sees the old file or
        the new one, never a mix.

        Raises:
            ChecksumMismatch: ``data`` does not hash to ``oid``. StoreIOError.
        """
        got = hashlib.sha256(data).hexdigest()
        if got != oid:
            raise ChecksumMismatch(oid, got)
        self._write(oid, data)

    # --- reading ---------------------------------------------------------------------------

    def read_raw(self, oid: str) -> bytes:
        """The stored bytes of ``oid``, unverified."""
        data = self._read(oid)
        if data is None:
            raise ObjectMissing(oid)
        return data

    # --- copies ----------------------------------------------------------------------------
    #
    # A store may hold an object more than once (loose and packed, or in two packs, while gc
    # or repack runs, or a loose file written over a packed object). Readers take the copy
    # that comes first and, when it does not verify, every other copy in turn: they return a
    # copy that hashes to its oid or fail, never bytes that do not (docs/format.md, "Copies").

    def copies(self, oid: str) -> list[str]:
        """Where ``oid`` has a copy, each a path relative to the store (a loose file, or a
        pack that holds it), in the order a reader tries them after its first read failed."""
        return [loose_path(oid)] if self.contains(oid) else []

    def open_copy(self, oid: str, where: str) -> tuple[str, int, BinaryIO]:
        """Open the copy of ``oid`` at ``where`` (one of ``copies``) as ``open_body`` opens
        an object: (kind, size, stream at the body), unverified.

        Raises:
            ObjectMissing: the copy is gone. CorruptObject: its header or length is wrong.
        """
        return ObjectStore.open_body(self, oid)

    def good_copy(self, oid: str, first: CorruptObject) -> bytes:
        """The stored bytes of a copy of ``oid`` that hashes to it, for a reader whose copy
        did not; raise ``first`` (what that reader found) when no copy does."""
        for where in self.copies(oid):
            try:
                kind, size, stream = self.open_copy(oid, where)
                with stream:
                    body = stream.read(size)
            except (CorruptObject, ObjectMissing):
                continue
            if len(body) == size and hash_object(kind, body) == oid:
                return header(kind, size) + body
        raise first

    def _proved(self, oid: str, data: bytes) -> StoredObject:
        """The object of stored bytes ``data``, checked (``get``); another copy of it when
        these do not verify."""
        try:
            obj = StoredObject(oid, *split(data, oid))
            obj.check_hash()
        except CorruptObject as exc:
            obj = StoredObject(oid, *split(self.good_copy(oid, exc), oid))
        if obj.kind == "record":
            obj.value()
        return obj

    def get(self, oid: str) -> StoredObject:
        """Read ``oid`` and prove its bytes hash to it (records: and decode canonically).

        Raises:
            ObjectMissing, CorruptObject (ChecksumMismatch, NonCanonical).
        """
        try:
            data = self.read_raw(oid)
        except CorruptObject as exc:  # the first copy cannot even be read
            data = self.good_copy(oid, exc)
        return self._proved(oid, data)

    def blob_bodies(
        self, oids: list[bytes | None], helper: bool = False
    ) -> list[memoryview | None]:
        """For a batch reader that only passes bodies on (``cat-object --batch``): the body of
        each ``oids[i]`` (64 lowercase hex digits; None is skipped) that is a blob this store
        can prove cheaply (its bytes hash to its oid), else None: the caller reads that one
        with ``get``, which names what is missing or wrong. A body may be a view into a mapped
        pack, valid while the store is open. ``helper``: a pack read in bulk may fork a
        process that proves a share of the list beside this one (``pack_hashing``; only for a
        caller with no threads, as a fork needs)."""
        return self.finish_blob_bodies(self.begin_blob_bodies(oids, helper))

    def begin_blob_bodies(self, oids: list[bytes | None], helper: bool = False) -> Any:
        """``blob_bodies`` in two halves, so that a reader can begin the next list before it
        writes out this one's bodies (a helper then proves meanwhile). Finish every list
        begun, in the order begun. Here: nothing is proved cheaply, every name left to
        ``get``."""
        return len(oids)

    def finish_blob_bodies(self, begun: Any) -> list[memoryview | None]:
        """The bodies of a list begun by ``begin_blob_bodies`` (as ``blob_bodies``)."""
        return [None] * begun

    def stop_helpers(self) -> None:
        """Stop and reap the helper processes bulk reads forked (a reader done with its
        batch); later bulk reads prove everything in this process. Here: there are none."""
        return None

    def get_small(self, oid: str, limit: int = 1 << 20) -> StoredObject | None:
        """``get`` for an object whose stored bytes are at most ``limit``, in one read; None
        when it is larger (or needs the careful reading ``open_body`` does, which then names
        what is wrong), so a caller holds at most ``limit`` bytes.

        Raises:
            ObjectMissing, CorruptObject (ChecksumMismatch, NonCanonical).
        """
        data = self.read_small(oid, limit)
        if data is None:
            return None
        if not data:
            raise ObjectMissing(oid)
        return self._proved(oid, data)

    def get_record(self, oid: str) -> dict:
        """Read and decode a record; a blob under ``oid`` is CorruptObject for this caller."""
        obj = self.get(oid)
        if obj.kind != "record":
            raise CorruptObject(oid, f"expected a record, found a {obj.kind}")
        return obj.value()

    # While ``memoized``: the schemas whose records are remembered, and oid -> value.
    _memo: tuple[frozenset[str], dict[str, dict]] | None = None

    def memoized(self, schemas: Iterable[str]) -> _Memoized:
        """A context within which ``read_record`` of a record of one of ``schemas`` answers
        from memory the second time, for a pass that only reads and reads some records
        twice. An object never changes, so nothing goes stale; the values are shared, so the
        pass must not change them."""
        return _Memoized(self, (frozenset(schemas), {}))

    def _passing(self, begins: bool) -> None:  # noqa: B027 - a hook; most stores hold nothing
        """A reading pass (``memoized``, outermost) begins or ends: a store may hold what
        every read would otherwise open again."""

    def read_record(self, oid: str) -> dict:
        """A record's value, its bytes proved by their hash but their encoding not proved
        canonical: for readers of many records that need only the values, beside a check
        that proves the form (``fsck``, the chain checks of one plan). Costs about half a
        get_record.

        Raises:
            ObjectMissing, CorruptObject (ChecksumMismatch, or not a decodable record).
        """
        memo = self._memo
        if memo is None:
            return self._read_record(oid)
        schemas, values = memo
        value = values.get(oid)
        if value is None:
            value = self._read_record(oid)
            if value.get("schema_version") in schemas:
                values[oid] = value
        return value

    def _read_record(self, oid: str) -> dict:
        try:
            data = self.read_raw(oid)
            kind, body = split(data, oid)
            # The stored bytes are the header and the body the oid was computed over: one
            # hash of them proves both, without putting the header together again.
            if hashlib.sha256(data).hexdigest() != oid:
                StoredObject(oid, kind, body).check_hash()  # raises what it always raised
        except CorruptObject as exc:
            kind, body = split(self.good_copy(oid, exc), oid)
        if kind != "record":
            raise CorruptObject(oid, f"expected a record, found a {kind}")
        return codec.decode_value(body, oid)

    def open_body(self, oid: str) -> tuple[str, int, BinaryIO]:
        """Open ``oid`` for streaming: (kind, size, stream positioned at the body). Unverified."""
        import io

        data = self.read_raw(oid)
        kind, size, start = parse_header(data, oid)
        split(data, oid)  # the same length checks the disk store makes
        stream = io.BytesIO(data)
        stream.seek(start)
        return kind, size, stream

    def resolve(self, name: str) -> str:
        """Expand a full or abbreviated (4+ hex digits) oid to the one object it names.

        A full oid is returned as it is, present or not.

        Raises:
            InvalidOid, ObjectMissing, AmbiguousOid.
        """
        check_prefix(name)
        if len(name) == OID_HEX:
            return name
        found = sorted(self.with_prefix(name))
        if not found:
            raise ObjectMissing(name)
        if len(found) > 1:
            raise AmbiguousOid(name, found)
        return found[0]


class MemoryObjects(ObjectStore):
    """The memory twin: same behaviour, no disk. Tests may poke ``raw`` to simulate damage."""

    def __init__(self) -> None:
        self.raw: dict[str, bytes] = {}
        self._lock = _thread.allocate_lock()  # threading.Lock, without importing threading

    def _read(self, oid: str) -> bytes | None:
        return self.raw.get(oid)

    def _write(self, oid: str, data: bytes) -> None:
        with self._lock:
            self.raw.setdefault(oid, data)

    def replace(self, oid: str, data: bytes) -> None:
        super().replace(oid, data)  # checked, then written over whatever was there
        with self._lock:
            self.raw[oid] = data

    def contains(self, oid: str) -> bool:
        return oid in self.raw

    def iter_oids(self) -> Iterator[str]:
        return iter(sorted(self.raw))

    def with_prefix(self, prefix: str) -> list[str]:
        return [oid for oid in self.raw if oid.startswith(prefix)]
