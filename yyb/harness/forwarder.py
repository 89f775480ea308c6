"""The gateway port's forwarder: inside the sandbox, 127.0.0.1:PORT relayed to the gateway's socket.

Run as ``python3 -I -S forwarder.py SOCKET PORT -- COMMAND [ARG...]`` as the sandbox's first
program after the drop of privilege and the seccomp filter (yyb/harness/gatewayport.py shows it
read-only at ``/run/yyb/forward.py``). It opens its listening sockets (``127.0.0.1:PORT``, and
``[::1]:PORT`` where the namespace has IPv6), starts the relay in a process of its own, and then
becomes COMMAND by ``exec``: the harness keeps this process, its pid, descriptors, environment
(the block this process was given, read back from ``/proc/self/environ``) and signal
dispositions, and has no child it did not start. The port listens before COMMAND runs, so a
connection made at once waits in the kernel's backlog for the relay to accept it.

The relay is a grandchild, so that the harness is not its parent: it closes every descriptor
but its own (the envelope channel is never held here), points 0, 1 and 2 at /dev/null, and
leaves the harness's session. It ends when the harness ends (a pidfd of the harness, or a
check each half second where there is none), and with the sandbox's PID namespace in any case.
For each accepted connection it opens one to SOCKET and copies bytes both ways, a half-close
passed on as a half-close, at most ``CHUNK`` bytes held per direction; at most
``MAX_CONNECTIONS`` are open at once (fewer if the open-files limit is low); further
connections wait in the backlog. One that the gateway does not take at once is closed.

Standard library only, Python 3.7 or later: it runs on whichever interpreter the sandbox's view
holds, the host's or an environment's.
"""

from __future__ import annotations

import errno
import os
import selectors
import signal
import socket
import sys

CHUNK = 1 << 16  # bytes read at once, and the most held, per direction of a connection
MAX_CONNECTIONS = 64  # connections relayed at once, so open to the gateway at once
BACKLOG = 64  # connections waiting to be accepted, per listening socket
FDS_KEPT = 16  # descriptors left aside under the open-files limit (selector, listeners, ...)
CANNOT_LISTEN = 125  # the exit status when the port cannot be opened: COMMAND never runs
POLL_S = 0.5  # how often the harness is looked for when there is no pidfd
# What execvp does when a directory of PATH does not hold the program: go on with the next.
NEXT_DIRECTORY = (errno.ENOENT, errno.ENOTDIR, errno.ESTALE, errno.ENODEV, errno.ETIMEDOUT)
DEFAULT_PATH = "/bin:/usr/bin"  # the C library's, when the environment has no PATH


def main(argv: list[str]) -> int:
    """Open the port, start the relay, become the command; returns only on failure."""
    if len(argv) < 4 or argv[2] != "--" or not argv[1].isdigit():
        return fail(2, "usage: forwarder.py SOCKET PORT -- COMMAND [ARG...]")
    target, port, command = argv[0], int(argv[1]), argv[3:]
    environ = initial_environment()
    try:
        listeners = listen(port)
    except OSError as exc:
        return fail(CANNOT_LISTEN, f"cannot listen on 127.0.0.1:{port} ({exc.strerror})")
    watch = harness_watch()
    try:
        detach(listeners, target, watch)
    except OSError as exc:
        return fail(CANNOT_LISTEN, f"cannot start the relay ({exc.strerror})")
    for listener in listeners:
        listener.close()
    if watch is not None:
        os.close(watch)
    # Python ignores these two at start-up; the harness gets them as a plain exec would.
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        execvp(command, environ)
    except OSError as exc:
        code = 127 if exc.errno in NEXT_DIRECTORY else 126
        return fail(code, f"cannot run {command[0]} ({exc.strerror})")
    return 126  # not reached: execvp returns only by raising


def fail(code: int, message: str) -> int:
    sys.stderr.write(f"yyb forwarder: {message}\n")
    sys.stderr.flush()
    return code


def initial_environment() -> dict[bytes, bytes]:
    """The environment this process was started with, as it was given: the interpreter may
    have added to its own (a coerced ``LC_CTYPE``), and the harness must not inherit that."""
    try:
        with open("/proc/self/environ", "rb") as handle:
            block = handle.read()
    except OSError:
        return dict(os.environb)
    found = {}
    for entry in block.split(b"\0"):
        name, equals, value = entry.partition(b"=")
        if equals and name:
            found.setdefault(name, value)
    return found


def execvp(command: list[str], environ: dict[bytes, bytes]) -> None:
    """``execvpe`` as the C library does it: PATH searched (``environ``'s), a file the kernel
    cannot run (no ``#!``) given to /bin/sh, EACCES reported if no directory held a runnable
    one. Raises OSError when nothing could be run."""
    name = command[0]
    if not name:
        raise OSError(errno.ENOENT, os.strerror(errno.ENOENT))
    if "/" in name:
        candidates = [name]
    else:
        path = os.fsdecode(environ.get(b"PATH", DEFAULT_PATH.encode()))
        candidates = [os.path.join(folder or ".", name) for folder in path.split(":")]
    denied = None
    for candidate in candidates:
        try:
            os.execve(candidate, command, environ)
        except OSError as exc:
            if exc.errno == errno.ENOEXEC:
                os.execve("/bin/sh", ["/bin/sh", candidate, *command[1:]], environ)
            if exc.errno == errno.EACCES:
                denied = exc
            elif exc.errno not in NEXT_DIRECTORY or len(candidates) == 1:
                raise
    if denied is not None:
        raise denied
    raise OSError(errno.ENOENT, os.strerror(errno.ENOENT))


def listen(port: int) -> list[socket.socket]:
    """The listening sockets: 127.0.0.1 (required) and ::1 (where the namespace has it)."""
    four = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        four.bind(("127.0.0.1", port))
        four.listen(BACKLOG)
    except OSError:
        four.close()
        raise
    listeners = [four]
    try:
        six = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError:
        return listeners
    try:
        six.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        six.bind(("::1", port))
        six.listen(BACKLOG)
        listeners.append(six)
    except OSError:
        six.close()
    for listener in listeners:
        listener.setblocking(False)
    return listeners


def harness_watch() -> int | None:
    """A pidfd of this process (the harness once it has exec'd), readable when it ends."""
    try:
        return os.pidfd_open(os.getpid())
    except (AttributeError, OSError):
        return None


def detach(listeners: list[socket.socket], target: str, watch: int | None) -> None:
    """Start the relay as a grandchild (reparented to the sandbox's init, not the harness's
    child) and wait for the child in between, so no zombie is left to the harness."""
    harness = os.getpid()
    child = os.fork()
    if child == 0:
        try:
            # Quiet before the relay is forked and before the harness is let go: no moment
            # where a process other than the harness holds what the harness inherited.
            quiet(listeners, watch)
            if os.fork() == 0:
                Relay(listeners, target, watch, harness).run()
        finally:
            os._exit(0)
    os.waitpid(child, 0)


def quiet(listeners: list[socket.socket], watch: int | None) -> None:
    """Leave the harness's session and hold no descriptor but the relay's own (0, 1 and 2
    on /dev/null)."""
    os.setsid()
    keep = {listener.fileno() for listener in listeners}
    if watch is not None:
        keep.add(watch)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        if fd != null:
            os.dup2(null, fd, inheritable=False)
    try:
        held = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        held = list(range(3, soft_open_files()))
    for fd in held:
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def soft_open_files() -> int:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 16


class Relay:
    """Accept on the listeners, connect each to the gateway's socket, copy both ways."""

    def __init__(self, listeners, target: str, watch: int | None, harness: int):
        self.selector = selectors.DefaultSelector()
        self.listeners = listeners
        self.target = target
        self.watch = watch
        self.harness = harness
        self.open = 0
        self.limit = max(1, min(MAX_CONNECTIONS, (soft_open_files() - FDS_KEPT) // 2))
        self.accepting = False
        self.resume()
        if watch is not None:
            self.selector.register(watch, selectors.EVENT_READ, None)

    def run(self) -> None:
        """Relay until the harness has ended."""
        while True:
            events = self.selector.select(None if self.watch is not None else POLL_S)
            for key, mask in events:
                if key.data is None:
                    return
                key.data(key.fileobj, mask)
            if self.watch is None and not alive(self.harness):
                return

    def resume(self) -> None:
        if not self.accepting:
            for listener in self.listeners:
                self.selector.register(listener, selectors.EVENT_READ, self.accept)
            self.accepting = True

    def pause(self) -> None:
        if self.accepting:
            for listener in self.listeners:
                self.selector.unregister(listener)
            self.accepting = False

    def accept(self, listener: socket.socket, _mask: int) -> None:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.setblocking(False)
        try:
            # A UNIX socket connects at once or not at all (EAGAIN: the gateway's backlog is
            # full): never wait for it here, where every other connection would wait too.
            upstream.connect(self.target)
        except OSError:
            upstream.close()
            client.close()
            return
        client.setblocking(False)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        Link(self, client, upstream)
        self.open += 1
        if self.open >= self.limit:
            self.pause()

    def closed(self) -> None:
        self.open -= 1
        if self.open < self.limit:
            self.resume()


def alive(pid: int) -> bool:
    """Whether the harness is still there (the sandbox's init reaps it as it ends)."""
    return os.path.exists(f"/proc/{pid}")


class Link:
    """One relayed connection: two sockets, the bytes waiting to be written to each, and
    which of them has said it sends no more."""

    def __init__(self, relay: Relay, client: socket.socket, upstream: socket.socket):
        self.relay = relay
        self.peer = {client: upstream, upstream: client}
        self.waiting = {client: memoryview(b""), upstream: memoryview(b"")}
        self.ended: set[socket.socket] = set()  # sockets read to their end
        self.events = {client: 0, upstream: 0}
        self.done = False
        self.update()

    def __call__(self, sock: socket.socket, mask: int) -> None:
        try:
            if mask & selectors.EVENT_WRITE:
                self.flush(sock)
            if mask & selectors.EVENT_READ:
                self.pull(sock)
        except OSError:
            self.close()
            return
        if len(self.ended) == 2 and not any(self.waiting.values()):
            self.close()
        else:
            self.update()

    def pull(self, sock: socket.socket) -> None:
        """Read what ``sock`` sent and pass it on (or its end, as a half-close)."""
        try:
            data = sock.recv(CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        peer = self.peer[sock]
        if not data:
            self.ended.add(sock)
            peer.shutdown(socket.SHUT_WR)
            return
        self.waiting[peer] = memoryview(data)
        self.flush(peer)

    def flush(self, sock: socket.socket) -> None:
        """Write to ``sock`` what waits for it."""
        data = self.waiting[sock]
        if not data:
            return
        try:
            sent = sock.send(data)
        except (BlockingIOError, InterruptedError):
            return
        self.waiting[sock] = data[sent:]

    def update(self) -> None:
        """Ask for what each socket can do next: read, when what it sent last is written and
        it has not ended; write, when something waits for it."""
        for sock, peer in self.peer.items():
            wanted = 0
            if sock not in self.ended and not self.waiting[peer]:
                wanted |= selectors.EVENT_READ
            if self.waiting[sock]:
                wanted |= selectors.EVENT_WRITE
            if wanted == self.events[sock]:
                continue
            if not self.events[sock]:
                self.relay.selector.register(sock, wanted, self)
            elif wanted:
                self.relay.selector.modify(sock, wanted, self)
            else:
                self.relay.selector.unregister(sock)
            self.events[sock] = wanted

    def close(self) -> None:
        if self.done:
            return
        self.done = True
        for sock in self.peer:
            if self.events[sock]:
                self.relay.selector.unregister(sock)
            sock.close()
        self.relay.closed()


if __name__ == "__main__":  # a program the sandbox runs, with its own exit status
    raise SystemExit(main(sys.argv[1:]))
