"""The transparency log: every ref update of a store, in order, as leaves of a Merkle tree.

Each ref update appends one leaf, ``<update oid> <ref name>`` (ASCII, the update being the
``yyb_ref_update.v1`` record the update wrote), in the same step that makes the update
durable: ``RefStore.update`` holds the log's lock while it writes its record, appends the leaf
(fsynced) and points the ref's log head at the record. Leaves hash as RFC 6962 says
(``merkle.py``), so a checkpoint (size, root) commits to the whole history, and inclusion and
consistency proofs show that an update is in it and that a later log extends an earlier one.

On disk, in ``<store>/transparency/``:

- ``leaves``: one line per leaf, ``<64 hex> <ref name>\\n``, append-only: the log itself.
- ``origin``: the log's name, ``yyb/<32 hex>``, made with the first leaf.
- ``level-00``, ``level-01``, ...: the 32-byte hashes of every complete subtree of 2^k leaves,
  in order; derived from ``leaves`` (and rebuilt from it when short), so proofs read
  O(log² n) hashes instead of rehashing the tree.
- ``state``: ``<leaf count> <byte size of leaves>``, so that a new holder of the lock need not
  count the lines of ``leaves``; a ``state`` that does not match is recounted.
- ``lock``: held with ``flock`` by whoever reads or appends (released by the kernel when a
  process dies).

A crash can leave a torn last line (dropped: its update never reached its log head, since the
head is written after the append returns) or the last leaf's update short of its log head
(the writer died between the two): the next holder of the lock completes that head
(``RefStore`` does), which leaves the update as if the writer had died one step later, and
the next update of that ref records it as ``discarded``.
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator

from yyb.errors import CorruptRef
from yyb.store import file
from yyb.store.log import merkle

FOLDER = "transparency"
HASH = merkle.HASH_SIZE


def leaf_line(oid: str, ref: str) -> bytes:
    return f"{oid} {ref}\n".encode("ascii")


def leaf_hash(oid: str, ref: str) -> bytes:
    """The RFC 6962 hash of the leaf of one update: its line without the newline."""
    return merkle.leaf_hash(f"{oid} {ref}".encode("ascii"))


def parse_line(line: bytes) -> tuple[str, str]:
    oid, _, ref = line.decode("ascii").partition(" ")
    return oid, ref


class View(ABC):
    """The log while its lock is held: read it, prove things about it, append to it."""

    @abstractmethod
    def size(self) -> int: ...

    @abstractmethod
    def origin(self) -> str: ...

    @abstractmethod
    def node(self, level: int, index: int) -> bytes:
        """The hash of complete subtree ``index`` of 2^``level`` leaves."""
        ...

    @abstractmethod
    def entries(self, start: int = 0) -> Iterator[tuple[str, str]]:
        """(update oid, ref name) of each leaf from ``start``, in order."""
        ...

    @abstractmethod
    def level(self, level: int) -> bytes:
        """Every stored hash of one level, concatenated (for audits)."""
        ...

    @abstractmethod
    def append(self, entries: list[tuple[str, str]]) -> None: ...

    @abstractmethod
    def last(self) -> tuple[str, str] | None: ...

    def stored_level(self, level: int) -> bytes:
        """The hashes of one level as the log holds them (an audit compares them with
        ``level``, computed); the same as ``level`` where nothing is stored apart."""
        return self.level(level)

    def under(self, folders: Iterable[str]) -> Iterator[tuple[str, str]]:
        """(update oid, ref name) of each leaf, in order, whose ref is one of ``folders`` or
        lies below one of them."""
        tops = tuple(folders)
        below = tuple(f"{top}/" for top in tops)
        for oid, ref in self.entries():
            if ref in tops or ref.startswith(below):
                yield oid, ref

    # --- shared -------------------------------------------------------------------------

    def nodes(self, lo: int, hi: int) -> bytes:
        """MTH of leaves [lo, hi) (an aligned range, as merkle's proofs ask)."""
        n = hi - lo
        if n & (n - 1) == 0 and lo % n == 0:
            return self.node(n.bit_length() - 1, lo // n)
        k = merkle.split(n)
        return merkle.node_hash(self.nodes(lo, lo + k), self.nodes(lo + k, hi))

    def root(self, size: int | None = None) -> bytes:
        size = self.size() if size is None else size
        self._within(size)
        return merkle.root(self.nodes, size)

    def inclusion(self, index: int, size: int | None = None) -> list[bytes]:
        size = self.size() if size is None else size
        self._within(size)
        return merkle.inclusion_proof(self.nodes, index, size)

    def consistency(self, first: int, second: int | None = None) -> list[bytes]:
        second = self.size() if second is None else second
        self._within(second)
        return merkle.consistency_proof(self.nodes, first, second)

    def index_of(self, oid: str, ref: str) -> int | None:
        """The first leaf recording update ``oid`` of ``ref``, or None: its leaf hash looked
        up among the leaf hashes (``level(0)``), never a scan of the lines."""
        wanted, hashes = leaf_hash(oid, ref), self.level(0)
        at = hashes.find(wanted)
        while at >= 0 and at % HASH:
            at = hashes.find(wanted, at + 1)
        return None if at < 0 else at // HASH

    def _within(self, size: int) -> None:
        if not 0 <= size <= self.size():
            raise merkle.ProofError(f"the log has {self.size()} leaves, not {size}")


class TransparencyLog(ABC):
    """Opens ``View``s of one store's log (``locked``)."""

    @abstractmethod
    def locked(self) -> contextlib.AbstractContextManager[View]:
        """The log under its lock, for as long as the context lasts."""

    def reading(self) -> contextlib.AbstractContextManager[View]:
        """The log as it stands, for checks: nothing is created, repaired or appended."""
        return self.locked()


# --- in memory ----------------------------------------------------------------------------


class MemoryLog(TransparencyLog, View):
    def __init__(self, origin: str | None = None) -> None:
        self._lines: list[tuple[str, str]] = []
        self._levels: list[list[bytes]] = [[]]
        self._origin = origin or f"yyb/{os.urandom(16).hex()}"
        self._mutex = threading.RLock()

    @contextlib.contextmanager
    def locked(self) -> Iterator[View]:
        with self._mutex:
            yield self

    def size(self) -> int:
        return len(self._lines)

    def origin(self) -> str:
        return self._origin

    def node(self, level: int, index: int) -> bytes:
        return self._levels[level][index]

    def entries(self, start: int = 0) -> Iterator[tuple[str, str]]:
        yield from self._lines[start:]

    def last(self) -> tuple[str, str] | None:
        return self._lines[-1] if self._lines else None

    def level(self, level: int) -> bytes:
        return b"".join(self._levels[level]) if level < len(self._levels) else b""

    def append(self, entries: list[tuple[str, str]]) -> None:
        for oid, ref in entries:
            self._lines.append((oid, ref))
            _grow(self._levels, leaf_hash(oid, ref))


def levels_of(entries: Iterable[tuple[str, str]]) -> list[list[bytes]]:
    """Every complete subtree hash of the leaves ``entries``, level by level (an audit's
    reference, computed from scratch)."""
    levels: list[list[bytes]] = [[]]
    for oid, ref in entries:
        _grow(levels, leaf_hash(oid, ref))
    return levels


def _grow(levels: list[list[bytes]], leaf: bytes) -> None:
    """Add one leaf hash to complete-subtree ``levels``, completing the subtrees it closes."""
    levels[0].append(leaf)
    k = 0
    while len(levels[k]) % 2 == 0:
        if len(levels) == k + 1:
            levels.append([])
        levels[k + 1].append(merkle.node_hash(levels[k][-2], levels[k][-1]))
        k += 1


# --- on disk ------------------------------------------------------------------------------


class DiskLog(TransparencyLog):
    def __init__(self, store_root: str) -> None:
        self.folder = os.path.join(store_root, FOLDER)

    def path(self, name: str) -> str:
        return os.path.join(self.folder, name)

    @contextlib.contextmanager
    def locked(self) -> Iterator[View]:
        """The log under its lock; on a file system that cannot be written (a read-only
        mount, an archive), a view read from its leaves, for reading only."""
        import fcntl

        try:
            file.ensure_dir(self.folder)
            fd = os.open(self.path("lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise file.io_error(self.folder, exc) from exc
            yield self._read_only()
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            view = _DiskView(self)
            try:
                yield view
            finally:
                view.close()
        finally:
            os.close(fd)  # releases the flock

    @contextlib.contextmanager
    def reading(self) -> Iterator[View]:
        """The log as it stands, under a shared lock when its lock file exists, read from
        its files without writing any: a store without a log stays without one, and derived
        files that lag behind the leaves are left for the next writer to rebuild."""
        import fcntl

        try:
            fd: int | None = os.open(self.path("lock"), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            fd = None  # no writer ever held it: there is nothing to wait for
        except OSError as exc:
            raise file.io_error(self.path("lock"), exc) from exc
        try:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_SH)
            yield self._read_only()
        finally:
            if fd is not None:
                os.close(fd)

    def _read_only(self) -> View:
        return _Snapshot(self)

    def _read(self, name: str) -> bytes:
        """The bytes of one of the log's files; none when it is absent or not a file (a
        folder in its place is the audit's ``log-stray-file``)."""
        try:
            with open(self.path(name), "rb") as handle:
                return handle.read()
        except (FileNotFoundError, IsADirectoryError):
            return b""


def _refuse(entries) -> None:
    raise file.io_error(FOLDER, OSError(errno.EROFS, "the log cannot be written here"))


class _Snapshot(View):
    """The log read from its files, for reading only: the whole lines of ``leaves`` (a torn
    last line is not one), read once into memory (a check reads every line anyway, or
    searches them all); the subtree hashes computed from them when a proof or an audit first
    asks, the stored ones read as they are."""

    def __init__(self, log: DiskLog) -> None:
        self.log = log
        try:
            with open(log.path("origin"), "rb") as handle:
                self._origin = handle.read(200).decode("ascii", "replace").strip()
        except FileNotFoundError:
            self._origin = ""
        self._data = log._read("leaves")
        self._end = self._data.rfind(b"\n") + 1  # whole lines only
        self._count = self._data.count(b"\n", 0, self._end)
        self._levels: list[list[bytes]] | None = None

    def size(self) -> int:
        return self._count

    def origin(self) -> str:
        return self._origin

    def entries(self, start: int = 0) -> Iterator[tuple[str, str]]:
        data, at = self._data, 0
        for _ in range(start):
            at = data.index(b"\n", at) + 1
        while at < self._end:
            end = data.index(b"\n", at)
            yield parse_line(data[at:end])
            at = end + 1

    def under(self, folders: Iterable[str]) -> Iterator[tuple[str, str]]:
        """As ``View.under``, found by searching the bytes for each folder: only the lines
        that name one are parsed. A leaf line is 64 hex digits, a space and a ref name, so
        ``" <folder>"`` can only start at a line's 65th byte."""
        data, found = self._data, []
        for top in dict.fromkeys(folders):
            needle = f" {top}".encode("ascii")
            at = data.find(needle, 0, self._end)
            while at >= 0:
                end = data.index(b"\n", at)
                start = at - 64
                rest = data[at + len(needle) : at + len(needle) + 1]
                if (start == 0 or (start > 0 and data[start - 1] == 10)) and rest in (
                    b"/",
                    b"\n",
                ):
                    found.append((start, data[start:at].decode("ascii"), data[at + 1 : end]))
                at = data.find(needle, end, self._end)
        for _, oid, ref in sorted(found):
            yield oid, ref.decode("ascii")

    def last(self) -> tuple[str, str] | None:
        if not self._count:
            return None
        start = self._data.rfind(b"\n", 0, self._end - 1) + 1
        return parse_line(self._data[start : self._end - 1])

    def _computed(self) -> list[list[bytes]]:
        if self._levels is None:
            self._levels = levels_of(self.entries())
        return self._levels

    def node(self, level: int, index: int) -> bytes:
        return self._computed()[level][index]

    def level(self, level: int) -> bytes:
        levels = self._computed()
        return b"".join(levels[level]) if level < len(levels) else b""

    def stored_level(self, level: int) -> bytes:
        return self.log._read(f"level-{level:02d}")

    def append(self, entries: list[tuple[str, str]]) -> None:
        _refuse(entries)


class _DiskView(View):
    def __init__(self, log: DiskLog) -> None:
        self.log = log
        self.fds: dict[str, int] = {}
        self.count, self.bytes = self._recover()

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()

    def _fd(self, name: str) -> int:
        fd = self.fds.get(name)
        if fd is None:
            fd = self.fds[name] = os.open(
                self.log.path(name), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644
            )
        return fd

    # --- recovery -----------------------------------------------------------------------

    def _recover(self) -> tuple[int, int]:
        """(leaves, bytes of ``leaves``) after dropping a torn last line and bringing the
        derived files up to date."""
        leaves = self._fd("leaves")
        size = os.fstat(leaves).st_size
        count, known = self._state()
        if known > size or count > known:
            count, known = 0, 0  # a state that cannot be right: count again
        if known < size:
            count, known = self._count(leaves, count, known, size)
            if known < size:  # a torn last line: its update never reached a log head
                os.ftruncate(leaves, known)
                os.fsync(leaves)
        self._write_state(count, known)
        self._levels(count, known)
        return count, known

    def _state(self) -> tuple[int, int]:
        try:
            with open(self.log.path("state"), "rb") as handle:
                count, size = handle.read(64).split()
            return int(count), int(size)
        except (OSError, ValueError):
            return 0, 0

    def _write_state(self, count: int, size: int) -> None:
        fd = self._fd("state")
        data = f"{count} {size}\n".encode("ascii")
        os.pwrite(fd, data.ljust(40), 0)  # fixed length: never torn into a smaller number

    @staticmethod
    def _count(fd: int, count: int, start: int, size: int) -> tuple[int, int]:
        """Count the whole lines of ``leaves`` from ``start``: (leaves, end of the last one)."""
        end = start
        offset = start
        while offset < size:
            chunk = os.pread(fd, min(1 << 20, size - offset), offset)
            if not chunk:
                break
            lines = chunk.count(b"\n")
            if lines:
                count += lines
                end = offset + chunk.rindex(b"\n") + 1
            offset += len(chunk)
        return count, end

    def _levels(self, count: int, size: int) -> None:
        """Bring every ``level-NN`` file to the subtrees of ``count`` leaves."""
        have = os.fstat(self._fd("level-00")).st_size // HASH
        if have < count:
            start = self._line_offset(have)
            hashes = [leaf_hash(oid, ref) for oid, ref in self._lines_from(start, size)]
            self._write_level(0, have, hashes)
        elif have > count:
            os.ftruncate(self._fd("level-00"), count * HASH)
        level, width = 1, count >> 1
        while width or os.path.exists(self.log.path(f"level-{level:02d}")):
            name = f"level-{level:02d}"
            have = os.fstat(self._fd(name)).st_size // HASH
            if have > width:
                os.ftruncate(self._fd(name), width * HASH)
            elif have < width:
                below = self._read_level(level - 1, 2 * have, 2 * width)
                nodes = [merkle.node_hash(below[i], below[i + 1]) for i in range(0, len(below), 2)]
                self._write_level(level, have, nodes)
            if not width:
                break
            level, width = level + 1, width >> 1

    def _line_offset(self, index: int) -> int:
        """The byte offset of line ``index`` of ``leaves`` (a scan: repairs and audits)."""
        fd, seen, offset = self._fd("leaves"), 0, 0
        while index:
            chunk = os.pread(fd, 1 << 20, offset)
            if not chunk:
                return offset
            lines = chunk.count(b"\n")
            if seen + lines < index:
                seen, offset = seen + lines, offset + len(chunk)
                continue
            position = -1
            while seen < index:
                position = chunk.index(b"\n", position + 1)
                seen += 1
            return offset + position + 1
        return 0

    def _lines_from(self, start: int, end: int) -> Iterator[tuple[str, str]]:
        fd = self._fd("leaves")
        rest = b""
        offset = start
        while offset < end:
            chunk = os.pread(fd, min(1 << 20, end - offset), offset)
            if not chunk:
                break
            offset += len(chunk)
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                yield parse_line(line)

    def _read_level(self, level: int, lo: int, hi: int) -> list[bytes]:
        data = os.pread(self._fd(f"level-{level:02d}"), (hi - lo) * HASH, lo * HASH)
        if len(data) != (hi - lo) * HASH:
            raise CorruptRef("transparency", f"level {level} is shorter than the log")
        return [data[i : i + HASH] for i in range(0, len(data), HASH)]

    def _write_level(self, level: int, at: int, hashes: list[bytes]) -> None:
        if hashes:
            os.pwrite(self._fd(f"level-{level:02d}"), b"".join(hashes), at * HASH)

    # --- View ---------------------------------------------------------------------------

    def size(self) -> int:
        return self.count

    def origin(self) -> str:
        """The log's name ("" before its first leaf names it)."""
        try:
            with open(self.log.path("origin"), encoding="ascii") as handle:
                return handle.read().strip()
        except FileNotFoundError:
            return ""

    def node(self, level: int, index: int) -> bytes:
        return self._read_level(level, index, index + 1)[0]

    def level(self, level: int) -> bytes:
        name = f"level-{level:02d}"
        if not os.path.exists(self.log.path(name)):
            return b""
        fd = self._fd(name)
        return os.pread(fd, os.fstat(fd).st_size, 0)

    def entries(self, start: int = 0) -> Iterator[tuple[str, str]]:
        offset = self._line_offset(start)
        yield from self._lines_from(offset, self.bytes)

    def last(self) -> tuple[str, str] | None:
        if not self.count:
            return None
        data = os.pread(self._fd("leaves"), min(self.bytes, 2048), max(0, self.bytes - 2048))
        return parse_line(data[:-1].rsplit(b"\n", 1)[-1])

    def append(self, entries: list[tuple[str, str]]) -> None:
        if not entries:
            return
        if not self.count and not self.origin():  # named with the first leaf
            origin = f"yyb/{os.urandom(16).hex()}"
            file.write_atomic(self.log.path("origin"), f"{origin}\n".encode("ascii"))
        fd = self._fd("leaves")
        data = b"".join(leaf_line(oid, ref) for oid, ref in entries)
        try:
            written = 0
            while written < len(data):
                written += os.pwrite(fd, data[written:], self.bytes + written)
            os.fsync(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self.bytes)  # nothing half-appended stays counted
            if exc.errno == errno.ENOSPC:
                raise file.io_error(self.log.path("leaves"), exc) from exc
            raise file.io_error(self.log.path("leaves"), exc) from exc
        file.durable_point()
        first = self.count
        self.count += len(entries)
        self.bytes += len(data)
        self._write_level(0, first, [leaf_hash(oid, ref) for oid, ref in entries])
        self._extend(first)
        self._write_state(self.count, self.bytes)

    def _extend(self, before: int) -> None:
        """Add the subtrees that leaves [before, count) complete, level by level."""
        level, lo, hi = 1, before >> 1, self.count >> 1
        while hi > lo:
            below = self._read_level(level - 1, 2 * lo, 2 * hi)
            nodes = [merkle.node_hash(below[i], below[i + 1]) for i in range(0, len(below), 2)]
            self._write_level(level, lo, nodes)
            level, lo, hi = level + 1, lo >> 1, hi >> 1


def ordered(chains: Iterable[list[tuple[int, str, str]]]) -> list[tuple[str, str]]:
    """(oid, ref) of the updates of whole chains (each (time, oid, ref), oldest first) in the
    order a log that never had them appends them: each chain in its own order, the chains
    merged by time, then oid (backfilling a store made before its log)."""
    return [(oid, ref) for _, oid, ref in heapq.merge(*chains)]
