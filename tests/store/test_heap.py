"""heap.gc_paused: the cyclic collector is off inside, back on after, nesting included."""

from __future__ import annotations

import gc

import pytest

from yyb.store import heap


def test_the_collector_is_paused_inside_and_restored_after():
    assert gc.isenabled()
    with heap.gc_paused():
        assert not gc.isenabled()
        with heap.gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # only the outermost pause turns it back on
    assert gc.isenabled()


def test_it_is_restored_when_the_work_raises():
    @heap.without_gc
    def fails():
        assert not gc.isenabled()
        raise ValueError("boom")

    with pytest.raises(ValueError):
        fails()
    assert gc.isenabled()


def test_a_collector_someone_else_turned_off_stays_off():
    gc.disable()
    try:
        with heap.gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
