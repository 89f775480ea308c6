"""Packed refs (``git pack-refs``): many refs and log heads in one file, ``packed-refs``.

A store of 50,000 attempts holds about 460,000 ref and log-head files, and a report from a
cold page cache spent most of its extra time opening them (docs/performance.md). ``pack_refs``
(run by ``yyb gc`` and ``yyb pack-refs``) moves them into one sorted file; the loose file of a
ref, when there is one, always wins over its packed entry.

The order keeps every reader right without locks. Under the store-wide lock
``locks/packed-refs.lock``, pack-refs reads every loose ref and log head and writes the new
packed file (temp, fsync, rename, fsync the folder); it releases that lock, and only then
removes each loose file, under that ref's own lock, if the packed file (looked at again) holds
the same value. A reader that misses a loose file looks at the packed file again when it has
changed (its inode, size or times), so it never misses a ref that moved into it. Deleting a ref
rewrites the packed file without the ref's value, holding the ref's lock and then this lock,
before it unlinks the loose file; pack-refs, holding this lock while it reads the loose refs,
therefore never packs a ref deleted meanwhile. Lock order: a ref's lock, then this one;
pack-refs never takes a ref lock while holding this one.

A crash leaves the old packed file or the new one (with the loose files still there, which
agree with it), a temp file at the top of the store, or some loose files removed: in every case
each ref reads as it did.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import itertools
import os
import re
import threading
from collections import namedtuple

from yyb.errors import CorruptRef
from yyb.store import file
from yyb.store.lock import store_lock
from yyb.store.objects.format import ZERO_OID

PACKED_REFS = "packed-refs"  # the file, at the top of the store
LOCK_NAME = "packed-refs"  # its lock: locks/packed-refs.lock
HEADER = b"yyb-packed-refs 1\n"
ABSENT = ZERO_OID  # a field that holds no oid: a deleted ref's value
_NAME_AT = 130  # a line: 64 hex, space, 64 hex, space, then the name
_NAME = rb"refs(?:/[A-Za-z0-9_+=@-][A-Za-z0-9._+=@-]{0,254})+"
_LINES = re.compile(rb"(?:[0-9a-f]{64} [0-9a-f]{64} " + _NAME + rb"\n)*")
_LINE = re.compile(rb"[0-9a-f]{64} [0-9a-f]{64} (" + _NAME + rb")")
_NAMES = re.compile(rb" (refs/[^ \n]*)\n")
MAX_NAME = 1024


def _corrupt(reason: str) -> CorruptRef:
    return CorruptRef(PACKED_REFS, reason)


class PackedTable:
    """One parsed packed-refs file: each ref's value and log head by name, names in order."""

    def __init__(self, body: bytes, names: list[str], offsets: list[int]) -> None:
        self.body = body  # the whole file
        self.names = names  # sorted
        self.index = dict(zip(names, offsets, strict=True))  # name -> offset of its line in body

    def _field(self, name: str, start: int) -> str | None:
        offset = self.index.get(name)
        if offset is None:
            return None
        oid = self.body[offset + start : offset + start + 64].decode("ascii")
        return None if oid == ABSENT else oid

    def value(self, name: str) -> str | None:
        return self._field(name, 0)

    def head(self, name: str) -> str | None:
        return self._field(name, 65)

    def names_under(self, prefix: str, heads: bool = False) -> list[str]:
        """The names starting with ``prefix`` that have a value (``heads``: a log head)."""
        start = 65 if heads else 0
        found = []
        for i in range(bisect.bisect_left(self.names, prefix), len(self.names)):
            name = self.names[i]
            if not name.startswith(prefix):
                break
            offset = self.index[name] + start
            if self.body[offset : offset + 64] != ABSENT.encode():
                found.append(name)
        return found

    def conflict(self, name: str) -> str | None:
        """A packed name that ``name`` cannot exist beside: a folder of it, or one inside it."""
        parts = name.split("/")
        for i in range(2, len(parts)):
            folder = "/".join(parts[:i])
            if folder in self.index:
                return folder
        i = bisect.bisect_left(self.names, name + "/")
        if i < len(self.names) and self.names[i].startswith(name + "/"):
            return self.names[i]
        return None

    def entries(self) -> dict[str, tuple[str | None, str | None]]:
        """name -> (value, log head), every entry."""
        return {name: (self.value(name), self.head(name)) for name in self.names}


def parse(data: bytes) -> PackedTable:
    """Parse a packed-refs file (docs/format.md, "Packed refs").

    Raises:
        CorruptRef: the file breaks a rule of the format (the reason names the line).
    """
    if not data.startswith(HEADER):
        raise _corrupt(f"the first line is not {HEADER.decode().strip()!r}")
    start = len(HEADER)
    if not _LINES.fullmatch(data, start):
        raise _corrupt(_explain(data[start:]))
    raw = _NAMES.findall(data, start)  # each line's name (the grammar holds: one per line)
    names = b"\n".join(raw).decode("ascii").split("\n") if raw else []
    offsets = list(itertools.accumulate((_NAME_AT + 1 + len(name) for name in raw), initial=start))
    for i, (before, after) in enumerate(itertools.pairwise(names)):
        if before >= after:
            why = "repeats the name" if before == after else "is out of order"
            raise _corrupt(f"line {i + 3} ({after}) {why}")
    both = b"\n" + ABSENT.encode() + b" " + ABSENT.encode() + b" "
    for what, needle in (
        ("a component ending in .lock", b".lock/"),
        ("a component ending in .lock", b".lock\n"),
        ("neither a value nor a log head", both),
    ):
        at = data.find(needle, start - 1)  # the header's newline starts the first line
        if at != -1:
            number = data.count(b"\n", 0, at + needle.startswith(b"\n")) + 1
            raise _corrupt(f"line {number} has {what}")
    for i, name in enumerate(names):
        if len(name) > MAX_NAME:
            raise _corrupt(f"line {i + 2} names a ref longer than {MAX_NAME} characters")
    return PackedTable(data, names, offsets[:-1])


def _explain(body: bytes) -> str:
    """Why ``body`` does not match the line grammar: the first line that does not."""
    lines = body.split(b"\n")
    last = lines.pop()  # empty when the body ends with a newline
    for number, line in enumerate(lines, start=2):
        if not _LINE.fullmatch(line):
            return f"line {number} is not '<value> <log head> <ref name>'"
    return f"line {len(lines) + 2} ({last[:80]!r}) does not end with a newline"


def serialize(entries: dict[str, tuple[str | None, str | None]]) -> bytes:
    """The packed-refs file holding ``entries`` (name -> (value, log head))."""
    lines = [HEADER]
    for name in sorted(entries):
        value, head = entries[name]
        if value is None and head is None:
            continue
        lines.append(f"{value or ABSENT} {head or ABSENT} {name}\n".encode("ascii"))
    return b"".join(lines)


def check(root: str) -> str | None:
    """Why the store's packed-refs file is malformed, or None (also when there is none)."""
    try:
        PackedRefs(root).table()
    except CorruptRef as exc:
        return exc.reason
    return None


class PackedRefs:
    """The packed-refs file of the store at ``root``, parsed once per version of the file.

    ``table`` looks at the file's identity (inode, size, times; one ``lstat``) on every call
    and parses it again when that changed, so a reader that has just missed a loose file sees
    the packed file that pack-refs wrote before removing it.
    """

    def __init__(self, root: str) -> None:
        self.root = root
        self.path = os.path.join(root, PACKED_REFS)
        self._state: tuple[tuple | None, PackedTable | None, str | None] = (None, None, None)
        self._mutex = threading.Lock()

    def table(self) -> PackedTable | None:
        """The parsed file, or None when the store has none.

        Raises:
            CorruptRef: the file is malformed, or is not a regular file.
        """
        try:
            st = os.lstat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        identity = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        known, table, problem = self._state
        if known != identity:
            with self._mutex:
                known, table, problem = self._state
                if known != identity:
                    known, table, problem = self._load()
                    self._state = (known, table, problem)
        if problem is not None:
            raise _corrupt(problem)
        return table

    def _load(self) -> tuple[tuple | None, PackedTable | None, str | None]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except (FileNotFoundError, NotADirectoryError):
            return None, None, None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return None, None, f"{self.path} is a symbolic link"
            raise
        try:
            st = os.fstat(fd)
            identity = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            import stat

            if not stat.S_ISREG(st.st_mode):
                return identity, None, f"{self.path} is not a regular file"
            with os.fdopen(fd, "rb", closefd=False) as handle:
                data = handle.read()  # one allocation of the file's size
        finally:
            os.close(fd)
        try:
            return identity, parse(data), None
        except CorruptRef as exc:
            return identity, None, exc.reason

    @contextlib.contextmanager
    def locked(self, timeout: float):
        """Hold ``locks/packed-refs.lock`` (an abandoned one is replaced: it guards no
        evidence, only this file, which is always replaced whole).

        Raises:
            LockHeld: a live process holds it past ``timeout`` seconds.
        """
        with store_lock(self.root, LOCK_NAME, timeout):
            yield

    def write(self, data: bytes) -> None:
        """Replace the file with ``data`` durably (the caller holds the lock)."""
        file.write_atomic(self.path, data)

    def drop_value(self, name: str) -> None:
        """Rewrite the file without ``name``'s value (it is being deleted; its log head
        stays), if it holds one; the caller holds the ref's lock and this file's lock."""
        table = self.table()
        if table is None or table.value(name) is None:
            return
        offset = table.index[name]
        body = table.body
        if table.head(name) is None:
            end = body.index(b"\n", offset) + 1
            body = body[:offset] + body[end:]
        else:
            body = body[:offset] + ABSENT.encode() + body[offset + 64 :]
        self.write(body)


# What pack_refs did: the refs (with a value) in the packed file now, the log heads in it, and
# the loose ref and log-head files removed.
Packed = namedtuple("Packed", "refs log_heads removed")


PACKED_LOCK_TIMEOUT = 10.0


def pack_refs(store, timeout: float = PACKED_LOCK_TIMEOUT) -> Packed:
    """Move the loose refs and log heads of ``store`` into its packed-refs file and remove
    the loose files (see the module's text), as ``git pack-refs --all --prune``. A store in
    memory has nothing to pack.

    Raises:
        LockHeld: another pack-refs (or a deletion) holds the packed-refs lock past
        ``timeout``. StoreIOError: the file system refused. CorruptRef: the packed-refs file
        is malformed (nothing changed; ``yyb doctor`` says where).
    """
    if store.path is None:
        return Packed(0, 0, 0)
    refs = store.refs
    packed = refs.packed
    _loose(refs)  # once without the lock: the reading under it then finds them cached
    with packed.locked(timeout):
        store.mark_packed()
        _sweep_temp(refs.root)
        table = packed.table()
        entries = table.entries() if table is not None else {}
        values, heads = _loose(refs)
        if values or heads:
            for name, value in values.items():
                entries[name] = (value, entries.get(name, (None, None))[1])
            for name, head in heads.items():
                entries[name] = (entries.get(name, (None, None))[0], head)
            packed.write(serialize(entries))
    removed = _prune(refs, sorted(set(values) | set(heads)))
    return Packed(
        sum(1 for value, _ in entries.values() if value is not None),
        sum(1 for _, head in entries.values() if head is not None),
        removed,
    )


def _loose(refs) -> tuple[dict[str, str], dict[str, str]]:
    """(name -> value, name -> log head) of the loose files; a malformed one is left out (and
    stays loose, for ``yyb doctor`` to report)."""
    values, heads = {}, {}
    for name in refs.loose_names():
        with contextlib.suppress(CorruptRef):
            if (value := refs.loose_value(name)) is not None:
                values[name] = value
    for name in refs.loose_log_names():
        with contextlib.suppress(CorruptRef):
            if (head := refs.loose_head(name)) is not None:
                heads[name] = head
    return values, heads


def _prune(refs, names: list[str]) -> int:
    """Remove each loose file of ``names`` that the packed file holds as it is, under the
    ref's lock (a ref whose lock is held is left loose); then drop the folders emptied."""
    removed = 0
    folders: set[str] = set()
    for name in names:
        with refs.try_lock(name) as held:
            if not held:
                continue
            folders.add(os.path.dirname(refs.path(name)))  # the lock's: made if it was gone
            table = refs.packed.table()  # looked at again: a deletion may have rewritten it
            if table is None:
                continue
            for path, loose, packed_oid in (
                (refs.path(name), refs.loose_value, table.value),
                (refs.log_path(name), refs.loose_head, table.head),
            ):
                try:
                    current = loose(name)
                except CorruptRef:
                    continue
                if current is not None and current == packed_oid(name) and file.remove(path):
                    removed += 1
                    folders.add(os.path.dirname(path))
    _drop_folders(refs.root, folders)
    return removed


def _drop_folders(root: str, folders: set[str]) -> None:
    """fsync each folder a file left, and drop those emptied (deepest first), up to ``refs``
    and ``logs/refs``; a writer that makes a folder just dropped makes it again."""
    tops = {os.path.join(root, "refs"), os.path.join(root, "logs", "refs")}
    touched = set(folders)  # folders whose entries changed: each is fsynced if it stays
    for folder in sorted(folders, key=lambda f: -f.count("/")):
        while folder not in tops and folder.startswith(root + "/"):
            try:
                os.rmdir(folder)
            except FileNotFoundError:
                pass  # another pack-refs dropped it
            except OSError:
                break  # still holds refs (or a write in progress)
            touched.discard(folder)
            folder = os.path.dirname(folder)
            touched.add(folder)
    for folder in sorted(touched):
        with contextlib.suppress(FileNotFoundError):
            file.fsync_dir(folder)
    if folders:
        file.durable_point()


def _sweep_temp(root: str) -> None:
    """Remove the temp files an interrupted write of the packed file left at the top of the
    store (only writers of that file, holding its lock, make temp files there)."""
    for name in os.listdir(root):
        if name.startswith(file.TEMP_PREFIX):
            file.discard(os.path.join(root, name))
