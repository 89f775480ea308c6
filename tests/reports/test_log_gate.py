"""The report's gate holds the refs it reads to the transparency log: a run ref set back with
its log head (consistent, so its own chain is clean) makes the report incomplete."""

from __future__ import annotations

import pytest

from tests.doctor.forge import set_back
from tests.reports.fabricate import Spec, fabricate
from yyb.evidence.experiment import verify_experiment
from yyb.reports import build
from yyb.store import fanout
from yyb.store.log import audit as logaudit


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_run_ref_set_back_with_its_log_head_makes_the_report_incomplete(
    disk_store, monkeypatch, workers
):
    monkeypatch.setattr(fanout, "MINIMUM", 1)  # with "2": the refs audited in worker processes
    monkeypatch.setattr(fanout, "CHUNK", 1)
    monkeypatch.setenv("YYB_WORKERS", workers)
    plan = fabricate(disk_store, Spec(["m/a", "m/b"], ["c1", "c2"]))
    ref = next(n for n in disk_store.refs.names(under=f"refs/runs/{plan}") if "/evaluations/" in n)
    first = disk_store.refs.log_head(ref)
    # A later move of the ref (a newer generation, say), then that move undone by hand.
    later = disk_store.objects.put("blob", b"what the second update pointed at")
    disk_store.refs.update(ref, later, reason="a later move")
    disk_store.refs.update("refs/notes/after", later)  # the set-back update is not the last
    set_back(disk_store, ref, first)
    assert ("log-rolled-back", ref) in {(f.code, f.subject) for f in logaudit.audit(disk_store)}
    report, _ = build.build(disk_store, plan)
    assert report["status"] == "incomplete"
    assert any(f"log-rolled-back {ref}" in line for line in report["doctor"]["first_errors"])
    findings, summary = verify_experiment(disk_store, plan)
    assert summary["status"] == "incomplete"
    assert ("log-rolled-back", ref) in {(f.code, f.subject) for f in findings}


def test_an_honest_experiment_stays_complete(disk_store):
    plan = fabricate(disk_store, Spec(["m/a"], ["c1", "c2"]))
    disk_store.refs.update("refs/notes/other", disk_store.objects.put("blob", b"elsewhere"))
    assert build.build(disk_store, plan)[0]["status"] == "complete"
