"""What ``hash-object`` and ``cat-object`` do, without click: the click commands in
``yyb.cli.plumbing`` and the fast path in ``yyb.cli.fast`` both parse their flags into these
calls, so a command line means the same whichever path runs it."""

from __future__ import annotations

import os
import sys

from yyb.cli.failure import fail
from yyb.errors import CorruptObject, NotFound, UsageError, YybError
from yyb.store import heap
from yyb.store.objects import codec
from yyb.store.objects.format import HEX, OID_HEX
from yyb.store.objects.format import hash_object as oid_of
from yyb.store.objects.store import STREAM_THRESHOLD, hash_stream, record_body, spool

TYPE_CHECKING = False  # typing is not imported at run time (docs/performance.md)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import BinaryIO, Literal

    HashKind = Literal["blob", "record"]
    CatMode = Literal["type", "size", "exists", "pretty", "json", "raw", "batch", "batch-check"]
CAT_MODES: tuple[CatMode, ...] = (
    "type",
    "size",
    "exists",
    "pretty",
    "json",
    "raw",
    "batch",
    "batch-check",
)


# --- hash-object ----------------------------------------------------------------------------


def hash_objects(
    open_store: Callable,
    write: bool,
    kind: HashKind,
    from_stdin: bool,
    stdin_paths: bool,
    nul: bool,
    files: list[str],
) -> int:
    """Print the oid of each input, one per line (flags already checked for consistency)."""
    store = open_store() if write else None
    out = sys.stdout
    if from_stdin:
        out.write(_hash_one(sys.stdin.buffer, None, kind, store, "<stdin>") + "\n")
    if stdin_paths:
        data = sys.stdin.buffer.read()
        names = data.split(b"\0" if nul else b"\n")
        if names and names[-1] == b"":
            names.pop()
        files = [os.fsdecode(n) for n in names]
    for path in files:
        handle, size = _open_input(path)
        with handle:
            out.write(_hash_one(handle, size, kind, store, path) + "\n")
        out.flush()
    return 0


def _hash_one(stream: BinaryIO, size: int | None, kind: HashKind, store, label: str) -> str:
    if kind == "record":
        data = stream.read()
        try:
            body = record_body(codec.from_json(data))
        except YybError as exc:
            raise UsageError(f"{label}: {exc.message}") from None
        return store.objects.put("record", body) if store else oid_of("record", body)
    if size is None:
        stream, size = spool(stream, os.path.join(store.path, "tmp") if store else None)
    if store:
        return store.objects.put_blob_file(stream, size)
    return hash_stream("blob", stream, size)


def _open_input(path: str) -> tuple[BinaryIO, int]:
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    info = os.fstat(handle.fileno())
    if not os.path.stat.S_ISREG(info.st_mode):
        handle.close()
        raise UsageError(f"cannot read {path}: not a regular file")
    return handle, info.st_size


# --- cat-object -----------------------------------------------------------------------------


def cat_object(store, mode: CatMode, name: str | None, buffer: bool = False) -> int:
    """Show one object (``name``) in ``mode``, or answer the names on stdin (batch modes)."""
    if mode in ("batch", "batch-check"):
        return _batch(store, mode == "batch", not buffer)
    if mode == "exists":
        try:
            store.objects.get(store.rev_parse(name))
        except NotFound:
            return 1
        except CorruptObject as exc:
            return fail(exc.message, 1)
        return 0
    oid = store.rev_parse(name)
    kind, size, stream = store.objects.open_body(oid)
    with stream:
        if mode in ("type", "size"):
            sys.stdout.write(f"{kind if mode == 'type' else size}\n")
            return 0
        if size > STREAM_THRESHOLD and mode in ("raw", "pretty") and kind == "blob":
            return _stream_verified(oid, kind, size, stream)
    obj = store.objects.get(oid)
    if mode == "json":
        if obj.kind != "record":
            raise UsageError(f"{oid} is a blob; --json shows records (use -p or --raw)")
        import json

        sys.stdout.write(
            json.dumps(codec.to_json(obj.value()), ensure_ascii=False, separators=(",", ":")) + "\n"
        )
        return 0
    sys.stdout.flush()
    sys.stdout.buffer.write(obj.body if mode == "raw" else _pretty(obj.kind, obj.body, oid))
    return 0


def _pretty(kind: str, body: bytes, oid: str) -> bytes:
    if kind == "blob":
        return body
    import json

    value = codec.decode(body, oid)
    return (json.dumps(codec.to_json(value), indent=2, ensure_ascii=False) + "\n").encode()


def _stream_verified(oid: str, kind: str, size: int, stream: BinaryIO) -> int:
    """Copy a large body to stdout, then fail (exit 1) if it did not hash to ``oid``."""
    got = hash_stream(kind, stream, size, sys.stdout.buffer, with_header=False)
    sys.stdout.buffer.flush()
    if got != oid:
        raise CorruptObject(
            oid, f"bytes hash to {got} (output above is not trustworthy)", "hash-mismatch"
        )
    return 0


_HEX = HEX.encode()
GATHER = 1024  # pieces a writev takes at most (Linux's IOV_MAX)
READ_SIZE = 64 << 10
# Bytes of a batch input line before its LF (a CR included): past any name (a ref name is at
# most 1024 characters), and few enough that a line without an end costs no memory.
MAX_LINE = 4096
HALF_LINE = MAX_LINE // 2


def _batch(store, with_body: bool, flush: bool) -> int:
    """Answer each name on stdin. Unless ``--buffer``, the answers are flushed whenever
    every name read so far has been answered and more input must be waited for: a program
    that writes one name and waits gets its answer, a pipe full of names is answered in large
    writes. While names are waiting to be read, the next chunk is begun before this one's
    answers are written (``begin_blob_bodies``), so a helper proving objects works meanwhile."""
    out = sys.stdout.buffer
    names = Names(sys.stdin.buffer)
    waiting = _waiting(sys.stdin.buffer)
    from yyb.store.objects import pack_hashing as prover  # the batch modes' alone

    helper = prover.wanted()
    try:
        with heap.gc_paused():  # a chunk makes thousands of short-lived objects and no cycle
            status = _answer_all(store, iter(names), waiting, helper, out, with_body, flush)
    finally:
        store.objects.stop_helpers()  # reaped here, so the helpers' time counts as this one's
    if names.too_long:
        out.flush()
        raise UsageError(
            f"{names.too_long} input line{'s' if names.too_long > 1 else ''} longer than "
            f"{MAX_LINE} bytes, answered too-long"
        )
    return status


def _answer_all(store, chunks, waiting, helper, out, with_body, flush) -> int:
    status = 0
    held = None  # a chunk begun and not yet answered: (its names, what begin returned)
    ended = False
    while held is not None or not ended:
        begun = None
        if not ended and (held is None or waiting()):
            lines = next(chunks, None)
            if lines is None:
                ended = True
            else:
                begun = (lines, store.objects.begin_blob_bodies(_fulls(lines), helper))
        if held is not None:
            lines, ticket = held
            if not _answer_chunk(
                store, lines, store.objects.finish_blob_bodies(ticket), out, with_body
            ):
                status = 1
            if flush:
                out.flush()
        held = begun
    return status


class TooLong(bytes):
    """The first MAX_LINE bytes of a batch input line that was longer (the rest was read and
    dropped): it names nothing, and is answered ``too-long``."""


class Names:
    """The names on a batch's stdin, a list for what each read gives (a name cut at the end
    of a read goes with the next). Linear in the input, holding at most one read and
    MAX_LINE + 1 bytes of a line cut across reads; ``too_long`` counts the lines longer."""

    def __init__(self, stdin: BinaryIO) -> None:
        self._stdin = stdin
        self.too_long = 0

    def __iter__(self) -> Iterator[list[bytes]]:
        take = getattr(self._stdin, "read1", self._stdin.read)  # waits only when nothing is
        cut: list[bytes] = []  # the kept start of a line cut at the end of a read
        length = 0  # that line's length so far
        while chunk := take(READ_SIZE):
            end = chunk.find(b"\n")
            if end < 0:
                if length <= MAX_LINE:
                    cut.append(chunk[: MAX_LINE + 1 - length])
                length += len(chunk)
                continue
            first = length + end  # the length of the line the chunk's first newline ends
            data = b"".join([*cut, chunk]) if cut else chunk
            lines = data.split(b"\n")
            rest = lines.pop()
            start, stop = len(data) - len(chunk) + end, len(data) - len(rest)
            if first > MAX_LINE or b"\r" in data or not _short(data, start, stop):
                lengths = [first, *map(len, lines[1:])]
                lines = list(map(self._line, lines, lengths))
            yield lines
            cut, length = [rest[: MAX_LINE + 1]], len(rest)
        if length:  # the input's last line, with no newline after it
            yield [self._line(b"".join(cut), length)]

    def _line(self, data: bytes, length: int) -> bytes:
        """The name of a line of ``length`` bytes that begins with ``data``."""
        if length > MAX_LINE:
            self.too_long += 1
            return TooLong(data[:MAX_LINE])
        return data.rstrip(b"\r")


def _short(data: bytes, start: int, stop: int) -> bool:
    """True when no line of ``data`` between the newline at ``start`` and ``stop`` is longer
    than MAX_LINE, by one search a block of HALF_LINE bytes (two newlines more than two blocks
    apart would have a whole block between them); False: there may be one. A few searches
    where ``max(map(len, lines))`` would take one step a line."""
    find = data.find
    return all(find(b"\n", at, at + HALF_LINE) >= 0 for at in range(start, stop, HALF_LINE))


def _waiting(stdin: BinaryIO) -> Callable[[], bool]:
    """A check that a read of ``stdin`` would not wait (input there, or its end)."""
    import select

    try:
        fd = stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return lambda: True  # in memory: a read never waits
    poll = select.poll()
    poll.register(fd, select.POLLIN)
    return lambda: bool(poll.poll(0))


def _fulls(lines: list[bytes]) -> list[bytes | None]:
    """Each line that is a full oid, else None; all at once when every line is one."""
    if not b"".join(lines).translate(None, _HEX) and set(map(len, lines)) <= {OID_HEX}:
        return lines
    return [line if len(line) == OID_HEX and not line.strip(_HEX) else None for line in lines]


def _answer_chunk(store, lines: list[bytes], bodies: list, out: BinaryIO, with_body: bool) -> bool:
    """Write the answers for one chunk; False when an object was corrupt."""
    if None not in bodies:
        _write_parts(out, _blobs(lines, bodies, with_body))
        return True
    good = True
    for line, body in zip(lines, bodies, strict=True):
        if body is not None:
            out.write(b"".join(_blobs([line], [body], with_body)))
        elif not _answer(store, line, out, with_body):
            good = False
    return good


def _blobs(names: list[bytes], bodies: list, with_body: bool) -> list:
    """The answers for blobs found by ``blob_bodies``, as pieces of output in order."""
    heads = map(b"%s blob %d\n".__mod__, zip(names, map(len, bodies), strict=True))
    if not with_body:
        return [b"".join(heads)]
    parts = [b"\n"] * (3 * len(names))
    parts[0::3] = heads
    parts[1::3] = bodies
    return parts


def _write_parts(out: BinaryIO, parts: list) -> None:
    """Write ``parts`` in order: gathered by ``writev`` straight from where they lie (the
    bodies are views into a mapped pack) when ``out`` is a file descriptor's, else joined."""
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        out.write(b"".join(parts))
        return
    out.flush()
    for start in range(0, len(parts), GATHER):
        group = parts[start : start + GATHER]
        left = sum(map(len, group))
        while left:
            written = os.writev(fd, group)
            left -= written
            while left and written >= len(group[0]):  # cut short: drop what went out
                written -= len(group.pop(0))
            if left:
                group[0] = memoryview(group[0])[written:]


def _answer(store, line: bytes, out: BinaryIO, with_body: bool) -> bool:
    """Answer one name the general way; False when its object is corrupt. A name that is not
    found is echoed as UTF-8, undecodable bytes replaced."""
    too_long = type(line) is TooLong
    name = line.decode("utf-8", "replace")
    line = name.encode()
    if too_long:
        out.write(line + b" too-long\n")
        return True
    try:
        oid = store.rev_parse(name)
        obj = store.objects.get(oid)
    except NotFound:
        out.write(line + b" missing\n")
    except CorruptObject:
        out.write(line + b" corrupt\n")
        return False
    except UsageError as exc:
        word = b"ambiguous" if getattr(exc, "candidates", None) else b"missing"
        out.write(line + b" " + word + b"\n")
    else:
        out.write(b"%s %s %d\n" % (oid.encode(), obj.kind.encode(), len(obj.body)))
        if with_body:
            out.write(obj.body)
            out.write(b"\n")
    return True
