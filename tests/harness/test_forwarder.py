"""The forwarder program on its own, on the host: how it relays, fails, starts and ends the
command (the sandbox around it: tests/harness/test_gatewayport.py)."""

from __future__ import annotations

import errno
import hashlib
import os
import resource
import socket
import subprocess
import sys
import threading
import time

import pytest

from yyb.harness import forwarder, gatewayport

PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Upstream:
    """A UNIX socket server: each connection read to its end, then answered with
    ``answer(what arrived)`` and closed; ``peak``: most connections held at once."""

    def __init__(self, path: str, answer=lambda data: b"pong:" + data, hold: bool = False):
        self.path = path
        self.answer = answer
        self.hold = hold  # keep each connection, reading nothing, until close()
        self.open = self.peak = 0
        self.lock = threading.Lock()
        self.held = []
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(path)
        self.server.listen(256)
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with self.lock:
                self.open += 1
                self.peak = max(self.peak, self.open)
            if self.hold:
                self.held.append(conn)
                continue
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn):
        got = bytearray()
        while chunk := conn.recv(1 << 16):
            got += chunk
        conn.sendall(self.answer(bytes(got)))
        conn.close()
        with self.lock:
            self.open -= 1

    def close(self):
        self.server.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def upstream(tmp_path):
    served = Upstream(str(tmp_path / "gw.sock"))
    yield served
    served.close()


def start(target: str, port: int, command: list[str], **given) -> subprocess.Popen:
    argv = [PYTHON, "-I", "-S", str(gatewayport.SOURCE), target, str(port), "--", *command]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **given)


def connect(port: int, tries: int = 100) -> socket.socket:
    for _ in range(tries):
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=10)
        except ConnectionRefusedError:
            time.sleep(0.02)
    raise AssertionError(f"nothing listens on {port}")


def exchange(port: int, data: bytes) -> bytes:
    with connect(port) as client:
        client.sendall(data)
        client.shutdown(socket.SHUT_WR)
        got = bytearray()
        while chunk := client.recv(1 << 16):
            got += chunk
    return bytes(got)


def test_a_half_close_is_passed_on_and_the_answer_comes_back(upstream):
    port = free_port()
    running = start(upstream.path, port, ["sleep", "30"])
    try:
        assert exchange(port, b"ping") == b"pong:ping"
        assert exchange(port, b"") == b"pong:"
    finally:
        running.kill()
        running.wait()


def test_bulk_data_passes_intact_on_many_connections_at_once(tmp_path):
    served = Upstream(str(tmp_path / "gw.sock"), answer=lambda data: data[::-1])
    port = free_port()
    running = start(served.path, port, ["sleep", "60"])
    bodies = [os.urandom(3 << 20) + bytes([n]) for n in range(6)]
    answers = {}

    def one(n):
        answers[n] = exchange(port, bodies[n])

    threads = [threading.Thread(target=one, args=(n,)) for n in range(len(bodies))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        running.kill()
        running.wait()
        served.close()
    for n, body in enumerate(bodies):
        assert hashlib.sha256(answers[n]).digest() == hashlib.sha256(body[::-1]).digest()


def test_the_relay_ends_when_the_command_ends(upstream):
    port = free_port()
    running = start(upstream.path, port, ["sh", "-c", "sleep 0.5; exit 4"])
    assert exchange(port, b"x") == b"pong:x"
    assert running.wait(10) == 4
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except ConnectionRefusedError:
            break
        time.sleep(0.02)
    else:
        raise AssertionError("the relay outlived the command by 2 s")
    # It held neither of the command's outputs: both reached their end with the command.
    assert running.stdout.read() == b"" and running.stderr.read() == b""


def test_a_port_in_use_stops_before_the_command(upstream, tmp_path):
    taken = socket.create_server(("127.0.0.1", 0))
    marker = tmp_path / "ran"
    running = start(upstream.path, taken.getsockname()[1], ["touch", str(marker)])
    _, err = running.communicate(timeout=20)
    taken.close()
    assert running.returncode == forwarder.CANNOT_LISTEN
    assert err.decode().count("\n") == 1 and "cannot listen on 127.0.0.1:" in err.decode()
    assert not marker.exists()


def test_a_command_is_looked_for_as_execvp_does(upstream, tmp_path):
    port = free_port()
    missing = start(upstream.path, port, ["no-such-command-here"])
    _, err = missing.communicate(timeout=20)
    assert missing.returncode == 127 and "cannot run no-such-command-here" in err.decode()
    plain = tmp_path / "plain"
    plain.write_text('echo ran-by-sh "$1"\n')
    os.chmod(plain, 0o644)
    denied = start(upstream.path, free_port(), [str(plain)])
    _, err = denied.communicate(timeout=20)
    assert denied.returncode == 126 and err.decode().count("\n") == 1
    os.chmod(plain, 0o755)  # runnable, no #!: /bin/sh runs it, as the C library does
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    script = start(upstream.path, free_port(), ["plain", "arg"], env=env)
    out, err = script.communicate(timeout=20)
    assert script.returncode == 0, err
    assert out == b"ran-by-sh arg\n"


def test_the_command_gets_the_environment_as_given(upstream):
    """No LANG: the interpreter coerces its own locale (LC_CTYPE); the command never sees it."""
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "YYB_T": "a=b", "EMPTY": ""}
    running = start(upstream.path, port, ["sh", "-c", "tr '\\0' '\\n' < /proc/$$/environ"], env=env)
    out, err = running.communicate(timeout=20)
    assert running.returncode == 0, err
    assert sorted(out.decode().splitlines()) == ["EMPTY=", "PATH=/usr/bin:/bin", "YYB_T=a=b"]


def test_the_connections_open_at_once_are_bounded_by_the_open_files(tmp_path):
    """Under an open-files limit of 40, (40 - FDS_KEPT) // 2 connections at most; the rest
    wait and are taken as those end."""
    held = Upstream(str(tmp_path / "gw.sock"), hold=True)
    port = free_port()

    def low():
        resource.setrlimit(resource.RLIMIT_NOFILE, (40, 40))

    running = start(held.path, port, ["sleep", "30"], preexec_fn=low)
    clients = [connect(port)]  # once it listens
    try:
        for _ in range(29):
            client = socket.socket()
            client.setblocking(False)
            client.connect_ex(("127.0.0.1", port))
            clients.append(client)
        time.sleep(1)
        assert held.peak == (40 - forwarder.FDS_KEPT) // 2
    finally:
        for client in clients:
            client.close()
        running.kill()
        running.wait()
        held.close()


def test_a_gateway_gone_closes_the_connection_and_the_port_stays(tmp_path):
    path = str(tmp_path / "gw.sock")
    port = free_port()
    running = start(path, port, ["sleep", "30"])
    try:
        try:  # no gateway: closed at once (reset, the request unread; perhaps before the
            # client's own half-close, which then finds nothing connected)
            assert exchange(port, b"nobody") == b""
        except OSError as exc:
            assert exc.errno in (errno.ECONNRESET, errno.ENOTCONN, errno.EPIPE), exc
        served = Upstream(path)
        assert exchange(port, b"back") == b"pong:back"
        served.close()
    finally:
        running.kill()
        running.wait()


def test_the_program_fits_one_pipe_write_and_an_older_interpreter():
    """An environment's interpreter may be older than the controller's: 3.7's grammar, and
    only the standard library."""
    import ast

    from yyb.harness import sandbox

    source = gatewayport.program()
    assert len(source) < sandbox.PIPE_BUFFER
    tree = ast.parse(source, feature_version=(3, 7))
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= {
        "__future__",
        "errno",
        "os",
        "resource",
        "selectors",
        "signal",
        "socket",
        "sys",
    }
