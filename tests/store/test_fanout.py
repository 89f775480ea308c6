"""fanout.map_chunks: worker processes, results in order, and when it stays in-process."""

from __future__ import annotations

import os

import pytest

from tests.conftest import signalled
from yyb.errors import UsageError
from yyb.store import fanout


def _pids_and_squares(offset: int, part: list[int]) -> tuple[int, list[int]]:
    return os.getpid(), [offset + n * n for n in part]


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")


@needs_fork
def _small(monkeypatch, chunk: int, minimum: int) -> None:
    monkeypatch.setattr(fanout, "CHUNK", chunk)
    monkeypatch.setattr(fanout, "MINIMUM", minimum)


@needs_fork
def test_chunks_run_in_workers_and_come_back_in_order(monkeypatch):
    _small(monkeypatch, 7, 1)
    items = list(range(50))
    parts = fanout.map_chunks(_pids_and_squares, (1,), items, workers=2)
    assert [n for _, part in parts for n in part] == [1 + n * n for n in items]
    pids = {pid for pid, _ in parts}
    assert os.getpid() not in pids and len(parts) == 8


def test_few_items_stay_in_this_process(monkeypatch):
    _small(monkeypatch, 2, 10)
    parts = fanout.map_chunks(_pids_and_squares, (0,), [1, 2, 3])
    assert parts == [(os.getpid(), [1, 4]), (os.getpid(), [9])]


def test_yyb_workers_one_keeps_the_work_here(monkeypatch):
    monkeypatch.setenv("YYB_WORKERS", "1")
    _small(monkeypatch, 3, 1)
    parts = fanout.map_chunks(_pids_and_squares, (0,), list(range(9)))
    assert {pid for pid, _ in parts} == {os.getpid()}


@pytest.mark.parametrize("text", ["0", "-2", "two", "1.5"])
def test_a_bad_yyb_workers_is_a_usage_error(monkeypatch, text):
    monkeypatch.setenv("YYB_WORKERS", text)
    _small(monkeypatch, 3, 1)
    with pytest.raises(UsageError, match="YYB_WORKERS"):
        fanout.map_chunks(_pids_and_squares, (0,), list(range(9)))


def _refuse(part: list[int]) -> list[int]:
    from yyb.errors import ChecksumMismatch

    if 3 in part:
        raise ChecksumMismatch("a" * 64, "b" * 64)
    return part


@needs_fork
def test_an_error_in_a_worker_reaches_the_caller_whole(monkeypatch):
    from yyb.errors import ChecksumMismatch

    _small(monkeypatch, 2, 1)
    with pytest.raises(ChecksumMismatch) as caught:
        fanout.map_chunks(_refuse, (), list(range(8)), workers=2)
    assert caught.value.oid == "a" * 64 and "bytes hash to " + "b" * 64 in str(caught.value)


INTERRUPTED = """
import sys, time
from yyb.store import fanout

def nap(part):
    time.sleep(30)
    return part

fanout.CHUNK = fanout.MINIMUM = 1
try:
    fanout.map_chunks(nap, (), list(range(4)), workers=2)
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
    sys.exit(130)
"""


@needs_fork
def test_ctrl_c_stops_the_workers_without_a_traceback_from_each(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED)
    with signalled([sys.executable, str(script)], stderr=subprocess.PIPE) as child:
        time.sleep(1.5)  # the workers are asleep in their chunks
        os.killpg(child.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
        _, err = child.communicate(timeout=20)
    assert child.returncode == 130
    assert err.decode().strip().splitlines() == ["interrupted"]


def test_errors_survive_pickling_with_their_exit_code_and_attributes():
    import pickle

    from yyb.errors import ChecksumMismatch, RefMismatch, UsageError

    for error in (
        ChecksumMismatch("a" * 64, "b" * 64),
        RefMismatch("refs/x", None, "c" * 64),
        UsageError("bad input"),
    ):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and copy.__dict__ == error.__dict__
        assert (str(copy), copy.exit_code) == (str(error), error.exit_code)


def _die_on_three(part: list[int]) -> list[int]:
    import signal

    if 3 in part:
        os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer would
    return part


@needs_fork
def test_a_worker_killed_midway_fails_the_call_instead_of_hanging(monkeypatch):
    from yyb.errors import YybError

    _small(monkeypatch, 2, 1)
    with pytest.raises(YybError, match="ended without its results"):
        fanout.map_chunks(_die_on_three, (), list(range(12)), workers=3)
