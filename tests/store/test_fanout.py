"""fanout.map_chunks: worker processes, results in order, and when it stays in-process."""

from __future__ import annotations

import os

import pytest

from yyb.errors import UsageError
from yyb.store import fanout


def _pids_and_squares(offset: int, part: list[int]) -> tuple[int, list[int]]:
    return os.getpid(), [offset + n * n for n in part]


needs_fork = pytest.mark.skipif(
    "fork" not in __import__("multiprocessing").get_all_start_methods(), reason="no fork"
)


@needs_fork
def test_chunks_run_in_workers_and_come_back_in_order():
    items = list(range(50))
    parts = fanout.map_chunks(_pids_and_squares, (1,), items, chunk=7, minimum=1, workers=2)
    assert [n for _, part in parts for n in part] == [1 + n * n for n in items]
    pids = {pid for pid, _ in parts}
    assert os.getpid() not in pids and len(parts) == 8


def test_few_items_stay_in_this_process():
    parts = fanout.map_chunks(_pids_and_squares, (0,), [1, 2, 3], chunk=2, minimum=10)
    assert parts == [(os.getpid(), [1, 4]), (os.getpid(), [9])]


def test_yyb_workers_one_keeps_the_work_here(monkeypatch):
    monkeypatch.setenv("YYB_WORKERS", "1")
    parts = fanout.map_chunks(_pids_and_squares, (0,), list(range(9)), chunk=3, minimum=1)
    assert {pid for pid, _ in parts} == {os.getpid()}


@pytest.mark.parametrize("text", ["0", "-2", "two", "1.5"])
def test_a_bad_yyb_workers_is_a_usage_error(monkeypatch, text):
    monkeypatch.setenv("YYB_WORKERS", text)
    with pytest.raises(UsageError, match="YYB_WORKERS"):
        fanout.map_chunks(_pids_and_squares, (0,), list(range(9)), chunk=3, minimum=1)
