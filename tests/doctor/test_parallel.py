"""doctor --plan in worker processes finds exactly what one process finds."""

from __future__ import annotations

import os

import pytest

from tests.conftest import flip_byte
from tests.reports.fabricate import Spec, fabricate
from yyb.evidence import experiment as verify
from yyb.store import fanout

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")


def test_workers_find_what_one_process_finds(disk_store, monkeypatch):
    plan = fabricate(disk_store, Spec(["m/a", "m/b"], ["c1", "c2", "c3"], attempts=3))
    names = disk_store.refs.names(under=f"refs/runs/{plan}")
    terminal = disk_store.refs.read(next(n for n in names if n.endswith("/terminal")))
    stdout = disk_store.objects.get_record(terminal)["links"]["stdout"]
    flip_byte(disk_store.objects.path(terminal), -2)  # read by the attempt checks
    os.unlink(disk_store.objects.path(stdout))  # only the object walk reaches it
    alone = verify.verify_experiment(disk_store, plan)
    codes = {f.code for f in alone[0]}
    assert {"unreadable", "hash-mismatch", "broken-link"} <= codes, codes
    monkeypatch.setattr(fanout, "MINIMUM", 1)
    monkeypatch.setattr(fanout, "CHUNK", 1)
    monkeypatch.setenv("YYB_WORKERS", "3")
    shared = verify.verify_experiment(disk_store, plan)
    assert shared[1] == alone[1] and shared[1]["status"] == "incomplete"
    assert sorted(shared[0], key=repr) == sorted(alone[0], key=repr)
