"""The attempt's disk: a size-bounded file system for its folders, held by the controller.

A per-file limit (``RLIMIT_FSIZE``) leaves the total unbounded: many files each under it fill
the host's disk, and everything a candidate leaves is read into the store. So an attempt's
folder (workspace, home, temp, cache, config and control folders together) is a tmpfs of
``disk_mib`` MiB and one inode per 4 KiB of that, which the kernel refuses to grow past
(``ENOSPC``), whoever writes and however.

The tmpfs is mounted in a mount namespace of its own, never on the host: a small holder process
(``HOLDER``) leaves the controller's namespaces (a user namespace too, when yyb is not root,
where mounting a tmpfs is allowed to anyone), mounts it over the attempt's folder, says so, and
waits for the controller to close its standard input. The sandbox is started in the holder's
namespaces (``Disk.prefix``: util-linux ``nsenter`` ahead of bubblewrap), so the candidate's
folders are the tmpfs at their usual paths; bubblewrap's own mounts are made in a namespace
below it. The controller, whose threads cannot join another mount namespace, reaches the same
files through ``/proc/<holder>/root`` (``Disk.reach``), with the same descriptor-by-descriptor
reads as before; nothing resolves those paths with ``realpath``, which would name the host's
empty folder under the mount. When the holder ends (closed, or its controller gone) the
namespace and the tmpfs go with it: nothing is left mounted and no host disk was used.

The pages of a tmpfs are memory (or swap): with a control group they count against the memory
limit of the process that wrote them, so a candidate's files and its processes share its
memory limit, and the base snapshot the controller writes counts against the controller's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

from yyb.errors import YybError

MIB = 1 << 20
PAGE = 4096
# Run by the holder (``python -I -S -c``, argv: target, mount options): unshare, mount, say
# "m", wait for standard input to close. Single-threaded, as unshare(CLONE_NEWUSER) demands.
HOLDER = r"""
import ctypes, os, sys
target, options = sys.argv[1].encode(), sys.argv[2].encode()
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
def check(result, what):
    if result != 0:
        sys.stderr.write(f"{what}: {os.strerror(ctypes.get_errno())}\n")
        raise SystemExit(1)
uid, gid = os.getuid(), os.getgid()
check(libc.unshare(0x00020000 | (0x10000000 if uid else 0)), "unshare")
if uid:
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(text)
check(libc.mount(None, b"/", None, 0x4000 | 0x40000, None), "making the mounts private")
check(libc.mount(b"yyb-disk", target, b"tmpfs", 0x2 | 0x4, options), "mounting the tmpfs")
sys.stdout.write("m")
sys.stdout.flush()
sys.stdin.read()
"""


class DiskUnavailable(YybError):
    """The host refused the attempt's disk (its namespace, its mount, or the tool to join it)."""

    def __init__(self, reason: str):
        super().__init__(f"the attempt's disk is unavailable: {reason}")
        self.reason = reason


def options(limit_mib: int) -> str:
    """The tmpfs's mount options for a bound of ``limit_mib`` MiB: its size, one inode per
    page of it (a file of one byte takes a page anyway), private to its owner."""
    size = limit_mib * MIB
    return f"size={size},nr_inodes={max(size // PAGE, 1024)},mode=0700"


@dataclass
class Disk:
    """A tmpfs of ``limit_mib`` MiB mounted at ``target`` in the namespaces of ``holder``."""

    target: str
    limit_mib: int
    holder: subprocess.Popen

    @classmethod
    def mount(cls, target: str, limit_mib: int) -> Disk:
        """Start a holder with a tmpfs of ``limit_mib`` MiB over the folder ``target``.

        Raises:
            DiskUnavailable: the host refused the namespace or the mount (nothing is held).
        """
        holder = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", HOLDER, target, options(limit_mib)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin"},
            start_new_session=True,  # a signal to the controller's group does not end it first
        )
        said = holder.stdout.read(1)
        if said != b"m":
            holder.stdin.close()
            detail = holder.stderr.read().decode(errors="replace").strip()
            holder.wait()
            raise DiskUnavailable(f"a tmpfs could not be mounted ({detail or 'the holder died'})")
        return cls(target, limit_mib, holder)

    def reach(self, path: str) -> str:
        """The path through which the controller reaches ``path`` (on this disk)."""
        return f"/proc/{self.holder.pid}/root{os.path.abspath(path)}"

    def prefix(self) -> list[str]:
        """The argv prefix that runs the rest of a command line in the holder's namespaces,
        with the caller's own uid and gid."""
        args = [_nsenter(), f"--target={self.holder.pid}", "--mount"]
        if os.geteuid() != 0:
            args += ["--user", "--preserve-credentials"]
        return [*args, "--"]

    def user_namespace(self) -> str | None:
        """The holder's user namespace (``user:[inode]``), or None when it made none (root)."""
        if os.geteuid() == 0:
            return None
        return os.readlink(f"/proc/{self.holder.pid}/ns/user")

    def usage(self) -> dict:
        """How full the disk is: bytes and files used, and whether no block or no inode is
        left (``disk_full``): a candidate that wrote until the kernel refused leaves it so."""
        try:
            found = os.statvfs(self.reach(self.target))
        except OSError:
            return dict.fromkeys(COUNTS)
        return {
            "disk_used_bytes": (found.f_blocks - found.f_bfree) * found.f_frsize,
            "disk_used_files": found.f_files - found.f_ffree,
            "disk_full": found.f_bavail == 0 or found.f_favail == 0,
        }

    def close(self) -> None:
        """Let the holder end: its namespace and the tmpfs, with all it holds, go."""
        try:
            self.holder.stdin.close()
        except OSError:
            pass
        try:
            self.holder.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.holder.kill()
            self.holder.wait()
        for stream in (self.holder.stdout, self.holder.stderr):
            stream.close()

    def __enter__(self) -> Disk:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


COUNTS = ("disk_used_bytes", "disk_used_files", "disk_full")


def _nsenter() -> str:
    for candidate in ("/usr/bin/nsenter", "/bin/nsenter", "/usr/sbin/nsenter"):
        if os.access(candidate, os.X_OK):
            return candidate
    raise DiskUnavailable(
        "nsenter (util-linux) is not installed, which starts the sandbox on the disk"
    )
