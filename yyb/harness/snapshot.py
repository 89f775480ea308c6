"""Snapshots: a fresh private repository holding one commit's tree, nothing else.

The snapshot repository gets a new root commit (no parents) whose tree is the base commit's
tree without the harness-owned paths. Only the blobs and trees of that tree are copied, so the
snapshot holds no object the base commit cannot reach: no history, no future commits, no other
branches, remotes, alternates, hooks, worktree links or reflogs.

A base is exported once per process (``_export``): one walk of its tree, every object in one
undeltified pack kept in this process's scratch folder. Each snapshot of that base copies the
pack, writes its files from it (a thread pool: on a large tree, file creation is the cost) and
writes the index with their stat data (``gitfiles``). The export is the controller's: it lives
outside every sandbox, and a candidate gets a copy of the pack, never the export's own file.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from yyb.harness import gitfiles, scratch, worktree
from yyb.store.objects.format import hash_object

SNAPSHOT_AUTHOR = ("yyb", "yyb@snapshot.invalid")
GITLINK = 0o160000
SYMLINK = 0o120000
MAX_EXPORTS = 4  # bases kept exported at once in a process (each holds its pack on disk)
WRITERS = 8  # threads writing a worktree
CHUNK = 128  # files of one folder a writer takes at a time
INDEX_MODES = {SYMLINK: SYMLINK, 0o100755: 0o100755}  # any other file is 100644 in the index


@dataclass(frozen=True)
class Snapshot:
    path: str  # the workspace (the repository's working tree)
    base_commit: str
    commit: str  # the snapshot's root commit
    tree: str
    file_count: int
    excluded: list[str]  # paths that were present at the base commit and left out
    # path -> (its stat as written, blob oid in the store's naming) of every regular file
    # written, for ``manifest.scan`` to list the fresh workspace without reading it back
    known: Mapping[str, tuple[tuple, str]] = field(default_factory=dict, repr=False, compare=False)


def is_excluded(path: str, patterns: list[str]) -> bool:
    """Whether a repository-relative path falls under one of the excluded paths.

    A pattern ending in ``/`` names a folder and everything below it; otherwise it names that
    exact path (file or folder) and everything below it. A ``*`` in a pattern stands for any
    run of characters within one name (``.aider*`` names ``.aider.chat.history.md``).
    """
    for pattern in patterns:
        clean = pattern.strip("/")
        if "*" in clean:
            parts, names = clean.split("/"), path.split("/")
            if len(names) >= len(parts) and all(
                fnmatch.fnmatchcase(name, part.replace("[", "[[]").replace("?", "[?]"))
                for name, part in zip(names, parts, strict=False)
            ):
                return True
        elif path == clean or path.startswith(clean + "/"):
            return True
    return False


@dataclass(frozen=True)
class _Export:
    """A base commit's filtered tree, exported: a pack of all its objects and what it holds."""

    folder: str  # this process's, holding snapshot.pack and snapshot.idx
    checksum: str  # the pack's, which names it in a repository
    commit: str
    tree: str
    folders: list[str]  # parents first
    files: list[tuple[str, int, bytes, int, int, int]]  # path, mode, sha1, offset, length, size
    excluded: list[str]
    named: Mapping[bytes, str]  # a blob's sha1 -> its oid in the store's naming


class _Walk:
    """What walking a source tree gathers: the kept files and folders, the new trees."""

    def __init__(self, patterns: list[str]) -> None:
        self.patterns = patterns
        self.excluded: list[str] = []
        self.folders: list[str] = []
        self.files: list[tuple[str, int, bytes]] = []  # path, mode, sha1 (in walk order)
        self.trees: dict[bytes, bytes] = {}  # sha1 -> body

    def tree(self, tree, prefix: str) -> bytes | None:
        """The body of ``tree`` filtered (its kept subtrees recorded), None when nothing is
        kept. A name is taken as Git holds it (bytes), whatever its encoding."""
        rows = []
        for entry in tree:
            raw = entry.raw_name
            path = prefix + os.fsdecode(raw)
            mode = entry.filemode
            if is_excluded(path, self.patterns) or mode == GITLINK:
                self.excluded.append(path)  # a submodule's commit is not in this repository
                continue
            if mode == gitfiles.TREE:
                body = self.tree(entry, path + "/")
                if body is None:
                    continue
                oid = gitfiles.object_id(gitfiles.OBJ_TREE, body)
                self.trees[oid] = body
                self.folders.append(path)
            else:
                oid = entry.id.raw
                self.files.append((path, mode, oid))
            rows.append((mode, raw, oid))
        return gitfiles.tree_body(rows) if rows else None


def _build(src, commit, patterns: list[str], base_commit: str) -> _Export:
    """Export ``commit``'s filtered tree into a new scratch folder (one pack and its index)."""
    walk = _Walk(patterns)
    root = walk.tree(commit.tree, "") or b""
    tree = gitfiles.object_id(gitfiles.OBJ_TREE, root)
    walk.trees[tree] = root
    body = gitfiles.commit_body(
        tree.hex(), *SNAPSHOT_AUTHOR, commit.committer.time, f"snapshot of {base_commit}\n"
    )
    commit_id = gitfiles.object_id(gitfiles.OBJ_COMMIT, body)
    blobs = list(dict.fromkeys(oid for _, _, oid in walk.files))
    folder = scratch.folder("snapshot")
    try:
        pack = gitfiles.PackWriter(
            os.path.join(folder, "snapshot.pack"), len(blobs) + len(walk.trees) + 1
        )
        where: dict[bytes, tuple[int, int, int]] = {}
        named: dict[bytes, str] = {}  # sha1 -> the blob's oid in the store
        for oid in blobs:
            _, data = src.odb.read(oid.hex())
            where[oid] = (*pack.add(gitfiles.OBJ_BLOB, oid, data), len(data))
            named[oid] = hash_object("blob", data)
        for oid, tree_body in walk.trees.items():
            pack.add(gitfiles.OBJ_TREE, oid, tree_body)
        pack.add(gitfiles.OBJ_COMMIT, commit_id, body)
        checksum = pack.finish()
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return _Export(
        folder,
        checksum,
        commit_id.hex(),
        tree.hex(),
        sorted(walk.folders, key=lambda path: path.count("/")),
        [(path, mode, oid, *where[oid]) for path, mode, oid in walk.files],
        sorted(walk.excluded),
        MappingProxyType(named),
    )


class _Exports:
    """The bases this process has exported, the most recently used last; at most
    MAX_EXPORTS, each built once however many threads ask for it at the same time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.slots: OrderedDict[tuple, list] = OrderedDict()  # key -> [lock, export or None]

    def open(self, src, commit, patterns: list[str], base_commit: str):
        """(export, descriptor of its pack, descriptor of its index): the descriptors stay
        valid whatever happens to the export afterwards."""
        key = (os.getpid(), os.path.realpath(src.path), str(commit.id), tuple(patterns))
        with self.lock:
            slot = self.slots.setdefault(key, [threading.Lock(), None])
            self.slots.move_to_end(key)
        with slot[0]:
            export = slot[1]
            if export is not None:
                try:
                    return export, *_open_pack(export)
                except OSError:
                    pass  # its folder was removed (a sweep, say): export it again
            export = slot[1] = _build(src, commit, patterns, base_commit)
            opened = _open_pack(export)
        with self.lock:
            while len(self.slots) > MAX_EXPORTS:
                (pid, *_), (_, old) = self.slots.popitem(last=False)
                if old is not None and pid == os.getpid():  # a forked child's parent keeps its own
                    shutil.rmtree(old.folder, ignore_errors=True)
        return export, *opened


_EXPORTS = _Exports()


def _open_pack(export: _Export) -> tuple[int, int]:
    pack = os.open(os.path.join(export.folder, "snapshot.pack"), os.O_RDONLY | os.O_CLOEXEC)
    try:
        index = os.open(os.path.join(export.folder, "snapshot.idx"), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        os.close(pack)
        raise
    return pack, index


def _copy(source: int, dest: str) -> None:
    """Copy the whole file open as ``source`` to the new file ``dest``, in the kernel."""
    size = os.fstat(source).st_size
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444)
    try:
        done = 0
        while done < size:
            try:
                copied = os.copy_file_range(source, fd, size - done, done)
            except OSError:
                copied = os.write(fd, os.pread(source, min(size - done, 1 << 20), done))
            if not copied:
                raise OSError(f"{dest}: the copy stopped at {done} of {size} bytes")
            done += copied
    finally:
        os.close(fd)


def _write_worktree(dest: str, export: _Export, pack: int) -> list:
    """Write the export's files under ``dest`` from its pack, from a small thread pool; return
    their index entries (path, lstat, mode, sha1)."""
    from concurrent.futures import ThreadPoolExecutor

    for folder in export.folders:
        os.mkdir(os.path.join(dest, folder))
    groups: dict[str, list] = {}
    for item in export.files:
        folder, _, _ = item[0].rpartition("/")
        groups.setdefault(folder, []).append(item)
    chunks = [
        (folder, items[i : i + CHUNK])
        for folder, items in groups.items()
        for i in range(0, len(items), CHUNK)
    ]

    def write(chunk) -> list:
        folder, items = chunk
        parent = os.open(os.path.join(dest, folder), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        entries = []
        try:
            for path, mode, oid, offset, length, size in items:
                name = path.rpartition("/")[2]
                data = gitfiles.inflate(pack, offset, length, size)
                info = _write_file(parent, name, mode, data)
                entries.append((os.fsencode(path), info, INDEX_MODES.get(mode, 0o100644), oid))
        finally:
            os.close(parent)
        return entries

    if len(chunks) == 1:
        return write(chunks[0])
    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        return [entry for entries in pool.map(write, chunks) for entry in entries]


def _write_file(parent: int, name: str, mode: int, data: bytes) -> os.stat_result:
    if mode == SYMLINK:
        os.symlink(os.fsdecode(data), name, dir_fd=parent)
        return os.stat(name, dir_fd=parent, follow_symlinks=False)
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644, dir_fd=parent)
    try:
        os.fchmod(fd, 0o755 if mode == 0o100755 else 0o644)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        return os.fstat(fd)
    finally:
        os.close(fd)


# What ``git init`` writes that a snapshot keeps (no hook samples, description or logs).
GIT_CONFIG = (
    "[core]\n\tbare = false\n\trepositoryformatversion = 0\n\tfilemode = true\n"
    "\tlogallrefupdates = true\n"
)


def _init(dest: str) -> str:
    """A new, empty repository at ``dest`` with ``main`` as its unborn HEAD; return its .git.

    Written here rather than by libgit2, which resolves the path with ``realpath``: through
    the ``/proc/<pid>/root`` path of an attempt's disk (yyb/harness/disk.py) that names the
    host's folder under the mount, not the disk.
    """
    gitdir = os.path.join(dest, ".git")
    os.makedirs(dest, exist_ok=True)
    os.mkdir(gitdir)
    for folder in ("objects", "objects/info", "objects/pack", "refs", "refs/heads", "refs/tags"):
        os.mkdir(os.path.join(gitdir, folder))
    os.mkdir(os.path.join(gitdir, "hooks"))
    for name, text in (("HEAD", "ref: refs/heads/main\n"), ("config", GIT_CONFIG)):
        with open(os.path.join(gitdir, name), "x") as handle:
            handle.write(text)
    return gitdir


def create(source_path: str, base_commit: str, excluded_paths: list[str], dest: str) -> Snapshot:
    """Export ``base_commit`` of the repository at ``source_path`` into a new repo at ``dest``.

    Raises:
        UsageError: the source repository or the commit cannot be found.
    """
    from yyb.harness import source

    src = source.open_repository(source_path)
    commit = source.commit_at(src, base_commit, "base_commit")
    export, pack, index = _EXPORTS.open(src, commit, list(excluded_paths), base_commit)
    return _materialize(export, pack, index, base_commit, export.excluded, dest)


@dataclass(frozen=True)
class Shipped:
    """A base's export as bytes, for another machine to make the same snapshot from
    (``ship``, ``create_shipped``): the pack of the filtered tree and the snapshot commit, and
    what the receipt says of it."""

    base_commit: str
    commit: str  # the snapshot commit the pack must rebuild exactly
    excluded: tuple[str, ...]
    pack: bytes
    index: bytes


def ship(source_path: str, base_commit: str, excluded_paths: list[str]) -> tuple[Shipped, list]:
    """``base_commit``'s export, as bytes (the excluded paths' content is not in it), and the
    oids, in the store's naming, of the blobs its files hold.

    Raises:
        UsageError: the source repository or the commit cannot be found.
    """
    from yyb.harness import source

    src = source.open_repository(source_path)
    commit = source.commit_at(src, base_commit, "base_commit")
    export, pack, index = _EXPORTS.open(src, commit, list(excluded_paths), base_commit)
    try:
        data = [os.pread(fd, os.fstat(fd).st_size, 0) for fd in (pack, index)]
    finally:
        os.close(pack)
        os.close(index)
    shipped = Shipped(base_commit, export.commit, tuple(export.excluded), *data)
    return shipped, sorted(set(export.named.values()))


_SHIPPED_LOCK = threading.Lock()


def create_shipped(shipped: Shipped, dest: str) -> Snapshot:
    """The snapshot ``shipped`` describes, in a new repo at ``dest``: what ``create`` makes
    on the controller, made where the controller's repository is not.

    Its pack goes into a private repository of this process (once per shipment) and
    is read through libgit2, which checks every object's id; the tree is walked and exported
    again, and the rebuilt snapshot commit must be the shipped one, so a pack that lost,
    changed or added a file is refused.

    Raises:
        CorruptObject: the pack is damaged or does not rebuild the shipped snapshot commit
            (the machine's fault, not the case's).
    """
    import hashlib

    import pygit2

    from yyb.errors import CorruptObject, UsageError
    from yyb.harness import source

    digest = hashlib.sha256(shipped.pack)
    digest.update(shipped.index)
    with _SHIPPED_LOCK:  # one private repository per distinct shipment (bytes, not claims)
        holder = os.path.join(scratch.run_folder(), f"yyb-shipped-{digest.hexdigest()}")
        if not os.path.isdir(holder):
            staging = scratch.folder("shipping")
            gitdir = pygit2.init_repository(staging, bare=True).path
            checksum = shipped.pack[-20:].hex()  # a pack's name is its trailer (SHA-1)
            name = os.path.join(gitdir, "objects", "pack", f"pack-{checksum}")
            for suffix, data in ((".pack", shipped.pack), (".idx", shipped.index)):
                with open(name + suffix, "wb") as handle:
                    handle.write(data)
            os.rename(staging, holder)
    try:
        src = source.open_repository(holder)
        commit = source.commit_at(src, shipped.commit, "snapshot_commit")
        export, pack, index = _EXPORTS.open(src, commit, [], shipped.base_commit)
    except (pygit2.GitError, KeyError, ValueError, OSError, UsageError) as exc:
        raise CorruptObject(
            None, f"the shipped snapshot of {shipped.base_commit} is damaged: {exc}"
        ) from None
    if export.commit != shipped.commit:
        os.close(pack)
        os.close(index)
        raise CorruptObject(
            None,
            f"the shipped snapshot of {shipped.base_commit} rebuilds commit {export.commit}, "
            f"not {shipped.commit}",
        )
    return _materialize(export, pack, index, shipped.base_commit, list(shipped.excluded), dest)


def _materialize(export, pack: int, index: int, base_commit: str, excluded, dest) -> Snapshot:
    """Write the snapshot repository of ``export`` at ``dest`` (closing ``pack`` and ``index``,
    its descriptors)."""
    try:
        gitdir = _init(dest)
        packs = os.path.join(gitdir, "objects", "pack", f"pack-{export.checksum}")
        _copy(index, packs + ".idx")
        _copy(pack, packs + ".pack")
        with open(os.path.join(gitdir, "refs", "heads", "main"), "w") as handle:
            handle.write(export.commit + "\n")
        entries = _write_worktree(dest, export, pack)
    finally:
        os.close(pack)
        os.close(index)
    with open(os.path.join(gitdir, "index"), "wb") as handle:
        handle.write(gitfiles.index_file(entries))
    known = {
        os.fsdecode(path): (worktree.stat_key(info), export.named[oid])
        for path, info, mode, oid in entries
        if mode != SYMLINK
    }
    return Snapshot(
        dest,
        base_commit,
        export.commit,
        export.tree,
        len(export.files),
        list(excluded),
        known,
    )


def empty(dest: str) -> Snapshot:
    """A workspace with an empty repository and no base commit (a workflow attempt's)."""
    _init(dest)
    return Snapshot(dest, "", "", "", 0, [])
