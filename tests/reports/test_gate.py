"""The report's gate: one read per attempt, what each gate finds, worker processes."""

from __future__ import annotations

import copy
import os

import pytest

from tests.conftest import flip_byte
from tests.reports.fabricate import Spec, default_outcome, fabricate
from yyb.evidence import check as verify
from yyb.reports import build
from yyb.store import fanout


def _spec(**kwargs) -> Spec:
    return Spec(["m/a", "m/b"], ["c1", "c2", "c3"], attempts=3, **kwargs)


def test_a_fabricated_experiment_passes_both_gates(disk_store):
    plan = fabricate(disk_store, _spec())
    report, facts = build.build(disk_store, plan)
    assert report["status"] == "complete" and report["doctor"]["gate"] == "chains"
    assert report["doctor"]["complete_chains"] == len(facts) == 18
    full, _ = build.build(disk_store, plan, verify_objects=True)
    assert full["status"] == "complete" and full["doctor"]["gate"] == "objects"
    assert full["models"] == report["models"] and full["attempts"] == report["attempts"]


def test_an_object_the_figures_do_not_read_is_left_to_the_objects_gate(disk_store):
    plan = fabricate(disk_store, _spec())
    evidence = disk_store.refs.read(disk_store.refs.names(under=f"refs/runs/{plan}")[1])
    terminal = disk_store.objects.get_record(
        disk_store.objects.get_record(evidence)["links"]["terminal"]
    )
    os.unlink(disk_store.objects.path(terminal["links"]["stdout"]))
    assert build.build(disk_store, plan)[0]["status"] == "complete"
    report, _ = build.build(disk_store, plan, verify_objects=True)
    assert report["status"] == "incomplete"
    assert any("broken-link" in line for line in report["doctor"]["first_errors"])


def test_a_tampered_record_the_figures_read_fails_the_default_gate(disk_store):
    plan = fabricate(disk_store, _spec())
    name = next(
        n for n in disk_store.refs.names(under=f"refs/runs/{plan}") if n.endswith("/terminal")
    )
    flip_byte(disk_store.objects.path(disk_store.refs.read(name)), -3)
    report, facts = build.build(disk_store, plan)
    assert report["status"] == "incomplete"
    assert report["doctor"]["complete_chains"] == len(facts) - 1
    assert "unreadable" in report["doctor"]["first_errors"][0]


def _boolean_wall_time(ordinal: int):
    cls, verdict, wall_ms = default_outcome(ordinal)
    return cls, verdict, True if ordinal == 1 else wall_ms


def test_a_record_of_the_wrong_shape_is_a_finding_not_a_crash(disk_store):
    plan = fabricate(disk_store, _spec(outcome=_boolean_wall_time))
    report, facts = build.build(disk_store, plan)
    assert report["status"] == "incomplete"
    assert report["doctor"]["complete_chains"] == len(facts) - 1
    assert "malformed" in report["doctor"]["first_errors"][0]
    assert "wall time of True" in report["doctor"]["first_errors"][0]
    assert [row["outcome"] for row in report["attempts"]].count("missing") == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_worker_processes_give_the_report_one_process_gives(disk_store, monkeypatch):
    plan = fabricate(disk_store, _spec(outcome=_boolean_wall_time))
    alone, alone_facts = build.build(disk_store, plan)
    seen = set()
    real = verify.check_attempt

    def spy(*args):
        seen.add(os.getpid())
        return real(*args)

    monkeypatch.setattr(verify, "check_attempt", spy)
    monkeypatch.setattr(fanout, "MINIMUM", 1)
    monkeypatch.setattr(fanout, "CHUNK", 4)
    monkeypatch.setenv("YYB_WORKERS", "2")
    shared, shared_facts = build.build(disk_store, plan)
    assert shared == alone and shared_facts == alone_facts
    assert not seen  # the spy ran in the workers only: this process read nothing itself


def test_no_layer_only_reads_the_store(disk_store, yyb):
    import json

    plan = fabricate(disk_store, _spec())
    objects = sorted(disk_store.objects.iter_oids())
    refs = [(name, disk_store.refs.read(name)) for name in disk_store.refs.names()]
    done = yyb("report", "--plan", plan, "--no-layer", "--format", "json")
    assert done.exit_code == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["layer"] == {"oid": None, "previous": None, "reused": False}
    assert document["status"] == "complete" and len(document["attempts"]) == 18
    longitudinal = yyb("report", "--longitudinal", "--no-layer")
    assert longitudinal.exit_code == 0 and "layer: not stored" in longitudinal.stdout
    assert sorted(disk_store.objects.iter_oids()) == objects
    assert [(name, disk_store.refs.read(name)) for name in disk_store.refs.names()] == refs
    stored = yyb("report", "--plan", plan, "--format", "json")
    assert json.loads(stored.stdout)["layer"]["oid"] is not None
    assert sorted(disk_store.objects.iter_oids()) != objects


def _as_v2(report: dict) -> dict:
    """The shape yyb wrote before report_layer.v3 (schemas/...report_layer.v2.schema.json)."""
    old = copy.deepcopy(report)
    del old["doctor"]["gate"]
    old.pop("unprotected", None)
    for comparison in old["comparisons"]:
        del comparison["invalidity_fisher_exact"], comparison["intent_to_treat"]
    for summary in [old["totals"], *old["models"], *[c for m in old["models"] for c in m["cases"]]]:
        del summary["intent_to_treat"], summary["invalidity"]
        summary.pop("pass_at_k", None)
        for name in ("candidate", "evaluator", "combined"):
            d = summary["runtime"][name]
            ids = sorted({d.pop("median_id"), d.pop("p90_id")} - {None})
            d["ids"] = ids
    for row in old["attempts"]:
        del row["evaluator_ms"]
        row.pop("cost_note", None)
        for name in ("number", "environment", "candidate_cost", "tokens", "verdicts"):
            del row[name]
    return old


def test_a_layer_from_before_v3_stays_valid_and_displaced_verdicts_still_point_at_it(disk_store):
    from yyb.reports import layer
    from yyb.store import fsck

    plan = fabricate(disk_store, _spec())
    report, facts = build.build(disk_store, plan)
    old = _as_v2(report)
    row = next(r for r in old["attempts"] if r["verdict"] == "pass")
    row["verdict"], row["outcome"] = "fail", "failed"
    value = {
        "schema_version": "yylo_benchmark_report_layer.v2",
        "plan": plan,
        "grader_version": None,
        "status": old["status"],
        "report": old,
        "links": {"plan": plan, "terminals": sorted(f.terminal for f in facts if f.terminal)},
    }
    v2 = disk_store.objects.put_record(value)  # validated against the v2 schema
    disk_store.refs.update(layer.layer_ref(plan), v2, old=None)
    assert not [f for f in fsck.fsck(disk_store) if f.level == "error"]
    report, facts = build.build(disk_store, plan)
    stored = layer.store_layer(disk_store, plan, report)
    assert stored["previous"] == v2 and not stored["reused"]
    shown = next(r for r in report["attempts"] if r["attempt"] == row["attempt"])
    assert shown["displaced"] == {"verdict": "fail", "outcome": "failed", "layer": v2}
    assert disk_store.objects.get_record(stored["oid"])["schema_version"] == layer.LAYER


def test_layers_share_the_rows_records_they_have_in_common(disk_store, monkeypatch):
    from yyb.reports import layer

    monkeypatch.setattr(layer, "PART_SIZE", 5)
    plan = fabricate(disk_store, _spec(outcome=lambda ordinal: ("resolved", "pass", 1000)))
    report, _ = build.build(disk_store, plan)
    first = layer.store_layer(disk_store, plan, report)
    pinned, _ = build.build(disk_store, plan, "1")  # other figures, the same rows
    second = layer.store_layer(disk_store, plan, pinned)
    assert second["previous"] == first["oid"] and not second["reused"]
    rows = [
        disk_store.objects.get_record(oid)["links"]["rows"] for oid in (first["oid"], second["oid"])
    ]
    assert len(rows[0]) == 4 and rows[0] == rows[1]  # 18 rows, 5 per record, stored once
    stored = disk_store.objects.get_record(second["oid"])
    assert layer.layer_rows(disk_store, stored) == pinned["attempts"]
