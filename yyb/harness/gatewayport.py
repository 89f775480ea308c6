"""The gateway port: a loopback TCP port inside the sandbox, relayed to the gateway's UNIX socket.

A sandbox with a ``Port`` (``Sandbox.gateway``) shows, in a read-only tmpfs of its own at
``FOLDER``, the gateway's socket at ``SOCKET`` and the forwarder program
(yyb/harness/forwarder.py, handed to bubblewrap through a pipe and written read-only) at
``PROGRAM``, and runs the command behind the forwarder: ``python3 -I -S PROGRAM SOCKET PORT --
COMMAND...``, started after the drop of privilege and the seccomp filter, as confined as the
command. The network namespace keeps loopback only: the port and the socket are the one way
out. The caller puts ``Port.url`` in whatever variables its harness reads (the forwarder adds
nothing to the environment).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from yyb.errors import InvalidArgument

FOLDER = "/run/yyb"  # a read-only tmpfs inside the sandbox's /run
SOCKET = f"{FOLDER}/gateway.sock"
PROGRAM = f"{FOLDER}/forward.py"
# The interpreter the forwarder runs on, at this path in the sandbox's view: the host's, or
# the environment's when the sandbox shows one (it runs unprivileged either way).
INTERPRETER = "/usr/bin/python3"
LOWEST_PORT = 1024  # the sandbox uid cannot bind below it (net.ipv4.ip_unprivileged_port_start)
SOURCE = Path(__file__).with_name("forwarder.py")


@dataclass(frozen=True)
class Port:
    """The gateway's UNIX socket on the host, and the loopback port it is reached at inside."""

    socket_path: str
    port: int

    def __post_init__(self):
        if not isinstance(self.port, int) or not LOWEST_PORT <= self.port <= 65535:
            raise InvalidArgument(
                "port", f"a TCP port from {LOWEST_PORT} to 65535 (the sandbox cannot bind below)"
            )
        if not self.socket_path:
            raise InvalidArgument("socket_path", "the path of the gateway's UNIX socket")

    @property
    def url(self) -> str:
        """The base URL a candidate reaches the gateway at (add the API's path, ``/v1``)."""
        return f"http://127.0.0.1:{self.port}"


def program() -> bytes:
    """The forwarder's source, as shown at ``PROGRAM``."""
    return SOURCE.read_bytes()


def mounts(port: Port, program_fd: int) -> list[str]:
    """The bubblewrap options showing the socket and the program (read from ``program_fd``)
    in a tmpfs at ``FOLDER``, made read-only after: nothing inside can replace either name.
    They come after the options making ``/run``."""
    return [
        *("--perms", "0755", "--size", str(1 << 20), "--tmpfs", FOLDER),
        *("--ro-bind", os.path.abspath(port.socket_path), SOCKET),
        *("--perms", "0444", "--ro-bind-data", str(program_fd), PROGRAM),
        *("--remount-ro", FOLDER),
    ]


def command(port: Port, harness: list[str]) -> list[str]:
    """``harness`` started behind the forwarder (``-I -S``: no variable, site folder or
    current folder of the sandbox changes what the interpreter runs)."""
    return [INTERPRETER, "-I", "-S", PROGRAM, SOCKET, str(port.port), "--", *harness]


def interpreter_missing(os_root: str | None) -> bool:
    """Whether the sandbox's view (the host's, or the environment tree ``os_root``) has no
    ``INTERPRETER`` for the forwarder."""
    if os_root is None:
        return not os.access(INTERPRETER, os.X_OK)
    return not os.path.lexists(os.path.join(os_root, INTERPRETER.lstrip("/")))


def admit(port: Port, uid: int | None) -> str | None:
    """Make the socket connectable by the sandbox ``uid`` (as root: given to that uid; the
    path to it on the host need not be passable, bubblewrap binds it) and writable by its
    owner. Returns why it cannot be used, if it cannot: no socket there."""
    import stat

    try:
        found = os.stat(port.socket_path)
    except OSError as exc:
        return f"the gateway's socket {port.socket_path} cannot be reached ({exc.strerror})"
    if not stat.S_ISSOCK(found.st_mode):
        return f"the gateway's socket {port.socket_path} is not a socket"
    if uid is not None:
        os.chown(port.socket_path, uid, uid)
    if not found.st_mode & stat.S_IWUSR:  # connecting is writing to it
        os.chmod(port.socket_path, stat.S_IMODE(found.st_mode) | stat.S_IWUSR)
    return None
