"""A real Dask cluster on loopback for the Dask executor's tests, and a way to count starts.

The scheduler and each worker are separate processes (``python -m dask scheduler|worker``),
as on a real cluster; they inherit the test's hermetic environment. A candidate that must be
counted reports its start over TCP to a listener in the test process (the plan allows the
network for that), which is how a test proves that no candidate ran twice: nothing else a
candidate does outlives its sandbox.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")

from tests.attempts.conftest import build_bench  # noqa: E402

# Reports its start, then behaves as the fixer (or sleeps first: ``SLEEP``, in seconds).
REPORTER = """
python3 - "$WORKSPACE" <<'EOF'
import socket, sys, time
# A loaded machine may refuse or time out a connection: try again rather than lose the count.
for _ in range(40):
    try:
        with socket.create_connection(("127.0.0.1", {port}), timeout=10) as s:
            s.sendall(("start " + sys.argv[1] + "\\n").encode())
        break
    except OSError as exc:
        print("start report not sent:", exc, file=sys.stderr)
        time.sleep(0.5)
EOF
{sleep}
sed -i 's/\\$1 - \\$2/$1 + $2/' calc.sh
git add -A && git -c user.name=agent -c user.email=agent@example.invalid commit -qm fix
envelope succeeded
"""


class Starts:
    """A TCP listener counting the candidates that started (one line each)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.lines: list[str] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            # One reader per connection, so a slow sender never holds up the next one.
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(60)
            data = b""
            try:
                while chunk := conn.recv(4096):
                    data += chunk
            except OSError:
                pass
        with self.lock:
            self.lines.extend(data.decode(errors="replace").splitlines())

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.lines)

    def close(self) -> None:
        self.sock.close()


class Cluster:
    """A scheduler and named workers, each its own process group."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.file = root / "scheduler.json"
        self.procs: dict[str, subprocess.Popen] = {}

    def _start(self, name: str, *args: str, env: dict | None = None) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - the process holds it
        proc = subprocess.Popen(
            [sys.executable, "-m", "dask", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.root,
            start_new_session=True,
            env=env,
        )
        self.procs[name] = proc
        return proc

    def start_scheduler(self) -> None:
        self._start(
            "scheduler",
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--scheduler-file",
            str(self.file),
        )
        deadline = time.monotonic() + 60
        while not self.file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.file.exists(), self.log("scheduler")

    def start_worker(self, name: str, nthreads: int = 1, env: dict | None = None) -> None:
        self._start(
            name,
            "worker",
            "--scheduler-file",
            str(self.file),
            "--no-nanny",
            "--nthreads",
            str(nthreads),
            "--name",
            name,
            "--no-dashboard",
            env=env,
        )

    @property
    def address(self) -> str:
        return json.loads(self.file.read_text())["address"]

    def wait_for_workers(self, count: int, timeout: float = 60) -> None:
        from distributed import Client

        with Client(self.address, timeout=timeout) as client:
            client.wait_for_workers(count, timeout=timeout)

    def running(self, pid: int) -> str | None:
        """The name of the cluster process ``pid`` descends from, or None."""
        mine = {proc.pid: name for name, proc in self.procs.items()}
        while pid > 1:
            if pid in mine:
                return mine[pid]
            try:
                with open(f"/proc/{pid}/stat") as handle:
                    pid = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                return None
        return None

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        for name in list(self.procs):
            self.kill(name)


def start_cluster(root: Path, workers: int = 2) -> Cluster:
    root.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(root)
    cluster.start_scheduler()
    for i in range(1, workers + 1):
        cluster.start_worker(f"w{i}")
    cluster.wait_for_workers(workers)
    return cluster


@pytest.fixture
def cluster(tmp_path):
    made = start_cluster(tmp_path / "cluster")
    yield made
    made.stop()


@pytest.fixture
def starts():
    made = Starts()
    yield made
    made.close()


@pytest.fixture
def dask_bench(tmp_path, starts):
    """The attempts bench with the network allowed (so candidates can report their start)
    and two reporting behaviours: ``stand/reporter`` (fixes the bug) and ``stand/sleeper``
    (reports, then sleeps a minute before fixing while ``tools/sleep-on`` exists)."""
    made = build_bench(tmp_path / "bench")
    made.configure(network="allowed")
    made.behaviour("reporter", REPORTER.format(port=starts.port, sleep=""))
    # Sleeps while tools/sleep-on exists (the tools are visible, read-only, in the sandbox).
    (made.tools / "sleep-on").write_text("")
    sleep = f'[ -e "$TOOLS/sleep-on" ] && sleep 60.{made.mark}'
    made.behaviour("sleeper", REPORTER.format(port=starts.port, sleep=sleep))
    yield made
    for pid, _ in made.alive():
        try:
            os.kill(pid, 9)
        except OSError:
            pass
