"""The base commit as a Git repository in a rebuilt workspace, from the store alone.

A grader may want to diff the candidate's work against the base, apply a patch, or check a
file out as the base had it. The workspace it gets is rebuilt from listings, with no ``.git``,
so ``write`` adds one: a repository with one root commit whose tree is the base listing's
(the snapshot's tree: the base commit's minus the harness-owned paths), ``HEAD`` on branch
``main`` at it, and an index of the base. The worktree is the graded one, so ``git status`` and
``git diff`` show the candidate's changes as uncommitted.

The repository is written in Git's formats without Git (yyb/harness/gitfiles.py): one
undeltified pack built once per process for each base (keyed by its listing), copied into each
workspace. The index carries the real stat data of the files that are exactly the base's, so
Git does not hash them again, and none for the others, so Git always compares their content.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections import OrderedDict
from dataclasses import dataclass
from types import SimpleNamespace

from yyb.harness import gitfiles, scratch

AUTHOR = ("yyb", "yyb@base.invalid")
BRANCH = "main"
MAX_BUILT = 4  # bases kept built at once in a process
# No stat data: Git then compares the file's content with the index entry.
_ZERO = SimpleNamespace(
    st_ctime_ns=0, st_mtime_ns=0, st_dev=0, st_ino=0, st_uid=0, st_gid=0, st_size=0
)


@dataclass(frozen=True)
class _Built:
    folder: str  # holds base.pack and base.idx
    checksum: str
    commit: str
    ids: dict[str, bytes]  # store blob oid -> Git's raw blob id


_built: OrderedDict[str, _Built] = OrderedDict()
_lock = threading.Lock()


def _trees(entries: dict[str, tuple[int, bytes]]) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """(root tree id, every tree as (id, body)) for path -> (mode, raw blob id) entries."""
    rows: dict[str, dict[bytes, tuple[int, bytes]]] = {"": {}}
    for path, (mode, oid) in entries.items():
        parent, _, name = path.rpartition("/")
        rows.setdefault(parent, {})[name.encode("utf-8", "surrogateescape")] = (mode, oid)
        while parent and parent.rpartition("/")[0] not in rows:
            parent = parent.rpartition("/")[0]
            rows.setdefault(parent, {})
    trees = []
    for folder in sorted(rows, key=lambda f: (-f.count("/"), f) if f else (1, "")):
        body = gitfiles.tree_body([(mode, name, oid) for name, (mode, oid) in rows[folder].items()])
        tree_id = gitfiles.object_id(gitfiles.OBJ_TREE, body)
        trees.append((tree_id, body))
        if folder:
            parent, _, name = folder.rpartition("/")
            rows[parent][name.encode("utf-8", "surrogateescape")] = (gitfiles.TREE, tree_id)
    return trees[-1][0], trees


def _build(store, base: dict[str, tuple[int, str]]) -> _Built:
    """Pack the base: its blobs one at a time (a base can be large), then its trees and commit."""
    folder = scratch.folder("base")
    oids = sorted({oid for _, oid in base.values()})
    folders = {""} | {p[:i] for p in base for i, c in enumerate(p) if c == "/"}
    # Stored, not deflated (zlib level 0): the pack lives in this process's run folder and
    # is built while a candidate runs, where level 1 took 1.6x the time for 0.6x the bytes.
    count = len(oids) + len(folders) + 1
    pack = gitfiles.PackWriter(os.path.join(folder, "base.pack"), count, level=0)
    ids = {}
    for oid in oids:
        data = store.objects.get(oid).body
        ids[oid] = gitfiles.object_id(gitfiles.OBJ_BLOB, data)
        pack.add(gitfiles.OBJ_BLOB, ids[oid], data)
    root, trees = _trees({path: (mode, ids[oid]) for path, (mode, oid) in base.items()})
    for tree_id, tree in trees:
        pack.add(gitfiles.OBJ_TREE, tree_id, tree)
    body = gitfiles.commit_body(root.hex(), *AUTHOR, 0, "base\n")
    commit = gitfiles.object_id(gitfiles.OBJ_COMMIT, body)
    pack.add(gitfiles.OBJ_COMMIT, commit, body)
    return _Built(folder, pack.finish(), commit.hex(), ids)


def _get(store, key: str, base: dict[str, tuple[int, str]]) -> _Built:
    with _lock:
        built = _built.get(key)
        if built is not None and os.path.isdir(built.folder):
            _built.move_to_end(key)
            return built
        built = _build(store, base)
        _built[key] = built
        while len(_built) > MAX_BUILT:
            _, old = _built.popitem(last=False)
            shutil.rmtree(old.folder, ignore_errors=True)
        return built


def write(
    store,
    key: str,
    base: dict[str, tuple[int, str]],
    graded: dict[str, tuple[int, str]],
    dest: str,
) -> str:
    """Make ``dest/.git`` a repository at the base (``base``: path -> (mode, store blob oid);
    ``key`` names it, the base listing's oid) whose worktree ``dest`` holds ``graded``;
    return the base commit's id."""
    commit = write_repository(store, key, base, dest)
    write_index(store, key, base, graded, dest, os.path.join(dest, ".git"))
    return commit


def write_repository(store, key: str, base: dict[str, tuple[int, str]], dest: str) -> str:
    """``dest/.git`` without its index: the base's pack, ``HEAD`` on ``main`` at the base
    commit, and the config; return the base commit's id."""
    built = _get(store, key, base)
    git = os.path.join(dest, ".git")
    packs = os.path.join(git, "objects", "pack")
    os.makedirs(packs)
    for folder in ("refs/heads", "refs/tags", "objects/info", "info"):
        os.makedirs(os.path.join(git, folder), exist_ok=True)
    name = f"pack-{built.checksum}"
    shutil.copyfile(os.path.join(built.folder, "base.pack"), os.path.join(packs, name + ".pack"))
    shutil.copyfile(os.path.join(built.folder, "base.idx"), os.path.join(packs, name + ".idx"))
    _text(os.path.join(git, "HEAD"), f"ref: refs/heads/{BRANCH}\n")
    _text(os.path.join(git, "refs", "heads", BRANCH), built.commit + "\n")
    _text(
        os.path.join(git, "config"),
        "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n",
    )
    return built.commit


def write_index(
    store,
    key: str,
    base: dict[str, tuple[int, str]],
    graded: dict[str, tuple[int, str]],
    files: str,
    git: str,
) -> None:
    """``git/index``: the base's entries, each with the stat data of its file under ``files``
    when ``graded`` has it exactly as the base does (so Git does not hash it again), and none
    otherwise (so Git compares its content)."""
    built = _get(store, key, base)
    rows = []
    for path, (mode, oid) in base.items():
        info = _ZERO
        if graded.get(path) == (mode, oid):
            try:
                info = os.lstat(os.path.join(files, path))
            except OSError:
                pass
        rows.append((path.encode("utf-8", "surrogateescape"), info, mode, built.ids[oid]))
    os.makedirs(git, exist_ok=True)
    with open(os.path.join(git, "index"), "wb") as handle:
        handle.write(gitfiles.index_file(rows))


def _text(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)
