"""A built root made ready to mount: build-time leftovers gone, the sandbox's mount points empty.

What goes was measured on bookworm and trixie minbase trees with python3
(docs/environments.md, "rootfs"): every change below is to a file that differs between hosts or
that nothing reads on a read-only root. Python's __pycache__ folders stay: built with
SOURCE_DATE_EPOCH set they hold hash-checked .pyc files, byte-identical from build to build,
and without them a read-only root recompiles every module on every start (measured: 125 ms
against 634 ms to import json, subprocess, argparse, unittest, email, http.client, asyncio).
"""

from __future__ import annotations

import os
import shutil

from yyb.errors import EnvironmentBuildFailed

# Folders the sandbox mounts over (bubblewrap needs them to exist on a read-only root, and
# whatever they held would be hidden anyway): made empty, created when missing. Mode 1777 on
# tmp as Debian has it, so a tree used without a tmpfs still behaves.
MOUNT_POINTS = {"tmp": 0o1777, "proc": 0o755, "dev": 0o755, "run": 0o755, "testbed": 0o755}
NESTED_MOUNT_POINTS = {"dev/shm": 0o1777}
# apt's downloaded lists and packages: the build's, changing with every mirror push; apt
# cannot run on a read-only root to use them.
EMPTIED = ("var/cache/apt", "var/lib/apt/lists")
# Files a build copies from the host or fills per machine: a fixed content and mode instead,
# so two hosts give one tree (the file stays, so a sandbox can still bind its own over it;
# mmdebstrap 1.3.5 leaves the copies at mode 0755).
FIXED = {"etc/hostname": b"localhost\n", "etc/resolv.conf": b"", "etc/machine-id": b""}
LOGS = "var/log"


def mounts_below(path: str, mountinfo: str) -> list[str]:
    """The mount points at or below ``path`` in a ``/proc/self/mountinfo`` text.

    Args:
        path: an absolute, resolved path.
        mountinfo: the text of a mountinfo file (proc(5): the fifth field is the mount point,
            with space, tab, newline and backslash written as octal escapes).

    Returns:
        the mount points found, in the file's order.
    """
    found = []
    prefix = path.rstrip("/") + "/"
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if len(fields) < 5:
            continue
        point = fields[4].encode("latin-1", "replace").decode("unicode_escape", "replace")
        if point == path or point.startswith(prefix):
            found.append(point)
    return found


def unmounted(name: str, root: str) -> None:
    """Refuse to go on when something is mounted at or below ``root``.

    Removing files below a bind mount of the host's /dev or /proc would remove the host's;
    mmdebstrap unmounts what it mounted even when it fails, so this only ever stops a build
    whose mmdebstrap was killed.

    Raises:
        EnvironmentBuildFailed: step ``tidy``, naming the first mount found.
    """
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
            text = handle.read()
    except OSError:
        return  # no /proc: nothing can be mounted that we could see, nor unmount
    found = mounts_below(os.path.realpath(root), text)
    if found:
        raise EnvironmentBuildFailed(
            name, "tidy", f"{found[0]} is still mounted; unmount it, then remove {root}"
        )


def empty(folder: str) -> None:
    """Remove everything inside ``folder`` (links are removed, never followed)."""
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def _real(root: str, relative: str) -> str | None:
    """``root/relative`` when no part of ``relative`` is a link, else None.

    A tree's own links may point anywhere (``var/log -> /var/log`` on the host, once
    resolved outside the tree): nothing is removed or written through one.
    """
    path = root
    for part in relative.split("/"):
        path = os.path.join(path, part)
        if os.path.islink(path):
            return None
    return path


def _folder(path: str, mode: int) -> None:
    """``path`` an empty real folder of ``mode``: a link or file there is replaced."""
    if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
        os.unlink(path)
    if os.path.isdir(path):
        empty(path)
    else:
        os.mkdir(path)
    os.chmod(path, mode)


def _logs(root: str) -> None:
    """Every file under var/log removed; its folders kept (packages expect them)."""
    top = _real(root, LOGS)
    if top is None:
        return
    for folder, _, files in os.walk(top):
        for name in files:
            os.unlink(os.path.join(folder, name))


def tidy(name: str, root: str) -> None:
    """Make a freshly built root ready to be described and mounted read-only.

    Empties apt's caches and lists and var/log's files, gives the host-copied files in
    ``FIXED`` a fixed content (only where they are regular files: a link such as
    systemd-resolved's resolv.conf is the tree's own), and makes ``MOUNT_POINTS`` and
    ``NESTED_MOUNT_POINTS`` empty folders, creating them when missing.

    Args:
        name: the environment's name, for errors.
        root: the tree's root folder.

    Raises:
        EnvironmentBuildFailed: step ``tidy``: something mounted below ``root`` or the file
            system refused a change.
    """
    unmounted(name, root)
    try:
        for relative in EMPTIED:
            path = _real(root, relative)
            if path is not None and os.path.isdir(path):
                empty(path)
        _logs(root)
        for relative, content in FIXED.items():
            path = _real(root, relative)
            if path is not None and os.path.isfile(path):
                with open(path, "wb") as handle:
                    handle.write(content)
                os.chmod(path, 0o644)
        for points in (MOUNT_POINTS, NESTED_MOUNT_POINTS):
            for relative, mode in points.items():
                parent = _real(root, os.path.dirname(relative)) if "/" in relative else root
                if parent is None:
                    raise EnvironmentBuildFailed(name, "tidy", f"{relative}: below a link")
                _folder(os.path.join(parent, os.path.basename(relative)), mode)
    except OSError as exc:
        raise EnvironmentBuildFailed(name, "tidy", str(exc)) from exc
