"""Walking a folder a candidate controlled: one level at a time, no link followed, bounded.

Every folder is opened relative to its parent with ``O_NOFOLLOW`` and checked to be the folder
that was listed, so no symbolic link (even one swapped in while the walk runs) leads the walk
out of the workspace. The walk is iterative and holds one descriptor per level, so its cost is
bounded by the limits below, never by Python's recursion limit or by the candidate's patience:
whatever lies past a limit is reported to ``omit`` with the reason, never read.
"""

from __future__ import annotations

import fcntl
import os
import stat
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

MAX_DEPTH = 128  # folder levels below the top (one open descriptor each)
MAX_PATH = 4096  # bytes in a relative path (PATH_MAX)
MAX_FILES = 250_000  # files and symlinks walked; a folder's names read at most this many
MAX_PATH_BYTES = 16 << 20  # bytes of the paths walked, all together (what a listing names)
GIT_STATE = "a .git name is Git state, never retained as a file"

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


@dataclass(frozen=True)
class Item:
    """Something that is not a folder, found by ``walk``."""

    path: str  # relative to the top, "/"-separated
    name: str
    folder: int  # descriptor of its folder: valid until the walk moves on
    info: os.stat_result  # lstat: a link is a link


def stat_key(info: os.stat_result) -> tuple[int, int, int, int, int]:
    """What changes whenever a file's bytes do: device, inode, size, mtime and ctime."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def is_git_name(name: str) -> bool:
    return name.lower() == ".git"


def text_name(name: str) -> str:
    """A file name as valid text (undecodable bytes shown as escapes)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def walk(root: str, omit: Callable[[str, str], None]) -> Iterator[Item]:
    """Everything under ``root`` that is not a folder, in sorted order, folders descended.

    The top-level ``.git`` is skipped (it is Git state, read by ``gitstate``); every other
    ``.git`` name, in any case, is omitted. Names that are not UTF-8 are omitted, and so is
    whatever is deeper, longer or later than the limits allow.
    """
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    stack: list[tuple[int, str, Iterator[str]]] = []
    try:
        stack.append((top, "", iter(_names(top, "", omit))))
        count = size = 0
        while stack:
            fd, prefix, names = stack[-1]
            name = next(names, None)
            if name is None:
                os.close(fd)
                stack.pop()
                continue
            path = prefix + name
            if not prefix and name == ".git":
                continue
            reason = _refused(name, path)
            if reason is not None:
                omit(text_name(path), reason)
                continue
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue  # gone since it was listed
            if stat.S_ISDIR(info.st_mode):
                child = _open_folder(fd, name, path, info, len(stack), omit)
                if child is not None:
                    stack.append((child, path + "/", iter(_names(child, path, omit))))
                continue
            count += 1
            size += len(path.encode())
            if count > MAX_FILES or size > MAX_PATH_BYTES:
                omit(
                    path,
                    f"the workspace holds more than {MAX_FILES} files or {MAX_PATH_BYTES} "
                    "bytes of paths: this and the rest were not read",
                )
                return
            yield Item(path, name, fd, info)
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def _refused(name: str, path: str) -> str | None:
    if is_git_name(name):
        # A nested repository (or .GIT, which is .git where case does not count) would act as
        # one in a rebuilt workspace: rebuild refuses it, so it is never listed.
        return GIT_STATE
    if text_name(name) != name:
        return "the file name is not UTF-8"
    if len(path.encode()) > MAX_PATH:
        return f"a path longer than {MAX_PATH} bytes: not read"
    return None


def _open_folder(parent: int, name: str, path: str, info, depth: int, omit) -> int | None:
    if depth > MAX_DEPTH:
        omit(path, f"a folder more than {MAX_DEPTH} levels deep: not read")
        return None
    try:
        child = os.open(name, _FOLDER, dir_fd=parent)
    except OSError as exc:
        omit(path, f"the folder could not be read ({exc.strerror})")
        return None
    if not os.path.samestat(os.fstat(child), info):
        os.close(child)
        omit(path, "the folder changed while it was read")
        return None
    return child


def _names(fd: int, path: str, omit) -> list[str]:
    """The sorted names in an open folder, at most MAX_FILES of them."""
    names = []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                if len(names) == MAX_FILES:
                    omit(
                        path or ".",
                        f"the folder holds more than {MAX_FILES} names: the rest were not read",
                    )
                    break
                names.append(entry.name)
    except OSError as exc:
        omit(path or ".", f"the folder could not be listed ({exc.strerror})")
    return sorted(names)


# ext2/3/4's inode flags (linux/fs.h): _IOR/_IOW('f', 1/2, long) and the "top of directory
# hierarchies" flag, which `chattr +T` sets.
_LONG = struct.calcsize("l")
FS_IOC_GETFLAGS = (2 << 30) | (_LONG << 16) | (ord("f") << 8) | 1
FS_IOC_SETFLAGS = (1 << 30) | (_LONG << 16) | (ord("f") << 8) | 2
FS_TOPDIR_FL = 0x00020000


def spread(folder: str) -> None:
    """Ask the file system to place each folder made in ``folder`` away from the others
    (ext2/3/4's top-of-hierarchy flag, ``chattr +T``); elsewhere this does nothing.

    The measured reason: ext4 without a journal (this project's machines) looks for a new
    inode past every inode of the block group freed in the last minute or more, and a folder
    is made in its parent's group, so 5,000 files made in a folder beside one just removed
    took 2 to 2.7 s, and 0.1 s in a folder placed in a group of its own.
    """
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        flags = struct.unpack("i", fcntl.ioctl(fd, FS_IOC_GETFLAGS, struct.pack("i", 0)))[0]
        fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("i", flags | FS_TOPDIR_FL))
    except OSError:
        pass  # not ext2/3/4, or the flag refused: where folders go is only a hint
    finally:
        os.close(fd)


def remove(root: str) -> None:
    """Remove ``root`` and everything in it, however deep, without following any link.

    ``shutil.rmtree`` recurses once per level and stops with a RecursionError past about a
    thousand; this walks down and back up through ``..`` holding one descriptor. What cannot
    be removed is left where it is, as ``rmtree(ignore_errors=True)`` would.
    """
    try:
        fd = os.open(root, _FOLDER)
    except OSError:
        return
    below: list[str] = []  # names of the folders descended into, top first
    stuck: set[tuple[int, int]] = set()  # folders that could not be emptied
    try:
        while True:
            child = _first_folder_left(fd, stuck)
            if child is not None:
                name, child_fd = child
                os.close(fd)
                fd = child_fd
                below.append(name)
                continue
            if not below:
                break
            here = os.fstat(fd)
            parent = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = parent
            try:
                os.rmdir(below.pop(), dir_fd=fd)
            except OSError:
                stuck.add((here.st_dev, here.st_ino))
    finally:
        os.close(fd)
    try:
        os.rmdir(root)
    except OSError:
        pass


def _first_folder_left(fd: int, stuck: set) -> tuple[str, int] | None:
    """Unlink everything in the folder ``fd`` but folders; open and return the first folder
    that is not stuck (name, descriptor), or None when none is left."""
    try:
        names = os.listdir(fd)
    except OSError:
        return None
    for name in names:
        try:
            os.unlink(name, dir_fd=fd)
            continue
        except IsADirectoryError:
            pass
        except OSError:
            continue
        try:
            child = os.open(name, _FOLDER, dir_fd=fd)
        except OSError:
            continue
        info = os.fstat(child)
        if (info.st_dev, info.st_ino) in stuck:
            os.close(child)
            continue
        return name, child
    return None
