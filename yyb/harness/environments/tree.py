"""A built environment's tree: made safe, described by a manifest, its files stored once.

A tree is a folder that becomes (part of) a sandbox's root. Before it is described it is made
safe (``sanitise``): device nodes, fifos and sockets are removed, and no file keeps a setuid,
setgid or sticky bit or a group or other write bit. Its **manifest** is one line per entry,
sorted by path bytes (docs/environments.md, "The manifest")::

    <type> <mode> <size> <sha256> <path>

``type`` is ``d`` (folder), ``f`` (file) or ``l`` (symbolic link); ``mode`` the permission
bits in four octal digits; ``size`` the file's bytes (0 for a folder, the target's bytes for a
link); ``sha256`` the file's content or the link's target (``-`` for a folder); ``path`` is
relative to the tree, ``.`` for the tree itself, with every byte below 0x21, 0x25 (``%``),
0x7f and above escaped as ``%XX``. The manifest's SHA-256 names the built tree.

Files are kept in a **pool** shared by every environment of a registry, one file per content
and mode (``pool/<2 hex>/<62 hex>.<mode>``), and each tree holds hard links to them: a file
that two environments share is on the disk once.

Verifying a tree against its manifest reads every file (``verify``). Before each use a cheaper
check suffices (``unchanged``): the tree's **stamp**, a digest of every entry's inode, size,
modification and change times and mode taken when it was last verified, read again. Any write,
chmod or utime changes a change time, which no process can set back; a hard link added to a
pool file (a new environment sharing it) changes it too, and the next use then verifies the
tree in full and stamps it again.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator

from yyb.errors import EnvironmentMismatch

CHUNK = 1 << 20
SAFE = frozenset(range(0x21, 0x7F)) - {0x25}
KEEP_BITS = 0o755  # what a mode keeps: no setuid, setgid, sticky, group or other write


def quote(path: bytes) -> str:
    """``path`` as the manifest writes it: printable ASCII but ``%`` as is, the rest ``%XX``."""
    return "".join(chr(b) if b in SAFE else f"%{b:02X}" for b in path)


def sanitise(root: str) -> list[tuple[str, str]]:
    """Make the tree at ``root`` safe to show: remove what is not a file, folder or link and
    drop the mode bits a shared read-only tree must not have. Returns (path, what was done)
    for each removal and each mode changed, paths relative to ``root``."""
    done = []
    for path, info in _walk(root):
        full = os.path.join(root, path) if path != "." else root
        kind = stat.S_IFMT(info.st_mode)
        if kind in (stat.S_IFREG, stat.S_IFDIR):
            mode = stat.S_IMODE(info.st_mode)
            if mode & ~KEEP_BITS:
                os.chmod(full, mode & KEEP_BITS | (0o700 if kind == stat.S_IFDIR else 0))
                done.append((path, f"mode {mode:04o} made {mode & KEEP_BITS:04o}"))
        elif kind != stat.S_IFLNK:
            os.unlink(full)
            done.append((path, "removed: not a file, folder or link"))
    return done


def _walk(root: str) -> Iterator[tuple[str, os.stat_result]]:
    """(relative path, lstat) of ``root`` and everything below it, links not followed, in no
    particular order; a stack, not recursion: a tree can be deeper than any limit."""
    yield ".", os.lstat(root)
    stack = [""]
    while stack:
        prefix = stack.pop()
        with os.scandir(os.path.join(root, prefix) if prefix else root) as entries:
            for entry in entries:
                rel = f"{prefix}/{entry.name}" if prefix else entry.name
                info = entry.stat(follow_symlinks=False)
                yield rel, info
                if stat.S_ISDIR(info.st_mode):
                    stack.append(rel)


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _line(root: str, path: str, info: os.stat_result, sha: str | None = None) -> bytes:
    """The manifest line of one entry (``sha``: a file's content digest, when known)."""
    full = os.path.join(root, path) if path != "." else root
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISDIR(info.st_mode):
        kind, size, sha = "d", 0, "-"
    elif stat.S_ISLNK(info.st_mode):
        target = os.fsencode(os.readlink(full))
        kind, size, sha, mode = "l", len(target), hashlib.sha256(target).hexdigest(), 0o777
    else:
        kind, size, sha = "f", info.st_size, sha or file_sha256(full)
    return f"{kind} {mode:04o} {size} {sha} {quote(os.fsencode(path))}\n".encode()


def _sorted(root: str) -> list[tuple[str, os.stat_result]]:
    return sorted(_walk(root), key=lambda item: os.fsencode(item[0]))


def manifest(root: str) -> bytes:
    """The manifest of the (sanitised) tree at ``root``: every entry's line, sorted."""
    return b"".join(_line(root, path, info) for path, info in _sorted(root))


def manifest_sha256(data: bytes) -> str:
    """The SHA-256 that names a built tree: of its manifest's bytes."""
    return hashlib.sha256(data).hexdigest()


def intern(root: str, pool: str) -> int:
    """Replace every file of the tree at ``root`` by a hard link into ``pool`` (adding what the
    pool lacks); returns the bytes the tree holds that the pool already had."""
    shared = 0
    for path, info in _walk(root):
        if not stat.S_ISREG(info.st_mode):
            continue
        full = os.path.join(root, path)
        sha, mode = file_sha256(full), stat.S_IMODE(info.st_mode)
        kept = os.path.join(pool, sha[:2], f"{sha[2:]}.{mode:04o}")
        if os.path.exists(kept):
            if os.path.samefile(kept, full):
                continue
            temp = f"{full}.yyb-link"
            os.link(kept, temp)
            os.replace(temp, full)
            shared += info.st_size
        else:
            os.makedirs(os.path.dirname(kept), exist_ok=True)
            os.link(full, kept)
    return shared


def stamp(root: str) -> str:
    """The digest of every entry's path, inode, size, times and mode, as they are now."""
    digest = hashlib.sha256()
    for path, info in _sorted(root):
        digest.update(
            f"{quote(os.fsencode(path))} {info.st_ino} {info.st_size} {info.st_mtime_ns} "
            f"{info.st_ctime_ns} {info.st_mode:o}\n".encode()
        )
    return digest.hexdigest()


def verify(root: str, expected: bytes, name: str) -> None:
    """Compare the tree at ``root`` with its manifest ``expected``, reading every file.

    Raises:
        EnvironmentMismatch: the first path (in manifest order) that is changed, missing or
            not in the manifest.
    """
    found = _sorted(root)
    have = {quote(os.fsencode(path)): (path, info) for path, info in found}
    want = {}
    for line in expected.decode("ascii").splitlines():
        want[line.rsplit(" ", 1)[-1]] = line + "\n"
    for quoted in sorted(set(want) | set(have), key=lambda q: q.encode()):
        if quoted not in have:
            raise EnvironmentMismatch(name, quoted, "missing from the built tree")
        if quoted not in want:
            raise EnvironmentMismatch(name, quoted, "not in the manifest")
        path, info = have[quoted]
        if _line(root, path, info).decode() != want[quoted]:
            raise EnvironmentMismatch(name, quoted, "differs from the manifest")
