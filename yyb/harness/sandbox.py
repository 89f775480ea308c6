"""The bubblewrap sandbox: a read-only host with protected roots masked and private writables.

The candidate sees the host file system read-only; the registry, the source repository, the
controller's home (except read-only tool paths), other attempts and grader assets are hidden
behind empty tmpfs mounts; it can write only to its own attempt folders. It runs in new PID,
IPC and UTS namespaces (and a new network namespace when the policy denies the network), in a
new session, and dies with its parent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from functools import cache

from yyb.errors import YybError

INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: sudo apt-get install bubblewrap)"


class SandboxUnavailable(YybError):
    """The host cannot start the sandbox; nothing was dispatched."""

    def __init__(self, reason: str):
        super().__init__(f"sandbox unavailable: {reason}; {INSTALL_HINT}")
        self.reason = reason


@dataclass
class Sandbox:
    """What one sandboxed process may see and write."""

    writable: list[str]  # bound read-write (created if missing)
    masked: list[str] = field(default_factory=list)  # hidden behind an empty tmpfs
    read_only: list[str] = field(default_factory=list)  # re-exposed read-only inside masks
    network: bool = False
    cwd: str | None = None

    def argv(self, command: list[str]) -> list[str]:
        args = [
            bwrap_path(),
            "--die-with-parent",
            "--new-session",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
        ]
        if not self.network:
            args.append("--unshare-net")
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        # Masks go first and longest paths last, so that a mask inside another survives.
        for path in sorted(set(self.masked), key=len):
            if os.path.isdir(path):
                args += ["--tmpfs", path]
            elif os.path.exists(path):
                args += ["--ro-bind", "/dev/null", path]
        exposed = [p for p in sorted(set(self.read_only), key=len) if os.path.exists(p)]
        for path in exposed:
            args += ["--ro-bind", path, path]
        # A protected root inside an exposed path stays hidden: mask it again on top.
        for path in sorted(set(self.masked), key=len):
            if any(_inside(path, outer) for outer in exposed):
                if os.path.isdir(path):
                    args += ["--tmpfs", path]
                elif os.path.exists(path):
                    args += ["--ro-bind", "/dev/null", path]
        for path in sorted(set(self.writable), key=len):
            args += ["--bind", path, path]
        if self.cwd:
            args += ["--chdir", self.cwd]
        return [*args, "--", *command]


def _inside(path: str, outer: str) -> bool:
    return path == outer or path.startswith(outer.rstrip("/") + "/")


@cache
def bwrap_path() -> str:
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxUnavailable("the bwrap executable is not on PATH")
    return found


@cache
def version() -> str:
    done = subprocess.run([bwrap_path(), "--version"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def probe() -> str:
    """Start a trivial sandboxed process; return the bubblewrap version or raise.

    Raises:
        SandboxUnavailable: bwrap is missing or cannot create its namespaces here.
    """
    import tempfile

    with tempfile.TemporaryDirectory(prefix="yyb-probe-") as folder:
        box = Sandbox(writable=[folder], masked=[os.path.expanduser("~")], cwd=folder)
        try:
            done = subprocess.run(
                box.argv(["/bin/sh", "-c", "echo ok > probe"]),
                capture_output=True,
                timeout=30,
                env={"PATH": "/usr/bin:/bin"},
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxUnavailable(f"bwrap did not start ({exc})") from None
        if done.returncode != 0 or not os.path.exists(os.path.join(folder, "probe")):
            detail = done.stderr.decode(errors="replace").strip().splitlines()
            raise SandboxUnavailable(f"bwrap failed: {detail[-1] if detail else done.returncode}")
    return version()


def protected_roots(store_path: str | None, config, plan: dict) -> list[str]:
    """Roots a sandboxed process must not see: the registry, the sources and the config,
    the controller's home, the system temp folder (so sibling attempts), grader files."""
    import tempfile

    roots = [store_path, os.path.expanduser("~"), tempfile.gettempdir()]
    if config is not None:
        roots.append(os.path.dirname(os.path.abspath(config.path)))
        for repo_id in config.data.get("repositories", {}):
            roots.append(config.repository_path(repo_id))
    for spec in plan["evaluators"]["catalog"].values():
        if spec.get("executable"):
            roots.append(os.path.abspath(spec["executable"]))
        roots += [os.path.abspath(a["path"]) for a in spec.get("assets", [])]
    return sorted({os.path.realpath(r) for r in roots if r})
