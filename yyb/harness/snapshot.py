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


def _copy_tree(src, dst, tree, prefix: str, patterns: list[str], excluded: list[str]) -> tuple:
    import pygit2

    builder = dst.TreeBuilder()
    count = 0
    for entry in tree:
        path = f"{prefix}{entry.name}"
        if is_excluded(path, patterns):
            excluded.append(path)
            continue
        if entry.filemode == GITLINK:
            excluded.append(path)  # a submodule's commit is not in this repository
            continue
        obj = src[entry.id]
        if obj.type == pygit2.GIT_OBJECT_TREE:
            sub, n = _copy_tree(src, dst, obj, path + "/", patterns, excluded)
            if n:
                builder.insert(entry.name, sub, entry.filemode)
                count += n
        else:
            dst.odb.write(obj.type, obj.read_raw())
            builder.insert(entry.name, entry.id, entry.filemode)
            count += 1
    return builder.write(), count


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
    dst = pygit2.init_repository(dest, bare=False, initial_head="main")
    _scrub(dst.path)
    excluded: list[str] = []
    tree_id, count = _copy_tree(src, dst, commit.tree, "", excluded_paths, excluded)
    when = commit.committer.time
    signature = pygit2.Signature(*SNAPSHOT_AUTHOR, when, 0)
    message = f"snapshot of {base_commit}\n"
    snap = dst.create_commit("refs/heads/main", signature, signature, message, tree_id, [])
    dst.checkout_tree(dst[tree_id], strategy=pygit2.GIT_CHECKOUT_FORCE)
    dst.set_head("refs/heads/main")
    dst.index.read_tree(dst[tree_id])
    dst.index.write()
    for name in ("logs",):
        target = os.path.join(dst.path, name)
        if os.path.isdir(target):
            shutil.rmtree(target)
    return Snapshot(dest, base_commit, str(snap), str(tree_id), count, sorted(excluded))
