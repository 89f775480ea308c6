"""Retaining a workspace: every file as a blob, a listing record, Git state, a unified diff.

A listing (``yylo_benchmark_file_listing.v2``) names every worktree file with its Git mode and
the blob holding its bytes (a symlink's blob holds its target; links are never followed), so a
workspace can be rebuilt from the store alone. ``.git`` is described by the manifest's Git
state instead; a ``.git`` name deeper down is omitted, never listed.

A listing read back from the store is treated as hostile: ``entries_of`` refuses any path that
could not be written inside the folder it is rebuilt into (see ``unsafe_path``), and
``rebuild`` checks the whole listing before it writes anything, then opens every folder
without following links.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from yyb.errors import InvalidRecord, UnsafeListing
from yyb.store import codec
from yyb.store.objects import hash_object

LISTING = "yylo_benchmark_file_listing.v2"
MANIFEST = "yylo_benchmark_post_execution_manifest.v2"
STREAM_FILE = 16 << 20  # files above this are streamed into the store one at a time
MAX_DIFF_FILE = 1 << 20  # larger or binary files appear in the patch as a one-line note
MAX_TOTAL = 2 << 30  # bytes of workspace retained before the rest is listed as omitted
MODES = (0o100644, 0o100755, 0o120000)
SYMLINK = 0o120000
MAX_NAME = 255  # bytes in one path component (NAME_MAX on Linux)
MAX_TARGET = 4095  # bytes in a symlink target (PATH_MAX less its NUL)
GIT_STATE = "a .git name is Git state, never retained as a file"


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
        for name in sorted(n for n in dirs + files if _is_git_name(n)):
            # A nested repository (or .GIT, which is .git where case does not count) would
            # act as one in a rebuilt workspace: rebuild refuses it, so it is never listed.
            result.omitted.append([_text_name(_relative(rel_folder, name)), GIT_STATE])
        dirs[:] = [d for d in dirs if not _is_git_name(d)]
        files = [f for f in files if not _is_git_name(f)]
        dirs.sort()
        names = list(files)
        for d in list(dirs):
            if os.path.islink(os.path.join(folder, d)):  # a symlink to a folder: list, not enter
                dirs.remove(d)
                names.append(d)
        for name in sorted(names):
            path = os.path.join(folder, name)
            rel = _relative(rel_folder, name)
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


def _relative(rel_folder: str, name: str) -> str:
    return os.path.normpath(os.path.join(rel_folder, name)).replace(os.sep, "/")


def _is_git_name(name: str) -> bool:
    return name.lower() == ".git"


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
        if _is_git_name(part):
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
    from concurrent.futures import ThreadPoolExecutor

    try:
        entries = sorted(entries_of(listing).items())
        targets = {
            path: _link_target(store, path, oid) for path, (mode, oid) in entries if mode == SYMLINK
        }
    except UnsafeListing as exc:
        raise UnsafeListing(exc.path, exc.reason, _listing_oid(listing)) from None
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

        def write(item: tuple[str, tuple[int, str]]) -> None:
            path, (mode, oid) = item
            *parts, name = path.split("/")
            with _folder(top, parts) as parent:
                if mode == SYMLINK:
                    os.symlink(targets[path], name, dir_fd=parent)
                    return
                _write_file(parent, name, store.objects.get(oid).body, mode)

        if len(entries) < 64:
            for item in entries:
                write(item)
            return
        with ThreadPoolExecutor(max_workers=8) as pool:
            for _ in pool.map(write, entries):
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


def _write_file(parent: int, name: str, body: bytes, mode: int) -> None:
    perms = 0o755 if mode == 0o100755 else 0o644
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(name, flags, perms, dir_fd=parent)
    try:
        os.fchmod(fd, perms)  # exact, whatever the umask
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


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
