"""The isolation suites on a ``rootfs`` environment: bookworm minbase with python3 (deep).

The environment is built once for the module by mmdebstrap (the network, about 40 s), then
the probe of tests/attempts/test_environment_isolation.py runs on it with the environment's
own shell and coreutils, followed by a probe in the environment's own python3 that tries what
a shell cannot: setuid, unshare, mount and ptrace by system call, a host Unix socket (by path
and abstract name) and the network. The tree is Debian's, so its ``/usr/bin/setpriv`` is
real: yyb must still drop root with the host's (``/.yyb-drop``).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading

import pytest

from tests.attempts.test_environment_isolation import (
    assert_confined,
    assert_no_host_mounts,
    assert_nothing_protected_visible,
    hermetic_module,
    on_environment,
    status,
)
from tests.grading.conftest import build_bench
from yyb.errors import EnvironmentBuildFailed

pytestmark = [
    pytest.mark.deep,
    pytest.mark.skipif(not shutil.which("mmdebstrap"), reason="needs mmdebstrap"),
]
SPEC = {
    "name": "bookworm-py",
    "kind": "rootfs",
    "rootfs": {"suite": "bookworm", "packages": ["python3"]},
}
# Each attempt prints "py NAME: refused (ERROR)" or "py NAME: WORKED"; $1 is a host socket.
PYTHON_PROBE = r"""
/usr/bin/python3 - "@SOCKET@" <<'PY'
import ctypes, errno, hashlib, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
print("py version", sys.version.split()[0], sys.executable)
with open(os.path.realpath(sys.executable), "rb") as handle:
    print("py binary", os.path.realpath(sys.executable), hashlib.sha256(handle.read()).hexdigest())
def attempt(name, call):
    try:
        result = call()
    except OSError as exc:
        print(f"py {name}: refused ({errno.errorcode.get(exc.errno, exc.errno)})")
        return
    print(f"py {name}: WORKED ({result})")
def syscall(function, *args):
    def call():
        if function(*args) != 0:
            number = ctypes.get_errno()
            raise OSError(number, os.strerror(number))
        return 0
    return call
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x20000, 0x10000000, 0x40000000
attempt("setuid", lambda: os.setuid(0))
attempt("setgid", lambda: os.setgid(0))
attempt("unshare-user", syscall(libc.unshare, CLONE_NEWUSER))
attempt("unshare-mount", syscall(libc.unshare, CLONE_NEWNS))
attempt("unshare-net", syscall(libc.unshare, CLONE_NEWNET))
attempt("mount", syscall(libc.mount, b"none", b"/tmp", b"tmpfs", 0, None))
attempt("ptrace-init", syscall(libc.ptrace, 16, 1, None, None))
attempt("chroot", lambda: os.chroot("/"))
attempt("write-usr", lambda: open("/usr/PWNED", "w"))
attempt("setpriv-write", lambda: open("/usr/bin/setpriv", "ab"))
for name, address in (("unix-path", sys.argv[1]), ("unix-abstract", "\0" + sys.argv[1])):
    def connect(address=address):
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(address)
            s.sendall(b"hello from the sandbox")
    attempt(name, connect)
def inet():
    with socket.create_connection(("192.0.2.1", 80), timeout=2):
        return "connected"
attempt("inet", inet)
PY
"""


class Listener:
    """A host Unix socket, by path and abstract name, that records what reaches it."""

    def __init__(self, path: str):
        self.path, self.heard, self.servers = path, [], []
        for address in (path, "\0" + path):
            server = socket.socket(socket.AF_UNIX)
            server.bind(address)
            server.listen(4)
            server.settimeout(0.2)
            self.servers.append(server)
        os.chmod(path, 0o777)  # even a socket anyone may use
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.listen, daemon=True)
        self.thread.start()

    def listen(self) -> None:
        while not self.done.is_set():
            for server in self.servers:
                try:
                    conn, _ = server.accept()
                    self.heard.append(conn.recv(100))
                    conn.close()
                except OSError:
                    continue

    def close(self) -> None:
        self.done.set()
        self.thread.join()
        for server in self.servers:
            server.close()


@pytest.fixture(scope="module")
def on_rootfs(tmp_path_factory):
    top = tmp_path_factory.mktemp("rootfs")
    with hermetic_module(top):
        listener = Listener(str(top / "host.sock"))
        try:
            bench = build_bench(top / "bench")
            more = PYTHON_PROBE.replace("@SOCKET@", listener.path)
            probed = on_environment(bench, SPEC, more)
        except EnvironmentBuildFailed as exc:
            if exc.step != "unshare":
                raise
            pytest.skip(f"mmdebstrap cannot build here as this user: {exc.reason}")
        finally:
            listener.close()
        yield probed, listener.heard


def python_attempts(stdout: str) -> dict[str, str]:
    found = {}
    for line in stdout.splitlines():
        if line.startswith("py ") and ": " in line:
            name, _, verdict = line[3:].partition(": ")
            found[name] = verdict
    return found


def test_on_a_debian_root_the_candidate_is_confined(on_rootfs):
    probed, _ = on_rootfs
    assert probed.result.terminal_class == "grader_failure", probed.stdout
    assert_confined(probed.stdout)
    assert_nothing_protected_visible(probed)
    assert_no_host_mounts(probed)
    if os.geteuid() == 0:
        assert status(probed.stdout)["Uid"] == "65534"  # by the host's setpriv, not Debian's


def test_the_environments_python_can_do_nothing_a_shell_could_not(on_rootfs):
    probed, heard = on_rootfs
    version = next(line for line in probed.stdout.splitlines() if line.startswith("py version"))
    assert version.startswith("py version 3.11.") and version.endswith("/usr/bin/python3")
    attempts = python_attempts(probed.stdout)
    assert len(attempts) == 13, probed.stdout
    assert all(verdict.startswith("refused") for verdict in attempts.values()), attempts
    assert heard == []


def test_the_python_that_ran_is_the_environments_own(on_rootfs):
    from yyb.harness.environments import build, tree

    probed, _ = on_rootfs
    line = next(line for line in probed.stdout.splitlines() if line.startswith("py binary "))
    path, digest = line.split()[2:]
    bench = probed.bench
    plan = bench.plan(["zz/idler"])
    ready = build.pinned(bench.store, plan.experiment["environments"][0]["environment"])
    assert tree.file_sha256(os.path.join(ready.root, path.lstrip("/"))) == digest


def test_the_debian_root_is_unchanged_after_the_run(on_rootfs):
    from yyb.harness.environments import build

    probed, _ = on_rootfs
    bench = probed.bench
    plan = bench.plan(["zz/idler"])
    ready = build.pinned(bench.store, plan.experiment["environments"][0]["environment"])
    build.check(bench.store, ready, full=True)
    assert not os.path.lexists(os.path.join(ready.root, "usr", "PWNED"))
