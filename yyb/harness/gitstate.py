"""The Git state of a candidate's repository, read as data: nothing in it is obeyed.

Neither git nor libgit2 opens the candidate's repository for the controller: its configuration
could move the worktree onto the host (``core.worktree``), run commands (``core.fsmonitor``,
hooks, filters), pull in host files (``include.path``, ``core.excludesFile``), and ``.git``
itself (a ``gitdir:`` file or a link), ``commondir`` and ``alternates`` could lead to another
repository. Instead the few files the state needs are read here, each opened relative to
``.git`` without following links, none of them the configuration:

- ``HEAD``, the loose refs and ``packed-refs``: at most MAX_REFS refs, names of at most
  MAX_REF_NAME bytes, ``packed-refs`` up to MAX_PACKED_REFS bytes;
- ``index`` (versions 2 to 4), up to MAX_INDEX bytes;
- HEAD's commit and trees, from ``.git/objects`` alone (libgit2's loose and pack readers on
  that folder: no alternates), at most ``worktree.MAX_FILES`` tree entries.

The status compares HEAD, the index and the worktree (walked as ``manifest.scan`` walks it)
with Git's status bits. Ignore rules are configuration too: every file not in the index is
untracked. A file whose stat data differs from its index entry is hashed (SHA-1, as Git
names blobs), up to MAX_HASHED bytes in all. Whatever was not read is named under ``unread``
as ``[what, why]``: a pathological repository is described, never a reason to fail.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import struct

from yyb.harness import worktree

MAX_REFS = 10_000
MAX_REF_NAME = 256
MAX_REF_FILE = 4096
MAX_PACKED_REFS = 4 << 20
MAX_INDEX = 32 << 20
MAX_OBJECT = 16 << 20  # bytes of one commit or tree
MAX_PACKS = 256
MAX_HASHED = 2 << 30  # the most a workspace retains (manifest.MAX_TOTAL)
MAX_STATUS_NAMES = 4 << 20  # bytes of paths in the status list
SYMREF_DEPTH = 5

# Git's status bits (git_status_t), as libgit2 and pygit2 number them.
INDEX_NEW, INDEX_MODIFIED, INDEX_DELETED, INDEX_TYPECHANGE = 1, 2, 4, 16
WT_NEW, WT_MODIFIED, WT_DELETED, WT_TYPECHANGE = 128, 256, 512, 1024
CONFLICTED = 32768
GITLINK, SYMLINK, TREE = 0o160000, 0o120000, 0o040000

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Unread(Exception):
    """Part of the repository that is not read, and why."""


def read(workspace: str) -> dict:
    """HEAD, refs, index digest, status and what was not read, as plain data.

    Never raises for anything the candidate could have made: an unreadable part is named
    under ``unread``, and a ``.git`` that is not a folder makes the whole state unreadable.
    """
    try:
        top = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        return {"readable": False, "error": f"the workspace could not be opened ({exc.strerror})"}
    try:
        try:
            gitdir = os.open(".git", _FOLDER, dir_fd=top)
        except FileNotFoundError:
            return {"readable": False, "error": "the workspace has no .git folder"}
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                reason = ".git is not a folder (a link, or a file naming another repository)"
                return {"readable": False, "error": f"{reason}: not followed"}
            return {"readable": False, "error": f".git could not be opened ({exc.strerror})"}
        try:
            return _Reader(workspace, gitdir).state()
        finally:
            os.close(gitdir)
    finally:
        os.close(top)


class _Reader:
    def __init__(self, workspace: str, gitdir: int) -> None:
        self.workspace = workspace
        self.gitdir = gitdir
        self.unread: list[list[str]] = []

    def note(self, what: str, why: str) -> None:
        self.unread.append([what, why])

    def state(self) -> dict:
        loose, packed = self.refs()
        head_ref, head_commit = self.head(loose, packed)
        refs = {}
        for name in sorted(set(loose) | set(packed)):
            if len(refs) == MAX_REFS:
                self.note(
                    "refs",
                    f"more than {MAX_REFS} refs: only the first {MAX_REFS} by name are listed",
                )
                break
            refs[name] = _resolve(name, loose, packed)
        state: dict = {
            "readable": True,
            "head": {"ref": head_ref, "commit": head_commit},
            "refs": refs,
        }
        index = self.index()
        if index is not None:
            entries, _ = index
            lines = sorted(
                f"{mode:o} {oid} {path}\n".encode("utf-8", "surrogateescape")
                for path, (mode, oid, *_rest) in entries.items()
            )
            state["index"] = {
                "entries": len(lines),
                "sha256": hashlib.sha256(b"".join(lines)).hexdigest(),
            }
            state["status"] = self.status(head_commit, index)
        state["unread"] = self.unread
        return state

    # --- files of .git ----------------------------------------------------------------------

    def file(self, path: str, limit: int, whole: bool = True) -> tuple[bytes, int]:
        """(bytes, mtime in ns) of ``.git/<path>``, opened without following links; at most
        ``limit`` bytes.

        Raises:
            FileNotFoundError: it does not exist.
            Unread: it is not a regular file, could not be read, or (``whole``) is too large.
        """
        *folders, name = path.split("/")
        fd = self.gitdir
        try:
            for folder in folders:
                child = os.open(folder, _FOLDER, dir_fd=fd)
                if fd != self.gitdir:
                    os.close(fd)
                fd = child
            handle = os.open(name, worktree.FILE_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise Unread(f"it could not be opened ({exc.strerror})") from None
        finally:
            if fd != self.gitdir:
                os.close(fd)
        try:
            info = os.fstat(handle)
            if not stat.S_ISREG(info.st_mode):
                raise Unread("it is not a regular file")
            if whole and info.st_size > limit:
                raise Unread(f"it is {info.st_size} bytes, over {limit}")
            return os.pread(handle, limit, 0), info.st_mtime_ns
        except OSError as exc:
            raise Unread(f"it could not be read ({exc.strerror})") from None
        finally:
            os.close(handle)

    def refs(self) -> tuple[dict[str, str], dict[str, str]]:
        """(loose refs, packed refs): name -> the file's content (an oid or ``ref: NAME``)."""
        loose: dict[str, str] = {}
        try:
            refs_fd = os.open("refs", _FOLDER, dir_fd=self.gitdir)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                self.note("refs", f"not a folder, or unreadable ({exc.strerror})")
            refs_fd = None
        if refs_fd is not None:
            walked = worktree.walk(f"/proc/self/fd/{refs_fd}", lambda p, r: None)
            try:
                for item in walked:
                    if len(loose) == MAX_REFS:
                        self.note(
                            "refs", f"more than {MAX_REFS} loose refs: the rest were not read"
                        )
                        break
                    name = "refs/" + item.path
                    if len(name.encode()) > MAX_REF_NAME or not stat.S_ISREG(item.info.st_mode):
                        continue
                    try:
                        data = _read_at(item.folder, item.name, MAX_REF_FILE)
                    except (OSError, Unread):
                        continue
                    target = _ref_value(data)
                    if target is not None:
                        loose[name] = target
            finally:
                walked.close()
                os.close(refs_fd)
        packed: dict[str, str] = {}
        try:
            data, _ = self.file("packed-refs", MAX_PACKED_REFS, whole=False)
        except FileNotFoundError:
            return loose, packed
        except Unread as exc:
            self.note("packed-refs", str(exc))
            return loose, packed
        if len(data) == MAX_PACKED_REFS:
            self.note("packed-refs", f"only its first {MAX_PACKED_REFS} bytes were read")
            data = data[: data.rfind(b"\n") + 1]
        for line in data.split(b"\n"):
            if len(packed) == MAX_REFS:
                self.note("packed-refs", f"more than {MAX_REFS} refs: the rest were not read")
                break
            oid, _, name = line.partition(b" ")
            if _is_oid(oid) and name.startswith(b"refs/") and len(name) <= MAX_REF_NAME:
                try:
                    packed[name.decode()] = oid.decode()
                except UnicodeDecodeError:
                    continue
        return loose, packed

    def head(self, loose: dict, packed: dict) -> tuple[str | None, str | None]:
        try:
            value = _ref_value(self.file("HEAD", MAX_REF_FILE)[0])
        except FileNotFoundError:
            self.note("HEAD", "there is no HEAD")
            return None, None
        except Unread as exc:
            self.note("HEAD", str(exc))
            return None, None
        if value is None:
            self.note("HEAD", "it holds neither an object id nor a ref")
            return None, None
        if not value.startswith("ref: "):
            return None, value
        name = value[5:]
        return name, _resolve(name, loose, packed)

    # --- the index --------------------------------------------------------------------------

    def index(self) -> tuple[dict, int] | None:
        """(path -> (mode, oid, stage, size, mtime_s, mtime_ns, ino), index mtime) or None."""
        try:
            data, mtime = self.file("index", MAX_INDEX)
        except FileNotFoundError:
            return {}, 0
        except Unread as exc:
            self.note("index", str(exc))
            return None
        try:
            return parse_index(data), mtime
        except Unread as exc:
            self.note("index", str(exc))
            return None

    # --- status -----------------------------------------------------------------------------

    def status(self, head_commit: str | None, index: tuple[dict, int]) -> list[list]:
        entries, index_mtime = index
        head: dict[str, tuple[int, str]] = {}
        if head_commit is not None:
            try:
                head = self.tree_of(head_commit)
            except Unread as exc:
                self.note("HEAD commit", f"{exc}: the status compares the index with no commit")
        flags: dict[str, int] = {}
        for path, (mode, oid, stage, *_rest) in entries.items():
            if stage:
                flags[path] = CONFLICTED
                continue
            old = head.get(path)
            if old is None:
                flags[path] = INDEX_NEW
            elif _kind(old[0]) != _kind(mode):
                flags[path] = INDEX_TYPECHANGE
            elif old != (mode, oid):
                flags[path] = INDEX_MODIFIED
        for path in head:
            if path not in entries:
                flags[path] = INDEX_DELETED
        seen: set[str] = set()
        self.hashed, self.not_compared = 0, 0
        for item in worktree.walk(self.workspace, lambda p, r: None):
            seen.add(item.path)
            entry = entries.get(item.path)
            if entry is None:
                flags[item.path] = flags.get(item.path, 0) | WT_NEW
            elif not entry[2]:
                change = self.compare(item, entry, index_mtime)
                if change:
                    flags[item.path] = flags.get(item.path, 0) | change
        for path, (mode, _oid, stage, *_rest) in entries.items():
            if path not in seen and not stage and mode != GITLINK:
                flags[path] = flags.get(path, 0) | WT_DELETED
        if self.not_compared:
            self.note(
                "status",
                f"past {MAX_HASHED} bytes hashed, {self.not_compared} files whose stat data "
                "differ from the index were not compared, and are not reported modified",
            )
        listed, size = [], 0
        for path in sorted(flags, key=lambda p: p.encode("utf-8", "surrogateescape")):
            size += len(path)
            if size > MAX_STATUS_NAMES:
                self.note("status", f"over {MAX_STATUS_NAMES} bytes of paths: the rest not listed")
                break
            if flags[path]:
                listed.append([worktree.text_name(path), flags[path]])
        return listed

    def compare(self, item: worktree.Item, entry: tuple, index_mtime: int) -> int:
        """The worktree bits of one file against its index entry."""
        mode, oid, _stage, size, mtime_s, mtime_ns, ino = entry
        info = item.info
        link = stat.S_ISLNK(info.st_mode)
        if mode == GITLINK or not (link or stat.S_ISREG(info.st_mode)):
            return WT_TYPECHANGE  # a file where a submodule was, or a FIFO, socket, device
        if link != (mode == SYMLINK):
            return WT_TYPECHANGE
        if not link and bool(info.st_mode & stat.S_IXUSR) != (mode == 0o100755):
            return WT_MODIFIED
        if size and info.st_size % (1 << 32) != size:  # 0: not recorded (after a read-tree)
            return WT_MODIFIED
        stamp = info.st_mtime_ns
        seconds = (stamp // 10**9) % (1 << 32)
        unchanged = (seconds, stamp % 10**9, info.st_ino % (1 << 32)) == (mtime_s, mtime_ns, ino)
        if unchanged and stamp < index_mtime:  # not "racy": its stat data can be trusted
            return 0
        if self.hashed + info.st_size > MAX_HASHED:
            self.not_compared += 1
            return 0
        self.hashed += info.st_size
        try:
            got = _blob_sha1(item, link)
        except (OSError, Unread):
            return WT_MODIFIED
        return 0 if got == oid else WT_MODIFIED

    # --- objects ----------------------------------------------------------------------------

    def tree_of(self, commit: str) -> dict[str, tuple[int, str]]:
        """The flattened tree of ``commit`` (path -> (mode, oid)), from .git/objects alone."""
        try:
            fd = os.open("objects", _FOLDER, dir_fd=self.gitdir)
        except OSError as exc:
            raise Unread(f".git/objects is not a folder ({exc.strerror})") from None
        try:
            return _flatten(_odb(fd), fd, commit)
        finally:
            os.close(fd)


def _flatten(odb, objects: int, commit: str) -> dict[str, tuple[int, str]]:
    data = _object(odb, objects, commit, "commit")
    first = data.split(b"\n", 1)[0]
    if not first.startswith(b"tree ") or not _is_oid(first[5:]):
        raise Unread("the commit names no tree")
    flat: dict[str, tuple[int, str]] = {}
    stack = [("", first[5:].decode())]
    while stack:
        prefix, tree = stack.pop()
        for mode, name, oid in _tree_entries(_object(odb, objects, tree, "tree")):
            if len(flat) + len(stack) >= worktree.MAX_FILES:
                raise Unread(f"its tree holds more than {worktree.MAX_FILES} entries")
            path = prefix + name
            if mode == TREE:
                stack.append((path + "/", oid))
            else:
                flat[path] = (mode, oid)
    return flat


def _odb(fd: int):
    """libgit2's loose and pack readers on the open folder ``fd`` (through /proc/self/fd,
    so the folder is the one opened without following links), and no alternates."""
    import pygit2

    try:
        packs = os.open("pack", _FOLDER, dir_fd=fd)
    except FileNotFoundError:
        packs = None
    except OSError as exc:
        raise Unread(f".git/objects/pack is not a folder ({exc.strerror})") from None
    if packs is not None:
        try:
            with os.scandir(packs) as found:
                entries = [(entry.name, entry.is_symlink()) for entry in found]
        finally:
            os.close(packs)
        if any(link for _, link in entries):
            raise Unread("a file of .git/objects/pack is a link: not followed")
        if sum(1 for name, _ in entries if name.endswith(".idx")) > MAX_PACKS:
            raise Unread(f"more than {MAX_PACKS} packs")
    path = f"/proc/self/fd/{fd}"
    odb = pygit2.Odb()
    odb.add_backend(pygit2.OdbBackendPack(path), 1)
    odb.add_backend(pygit2.OdbBackendLoose(path, 0, False), 2)
    return odb


def _object(odb, objects: int, oid: str, kind: str) -> bytes:
    """A commit or tree, its size checked before it is read; a loose object (or its fan-out
    folder) that is a link is not followed."""
    import pygit2

    for path in (oid[:2], f"{oid[:2]}/{oid[2:]}"):
        try:
            if stat.S_ISLNK(os.stat(path, dir_fd=objects, follow_symlinks=False).st_mode):
                raise Unread(f".git/objects/{path} is a link: not followed")
        except FileNotFoundError:
            break  # not loose: libgit2 looks in the packs
    try:
        found, size = odb.read_header(oid)
        if int(found) != {"commit": 1, "tree": 2}[kind]:
            raise Unread(f"{oid} is not a {kind}")
        if size > MAX_OBJECT:
            raise Unread(f"the {kind} {oid} is {size} bytes, over {MAX_OBJECT}")
        return odb.read(oid)[1]
    except (pygit2.GitError, KeyError, ValueError) as exc:
        raise Unread(f"the {kind} {oid} could not be read ({exc.__class__.__name__})") from None


def _tree_entries(data: bytes):
    position = 0
    while position < len(data):
        space = data.find(b" ", position)
        nul = data.find(b"\0", space + 1)
        if space < 0 or nul < 0 or nul + 21 > len(data):
            raise Unread("a tree is malformed")
        try:
            mode = int(data[position:space], 8)
        except ValueError:
            raise Unread("a tree is malformed") from None
        name = data[space + 1 : nul].decode("utf-8", "surrogateescape")
        yield mode, name, data[nul + 1 : nul + 21].hex()
        position = nul + 21


def parse_index(data: bytes) -> dict[str, tuple]:
    """path -> (mode, oid, stage, size, mtime_s, mtime_ns, ino) of a Git index (v2 to v4).

    Raises:
        Unread: not an index, a version other than 2 to 4, a bad checksum, or truncated.
    """
    if len(data) < 32 or data[:4] != b"DIRC":
        raise Unread("it is not a Git index")
    version, count = struct.unpack_from(">II", data, 4)
    if version not in (2, 3, 4):
        raise Unread(f"index version {version} is not read")
    if hashlib.sha1(data[:-20]).digest() != data[-20:]:
        raise Unread("its checksum does not match")
    if count > worktree.MAX_FILES:
        raise Unread(f"it lists {count} entries, over {worktree.MAX_FILES}")
    end = len(data) - 20
    entries: dict[str, tuple] = {}
    offset, previous = 12, b""
    try:
        for _ in range(count):
            fields = struct.unpack_from(">10I20sH", data, offset)
            _cs, _cn, mtime_s, mtime_ns, _dev, ino, mode, _uid, _gid, size, sha, flags = fields
            position = offset + 62
            if flags & 0x4000:
                position += 2
            if version == 4:
                strip, position = _varint(data, position)
                nul = data.index(b"\0", position, end)
                name = previous[: len(previous) - strip] + data[position:nul]
                offset = nul + 1
            else:
                nul = data.index(b"\0", position, end)
                name = data[position:nul]
                offset += (nul - offset + 8) & ~7
            previous = name
            path = name.decode("utf-8", "surrogateescape")
            entries[path] = (mode, sha.hex(), (flags >> 12) & 3, size, mtime_s, mtime_ns, ino)
    except (struct.error, ValueError, IndexError):
        raise Unread("it is truncated or malformed") from None
    return entries


def _varint(data: bytes, position: int) -> tuple[int, int]:
    """Git's offset varint (index v4 path prefixes)."""
    byte = data[position]
    position += 1
    value = byte & 0x7F
    while byte & 0x80:
        byte = data[position]
        position += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, position


def _blob_sha1(item: worktree.Item, link: bool) -> str:
    if link:
        target = os.fsencode(os.readlink(item.name, dir_fd=item.folder))
        return hashlib.sha1(b"blob %d\0" % len(target) + target).hexdigest()
    fd = os.open(item.name, worktree.FILE_FLAGS, dir_fd=item.folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unread("not a regular file")
        digest = hashlib.sha1(b"blob %d\0" % info.st_size)
        position = 0
        while position < info.st_size:
            chunk = os.pread(fd, min(1 << 20, info.st_size - position), position)
            if not chunk:
                break
            digest.update(chunk)
            position += len(chunk)
        return digest.hexdigest()
    finally:
        os.close(fd)


def _read_at(folder: int, name: str, limit: int) -> bytes:
    fd = os.open(name, worktree.FILE_FLAGS, dir_fd=folder)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Unread("not a regular file")
        return os.pread(fd, limit, 0)
    finally:
        os.close(fd)


def _ref_value(data: bytes) -> str | None:
    """An oid, or ``ref: NAME``, from the content of a ref file; None if it is neither."""
    text = data.strip()
    if _is_oid(text):
        return text.decode()
    if text.startswith(b"ref: refs/") or text == b"ref: HEAD":
        name = text[5:]
        if len(name) <= MAX_REF_NAME and b"\n" not in name and b"\0" not in name:
            try:
                return "ref: " + name.decode()
            except UnicodeDecodeError:
                return None
    return None


def _resolve(name: str, loose: dict, packed: dict) -> str | None:
    for _ in range(SYMREF_DEPTH):
        value = loose.get(name, packed.get(name))
        if value is None:
            return None
        if not value.startswith("ref: "):
            return value
        name = value[5:]
    return None


def _is_oid(text: bytes) -> bool:
    return len(text) == 40 and all(c in b"0123456789abcdef" for c in text)


def _kind(mode: int) -> str:
    if mode == SYMLINK:
        return "link"
    if mode == GITLINK:
        return "gitlink"
    return "file"
