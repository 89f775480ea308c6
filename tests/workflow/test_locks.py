"""Typed exclusive resource locks: one holder at a time across processes, a dead holder's lock
replaced and reported, a live one never taken, a holder's record unable to spoof its process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from yyb.errors import UsageError
from yyb.workflow import locks

HOLD = """
import sys, time
from yyb.workflow import locks
lease = locks.acquire(sys.argv[1], "database", "orders", {"plan": sys.argv[2]})
print("held", flush=True)
time.sleep(60)
"""

# Each worker takes the lock, checks that nobody else is inside, stays a moment, leaves.
WORKER = """
import os, sys, time
from yyb.workflow import locks
store, marker, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
for _ in range(rounds):
    with locks.acquire(store, "queue", "jobs", {"pid": os.getpid()}, timeout=30):
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            print("OVERLAP", flush=True)
            sys.exit(3)
        time.sleep(0.002)
        os.close(fd)
        os.unlink(marker)
print("done", flush=True)
"""


def holding(lock_store, plan="p1") -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock_store), plan], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_one_holder_at_a_time_and_the_holder_is_named(tmp_path):
    store = tmp_path / "locks"
    other = holding(store)
    try:
        with pytest.raises(locks.ResourceHeld, match=f"held, by process {other.pid}"):
            locks.acquire(str(store), "database", "orders")
        # Another resource, or the same name of another type, is free.
        locks.acquire(str(store), "database", "customers").release()
        locks.acquire(str(store), "bucket", "orders").release()
        [held] = [h for h in locks.holders(str(store)) if h["state"] == "held"]
        assert held["resource"] == {"type": "database", "name": "orders"}
        assert held["plan"] == "p1" and held["process"]["pid"] == other.pid
    finally:
        other.kill()
        other.wait()


def test_a_live_holder_is_waited_for_and_then_the_lock_is_free(tmp_path):
    store = tmp_path / "locks"
    other = holding(store)
    started = time.monotonic()
    with pytest.raises(locks.ResourceHeld):
        locks.acquire(str(store), "database", "orders", timeout=0.3)
    assert time.monotonic() - started >= 0.3
    other.terminate()  # dies without releasing: its lock is abandoned, then replaced
    other.wait()
    with locks.acquire(str(store), "database", "orders", {"plan": "p2"}) as lease:
        assert lease.replaced is not None and lease.replaced["pid"] == other.pid
    assert locks.holders(str(store)) == []


def test_a_holder_killed_leaves_an_abandoned_lock_that_is_reported(tmp_path):
    store = tmp_path / "locks"
    other = holding(store)
    os.kill(other.pid, signal.SIGKILL)
    other.wait()
    [left] = locks.holders(str(store))
    assert left["state"] == "abandoned" and left["process"]["pid"] == other.pid
    assert left["resource"] == {"type": "database", "name": "orders"}


def test_concurrent_holders_never_overlap(tmp_path):
    store, marker = tmp_path / "locks", tmp_path / "inside"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(store), str(marker), "40"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [w.communicate(timeout=120)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0, 0, 0], outputs
    assert all(out.strip() == "done" for out in outputs)


def test_a_record_cannot_spoof_its_holder(tmp_path):
    """The holder is read from the first line only: a record saying pid=1 (always alive)
    does not make an abandoned lock look held."""
    store = tmp_path / "locks"
    code = (
        "import os, sys\n"
        "from yyb.workflow import locks\n"
        "locks.acquire(sys.argv[1], 'database', 'orders', {'note': ' pid=1 host=x '})\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(store)], check=True)
    with locks.acquire(str(store), "database", "orders") as lease:
        assert lease.replaced is not None and lease.replaced["pid"] != 1


@pytest.mark.parametrize(
    ("kind", "name"), [("Database", "x"), ("", "x"), ("a/b", "x"), ("db", ""), ("db", "n" * 1025)]
)
def test_bad_types_and_names_are_refused(tmp_path, kind, name):
    with pytest.raises(UsageError):
        locks.acquire(str(tmp_path), kind, name)
