"""Process supervision: bounded output, timeouts, and proof that nothing is left running.

A supervised process starts in its own session (so its own process group). When it is run
under the sandbox it also has its own PID namespace, which is how the supervisor finds every
descendant, including those that called setsid. Stopping it sends TERM to the group, waits a
grace period, sends KILL to the group and to every process left in the namespace, reaps, and
then confirms within a bound that no process of the attempt remains.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass

OUTPUT_LIMIT = 1 << 20
GRACE_MS = 2_000
CLEANUP_MS = 10_000


@dataclass
class Captured:
    data: bytes
    total: int

    @property
    def truncated(self) -> bool:
        return self.total > len(self.data)


@dataclass
class Outcome:
    exit_code: int | None  # None when killed by a signal
    signal: int | None
    timed_out: bool
    cancelled: bool
    cleanup_confirmed: bool
    started_ms: int
    ended_ms: int
    wall_ms: int
    stdout: Captured
    stderr: Captured
    leftover: list[int]  # pids still alive when the cleanup bound ran out


def _reader(stream, limit: int, out: dict) -> None:
    kept = bytearray()
    total = 0
    while chunk := stream.read(65536):
        total += len(chunk)
        room = limit - len(kept)
        if room > 0:
            kept += chunk[:room]
    out["captured"] = Captured(bytes(kept), total)


def _namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(p) for p in handle.read().split()]
    except OSError:
        return []


def _members(namespace: str | None, group: int) -> list[int]:
    """Live pids in the PID namespace ``namespace`` or the process group ``group``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            if namespace is not None and os.readlink(f"/proc/{pid}/ns/pid") == namespace:
                found.append(pid)
                continue
            if os.getpgid(pid) == group:
                found.append(pid)
        except OSError:
            continue
    return found


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def run(
    argv: list[str],
    env: dict[str, str],
    cwd: str | None,
    timeout_ms: int,
    cancel: threading.Event | None = None,
    grace_ms: int | None = None,
    pass_fds: tuple[int, ...] = (),
) -> Outcome:
    """Run ``argv`` to its end, its timeout, or ``cancel``; never leave a process behind.

    A process stopped early gets TERM and ``grace_ms`` (default ``GRACE_MS``) before KILL;
    ``pass_fds`` are the descriptors the process inherits, at the same numbers; every other
    descriptor of the controller is closed in it. Each output keeps its first
    ``OUTPUT_LIMIT`` bytes; the cleanup is confirmed within ``CLEANUP_MS``.

    Raises:
        OSError: the executable could not be started (nothing ran).
    """
    grace_ms = GRACE_MS if grace_ms is None else grace_ms
    cleanup_ms = CLEANUP_MS
    started_ms = now_ms()
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        pass_fds=pass_fds,
    )
    group = proc.pid
    outputs: list[dict] = [{}, {}]
    readers = [
        threading.Thread(target=_reader, args=(s, OUTPUT_LIMIT, o), daemon=True)
        for s, o in zip((proc.stdout, proc.stderr), outputs, strict=True)
    ]
    for reader in readers:
        reader.start()
    namespace, ended = _wait(proc, start + timeout_ms / 1000, cancel)
    timed_out, cancelled = ended == "timed_out", ended == "cancelled"
    if timed_out or cancelled:
        _signal_group(group, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_ms / 1000)
        except subprocess.TimeoutExpired:
            pass
    # Whatever happened, nothing of the attempt may outlive this call.
    _signal_group(group, signal.SIGKILL)
    for pid in _members(namespace, group):
        _kill(pid)
    proc.wait()
    confirmed, leftover = _confirm_gone(namespace, group, cleanup_ms)
    end = time.monotonic()
    for reader in readers:
        reader.join(timeout=max(0.1, cleanup_ms / 1000))
    empty = Captured(b"", 0)
    code = proc.returncode
    return Outcome(
        exit_code=code if code is not None and code >= 0 else None,
        signal=-code if code is not None and code < 0 else None,
        timed_out=timed_out,
        cancelled=cancelled,
        cleanup_confirmed=confirmed,
        started_ms=started_ms,
        ended_ms=started_ms + int((end - start) * 1000),
        wall_ms=int((end - start) * 1000),
        stdout=outputs[0].get("captured", empty),
        stderr=outputs[1].get("captured", empty),
        leftover=leftover,
    )


def _wait(
    proc: subprocess.Popen, deadline: float, cancel: threading.Event | None
) -> tuple[str | None, str]:
    """Wait for ``proc`` to end, ``deadline`` (monotonic) to pass or ``cancel`` to be set,
    finding the PID namespace its sandbox made on the way (a child's namespace other than
    ours). Returns (that namespace or None, ``exited`` | ``timed_out`` | ``cancelled``)."""
    ours = _namespace(os.getpid())
    namespace = None
    while True:
        if namespace is None:
            for child in _children(proc.pid):
                candidate = _namespace(child)
                if candidate is not None and candidate != ours:
                    namespace = candidate
        try:
            proc.wait(timeout=0.02)
            return namespace, "exited"
        except subprocess.TimeoutExpired:
            pass
        if cancel is not None and cancel.is_set():
            return namespace, "cancelled"
        if time.monotonic() >= deadline:
            return namespace, "timed_out"


def _signal_group(group: int, sig: int) -> None:
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _confirm_gone(namespace: str | None, group: int, cleanup_ms: int) -> tuple[bool, list[int]]:
    deadline = time.monotonic() + cleanup_ms / 1000
    while True:
        alive = [pid for pid in _members(namespace, group) if not _zombie(pid)]
        if not alive:
            return True, []
        if time.monotonic() >= deadline:
            return False, alive
        for pid in alive:
            _kill(pid)
        time.sleep(0.02)
