"""Snapshots: a fresh private repository holding one commit's tree, nothing else.

The snapshot repository gets a new root commit (no parents) whose tree is the base commit's
tree without the harness-owned paths. Only the blobs and trees of that tree are copied, so the
snapshot holds no object the base commit cannot reach: no history, no future commits, no other
branches, remotes, alternates, hooks, worktree links or reflogs.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

SNAPSHOT_AUTHOR = ("yyb", "yyb@snapshot.invalid")
GITLINK = 0o160000


@dataclass(frozen=True)
class Snapshot:
    path: str  # the workspace (the repository's working tree)
    base_commit: str
    commit: str  # the snapshot's root commit
    tree: str
    file_count: int
    excluded: list[str]  # paths that were present at the base commit and left out


def is_excluded(path: str, patterns: list[str]) -> bool:
    """Whether a repository-relative path falls under one of the excluded paths.

    A pattern ending in ``/`` names a folder and everything below it; otherwise it names that
    exact path (file or folder) and everything below it.
    """
    for pattern in patterns:
        clean = pattern.strip("/")
        if path == clean or path.startswith(clean + "/"):
            return True
    return False


def _collect(src, tree, prefix: str, patterns: list[str], excluded: list[str], blobs: dict):
    """Walk ``tree``: gather included blobs, and return a nested plan of the filtered tree."""
    import pygit2

    plan = []
    for entry in tree:
        path = f"{prefix}{entry.name}"
        if is_excluded(path, patterns) or entry.filemode == GITLINK:
            excluded.append(path)  # a submodule's commit is not in this repository either
            continue
        obj = src[entry.id]
        if obj.type == pygit2.GIT_OBJECT_TREE:
            sub = _collect(src, obj, path + "/", patterns, excluded, blobs)
            if sub:
                plan.append((entry.name, entry.filemode, sub))
        else:
            blobs[str(entry.id)] = obj
            plan.append((entry.name, entry.filemode, entry.id))
    return plan


def _build_trees(dst, plan) -> object:
    builder = dst.TreeBuilder()
    for name, mode, target in plan:
        oid = _build_trees(dst, target) if isinstance(target, list) else target
        builder.insert(name, oid, mode)
    return builder.write()


def _pack_header(type_num: int, size: int) -> bytes:
    byte = (type_num << 4) | (size & 0x0F)
    size >>= 4
    out = bytearray()
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def write_pack(gitdir: str, objects: dict) -> int:
    """Write ``objects`` (sha1 hex -> pygit2 blob) as one undeltified pack plus its v2 index.

    One pack file instead of thousands of loose objects: the snapshot is bounded by the
    speed of compressing its bytes, not of creating files.
    """
    import hashlib
    import struct
    import zlib

    folder = os.path.join(gitdir, "objects", "pack")
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, "tmp-snapshot.pack")
    digest = hashlib.sha1()
    entries = []
    with open(tmp, "wb") as handle:
        head = b"PACK" + struct.pack(">II", 2, len(objects))
        handle.write(head)
        digest.update(head)
        offset = len(head)
        for hexid in sorted(objects):
            data = objects[hexid].read_raw()
            chunk = _pack_header(3, len(data)) + zlib.compress(data, 1)
            handle.write(chunk)
            digest.update(chunk)
            entries.append((bytes.fromhex(hexid), zlib.crc32(chunk), offset))
            offset += len(chunk)
        trailer = digest.digest()
        handle.write(trailer)
    fanout = [0] * 256
    for sha, _, _ in entries:
        fanout[sha[0]] += 1
    total = 0
    for i in range(256):
        total += fanout[i]
        fanout[i] = total
    small, large = [], []
    for _, _, off in entries:
        if off < 0x80000000:
            small.append(off)
        else:
            small.append(0x80000000 | len(large))
            large.append(off)
    index = b"".join(
        [
            b"\377tOc",
            struct.pack(">I", 2),
            struct.pack(">256I", *fanout),
            b"".join(sha for sha, _, _ in entries),
            b"".join(struct.pack(">I", crc) for _, crc, _ in entries),
            b"".join(struct.pack(">I", off) for off in small),
            b"".join(struct.pack(">Q", off) for off in large),
            trailer,
        ]
    )
    index += hashlib.sha1(index).digest()
    name = os.path.join(folder, f"pack-{trailer.hex()}")
    with open(name + ".idx", "wb") as handle:
        handle.write(index)
    os.rename(tmp, name + ".pack")
    return len(entries)


def _write_worktree(dest: str, plan, blobs: dict) -> None:
    """Write the snapshot's files from the blobs already in hand, from a small thread pool.

    This is what a checkout does, without reading every blob back out of the new pack.
    """
    from concurrent.futures import ThreadPoolExecutor

    files = []

    def walk(items, folder: str) -> None:
        for name, mode, target in items:
            path = os.path.join(folder, name)
            if isinstance(target, list):
                os.mkdir(path)
                walk(target, path)
            else:
                files.append((path, mode, str(target)))

    walk(plan, dest)

    def write(item) -> None:
        path, mode, hexid = item
        data = blobs[hexid].read_raw()
        if mode == 0o120000:
            os.symlink(os.fsdecode(data), path)
            return
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.fchmod(fd, 0o755 if mode == 0o100755 else 0o644)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in pool.map(write, files):
            pass


def _scrub(gitdir: str) -> None:
    """Remove what ``git init`` leaves that a snapshot must not hold (hook samples and such)."""
    for name in ("hooks", "info", "description", "logs"):
        target = os.path.join(gitdir, name)
        if os.path.isdir(target):
            shutil.rmtree(target)
        elif os.path.exists(target):
            os.unlink(target)
    os.mkdir(os.path.join(gitdir, "hooks"))


def create(source_path: str, base_commit: str, excluded_paths: list[str], dest: str) -> Snapshot:
    """Export ``base_commit`` of the repository at ``source_path`` into a new repo at ``dest``.

    Raises:
        UsageError: the source repository or the commit cannot be found.
    """
    import pygit2

    from yyb.harness import source

    src = source.open_repository(source_path)
    commit = source.commit_at(src, base_commit, "base_commit")
    init = pygit2.init_repository(dest, bare=False, initial_head="main")
    gitdir = init.path
    _scrub(gitdir)
    excluded: list[str] = []
    blobs: dict = {}
    plan = _collect(src, commit.tree, "", excluded_paths, excluded, blobs)
    write_pack(gitdir, blobs)
    dst = pygit2.Repository(dest)  # opened after the pack exists, so it sees it
    tree_id = _build_trees(dst, plan)
    when = commit.committer.time
    signature = pygit2.Signature(*SNAPSHOT_AUTHOR, when, 0)
    message = f"snapshot of {base_commit}\n"
    snap = dst.create_commit("refs/heads/main", signature, signature, message, tree_id, [])
    _write_worktree(dest, plan, blobs)
    dst.set_head("refs/heads/main")
    dst.index.read_tree(dst[tree_id])
    dst.index.add_all()  # records each file's stat data, so `git status` is clean and fast
    dst.index.write()
    logs = os.path.join(gitdir, "logs")
    if os.path.isdir(logs):
        shutil.rmtree(logs)
    return Snapshot(dest, base_commit, str(snap), str(tree_id), _files(plan), sorted(excluded))


def _files(plan) -> int:
    return sum(_files(target) if isinstance(target, list) else 1 for _, _, target in plan)


def empty(dest: str) -> Snapshot:
    """A workspace with an empty repository and no base commit (a workflow attempt's)."""
    import pygit2

    repo = pygit2.init_repository(dest, bare=False, initial_head="main")
    _scrub(repo.path)
    return Snapshot(dest, "", "", "", 0, [])
