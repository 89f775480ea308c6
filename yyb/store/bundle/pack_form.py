"""The pack form of a bundle's objects (bundle version 2): written and read with one hash each.

After the text header a version 2 bundle holds a pack without its trailer (docs/format.md,
"Packs"): the pack head, then every object's stored bytes, uncompressed, in ascending oid
order. Its trailer is the SHA-256 of the header, the pack head and each object's raw oid, not
of every byte: each object's bytes are hashed once to compute its oid, and the oid binds
them, so verifying a bundle of large objects costs one SHA-256 pass over the file instead of
two (or three, with a pack trailer), and a bundle of small objects one Python step per object.
The oids are computed, never declared: no index can disagree with the bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO

from yyb.errors import CorruptObject
from yyb.store.bundle.entry import SPILL, Entry, Source
from yyb.store.objects.format import MAX_HEADER, MAX_RECORD, header, header_re, parse_header
from yyb.store.objects.pack import HASH, HEAD, PACK_MAGIC
from yyb.store.objects.pack import VERSION as PACK_VERSION

if TYPE_CHECKING:
    from yyb.store.repo import Store

# format.parse_header's grammar, matched in the mapping without a copy or a call (1.5 µs an
# object, a sixth of verifying 100,000 small ones).
HEADER = header_re()
# The shortest stored object, "blob 0\0": a pack head cannot count more objects than fit.
MIN_STORED = len(header("blob", 0))
COPY = 1 << 20


def write(store: Store, handle: BinaryIO, head: bytes, oids: list[str]) -> None:
    """Write the objects and the trailer of a version 2 bundle after its text header ``head``.

    Raises:
        CorruptObject: an object's bytes no longer hash to its oid (changed while bundled).
    """
    trailer = hashlib.sha256(head)
    handle.write(head)
    pack_head = HEAD.pack(PACK_MAGIC, PACK_VERSION, len(oids))
    trailer.update(pack_head)
    handle.write(pack_head)
    read_small = store.objects.read_small
    for oid in oids:
        small = read_small(oid)
        if small:  # the common case, in one read: a small object, well-formed
            raw = hashlib.sha256(small).digest()
            if raw.hex() != oid:
                raise CorruptObject(oid, "changed while it was being bundled")
            handle.write(small)
            trailer.update(raw)
            continue
        kind, size, stream = store.objects.open_body(oid)
        with stream:
            stored_head = header(kind, size)
            digest = hashlib.sha256(stored_head)
            handle.write(stored_head)
            left = size
            while left and (chunk := stream.read(min(COPY, left))):
                left -= len(chunk)
                digest.update(chunk)
                handle.write(chunk)
        raw = digest.digest()
        if left or raw.hex() != oid:
            raise CorruptObject(oid, "changed while it was being bundled")
        trailer.update(raw)
    handle.write(trailer.digest())


def entries(reader: Source, private: bool) -> Iterator[Entry]:
    """Yield each object of a version 2 bundle after its header, proved to hash to its oid;
    check that the objects fill the pack exactly and the trailer last.

    With ``private`` each entry holds its own copy of the stored bytes, hashed after copying
    (what an import writes is exactly what was hashed, whatever happens to the file); else its
    ``data`` is the file's read-only mapping, valid until the next entry.

    Raises:
        CorruptBundle: any problem with the pack head, an object, the order or the trailer.
    """
    size, start = reader.size, reader.offset
    if size - start < HEAD.size + HASH:
        raise reader.fail("truncated in the pack head", None, "truncated")
    try:
        mapped = mmap.mmap(reader.handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise reader.fail(f"cannot be mapped ({exc})") from None
    try:
        if len(mapped) != size:
            raise reader.fail("the file changed while it was being read")
        with memoryview(mapped) as view:
            yield from _objects(reader, mapped, view, start, private)
    finally:
        mapped.close()


def _objects(
    reader: Source, mapped: mmap.mmap, view: memoryview, start: int, private: bool
) -> Iterator[Entry]:
    magic, version, count = HEAD.unpack_from(mapped, start)
    if magic != PACK_MAGIC:
        raise reader.fail(f"no pack after the header at byte {start} (expected 'YYBPACK\\0')")
    if version != PACK_VERSION:
        raise reader.fail(f"its pack has version {version}, not {PACK_VERSION}")
    end = reader.size - HASH
    room = (end - start - HEAD.size) // MIN_STORED
    if count > room:
        raise reader.fail(
            f"its pack head counts {count} objects, the file has room for at most {room}",
            None,
            "count",
        )
    reader.digest.update(view[start : start + HEAD.size])
    spans = _spans(reader, mapped, start + HEAD.size, end, count)
    oids: list[bytes] = []
    reader.spans = placed = []
    previous = b""
    position = start + HEAD.size
    with contextlib.ExitStack() as stack:
        hashed = _copied(view, spans, stack) if private else _in_place(view, spans, stack)
        for (position, kind, length, body), raw, data, spill in hashed:
            oid = raw.hex()
            if raw <= previous:
                if raw == previous:
                    raise reader.fail("the object appears twice", oid, "duplicate")
                raise reader.fail(
                    f"out of order: it comes after {previous.hex()} (sorted by oid)", oid, "order"
                )
            previous = raw
            oids.append(raw)
            placed.append((raw, position, body + length))
            if data is None and spill is None:
                yield Entry(oid, kind, length, mapped, None, body)
            else:
                yield Entry(oid, kind, length, data, spill, body - position)
            position = body + length
    reader.digest.update(b"".join(oids))
    expected = reader.digest.digest()
    if position != end:
        if mapped[position : position + HASH] == expected:
            raise reader.fail(f"{end - position} bytes after the trailer", None, "trailing-bytes")
        raise reader.fail(
            f"{end - position} bytes lie between its last object (the pack head counts "
            f"{count}) and the trailer",
            None,
            "count",
        )
    if expected != mapped[end:]:
        raise reader.fail(
            "the trailer is not the SHA-256 of the header, the pack head and the oids",
            None,
            "trailer",
        )


Span = tuple[int, str, int, int]  # (where the object starts, kind, body length, body start)
Hashed = tuple[Span, bytes, "bytes | None", "BinaryIO | None"]  # its oid raw, copy, spill


def _spans(reader: Source, mapped: mmap.mmap, position: int, end: int, count: int):
    """Each object's span, read from its header alone (nothing hashed yet)."""
    for _ in range(count):
        kind, length, body = _stored_header(reader, mapped, position, end)
        yield position, kind, length, body
        position = body + length


# Objects at least this large are hashed on other threads (hashlib releases the GIL), at most
# AHEAD of them at a time: with 2 CPUs, 200 objects of 1 MiB verify in about half the time.
PARALLEL = 256 << 10
AHEAD = 8


def _in_place(view: memoryview, spans: Iterator[Span], stack) -> Iterator[Hashed]:
    """Hash each object where it lies in the mapping, large ones on other threads."""
    sha256 = hashlib.sha256
    pending: deque = deque()
    pool = None
    for span in spans:
        position, _, length, body = span
        if body + length - position < PARALLEL:
            if not pending:
                yield span, sha256(view[position : body + length]).digest(), None, None
                continue
            pending.append((span, None))
        else:
            if pool is None:
                from concurrent.futures import ThreadPoolExecutor  # only large objects pay

                pool = stack.enter_context(ThreadPoolExecutor(max_workers=_workers()))
            pending.append((span, pool.submit(_digest, view[position : body + length])))
        while pending and (pending[0][1] is None or len(pending) > AHEAD):
            yield _done(view, *pending.popleft())
    while pending:
        yield _done(view, *pending.popleft())


def _done(view: memoryview, span: Span, future) -> Hashed:
    position, _, length, body = span
    if future is None:
        return span, hashlib.sha256(view[position : body + length]).digest(), None, None
    return span, future.result(), None, None


def _digest(data: memoryview) -> bytes:
    return hashlib.sha256(data).digest()


def _workers() -> int:
    return max(1, min(4, len(os.sched_getaffinity(0))))


def _copied(view: memoryview, spans: Iterator[Span], stack) -> Iterator[Hashed]:
    """Copy each object out of the mapping (a large one to a temporary file) and hash the
    copy: what is written later is exactly what was hashed."""
    for span in spans:
        position, _, length, body = span
        stop = body + length
        if stop - position <= SPILL:
            data = bytes(view[position:stop])
            yield span, hashlib.sha256(data).digest(), data, None
            continue
        spill, raw = _spill(view, position, stop)
        try:
            yield span, raw, None, spill
        finally:
            spill.close()


def _stored_header(
    reader: Source, mapped: mmap.mmap, position: int, end: int
) -> tuple[str, int, int]:
    """(kind, body length, where the body starts) of the object at ``position``."""
    match = HEADER.match(mapped, position, min(position + MAX_HEADER, end))
    if match is None:  # format.parse_header says what is wrong
        try:
            parse_header(mapped[position : min(position + MAX_HEADER, end)])
        except CorruptObject as exc:
            reason, code = exc.reason, exc.code
        else:
            reason, code = "a header this reader does not read", "malformed"
        raise reader.fail(f"the object at byte {position}: {reason}", None, code)
    kind, length, body = match.group(1).decode(), int(match.group(2)), match.end()
    if length > end - body:
        raise reader.fail(
            f"the object at byte {position} declares {length} body bytes, only {end - body} "
            "remain before the trailer",
            None,
            "truncated",
        )
    if kind == "record" and length > MAX_RECORD:
        raise reader.fail(
            f"the object at byte {position}: a {length}-byte record exceeds the "
            f"{MAX_RECORD}-byte limit",
            None,
            "giant",
        )
    return kind, length, body


def _spill(view: memoryview, position: int, stop: int) -> tuple[BinaryIO, bytes]:
    """Copy a large object to a temporary file, hashing the copy as it is written."""
    import tempfile

    spill = tempfile.TemporaryFile()
    digest = hashlib.sha256()
    try:
        for at in range(position, stop, COPY):
            chunk = bytes(view[at : min(at + COPY, stop)])
            digest.update(chunk)
            spill.write(chunk)
        spill.seek(0)
    except BaseException:
        spill.close()
        raise
    return spill, digest.digest()
