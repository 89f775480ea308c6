"""A control group per sandboxed run: memory and process limits the kernel enforces and counts.

rlimits stop a process but leave no trace of having done so: a memory hog sees ``ENOMEM``, a
fork bomb ``EAGAIN``, and the controller cannot tell either from an ordinary failure. A
control group limits the whole process tree at once (not each process, not each uid), and
the kernel counts what it refused: processes it killed out of memory (``oom_kill``), process
creations it refused (``pids.events`` ``max``), and the peaks it saw.

A group is made below the controller's own group, in the cgroup v2 hierarchy when the
controller may create a child there that has the ``memory`` and ``pids`` controllers, else in
the v1 ``memory`` and ``pids`` hierarchies when those are writable (as root, usually). When
neither is possible (an unprivileged user on most hosts) there is no group, and the rlimits of
yyb/harness/limits.py are the only bounds; the receipt says which held.

A sandboxed process joins its group before anything else runs (``join_prefix``), so every
process it starts is in it; the sandbox has no cgroup file system, so none can leave.
"""

from __future__ import annotations

import os
import secrets as random
from dataclasses import dataclass

from yyb.store import file

PREFIX = "yyb-"
MIB = 1 << 20
# What Group.usage counts (each None when unknown).
COUNTS = ("oom_kills", "refused_processes", "peak_memory_bytes", "peak_processes")


@dataclass
class Group:
    """One run's control group: the folder per controller (one folder for both in v2)."""

    version: int  # 1 or 2
    memory: str
    pids: str

    @property
    def enforced_by(self) -> str:
        return f"cgroup-v{self.version}"

    def join_prefix(self) -> list[str]:
        """An argv prefix that moves the process into the group, then runs the rest."""
        files = sorted({os.path.join(d, "cgroup.procs") for d in (self.memory, self.pids)})
        script = 'for f in "$@"; do [ "$f" = -- ] && break; echo $$ > "$f" || exit 125; '
        script += 'shift; done; shift; exec "$@"'
        return ["/bin/sh", "-c", script, "yyb-join", *files, "--"]

    def usage(self) -> dict:
        """What the kernel counted: processes killed out of memory, refused process
        creations, and the peaks of memory (bytes) and processes, each None when unknown."""
        if self.version == 2:
            events = _fields(os.path.join(self.memory, "memory.events"))
            kills = events.get("oom_kill")
            peak_memory = _number(os.path.join(self.memory, "memory.peak"))
        else:
            control = _fields(os.path.join(self.memory, "memory.oom_control"))
            kills = control.get("oom_kill")
            peak_memory = _number(os.path.join(self.memory, "memory.max_usage_in_bytes"))
        refused = _fields(os.path.join(self.pids, "pids.events")).get("max")
        return {
            "oom_kills": kills,
            "refused_processes": refused,
            "peak_memory_bytes": peak_memory,
            "peak_processes": _number(os.path.join(self.pids, "pids.peak")),
        }

    def remove(self) -> None:
        """Remove the (empty) group; one that still holds a process is left in place."""
        for folder in sorted({self.memory, self.pids}):
            try:
                os.rmdir(folder)
            except OSError:
                pass


def _fields(path: str) -> dict[str, int]:
    try:
        with open(path) as handle:
            lines = handle.read().splitlines()
    except OSError:
        return {}
    found = {}
    for line in lines:
        name, _, value = line.partition(" ")
        if value.strip().isdigit():
            found[name] = int(value)
    return found


def _number(path: str) -> int | None:
    try:
        with open(path) as handle:
            text = handle.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _write(path: str, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _own_paths() -> dict[str, str]:
    """Controller name (or "" for v2) -> this process's group path, from /proc/self/cgroup."""
    found = {}
    try:
        with open("/proc/self/cgroup") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return found
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for name in parts[1].split(",") if parts[1] else [""]:
                found[name] = parts[2]
    return found


def _mounts() -> dict[str, tuple[str, str]]:
    """Controller name (or "" for v2) -> (mount point, the hierarchy path mounted there)."""
    found = {}
    try:
        with open("/proc/self/mountinfo") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return found
    for line in lines:
        head, _, tail = line.partition(" - ")
        fields, extra = head.split(), tail.split()
        if len(fields) < 5 or len(extra) < 3:
            continue
        root, point = fields[3], fields[4].replace("\\040", " ")
        if extra[0] == "cgroup2":
            found.setdefault("", (point, root))
        elif extra[0] == "cgroup":
            for option in extra[2].split(","):
                if option in ("memory", "pids"):
                    found.setdefault(option, (point, root))
    return found


def _folder(mount: tuple[str, str], path: str) -> str | None:
    point, root = mount
    if root != "/" and not (path == root or path.startswith(root.rstrip("/") + "/")):
        return None
    relative = path[len(root) :] if root != "/" else path
    return os.path.join(point, relative.lstrip("/"))


def _make(parent: str) -> str | None:
    # The creator's pid in the name: sweep() removes only groups whose creator is gone.
    folder = os.path.join(parent, f"{PREFIX}{os.getpid()}-{random.token_hex(6)}")
    try:
        os.mkdir(folder)
    except OSError:
        return None
    return folder


# Whether a process could join a group made here, per kind of group (version): proved once
# per process by starting one, since a group that can be made but not joined would fail every
# sandboxed start (exit 125), which would read as the candidate's failure.
_joinable: dict[int, bool] = {}


def create(limits: dict) -> Group | None:
    """A new group holding ``limits`` (``memory_mib`` and ``processes``), or None when this
    host does not let yyb make (and join) one: then rlimits alone hold."""
    own, mounts = _own_paths(), _mounts()
    group = None
    if "" in own and "" in mounts:
        group = _create_v2(mounts[""], own[""], limits)
    if group is None and all(name in own and name in mounts for name in ("memory", "pids")):
        group = _create_v1(mounts, own, limits)
    if group is None:
        return None
    if group.version not in _joinable:
        import subprocess

        try:
            done = subprocess.run([*group.join_prefix(), "/bin/true"], capture_output=True)
            _joinable[group.version] = done.returncode == 0
        except OSError:
            _joinable[group.version] = False
    if not _joinable[group.version]:
        group.remove()
        return None
    return group


def _create_v2(mount, path: str, limits: dict) -> Group | None:
    parent = _folder(mount, path)
    if parent is None:
        return None
    folder = _make(parent)
    if folder is None:
        return None
    try:
        with open(os.path.join(folder, "cgroup.controllers")) as handle:
            controllers = handle.read().split()
        if "memory" not in controllers or "pids" not in controllers:
            raise OSError("memory and pids are not delegated here")
        _write(os.path.join(folder, "memory.max"), str(limits["memory_mib"] * MIB))
        if os.path.exists(os.path.join(folder, "memory.swap.max")):
            _write(os.path.join(folder, "memory.swap.max"), "0")
        _write(os.path.join(folder, "pids.max"), str(limits["processes"]))
    except OSError:
        _remove(folder)
        return None
    return Group(2, folder, folder)


def _create_v1(mounts, own, limits: dict) -> Group | None:
    made = []
    try:
        for name in ("memory", "pids"):
            parent = _folder(mounts[name], own[name])
            folder = _make(parent) if parent else None
            if folder is None:
                raise OSError(f"cannot make a {name} group")
            made.append(folder)
        memory, pids = made
        _write(os.path.join(memory, "memory.limit_in_bytes"), str(limits["memory_mib"] * MIB))
        swap = os.path.join(memory, "memory.memsw.limit_in_bytes")
        if os.path.exists(swap):
            _write(swap, str(limits["memory_mib"] * MIB))
        _write(os.path.join(pids, "pids.max"), str(limits["processes"]))
    except OSError:
        for folder in made:
            _remove(folder)
        return None
    return Group(1, memory, pids)


def _remove(folder: str) -> None:
    try:
        os.rmdir(folder)
    except OSError:
        pass


def _parents() -> list[str]:
    """The folders this process's groups are made in (those that exist)."""
    own, mounts = _own_paths(), _mounts()
    found = []
    for name in ("", "memory", "pids"):
        if name in own and name in mounts:
            folder = _folder(mounts[name], own[name])
            if folder and os.path.isdir(folder):
                found.append(folder)
    return found


def sweep() -> list[str]:
    """Remove the empty groups that yyb processes now gone left behind (a controller killed
    with SIGKILL cannot remove its own); return them."""
    removed = []
    for parent in _parents():
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            pid = name[len(PREFIX) :].split("-", 1)[0]
            if not name.startswith(PREFIX) or not pid.isdigit() or file.alive(int(pid)):
                continue
            try:
                os.rmdir(os.path.join(parent, name))
            except OSError:
                continue
            removed.append(os.path.join(parent, name))
    return removed
