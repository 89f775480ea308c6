"""Retaining a workspace: every file as a blob, a listing record, Git state, a unified diff.

A listing (``yylo_benchmark_file_listing.v2``) names every worktree file with its Git mode and
the blob holding its bytes (a symlink's blob holds its target; links are never followed), so a
workspace can be rebuilt from the store alone. ``.git`` is described by the manifest's Git
state instead.
"""

from __future__ import annotations

import difflib
import os
import stat
from dataclasses import dataclass, field

from yyb.store.objects import hash_object

LISTING = "yylo_benchmark_file_listing.v2"
MANIFEST = "yylo_benchmark_post_execution_manifest.v2"
STREAM_FILE = 16 << 20  # files above this are streamed into the store one at a time
MAX_DIFF_FILE = 1 << 20  # larger or binary files appear in the patch as a one-line note
MAX_TOTAL = 2 << 30  # bytes of workspace retained before the rest is listed as omitted


@dataclass
class Scan:
    entries: dict[str, tuple[int, str]] = field(default_factory=dict)  # path -> (mode, oid)
    omitted: list[list[str]] = field(default_factory=list)  # [path, reason]


def _mode(info: os.stat_result) -> int:
    if stat.S_ISLNK(info.st_mode):
        return 0o120000
    return 0o100755 if info.st_mode & 0o111 else 0o100644


def scan(store, root: str) -> Scan:
    """Store every file under ``root`` (except the top-level ``.git``) and list it."""
    result = Scan()
    small: list[tuple[str, int, bytes]] = []
    total = 0
    for folder, dirs, files in os.walk(root):
        rel_folder = os.path.relpath(folder, root)
        if rel_folder == ".":
            dirs[:] = [d for d in dirs if d != ".git"]
            if ".git" in files:  # a .git file (worktree link) is Git state, not content
                files = [f for f in files if f != ".git"]
        dirs.sort()
        names = list(files)
        for d in list(dirs):
            if os.path.islink(os.path.join(folder, d)):  # a symlink to a folder: list, not enter
                dirs.remove(d)
                names.append(d)
        for name in sorted(names):
            path = os.path.join(folder, name)
            rel = os.path.normpath(os.path.join(rel_folder, name)).replace(os.sep, "/")
            if _text_name(rel) != rel:
                result.omitted.append([_text_name(rel), "the file name is not UTF-8"])
                continue
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                small.append((rel, 0o120000, os.fsencode(os.readlink(path))))
                continue
            if not stat.S_ISREG(info.st_mode):
                result.omitted.append([rel, "not a regular file or symlink"])
                continue
            total += info.st_size
            if total > MAX_TOTAL:
                result.omitted.append([rel, f"workspace over {MAX_TOTAL} bytes"])
                continue
            if info.st_size > STREAM_FILE:
                with open(path, "rb") as handle:
                    oid = store.objects.put_blob_file(handle, info.st_size)
                result.entries[rel] = (_mode(info), oid)
                continue
            with open(path, "rb") as handle:
                small.append((rel, _mode(info), handle.read()))
    oids = store.objects.put_many([("blob", data) for _, _, data in small])
    for (rel, mode, _), oid in zip(small, oids, strict=True):
        result.entries[rel] = (mode, oid)
    return result


def listing_record(scan_result: Scan) -> dict:
    files = sorted({oid for _, oid in scan_result.entries.values()})
    index = {oid: i for i, oid in enumerate(files)}
    entries = [
        [path, mode, index[oid]]
        for path, (mode, oid) in sorted(
            scan_result.entries.items(), key=lambda item: item[0].encode()
        )
    ]
    record = {"schema_version": LISTING, "entries": entries, "omitted": sorted(scan_result.omitted)}
    record["links"] = {"files": files}
    return record


def entries_of(listing: dict) -> dict[str, tuple[int, str]]:
    """path -> (mode, blob oid) from a listing record."""
    files = listing["links"]["files"]
    return {path: (mode, files[i]) for path, mode, i in listing["entries"]}


def git_state(workspace: str) -> dict:
    """HEAD, refs, index and status of the candidate's repository, as plain data.

    The candidate controls this repository: anything unreadable (a corrupt index, a FIFO where
    a file belongs) is recorded as such rather than read, and never blocks.
    """
    import hashlib

    import pygit2

    gitdir = os.path.join(workspace, ".git")
    for name in ("index", "HEAD", "config"):
        path = os.path.join(gitdir, name)
        if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
            return {"readable": False, "error": f".git/{name} is not a regular file"}
    try:
        repo = pygit2.Repository(workspace)
        state: dict = {"readable": True}
        try:
            state["head"] = {
                "ref": None if repo.head_is_detached else repo.head.name,
                "commit": str(repo.head.target),
            }
        except (pygit2.GitError, KeyError):
            state["head"] = {"ref": None, "commit": None}
        refs = {}
        for name in sorted(repo.references):
            try:
                refs[name] = str(repo.references[name].resolve().target)
            except (pygit2.GitError, KeyError):
                refs[name] = None
        state["refs"] = refs
        lines = [
            f"{e.mode:o} {e.id} {e.path}\n".encode("utf-8", "surrogateescape") for e in repo.index
        ]
        state["index"] = {
            "entries": len(lines),
            "sha256": hashlib.sha256(b"".join(sorted(lines))).hexdigest(),
        }
        state["status"] = sorted(
            [_text_name(path), int(flags)] for path, flags in repo.status().items()
        )
        return state
    except (pygit2.GitError, KeyError, OSError, ValueError) as exc:
        return {"readable": False, "error": str(exc)[:1000] or exc.__class__.__name__}


def _text_name(name: str) -> str:
    """A file name as valid text (undecodable bytes shown as escapes)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def diff(store, before: dict[str, tuple[int, str]], after: dict[str, tuple[int, str]]) -> bytes:
    """A unified diff (``a/`` and ``b/`` prefixes) from ``before`` to ``after``."""
    out: list[str] = []
    for path in sorted(set(before) | set(after), key=str.encode):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        old_text = _text(store, old)
        new_text = _text(store, new)
        if old_text is None or new_text is None:
            out.append(f"Binary or large files a/{path} and b/{path} differ\n")
            continue
        if old and new and old[0] != new[0]:
            out.append(f"diff --git a/{path} b/{path}\nold mode {old[0]:o}\nnew mode {new[0]:o}\n")
        lines = difflib.unified_diff(
            old_text.splitlines(keepends=True),
            new_text.splitlines(keepends=True),
            fromfile=f"a/{path}" if old else "/dev/null",
            tofile=f"b/{path}" if new else "/dev/null",
            n=3,
        )
        for line in lines:
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out).encode("utf-8", "surrogateescape")


def _text(store, entry: tuple[int, str] | None) -> str | None:
    if entry is None:
        return ""
    obj = store.objects.get(entry[1])
    if len(obj.body) > MAX_DIFF_FILE or b"\0" in obj.body:
        return None
    try:
        return obj.body.decode("utf-8")
    except UnicodeDecodeError:
        return None


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

    Folders are made first, then files are written from a small thread pool (file creation,
    not hashing, is what costs on a workspace of thousands of files).

    Raises:
        ObjectMissing / CorruptObject: a blob the listing names is missing or damaged.
    """
    from concurrent.futures import ThreadPoolExecutor

    entries = sorted(entries_of(listing).items())
    folders = {dest}
    for path, _ in entries:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            folders.add(os.path.join(dest, *parts[:i]))
    for folder in sorted(folders, key=len):
        os.makedirs(folder, exist_ok=True)

    def write(item: tuple[str, tuple[int, str]]) -> None:
        path, (mode, oid) = item
        target = os.path.join(dest, *path.split("/"))
        body = store.objects.get(oid).body
        if mode == 0o120000:
            os.symlink(os.fsdecode(body), target)
            return
        fd = os.open(
            target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755 if mode == 0o100755 else 0o644
        )
        try:
            os.fchmod(fd, 0o755 if mode == 0o100755 else 0o644)  # exact, whatever the umask
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    if len(entries) < 64:
        for item in entries:
            write(item)
        return
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in pool.map(write, entries):
            pass


def blob_oid(data: bytes) -> str:
    return hash_object("blob", data)
