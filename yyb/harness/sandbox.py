"""The bubblewrap sandbox: a view built up from an allow-list, with no privilege inside.

Nothing of the host is visible unless it is named: the OS folders a program needs (``/usr``,
``/etc`` and the ``/bin``, ``/sbin``, ``/lib*`` links or folders) read-only, the declared
read-only tool paths, and the process's own writable folders. Everything else (the store, any
repository, any home, the host temp folder, the configuration, the signing key, other attempts,
grader files) does not exist inside, whatever the environment says. A protected root that lies
inside a visible one is masked (an empty tmpfs, or /dev/null for a file).

The process has no capability and cannot gain one (``no_new_privs``). When yyb runs as root,
bubblewrap sets up the mounts and the command then drops to an unprivileged uid and gid
(``SANDBOX_UID``, 65534 unless ``YYB_SANDBOX_UID`` says otherwise) with an empty bounding set,
so even files a root process could read by ownership stay closed; the process's writable
folders are handed over to that uid first. As an unprivileged user, bubblewrap runs the
command in a new user namespace with every capability dropped. Either way it gets its own PID,
IPC, UTS and cgroup namespaces, a network namespace with loopback only unless the network is
allowed, a new session, and dies with its parent. A seccomp filter (``harness/seccomp.py``)
keeps it from making a user namespace or reaching into another process; bubblewrap reads it
from a pipe, so a sandboxed process is started with ``Sandbox.launch``, which opens that pipe
and says which descriptors the process inherits. ``probe`` checks these properties for real.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Protocol

from yyb.errors import EnvironmentSpecError, InvalidArgument, UsageError, YybError
from yyb.harness import cgroups, disk, gatewayport, seccomp, supervise


class Premount(Protocol):
    """A mount made ahead of bubblewrap (``harness.overlay.Mount``), named here by what the
    sandbox asks of it so that the overlay module, which uses the sandbox, is not imported
    back."""

    def prefix(self, mark_fd: int) -> list[str]:
        """The argv that mounts it, writes one byte to ``mark_fd`` once mounted, then runs
        the rest of the command line."""
        ...


INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: sudo apt-get install bubblewrap)"
# OS folders bound read-only (when they exist), and the top-level names that are links into
# /usr on a merged-/usr system or folders of their own elsewhere.
OS_FOLDERS = ("/usr", "/etc")
OS_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FOLDERS = (*OS_FOLDERS, *OS_LINKS)
SANDBOX_UID_ENV = "YYB_SANDBOX_UID"
DEFAULT_SANDBOX_UID = 65534  # nobody
# The size of each of /tmp, /run and /dev/shm inside the sandbox, in MiB (Docker's /dev/shm):
# TMPDIR, HOME and the caches are the process's own folders, bounded with them.
SCRATCH_MIB = 64
PIPE_BUFFER = 1 << 16  # what a pipe holds before a write blocks (Linux's default)


class SandboxUnavailable(YybError):
    """The host cannot start the sandbox as yyb needs it; nothing was dispatched."""

    def __init__(self, reason: str, hint: str | None = INSTALL_HINT):
        super().__init__(f"sandbox unavailable: {reason}" + (f"; {hint}" if hint else ""))
        self.reason = reason


class UnsafeToolPath(UsageError):
    """A read-only tool path that would expose a protected root inside the sandbox."""

    def __init__(self, path: str, resolved: str, root: str):
        where = path if path == resolved else f"{path} (resolves to {resolved})"
        super().__init__(
            f"tool path {where} would expose {root}, which a sandboxed process must not see"
        )
        self.path = path
        self.root = root


def sandbox_uid() -> int | None:
    """The uid (and gid) a root controller drops to inside the sandbox; None when yyb does not
    run as root (the sandbox then runs as the controller's own uid, in a user namespace)."""
    if os.geteuid() != 0:
        return None
    text = os.environ.get(SANDBOX_UID_ENV, "")
    if text.isdigit() and int(text) > 0:
        return int(text)
    return DEFAULT_SANDBOX_UID


def inside(path: str, outer: str) -> bool:
    """``path`` is ``outer`` or lies below it."""
    return path == outer or path.startswith(outer.rstrip("/") + "/")


def tool_paths(paths: list[str], protected: list[str]) -> dict[str, str]:
    """Declared read-only tool path -> the real path bound there, each checked.

    Once symbolic links are resolved, a tool path that is or lies inside a protected root is
    refused: binding it would show that root. One that contains a protected root is bound with
    that root masked; one that contains the controller's home or the temp folder (``~``,
    ``/tmp``, ``/``) is refused, since masking those would leave nothing to bind.

    Raises:
        UnsafeToolPath: the first refused path.
    """
    import tempfile

    open_roots = {os.path.realpath(p) for p in (os.path.expanduser("~"), tempfile.gettempdir())}
    bound = {}
    for path in paths:
        if not os.path.exists(path):
            continue
        resolved = os.path.realpath(path)
        for root in protected:
            if root in open_roots:
                if inside(root, resolved):
                    raise UnsafeToolPath(path, resolved, root)
            elif inside(resolved, root):
                raise UnsafeToolPath(path, resolved, root)
        bound[os.path.abspath(path)] = resolved
    return bound


def hand_over(folder: str) -> None:
    """Give ``folder`` and everything in it to the sandbox uid (root only; links themselves,
    never their targets), so the dropped process can write its own folders."""
    uid = sandbox_uid()
    if uid is not None:
        _chown_tree(folder, uid, uid)


def take_back(folder: str) -> None:
    """Give ``folder`` back to the controller once the sandboxed process is gone, so that
    nothing the controller reads (a repository, say) is owned by another user."""
    if sandbox_uid() is not None:
        _chown_tree(folder, os.getuid(), os.getgid())


def _chown_tree(folder: str, uid: int, gid: int) -> None:
    """chown everything below ``folder``, links themselves, walking with a stack: a tree a
    candidate made can be deeper than any recursion limit."""
    stack = [folder]
    while stack:
        path = stack.pop()
        try:
            os.chown(path, uid, gid, follow_symlinks=False)
            if os.path.isdir(path) and not os.path.islink(path):
                with os.scandir(path) as entries:
                    stack.extend(entry.path for entry in entries)
        except (FileNotFoundError, NotADirectoryError):
            continue


@dataclass(frozen=True)
class Launch:
    """How to start one sandboxed command: its argv and the descriptors it must inherit."""

    argv: list[str]
    pass_fds: tuple[int, ...]
    group: cgroups.Group | None = None  # the control group holding memory and processes
    mounted_fd: int | None = None  # read end of the pipe the overlay's mount step writes to

    def mounted(self) -> bool | None:
        """Whether the sandbox's overlay was mounted before bubblewrap started (None: it has
        none). Only the step ahead of bubblewrap holds the pipe's write end, and it closes it
        before bubblewrap starts: nothing the command runs can answer for it."""
        if self.mounted_fd is None:
            return None
        os.set_blocking(self.mounted_fd, False)
        try:
            return os.read(self.mounted_fd, 1) != b""
        except BlockingIOError:
            return False

    def resources(self) -> dict:
        """What held the memory and process limits and what the kernel counted so far (read
        it once the process has ended, before leaving ``launch``)."""
        if self.group is None:
            return {"enforced_by": "rlimit", **dict.fromkeys(cgroups.COUNTS)}
        return {"enforced_by": self.group.enforced_by, **self.group.usage()}


@dataclass
class Sandbox:
    """What one sandboxed process sees: OS folders and tools read-only, its writables."""

    writable: list[str]  # bound read-write at the same path
    hidden: list[str] = field(default_factory=list)  # protected roots: never visible
    read_only: dict[str, str] = field(default_factory=dict)  # tool path -> real path bound
    network: bool = False
    cwd: str | None = None
    limits: dict | None = None  # resource limits (harness/limits.py) of every process inside
    # An overlay (harness/overlay.py) mounted at its target, in a mount namespace of the
    # command's own, before bubblewrap starts: the target is then bound like any writable.
    overlay: Premount | None = None
    # The attempt's disk (harness/disk.py): a sized tmpfs holding the writable folders, in
    # the namespaces of a holder process, where bubblewrap is then started.
    disk: disk.Disk | None = None
    # An environment's root (harness/environments/): a tree whose top-level entries are shown
    # read-only where the host's OS folders would be; None shows the host's.
    os_root: str | None = None
    # Folders shown at another path: (real path, path inside, writable), e.g. a workspace at
    # /testbed or an environment's virtual environment at /yyb/python.
    mounts: tuple[tuple[str, str, bool], ...] = ()
    # The gateway's socket, reached inside at 127.0.0.1:PORT through the forwarder the
    # command runs behind (yyb/harness/gatewayport.py); None: no way out but the network's.
    gateway: gatewayport.Port | None = None

    @contextmanager
    def launch(self, command: list[str]) -> Iterator[Launch]:
        """Open the seccomp filter's pipe for one start of ``command``; closed on leaving.

        The argv and the descriptors are valid together, for one process: bubblewrap reads the
        pipe to its end.

        Raises:
            SandboxUnavailable: the filter has no program for this host's machine.
        """
        if self.gateway is not None:
            problem = gatewayport.admit(self.gateway, sandbox_uid())
            if problem is not None:
                raise SandboxUnavailable(problem, None)
        fd = filter_pipe()
        program = data_pipe(gatewayport.program()) if self.gateway is not None else None
        mark = os.pipe() if self.overlay is not None else None
        group = cgroups.create(self.limits) if self.limits is not None else None
        try:
            argv = self.argv(command, fd, group, mark[1] if mark else None, program)
            fds = (fd, mark[1]) if mark else (fd,)
            fds += (program,) if program is not None else ()
            yield Launch(argv, fds, group, mark[0] if mark else None)
        finally:
            for end in (fd, *(mark or ()), *([program] if program is not None else [])):
                os.close(end)
            if group is not None:
                group.remove()

    def run(
        self,
        command: list[str],
        env: dict[str, str],
        timeout_ms: int,
        cancel=None,
        owner: str | None = None,
        pass_fds: tuple[int, ...] = (),
        give_back: bool = True,
    ) -> tuple[supervise.Outcome, dict]:
        """Run ``command`` in this sandbox to its end (yyb/harness/supervise.py): the folder
        ``owner`` (holding the writable folders) handed to the sandbox uid for the run and,
        with ``give_back``, taken back after (a caller that only removes the folder once the
        run is over, reading nothing in it, can spare that walk); ``pass_fds`` inherited.
        Returns the outcome and what held the memory and process limits and what the kernel
        counted (``Launch.resources``), with ``workspace_mounted`` (``Launch.mounted``) when
        the sandbox has an overlay."""
        if owner is not None:
            hand_over(owner)
        try:
            with self.launch(command) as launch:
                outcome = supervise.run(
                    launch.argv,
                    env,
                    None,
                    timeout_ms,
                    cancel,
                    pass_fds=(*pass_fds, *launch.pass_fds),
                )
                resources = launch.resources()
                if self.disk is not None:
                    resources.update(self.disk.usage())
                if self.overlay is not None:
                    resources["workspace_mounted"] = launch.mounted()
        finally:
            if owner is not None and give_back:
                take_back(owner)
        return outcome, resources

    def argv(
        self,
        command: list[str],
        seccomp_fd: int,
        group: cgroups.Group | None = None,
        mark_fd: int | None = None,
        program_fd: int | None = None,
    ) -> list[str]:
        """The bubblewrap command line, which loads the seccomp filter from ``seccomp_fd``
        (a descriptor the process inherits), joins ``group`` first, if any, mounts the
        overlay first, if any, saying so on ``mark_fd``, and, with a gateway, writes the
        forwarder read from ``program_fd``; ``launch`` provides them.

        Raises:
            SandboxUnavailable: a gateway, and no interpreter in the view for its forwarder.
            InvalidArgument: a gateway in a sandbox that has the host's network.
        """
        uid = sandbox_uid()
        args = self._wrappers(uid, group, mark_fd)
        args += [bwrap_path(), "--die-with-parent", "--new-session"]
        args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if uid is None:  # unprivileged: a user namespace, every capability in it dropped,
            # and no further user namespace inside it
            args += ["--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
        # (As root, no user namespace: the uid the command drops to must be a real one.)
        if not self.network:
            args.append("--unshare-net")
        args += ["--seccomp", str(seccomp_fd)]
        shown = [mount[1] for mount in self.mounts]
        dropped = [DROP] if uid is not None and self.os_root is not None else []
        places = [*self.read_only, *self.writable, *shown, *dropped]
        os_args, visible = _os_view(self.os_root, places)
        args += os_args
        # bubblewrap gives the folders it makes on the way to a mount point the host folders'
        # modes, which a dropped uid may not pass (a 0700 temp folder): make them 0755 first.
        for folder in _ancestors([*self.read_only, *self.writable, *shown], visible):
            args += ["--perms", "0755", "--dir", folder]
        seen = {folder: folder for folder in visible}  # where each visible real path shows
        for path, real in sorted(self.read_only.items(), key=lambda item: len(item[0])):
            args += ["--ro-bind", real, path]
            seen[real] = path
        args += _masks(self.hidden, seen)
        for path in sorted(set(self.writable), key=len):
            args += ["--bind", path, path]
        for real, shown, writable in sorted(self.mounts, key=lambda mount: len(mount[1])):
            args += ["--bind" if writable else "--ro-bind", real, shown]
        if dropped:
            args += ["--perms", "0755", "--dir", DROP]
            for real, shown_at in drop_files():
                args += ["--ro-bind", real, shown_at]
        if self.gateway is not None:
            if self.network:  # the port would open on the host's own loopback
                raise InvalidArgument("gateway", "a sandbox with the network allowed has none")
            if gatewayport.interpreter_missing(self.os_root):
                where = "the environment" if self.os_root is not None else "this host"
                raise SandboxUnavailable(
                    f"the gateway's forwarder needs {gatewayport.INTERPRETER} in {where}", None
                )
            args += gatewayport.mounts(self.gateway, program_fd)
            command = gatewayport.command(self.gateway, command)
        # The root bubblewrap made (and the folders on the way to each mount) becomes
        # read-only: only the writable folders, /tmp and /run can be written.
        args += ["--remount-ro", "/"]
        if self.cwd:
            args += ["--chdir", self.cwd]
        args.append("--")
        if uid is not None:
            args += [
                *([setpriv_path()] if self.os_root is None else drop_argv()),
                f"--reuid={uid}",
                f"--regid={uid}",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--no-new-privs",
                "--",
            ]
        return [*args, *command]

    def _wrappers(self, uid: int | None, group, mark_fd: int | None) -> list[str]:
        """What runs ahead of bubblewrap: the limits (joining ``group``), the overlay's mount
        (saying so on ``mark_fd``) and the way into the attempt's disk, each when present."""
        args = []
        if self.limits is not None:
            from yyb.harness import limits

            namespace = self.disk.user_namespace() if self.disk is not None else None
            args += limits.prefix(
                self.limits, os.getuid() if uid is None else uid, group, namespace
            )
        if self.overlay is not None:
            args += self.overlay.prefix(mark_fd)
        if self.disk is not None:
            args += self.disk.prefix()
        return args


# What bubblewrap makes itself: an environment's own entries of these names are not shown.
MADE = ("dev", "proc", "tmp", "run")


def _os_view(root: str | None = None, places=()) -> tuple[list[str], list[str]]:
    """The OS folders and links shown read-only at their own paths (the host's, or the
    top-level entries of the environment tree ``root``), and the bounded file systems
    bubblewrap makes; with the real paths shown (for masks and ancestors). ``places`` are the
    paths yyb mounts something at (checked against ``root``'s links: ``_linked_places``)."""
    args, visible = [], []
    if root is not None:
        taken = _linked_places(root, places)
        for name in sorted(os.listdir(root)):
            real = os.path.join(root, name)
            if name in MADE or name in taken or "/" + name == DROP:
                continue
            if os.path.islink(real):
                args += ["--symlink", os.readlink(real), "/" + name]
            elif os.path.isdir(real) or os.path.isfile(real):
                args += ["--ro-bind", real, "/" + name]
        return args + _made(), []
    for folder in OS_FOLDERS:
        if os.path.isdir(folder):
            args += ["--ro-bind", folder, folder]
            visible.append(folder)
    for name in OS_LINKS:
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
            visible.append(name)
    return args + _made(), visible


def _linked_places(root: str, places) -> set[str]:
    """The top-level links of the environment tree ``root`` that lie on the way to a place yyb
    mounts at: they are not shown (the mount's folders take their place).

    bubblewrap follows links while it sets up the mounts, in a root where the host's is
    reachable (as /oldroot): a link an image's author planted on the way to a mount point
    would have bubblewrap mount there, and make the missing folders and files, on the host.
    A link below a top-level folder of the tree cannot be left out that way, so it is refused.

    Raises:
        EnvironmentSpecError: a place lies below a link inside a folder of the tree.
    """
    taken = set()
    for place in places:
        parts = os.path.normpath(place).strip("/").split("/")
        if not parts[0] or parts[0] in MADE:
            continue
        if os.path.islink(os.path.join(root, parts[0])):
            taken.add(parts[0])
            continue
        for end in range(2, len(parts) + 1):
            if os.path.islink(os.path.join(root, *parts[:end])):
                raise EnvironmentSpecError(
                    root, "/" + "/".join(parts[:end]), f"is a link, and yyb mounts {place}"
                )
    return taken


def _made() -> list[str]:
    """The file systems bubblewrap makes: /dev, /proc and the bounded scratch folders."""
    args = []
    # The file systems bubblewrap makes are memory: each is bounded (its own tmpfs size),
    # and /dev, which a user namespace would let its owner write, is read-only.
    scratch = str(SCRATCH_MIB << 20)
    args += ["--dev", "/dev", "--proc", "/proc"]
    # /tmp and /dev/shm are everyone's, sticky, as on a host: the dropped uid writes there
    # when yyb runs as root (a tmpfs bubblewrap makes is root's otherwise).
    for folder, perms in (("/tmp", "1777"), ("/run", "0755"), ("/dev/shm", "1777")):
        args += ["--perms", perms, "--size", scratch, "--tmpfs", folder]
    args += ["--remount-ro", "/dev"]
    return args


def _masks(hidden, seen: dict[str, str]) -> list[str]:
    """A protected root inside something visible stays hidden: masked where it shows
    (``seen``: each visible real path, and where it shows)."""
    masks = set()
    for root in set(hidden):
        for real, shown in seen.items():
            if inside(root, real):
                masks.add((shown + root[len(real) :], root))
    args = []
    for shown, root in sorted(masks, key=lambda mask: len(mask[0])):
        if os.path.isdir(root):
            args += ["--tmpfs", shown]
        elif os.path.lexists(root):
            args += ["--ro-bind", "/dev/null", shown]
    return args


def _ancestors(paths, visible: list[str]) -> list[str]:
    """The folders above ``paths`` (outermost first) that are neither / nor inside a folder
    that is already shown."""
    found = set()
    for path in paths:
        parent = os.path.dirname(os.path.abspath(path))
        while parent not in ("/", "") and not any(inside(parent, v) for v in visible):
            found.add(parent)
            parent = os.path.dirname(parent)
    return sorted(found, key=lambda folder: (folder.count("/"), folder))


def filter_pipe() -> int:
    """The read end of a pipe holding the seccomp program for this host, ready for bubblewrap.

    Raises:
        SandboxUnavailable: this host's machine has no filter (the sandbox would not hold).
    """
    machine = os.uname().machine
    program = seccomp.program(machine)
    if program is None:
        known = " and ".join(seccomp.ARCHES)
        raise SandboxUnavailable(
            f"no seccomp filter for this machine ({machine}); yyb has one for {known}", None
        )
    return data_pipe(program)


def data_pipe(data: bytes) -> int:
    """The read end of a pipe holding ``data`` and then its end, for bubblewrap to read.

    ``data`` (a seccomp program: a few hundred bytes; the gateway's forwarder: a few KiB)
    fits a pipe's buffer: one write, which never blocks."""
    if len(data) > PIPE_BUFFER:
        raise ValueError(f"{len(data)} bytes do not fit a pipe's buffer")
    read, write = os.pipe()
    try:
        os.write(write, data)
    finally:
        os.close(write)
    return read


@cache
def bwrap_path() -> str:
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxUnavailable("the bwrap executable is not on PATH")
    return found


@cache
def setpriv_path() -> str:
    """setpriv (util-linux), which drops root inside the sandbox; it must lie under /usr."""
    for candidate in ("/usr/bin/setpriv", "/usr/sbin/setpriv"):
        if os.access(candidate, os.X_OK):
            return candidate
    raise SandboxUnavailable(
        "yyb runs as root and needs setpriv to drop it inside the sandbox",
        "install util-linux (Debian/Ubuntu: apt-get install util-linux)",
    )


# Where a root controller's setpriv is shown inside an environment's root, with the host's
# loader and the libraries it needs: the drop from root must be done by the host's own binary,
# never by one the environment (an image's author) provides, which would start as root.
DROP = "/.yyb-drop"


@cache
def drop_files() -> tuple[tuple[str, str], ...]:
    """(host file, where it is shown) for setpriv, its libraries and the host's loader; the
    loader first. Found with ldd, once per process.

    Raises:
        SandboxUnavailable: they cannot be found.
    """
    setpriv = setpriv_path()
    done = subprocess.run(["ldd", setpriv], capture_output=True, text=True)
    found = {}  # the name the loader looks for -> the host file
    for line in done.stdout.splitlines():
        parts = line.split()
        path = parts[2] if "=>" in parts and len(parts) > 2 else parts[0] if parts else ""
        if path.startswith("/"):
            found[os.path.basename(parts[0])] = os.path.realpath(path)
    loaders = [name for name in found if name.startswith("ld-")]
    if done.returncode != 0 or len(loaders) != 1:
        raise SandboxUnavailable(
            "cannot find the libraries setpriv needs to drop root inside an environment", None
        )
    names = [loaders[0], *[name for name in found if name != loaders[0]]]
    files = [(found[name], f"{DROP}/{name}") for name in names]
    return (*files, (os.path.realpath(setpriv), f"{DROP}/setpriv"))


def drop_argv() -> list[str]:
    """How the host's setpriv is started inside an environment's root: by the host's loader,
    on the host's libraries only."""
    shown = [where for _, where in drop_files()]
    return [shown[0], "--library-path", DROP, shown[-1]]


@cache
def version() -> str:
    done = subprocess.run([bwrap_path(), "--version"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def protected_roots(
    store_path: str | None, config, plan: dict, extra: tuple[str, ...] = ()
) -> list[str]:
    """Roots a sandboxed process must not see: the registry, the sources and the config,
    the controller's home, the system temp folder (so sibling attempts), grader files and
    ``extra`` (the signing key). None is visible by construction; these are what tool paths
    are checked against and what is masked should a visible root hold one."""
    import tempfile

    roots = [store_path, os.path.expanduser("~"), tempfile.gettempdir(), *extra]
    if config is not None:
        roots.append(os.path.dirname(os.path.abspath(config.path)))
        for repo_id in config.data.get("repositories", {}):
            roots.append(config.repository_path(repo_id))
    for spec in plan["evaluators"]["catalog"].values():
        files = [spec["executable"]] if spec.get("executable") else []
        files += [a["path"] for a in spec.get("assets", [])]
        for path in map(os.path.abspath, files):
            roots.append(path)
            # What lies next to a grader (its solution, its caches) is the grader's too,
            # unless it is a system folder, where only the file itself is kept out of view.
            folder = os.path.dirname(path)
            if not any(inside(os.path.realpath(folder), root) for root in SYSTEM_FOLDERS):
                roots.append(folder)
    return sorted({os.path.realpath(r) for r in roots if r})
