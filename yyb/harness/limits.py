"""Resource limits of a sandboxed process, enforced by the kernel.

Memory and processes are held by a control group of the whole process tree
(yyb/harness/cgroups.py) where the host lets yyb make one: the kernel then counts what it
refused, and the terminal can name the limit. Elsewhere they fall back to rlimits, which stop
a process but leave no count: memory (``RLIMIT_DATA``: heap and private mappings, the memory
a process really uses, without refusing the large address-space reservations of JIT
runtimes) and processes (``RLIMIT_NPROC``, counted per uid by the kernel, so the limit given
is added to what that uid already runs). The size of any one file written (``RLIMIT_FSIZE``)
and open files (``RLIMIT_NOFILE``) are rlimits everywhere. rlimits are set with util-linux's
``prlimit`` around bubblewrap, so every process of the sandbox inherits them. The size of all
an attempt's folders together (``disk_mib``) is the size of the tmpfs they are
(yyb/harness/disk.py), as root and as any other user alike.
"""

from __future__ import annotations

import os
import shutil
import signal

MIB = 1 << 20
DEFAULTS = {
    "memory_mib": 4096,
    "processes": 256,
    "file_mib": 1024,
    "open_files": 1024,
    "disk_mib": 2048,
}
# What the limit a signal reports is called in a terminal's reason.
SIGNALLED = {signal.SIGXFSZ: "file_mib", signal.SIGXCPU: "cpu"}
NAMES = {
    "memory_mib": "memory {} MiB",
    "processes": "processes {}",
    "file_mib": "file size {} MiB",
    "open_files": "open files {}",
    "disk_mib": "disk {} MiB",
}


def resolve(given: dict | None) -> dict:
    """The limits in force: ``given`` (a plan's ``tool_policy.limits``) over the defaults."""
    return {**DEFAULTS, **(given or {})}


def describe(limits: dict) -> str:
    return ", ".join(NAMES[name].format(limits[name]) for name in NAMES if name in limits)


def hit_by(signal_number: int | None, exit_code: int | None, limits: dict) -> str | None:
    """The limit that a candidate killed by ``signal_number`` (or whose exit status is 128 +
    that signal, as bubblewrap reports a child killed inside it) ran into; None if none."""
    if signal_number is None and exit_code is not None and exit_code > 128:
        signal_number = exit_code - 128
    name = SIGNALLED.get(signal_number) if signal_number is not None else None
    if name == "file_mib":
        return f"it wrote a file past the file size limit ({limits['file_mib']} MiB)"
    return None


def _processes_of(uid: int, namespace: str | None = None) -> int:
    """Processes of ``uid`` (those in the user namespace ``namespace`` only, when given)."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid != uid:
                    continue
                if namespace is None or os.readlink(f"/proc/{entry}/ns/user") == namespace:
                    count += 1
            except OSError:
                continue
    return count


def prefix(limits: dict, uid: int, group=None, namespace: str | None = None) -> list[str]:
    """The argv prefix that puts ``limits`` on a sandbox whose processes run as ``uid``:
    joining ``group`` (a cgroups.Group holding memory and processes) when there is one, and
    ``prlimit`` with the rest.

    ``namespace``: the user namespace the sandbox is started in, when it is not the
    controller's (an unprivileged controller's disk, yyb/harness/disk.py). The kernel counts
    ``RLIMIT_NPROC`` in each user namespace against the limit its creator had, so the limit
    is then what that namespace already runs plus ``processes``."""
    found = shutil.which("prlimit") or "/usr/bin/prlimit"
    args = [f"--fsize={limits['file_mib'] * MIB}", f"--nofile={limits['open_files']}"]
    if group is None:
        processes = _processes_of(uid, namespace) + limits["processes"]
        args = [f"--data={limits['memory_mib'] * MIB}", f"--nproc={processes}", *args]
    return [*(group.join_prefix() if group is not None else []), found, *args, "--"]


def stopped_by(usage: dict, limits: dict) -> str | None:
    """The limit a control group's ``usage`` (cgroups.Group.usage) says was hit, in words;
    None when the kernel refused nothing."""
    found = []
    if usage.get("oom_kills"):
        found.append(
            f"it ran out of memory (the {limits['memory_mib']} MiB memory limit): the kernel "
            f"killed {usage['oom_kills']} of its processes"
        )
    if usage.get("refused_processes"):
        found.append(
            f"it reached the process limit ({limits['processes']} processes): "
            f"{usage['refused_processes']} process creations were refused"
        )
    if usage.get("disk_full"):
        found.append(
            f"it filled its disk (the {limits['disk_mib']} MiB disk limit): the kernel refused "
            "to write more to its workspace and private folders"
        )
    return "; ".join(found) or None
