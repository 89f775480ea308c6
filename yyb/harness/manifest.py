"""Retaining a workspace: every file as a blob, a listing record; rebuilding it from them.

A listing (``yylo_benchmark_file_listing.v2``) names every worktree file with its Git mode and
the blob holding its bytes (a symlink's blob holds its target; links are never followed), so a
workspace can be rebuilt from the store alone. ``.git`` is described by the manifest's Git
state instead (``gitstate``); a ``.git`` name deeper down is omitted, never listed.

The workspace is the candidate's: it is walked without following links (``worktree.walk``),
and what is retained is bounded before a byte is read. A file counts with its apparent size
(a sparse file's holes too), and one that would take the retained total past MAX_TOTAL is
omitted unread; files up to STREAM_FILE are read whole and stored in batches of at most BATCH
bytes, larger ones are streamed, so memory stays bounded whatever the candidate left. A
configured secret in a file (any form ``redaction`` knows) is stored redacted and the file is
marked under ``redacted`` in the listing; a path that holds a secret is omitted.

A listing read back from the store is treated as hostile: ``entries_of`` refuses any path that
could not be written inside the folder it is rebuilt into (see ``unsafe_path``), and
``rebuild`` checks the whole listing before it writes anything, then opens every folder
without following links.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from yyb.errors import ChecksumMismatch, CorruptObject, InvalidRecord, UnsafeListing
from yyb.harness import worktree
from yyb.harness.redaction import Redactor
from yyb.store.objects import codec
from yyb.store.objects.format import hash_object
from yyb.store.objects.store import hash_stream

LISTING = "yylo_benchmark_file_listing.v2"
MANIFEST = "yylo_benchmark_post_execution_manifest.v2"
STREAM_FILE = 16 << 20  # files above this are streamed into the store one at a time
BATCH = 16 << 20  # bytes of smaller files held at once before they are stored together
MAX_TOTAL = 2 << 30  # bytes of workspace retained before the rest is listed as omitted
MAX_OMITTED = 1000  # omitted paths named one by one; past it, one entry counts the rest
CHUNK = 128  # files of one folder a rebuild thread writes with the folder opened once
MODES = (0o100644, 0o100755, 0o120000)
SYMLINK = 0o120000
MAX_NAME = 255  # bytes in one path component (NAME_MAX on Linux)
MAX_TARGET = 4095  # bytes in a symlink target (PATH_MAX less its NUL)
GIT_STATE = worktree.GIT_STATE


@dataclass
class Scan:
    entries: dict[str, tuple[int, str]] = field(default_factory=dict)  # path -> (mode, oid)
    omitted: list[list[str]] = field(default_factory=list)  # [path, reason]
    redacted: dict[str, list[str]] = field(default_factory=dict)  # path -> secret names
    redactor: Redactor = field(default_factory=lambda: Redactor({}), repr=False)
    more_omitted: int = 0

    def omit(self, path: str, reason: str) -> None:
        """Record a path that is not retained (both redacted); past MAX_OMITTED of them, the
        last entry counts the rest instead of naming them."""
        path, reason = self.redactor.text(path), self.redactor.text(reason)
        if len(self.omitted) < MAX_OMITTED:
            self.omitted.append([path, reason])
            return
        if len(self.omitted) == MAX_OMITTED:
            self.omitted.append([path, ""])
        self.more_omitted += 1
        self.omitted[-1][1] = (
            f"omitted, and {self.more_omitted - 1} paths after it in the walk too, for "
            "reasons not recorded one by one"
        )


def _mode(info: os.stat_result) -> int:
    if stat.S_ISLNK(info.st_mode):
        return 0o120000
    return 0o100755 if info.st_mode & 0o111 else 0o100644


class _Batch:
    """Small files waiting to be stored together, at most BATCH bytes of them at a time."""

    def __init__(self, store, result: Scan) -> None:
        self.store, self.result = store, result
        self.items: list[tuple[str, int, bytes]] = []
        self.size = 0

    def add(self, path: str, mode: int, data: bytes) -> None:
        if self.size + len(data) > BATCH:
            self.flush()
        self.items.append((path, mode, data))
        self.size += len(data)

    def flush(self) -> None:
        oids = self.store.objects.put_many([("blob", data) for _, _, data in self.items])
        for (path, mode, _), oid in zip(self.items, oids, strict=True):
            self.result.entries[path] = (mode, oid)
        self.items, self.size = [], 0


def scan(
    store,
    root: str,
    redactor: Redactor | None = None,
    known: Mapping[str, tuple[tuple, str]] | None = None,
) -> Scan:
    """Store every file under ``root`` (except the top-level ``.git``) and list it.

    Args:
        store: where the blobs go.
        root: the workspace.
        redactor: the secrets to redact from what is stored (none when omitted).
        known: path -> (``worktree.stat_key`` as written, blob oid) of files the controller
            itself has just written under ``root`` (a fresh snapshot's, before any other
            process could reach it): such a file, walked and counted like any other, is listed
            with that blob unread if its stat is unchanged and the blob is stored. Only with
            no secret to redact, whose search needs the bytes. Never for a workspace a
            candidate has had: it can give a file back the size and mtime it had, not its
            ctime, but a listing would then rest on the clock (docs/performance.md).
    """
    result = Scan(redactor=redactor or Redactor({}))
    batch = _Batch(store, result)
    trusted = known if known and not result.redactor else {}
    total = 0
    for item in worktree.walk(root, result.omit):
        path, info = item.path, item.info
        unsafe = unsafe_path(path)  # the walk makes none: checked all the same
        if unsafe is not None:
            result.omit(path, f"not retained: {unsafe}")
            continue
        if result.redactor.found(path.encode("utf-8", "surrogateescape")):
            result.omit(path, "the path holds a configured secret: not retained")
            continue
        if stat.S_ISLNK(info.st_mode):
            try:
                target = os.fsencode(os.readlink(item.name, dir_fd=item.folder))
            except OSError:
                continue  # gone since it was listed
            target = _redacted(result, path, target)
            if len(target) > MAX_TARGET:
                result.redacted.pop(path, None)
                result.omit(path, "a symlink whose target, redacted, is too long to retain")
                continue
            batch.add(path, SYMLINK, target)
            continue
        if not stat.S_ISREG(info.st_mode):
            result.omit(path, "not a regular file or symlink")
            continue
        if total + info.st_size > MAX_TOTAL:
            result.omit(path, f"retaining it would take the workspace over {MAX_TOTAL} bytes")
            continue
        total += info.st_size
        listed = trusted.get(path)
        if listed and listed[0] == worktree.stat_key(info) and store.objects.contains(listed[1]):
            result.entries[path] = (_mode(info), listed[1])
            continue
        try:
            _retain_file(store, result, batch, item)
        except (OSError, CorruptObject, _Changed) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "it changed while it was read"
            result.omit(path, f"the file could not be read ({why})")
    batch.flush()
    return result


class _Changed(Exception):
    """A file's size or kind changed between the listing and the read."""


def _retain_file(store, result: Scan, batch: _Batch, item: worktree.Item) -> None:
    fd = os.open(item.name, worktree.FILE_FLAGS, dir_fd=item.folder)
    try:
        info = os.fstat(fd)
        size = info.st_size
        if not stat.S_ISREG(info.st_mode) or size != item.info.st_size:
            raise _Changed()
        if size <= STREAM_FILE:
            data = os.pread(fd, size, 0) if size else b""
            if len(data) != size:
                raise _Changed()
            batch.add(item.path, _mode(info), _redacted(result, item.path, data))
            return
        result.entries[item.path] = (_mode(info), _stream(store, result, item.path, fd, size))
    finally:
        os.close(fd)


def _redacted(result: Scan, path: str, data: bytes) -> bytes:
    names = result.redactor.found(data) if result.redactor else set()
    if not names:
        return data
    result.redacted[path] = sorted(names)
    return result.redactor.redact(data)


def _stream(store, result: Scan, path: str, fd: int, size: int) -> str:
    """Store a large file without holding it: as it is, or redacted through a spill file."""
    names = result.redactor.found_in_file(fd, size) if result.redactor else set()
    if not names:
        with os.fdopen(os.dup(fd), "rb") as handle:
            handle.seek(0)  # searching for secrets moved the shared offset
            return store.objects.put_blob_file(handle, size)
    with tempfile.TemporaryFile(prefix="yyb-redacted-") as spill:
        sink = _SparseWriter(spill.fileno())
        written = result.redactor.copy_redacted(fd, size, sink.write)
        sink.close(written)
        spill.seek(0)
        oid = store.objects.put_blob_file(spill, written)
    result.redacted[path] = sorted(names)
    return oid


class _SparseWriter:
    """Writes to a descriptor, seeking over whole blocks of zeros instead of writing them, so
    a sparse file copied through it stays sparse."""

    BLOCK = 64 << 10
    ZEROS = bytes(BLOCK)

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.hole = False  # whether the last block was a hole, seeked over

    def write(self, data) -> None:
        view = memoryview(data)
        while view:
            piece = view[: self.BLOCK]
            self.hole = len(piece) == self.BLOCK and piece.tobytes() == self.ZEROS
            if self.hole:
                os.lseek(self.fd, self.BLOCK, os.SEEK_CUR)
            else:
                while piece:
                    piece = piece[os.write(self.fd, piece) :]
            view = view[self.BLOCK :]

    def close(self, size: int) -> None:
        if self.hole:
            os.ftruncate(self.fd, size)  # a trailing hole has to be made part of the file


def listing_of(entries: dict[str, tuple[int, str]], omitted=()) -> dict:
    """A listing record of ``entries`` (path -> (mode, blob oid)), paths in byte order and
    each distinct blob listed once in ``links.files``."""
    files = sorted({oid for _, oid in entries.values()})
    index = {oid: i for i, oid in enumerate(files)}
    rows = [
        [path, mode, index[oid]]
        for path, (mode, oid) in sorted(entries.items(), key=lambda item: item[0].encode())
    ]
    return {
        "schema_version": LISTING,
        "entries": rows,
        "omitted": sorted(omitted),
        "links": {"files": files},
    }


def set_aside(scan_result: Scan, base: dict, patterns) -> Scan:
    """Move out of ``scan_result`` the files the candidate added (not in ``base``) under one
    of ``patterns`` (a harness's scratch paths, matched as ``snapshot.is_excluded`` matches,
    ``*`` standing for any run of characters within one name); returns them as a Scan."""
    from yyb.harness.snapshot import is_excluded

    aside = Scan()
    if not patterns:
        return aside
    for path in [p for p in scan_result.entries if p not in base]:
        if is_excluded(path, list(patterns)):
            aside.entries[path] = scan_result.entries.pop(path)
            if path in scan_result.redacted:
                aside.redacted[path] = scan_result.redacted[path]
    return aside


def listing_record(scan_result: Scan) -> dict:
    record = listing_of(scan_result.entries, scan_result.omitted)
    if scan_result.redacted:
        record["redacted"] = [
            [path, names]
            for path, names in sorted(scan_result.redacted.items(), key=lambda i: i[0].encode())
            if path in scan_result.entries
        ]
    return record


def unsafe_path(path: str) -> str | None:
    """Why ``path`` could not be written inside the folder a listing is rebuilt into, or None.

    A listed path is relative, ``/``-separated, and each component is a plain name: not empty,
    not ``.`` or ``..``, not ``.git`` in any case (Git refuses it the same way, and a rebuilt
    ``.git`` would act as a repository), without NUL and at most 255 bytes.
    """
    if path.startswith("/"):
        return "an absolute path"
    if "\0" in path:
        return "a NUL in the path"
    for part in path.split("/"):
        if part in ("", ".", ".."):
            return f"a {part!r} component" if part else "an empty component"
        if worktree.is_git_name(part):
            return "a .git component"
        if len(part.encode("utf-8", "surrogateescape")) > MAX_NAME:
            return f"a component over {MAX_NAME} bytes"
    return None


def entries_of(listing: dict) -> dict[str, tuple[int, str]]:
    """path -> (mode, blob oid) from a listing record, every path proved safe to rebuild.

    Besides ``unsafe_path``: no path twice, and no path below one listed as a file (or
    symlink), which is how a listing could otherwise write through a link it made itself.

    Raises:
        UnsafeListing: the first entry that fails.
    """
    files = listing.get("links", {}).get("files")
    rows = listing.get("entries")
    if not isinstance(files, list) or not isinstance(rows, list):
        raise UnsafeListing(None, "it has no entries and links.files lists")
    entries: dict[str, tuple[int, str]] = {}
    for number, row in enumerate(rows):
        if not (isinstance(row, list) and len(row) == 3 and isinstance(row[0], str)):
            raise UnsafeListing(None, f"entry {number} is not [path, mode, index]")
        path, mode, index = row
        reason = unsafe_path(path)
        if reason is None and mode not in MODES:
            reason = f"mode {mode!r} is not one of {', '.join(f'{m:o}' for m in MODES)}"
        if reason is None and not (type(index) is int and 0 <= index < len(files)):
            reason = f"it names file {index!r}, and the listing has no file {index!r}"
        if reason is None and path in entries:
            reason = "the path is listed twice"
        if reason is not None:
            raise UnsafeListing(path, reason)
        entries[path] = (mode, files[index])
    for path in entries:
        parts = path.split("/")
        for i in range(1, len(parts)):
            folder = "/".join(parts[:i])
            if folder in entries:
                raise UnsafeListing(path, f"its folder {folder!r} is also listed as a file")
    return entries


def entries_at(store, oid: str) -> dict[str, tuple[int, str]]:
    """``entries_of`` the listing record stored under ``oid``; a refusal names ``oid``.

    Raises:
        UnsafeListing, ObjectMissing, CorruptObject.
    """
    try:
        return entries_of(store.objects.get_record(oid))
    except UnsafeListing as exc:
        raise UnsafeListing(exc.path, exc.reason, oid) from None


def changes(before: dict, after: dict) -> dict:
    return {
        "added": sorted((p for p in after if p not in before), key=str.encode),
        "changed": sorted(
            (p for p in after if p in before and before[p] != after[p]), key=str.encode
        ),
        "deleted": sorted((p for p in before if p not in after), key=str.encode),
    }


def rebuild(store, listing: dict, dest: str) -> None:
    """Write the files a listing names into ``dest`` (a new folder) from the store alone.

    The whole listing is checked first (``entries_of``, and every symlink target read and
    checked), so a listing that is refused leaves nothing behind, not even ``dest``. Folders
    are then made one level at a time and every folder is opened relative to its parent
    without following links, so nothing, even a link planted in ``dest`` beforehand, can send a
    write elsewhere. Files are written from a small thread pool (file creation, not hashing,
    is what costs on a workspace of thousands of files).

    Raises:
        UnsafeListing: a path that could not be written inside ``dest`` (named in the error,
            with the listing's oid), or a symlink target that is empty, holds a NUL or is over
            4095 bytes.
        ObjectMissing / CorruptObject: a blob the listing names is missing or damaged.
        OSError: the file system refused, or ``dest`` already holds one of the paths.
    """
    try:
        entries = entries_of(listing)
    except UnsafeListing as exc:
        raise UnsafeListing(exc.path, exc.reason, _listing_oid(listing)) from None
    write_entries(store, entries, dest, lambda: _listing_oid(listing))


def write_entries(store, proved: dict[str, tuple[int, str]], dest: str, listing=None) -> None:
    """``rebuild`` for entries already proved by ``entries_of`` (path -> (mode, blob oid));
    ``listing``, when given, is called for the listing's oid to name in a refused symlink
    target."""
    from concurrent.futures import ThreadPoolExecutor

    entries = sorted(proved.items())
    try:
        targets = {
            path: _link_target(store, path, oid) for path, (mode, oid) in entries if mode == SYMLINK
        }
    except UnsafeListing as exc:
        raise UnsafeListing(exc.path, exc.reason, listing() if listing else None) from None
    folders = sorted(
        {tuple(path.split("/")[:i]) for path, _ in entries for i in range(1, path.count("/") + 1)},
        key=len,
    )
    os.makedirs(dest, exist_ok=True)
    top = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for parts in folders:
            with _folder(top, parts[:-1]) as parent:
                try:
                    os.mkdir(parts[-1], 0o755, dir_fd=parent)
                except FileExistsError:
                    pass  # opening it below refuses anything but a real folder

        groups: dict[tuple[str, ...], list[tuple[str, int, str, str]]] = {}
        for path, (mode, oid) in entries:
            *parts, name = path.split("/")
            groups.setdefault(tuple(parts), []).append((path, mode, oid, name))
        chunks = [
            (parts, items[i : i + CHUNK])
            for parts, items in groups.items()
            for i in range(0, len(items), CHUNK)
        ]

        def write(chunk: tuple[tuple[str, ...], list[tuple[str, int, str, str]]]) -> None:
            parts, items = chunk
            with _folder(top, parts) as parent:
                for path, mode, oid, name in items:
                    if mode == SYMLINK:
                        os.symlink(targets[path], name, dir_fd=parent)
                    else:
                        _write_file(store, parent, name, oid, mode)

        if len(entries) < 64:
            for chunk in chunks:
                write(chunk)
            return
        with ThreadPoolExecutor(max_workers=8) as pool:
            for _ in pool.map(write, chunks):
                pass
    finally:
        os.close(top)


_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@contextlib.contextmanager
def _folder(top: int, parts: Sequence[str]) -> Iterator[int]:
    """The folder ``parts`` below ``top``, opened one component at a time, links refused."""
    fd = top
    try:
        for part in parts:
            child = os.open(part, _FOLDER_FLAGS, dir_fd=fd)
            if fd != top:
                os.close(fd)
            fd = child
        yield fd
    finally:
        if fd != top:
            os.close(fd)


def _write_file(store, parent: int, name: str, oid: str, mode: int) -> None:
    """Write blob ``oid`` as file ``name``, its bytes proved by their hash: a small one read
    whole, a large one streamed (hashed as it is copied, sparse where it is zeros).

    Raises:
        ChecksumMismatch: the blob's bytes are not those its oid names (a large file is then
            left written with them; the caller's rebuild fails).
        CorruptObject: the oid names a record, not a blob.
    """
    perms = 0o755 if mode == 0o100755 else 0o644
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    small = store.objects.get_small(oid, STREAM_FILE)  # one read, its hash proved
    if small is not None:
        kind, size, body, stream = small.kind, len(small.body), small.body, None
    else:
        (kind, size, stream), body = store.objects.open_body(oid), None
    try:
        if kind != "blob":
            raise CorruptObject(oid, f"expected a blob, found a {kind}")
        if body is None and size <= STREAM_FILE:
            body = stream.read(size)
            got = hash_object(kind, body)
            if got != oid:
                raise ChecksumMismatch(oid, got)
        fd = os.open(name, flags, perms, dir_fd=parent)
        try:
            os.fchmod(fd, perms)  # exact, whatever the umask
            sink = _SparseWriter(fd)
            if body is not None:
                sink.write(body)
            else:
                got = hash_stream("blob", stream, size, sink, with_header=False)
                if got != oid:
                    raise ChecksumMismatch(oid, got)
            sink.close(size)
        finally:
            os.close(fd)
    finally:
        if stream is not None:
            stream.close()


def _link_target(store, path: str, oid: str) -> str:
    body = store.objects.get(oid).body
    if not body or b"\0" in body or len(body) > MAX_TARGET:
        raise UnsafeListing(path, f"a symlink target must be 1 to {MAX_TARGET} bytes without NUL")
    return os.fsdecode(body)


def _listing_oid(listing: dict) -> str | None:
    """The oid a listing value has in the store (for the error message only)."""
    try:
        return hash_object("record", codec.encode(listing))
    except InvalidRecord:  # a value that is not even a record has no oid to show
        return None


def blob_oid(data: bytes) -> str:
    return hash_object("blob", data)
