"""One image layer (a tar stream) applied onto a root folder, never writing outside it.

Every entry's name is normalised and resolved the way a process chrooted into the root would
see it: a symbolic link met among the parents is followed inside the root and a ``..`` stops
at the root, so ``a -> /`` then ``a/etc/x`` writes ``<root>/etc/x``. The last component is
never followed: an entry replaces what is there. Nothing is chowned, and modes lose their
setuid, setgid and sticky bits and their group and other write bits. Folder modes are applied
once every layer is in (``Tree.finish``), so that a read-only folder of one layer does not
stop the next from writing into it.
"""

from __future__ import annotations

import os
import shutil
import stat
import tarfile
from dataclasses import dataclass

from yyb.errors import EnvironmentSpecError

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
MAX_LINK_HOPS = 40  # as Linux's ELOOP limit: a chain longer than this is a loop
KEPT_MODE_BITS = 0o755  # rwx for the owner, r-x for group and other; no special bits
SKIPPED_KINDS = {
    tarfile.CHRTYPE: "character device",
    tarfile.BLKTYPE: "block device",
    tarfile.FIFOTYPE: "fifo",
}


@dataclass(frozen=True)
class Unpacked:
    """What an unpacked tree holds once every layer is applied.

    ``files``, ``links`` (symbolic links) and ``dirs`` count paths below the root; ``bytes``
    sums the sizes of the regular files, a hard-linked file once; ``skipped`` lists each entry
    left out as ``(path, reason)``, in the order met.
    """

    files: int
    links: int
    dirs: int
    bytes: int
    skipped: tuple[tuple[str, str], ...]


def normalise(name: str, where: str) -> tuple[str, ...]:
    """The components of an entry name inside the root, a leading ``/`` dropped.

    Raises:
        EnvironmentSpecError: a ``..`` that would leave the root.
    """
    parts: list[str] = []
    for part in name.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise EnvironmentSpecError(where, repr(name), "a '..' leaves the image's root")
            parts.pop()
        else:
            parts.append(part)
    return tuple(parts)


class Tree:
    """A root folder that layers are applied onto, one after the other."""

    def __init__(self, root: str):
        self.root = os.path.realpath(root)
        self.skipped: list[tuple[str, str]] = []
        self.folder_modes: dict[tuple[str, ...], int] = {}
        self.written: set[tuple[str, ...]] = set()  # paths the current layer wrote
        self.where = root
        self.layer: tarfile.TarFile | None = None

    def host(self, parts: tuple[str, ...]) -> str:
        return os.path.join(self.root, *parts)

    def apply(self, layer: tarfile.TarFile, where: str) -> None:
        """Apply every entry of one layer, its whiteouts deleting what lower layers left.

        Raises:
            EnvironmentSpecError: an entry that cannot be placed inside the root (see module).
        """
        self.layer = layer
        self.written = set()
        self.where = where
        for entry in layer:
            self.entry(entry)

    def entry(self, entry: tarfile.TarInfo) -> None:
        parts = normalise(entry.name, self.where)
        if not parts:
            if not entry.isdir():
                raise EnvironmentSpecError(self.where, repr(entry.name), "not a folder at /")
            return  # the root's own entry: the caller's folder keeps its mode
        *parent, name = parts
        if name == OPAQUE:
            folder = self.parent(tuple(parent), create=True)
            self.written.add(folder)
            for child in sorted(os.listdir(self.host(folder))):
                self.prune(folder + (child,))
        elif name.startswith(WHITEOUT + WHITEOUT):
            self.skipped.append(("/".join(parts), "whiteout metadata of another kind"))
        elif name.startswith(WHITEOUT):
            gone = name[len(WHITEOUT) :]
            if gone in ("", ".", ".."):
                raise EnvironmentSpecError(self.where, repr(entry.name), "a whiteout of nothing")
            folder = self.parent(tuple(parent), create=False)
            if folder is not None:
                self.prune(folder + (gone,))
        elif entry.type in SKIPPED_KINDS:
            self.skipped.append(("/".join(parts), SKIPPED_KINDS[entry.type]))
        elif entry.isdir() or entry.isreg() or entry.issym() or entry.islnk():
            path = self.parent(tuple(parent), create=True) + (name,)
            self.place(path, entry)
            self.written.add(path)
        else:
            self.skipped.append(("/".join(parts), f"entry type {entry.type!r} not unpacked"))

    def parent(self, parts: tuple[str, ...], create: bool) -> tuple[str, ...] | None:
        """The real folder ``parts`` names, resolved inside the root (None: absent, not made).

        Missing folders are made (mode 0755) when ``create`` is set. A symbolic link is
        followed inside the root: an absolute target starts again at the root, ``..`` stops
        there.
        """
        real: list[str] = []
        pending = list(parts)
        hops = 0
        while pending:
            part = pending.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                if real:
                    real.pop()
                continue
            host = self.host((*real, part))
            try:
                info = os.lstat(host)
            except FileNotFoundError:
                if not create:
                    return None
                os.mkdir(host, 0o755)
                real.append(part)
                self.written.add(tuple(real))
                continue
            if stat.S_ISLNK(info.st_mode):
                hops += 1
                if hops > MAX_LINK_HOPS:
                    raise EnvironmentSpecError(self.where, "/".join(parts), "a symlink loop")
                target = os.readlink(host)
                if target.startswith("/"):
                    real = []
                pending = target.split("/") + pending
            elif stat.S_ISDIR(info.st_mode):
                real.append(part)
            else:
                raise EnvironmentSpecError(self.where, "/".join(parts), "a parent is not a folder")
        return tuple(real)

    def prune(self, path: tuple[str, ...]) -> None:
        """Delete what lower layers left at ``path``, keeping what this layer wrote there."""
        host = self.host(path)
        try:
            info = os.lstat(host)
        except FileNotFoundError:
            return
        if path in self.written:
            if stat.S_ISDIR(info.st_mode):
                for child in sorted(os.listdir(host)):
                    self.prune(path + (child,))
        else:
            remove(host, info)

    def place(self, path: tuple[str, ...], entry: tarfile.TarInfo) -> None:
        host = self.host(path)
        mode = entry.mode & KEPT_MODE_BITS
        try:
            info = os.lstat(host)
        except FileNotFoundError:
            info = None
        if entry.isdir():
            if info is not None and not stat.S_ISDIR(info.st_mode):
                remove(host, info)
                info = None
            if info is None:
                os.mkdir(host, 0o755)
            self.folder_modes[path] = mode
            return
        if entry.islnk():
            source = self.link_source(entry)
            if source == path:
                return
        if info is not None:
            remove(host, info)
        if entry.issym():
            os.symlink(entry.linkname, host)
        elif entry.islnk():
            os.link(self.host(source), host, follow_symlinks=False)
        else:
            self.write(host, entry, mode)

    def link_source(self, entry: tarfile.TarInfo) -> tuple[str, ...]:
        """The regular file already in the tree that a hard link entry names."""
        parts = normalise(entry.linkname, self.where)
        folder = self.parent(parts[:-1], create=False) if parts else None
        source = None if folder is None else folder + parts[-1:]
        try:
            regular = source is not None and stat.S_ISREG(os.lstat(self.host(source)).st_mode)
        except FileNotFoundError:
            regular = False
        if not regular:
            raise EnvironmentSpecError(
                self.where,
                repr(entry.name),
                f"a hard link to {entry.linkname!r}, not a regular file already in the tree",
            )
        return source

    def write(self, host: str, entry: tarfile.TarInfo, mode: int) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(host, flags, 0o600)
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(self.layer.extractfile(entry), out, 1 << 20)
            os.fchmod(out.fileno(), mode)

    def finish(self) -> Unpacked:
        """Give folders their modes and count what the tree holds."""
        files = links = dirs = size = 0
        seen: set[tuple[int, int]] = set()
        for folder, subfolders, names in os.walk(self.root, topdown=False):
            for name in subfolders + names:
                path = os.path.join(folder, name)
                info = os.lstat(path)
                if stat.S_ISLNK(info.st_mode):
                    links += 1
                elif stat.S_ISDIR(info.st_mode):
                    dirs += 1
                    parts = tuple(os.path.relpath(path, self.root).split(os.sep))
                    os.chmod(path, self.folder_modes.get(parts, 0o755))
                elif stat.S_ISREG(info.st_mode):
                    files += 1
                    if (info.st_dev, info.st_ino) not in seen:
                        seen.add((info.st_dev, info.st_ino))
                        size += info.st_size
        return Unpacked(files, links, dirs, size, tuple(self.skipped))


def remove(host: str, info: os.stat_result) -> None:
    """Delete one path, a folder with all it holds; a symbolic link itself, never its target."""
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(host)
    else:
        os.unlink(host)
