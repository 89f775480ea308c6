"""The longitudinal report: cohorts under stored compatibility keys, and their incompatibilities."""

from __future__ import annotations

import hashlib
import json

import msgpack
import pytest

from tests.reports.fabricate import Spec, fabricate
from yyb.reports import longitudinal
from yyb.store import fanout, schema
from yyb.store.repo import Store

# (case, model, key hash, attempts, valid, resolved, Wilson low/high ppm, plans)
GOLDEN_COHORTS = [
    ("c1", "m/a", "ce95319e77b251da", 5, 5, 4, (375534, 963776), 2),
    ("c1", "m/a", "d2e193f02826822f", 2, 2, 2, (342380, 1000000), 1),
    ("c1", "m/a", "70d9f9cc7198a225", 1, 1, 1, (206549, 1000000), 1),
    ("c1", "m/b", "04460ea7956166cc", 1, 0, 0, None, 1),
    ("c1", "m/b", "1f098bf6f111d741", 2, 2, 1, (94531, 905469), 1),
    ("c2", "m/a", "2818e6b246f7ad01", 5, 5, 3, (230724, 882380), 2),
    ("c2", "m/b", "a5602da24b56a5ef", 1, 0, 0, None, 1),
    ("c2", "m/b", "aaed26bc2b389082", 2, 2, 1, (94531, 905469), 1),
]
GOLDEN_INCOMPATIBILITIES = [
    ("c1", "m/a", "ce95319e77b2", "d2e193f02826", ["tool_policy_hash", "grading"]),
    ("c1", "m/a", "ce95319e77b2", "70d9f9cc7198", ["budget_hash", "versions.yylo"]),
    (
        "c1",
        "m/a",
        "d2e193f02826",
        "70d9f9cc7198",
        ["tool_policy_hash", "budget_hash", "versions.yylo", "grading"],
    ),
    ("c1", "m/b", "04460ea79561", "1f098bf6f111", ["snapshot_tree"]),
    ("c2", "m/b", "a5602da24b56", "aaed26bc2b38", ["snapshot_tree"]),
]


@pytest.fixture
def fabricated() -> Store:
    """Four experiments: two compatible ones, and two that each change some key parts."""
    store = Store.memory()
    fabricate(store, Spec(["m/a", "m/b"], ["c1", "c2"], attempts=3))
    fabricate(store, Spec(["m/a"], ["c1", "c2"], attempts=2))
    fabricate(store, Spec(["m/a"], ["c1"], attempts=2, network="allowed", grader_version="2"))
    fabricate(store, Spec(["m/a"], ["c1"], yylo_version="next", per_attempt_micros=5))
    return store


def canonical_sha(value) -> str:
    """SHA-256 of canonical MessagePack, re-implemented here from docs/reports.md."""

    def sort(v):
        if isinstance(v, dict):
            return {k: sort(v[k]) for k in sorted(v, key=lambda k: k.encode())}
        if isinstance(v, list):
            return [sort(x) for x in v]
        return v

    return hashlib.sha256(msgpack.packb(sort(value), use_bin_type=True)).hexdigest()


def test_golden_cohorts_and_incompatibilities(fabricated):
    doc, facts = longitudinal.build_longitudinal(fabricated)
    assert doc["attempts"] == len(facts) == 19 and doc["unretained"] == 0
    assert len(doc["plans"]) == 4
    got = [
        (
            c["case_id"],
            c["model"],
            c["key_hash"][:16],
            c["attempts"],
            c["valid"],
            c["resolved"],
            c["interval"] and (c["interval"]["low_ppm"], c["interval"]["high_ppm"]),
            len(c["plans"]),
        )
        for c in doc["cohorts"]
    ]
    assert got == GOLDEN_COHORTS
    assert [
        (i["case_id"], i["model"], i["first"][:12], i["second"][:12], i["differs"])
        for i in doc["incompatibilities"]
    ] == GOLDEN_INCOMPATIBILITIES
    # Pooled cohorts never mix keys: every member's evidence is listed, none twice.
    evidence = [e for c in doc["cohorts"] for e in c["evidence"]]
    assert len(evidence) == len(set(evidence)) == 19


def test_each_key_hash_is_canonical_messagepack_as_documented(fabricated):
    doc, _ = longitudinal.build_longitudinal(fabricated, case_id="c1", model="m/a")
    cohort = doc["cohorts"][0]
    key = cohort["key"]
    assert cohort["key_hash"] == canonical_sha({"compatibility_key": key})
    plan = fabricated.objects.get_record(cohort["plans"][0])
    assert key["tool_policy_hash"] == canonical_sha({"tool_policy": plan["tool_policy"]})
    assert key["budget_hash"] == canonical_sha(
        {"budget": {"currency": "USD", "per_attempt_micros": 2_000_000, "timeout_ms": 60_000}}
    )
    assert key["wiki_hash"] == canonical_sha({"wiki": []})
    assert key["agent"]["harness_config_hash"] == canonical_sha(
        {"harness": plan["candidate_harness"]["config"]}
    )
    assert key["grading"] == [
        {
            "profile": "tests",
            "id": "grader-tests",
            "version": "1",
            "bytes_sha256": plan["evaluators"]["catalog"]["tests"]["sha256"],
        }
    ]
    assert {c["model"] for c in doc["cohorts"]} == {"m/a"}
    assert {c["case_id"] for c in doc["cohorts"]} == {"c1"}


def test_the_report_is_stored_as_a_chained_layer(fabricated):
    doc, facts = longitudinal.build_longitudinal(fabricated)
    first = longitudinal.store_layer(fabricated, doc, facts)
    stored = fabricated.objects.get_record(first["oid"])
    schema.validate(stored, longitudinal.LONGITUDINAL)
    assert fabricated.refs.read(longitudinal.LONGITUDINAL_REF) == first["oid"]
    assert len(stored["links"]["plans"]) == 4 and "cohorts" not in stored["report"]
    assert stored["report"] == {k: v for k, v in doc.items() if k != "cohorts"}
    (part,) = stored["links"]["cohorts"]  # 8 cohorts: one cohorts record
    cohorts = fabricated.objects.get_record(part)
    schema.validate(cohorts, longitudinal.COHORTS)
    assert cohorts["cohorts"] == doc["cohorts"]
    assert len(cohorts["links"]["terminals"]) == 19
    assert {e for c in doc["cohorts"] for e in c["evidence"]} == set(cohorts["links"]["evidence"])
    assert longitudinal.store_layer(fabricated, doc, facts)["reused"]
    fabricate(fabricated, Spec(["m/c"], ["c1"]))
    doc, facts = longitudinal.build_longitudinal(fabricated)
    second = longitudinal.store_layer(fabricated, doc, facts)
    assert second["previous"] == first["oid"] and not second["reused"]
    assert fabricated.objects.get_record(second["oid"])["links"]["cohorts"] != [part]


def test_longitudinal_cli_lists_incompatibilities(bench):
    bench.configure()
    bench.run(["zz/fixer"])
    bench.configure({"tests": bench.command("honest", version="2")})
    bench.run(["zz/fixer", "zz/idler"])
    result = bench.yyb("report", "--longitudinal", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [(c["model"], c["attempts"]) for c in doc["cohorts"]] == [
        ("zz/fixer", 1),
        ("zz/fixer", 1),
        ("zz/idler", 1),
    ]
    (incompatible,) = doc["incompatibilities"]
    assert incompatible["model"] == "zz/fixer" and incompatible["differs"] == [
        "budget_hash",
        "grading",
    ]
    text = bench.yyb("report", "--longitudinal", "--model", "zz/fixer")
    assert text.exit_code == 0, text.stderr
    assert "differ in budget_hash, grading" in text.stdout and "zz/idler" not in text.stdout
    markdown = bench.yyb("report", "--longitudinal", "--format", "markdown").stdout
    assert "**Incompatibilities** (1)" in markdown
    refused = bench.yyb("report", "--longitudinal", "--plan", "x")
    assert refused.exit_code == 2 and "exactly one of" in refused.stderr


def test_an_attempt_failing_the_gate_is_counted_not_pooled(disk_store):
    from tests.reports.fabricate import default_outcome

    def boolean_wall_time(ordinal):
        cls, verdict, wall_ms = default_outcome(ordinal)
        return cls, verdict, True if ordinal == 0 else wall_ms

    fabricate(disk_store, Spec(["m/a"], ["c1"], attempts=3, outcome=boolean_wall_time))
    doc, facts = longitudinal.build_longitudinal(disk_store)
    assert (doc["attempts"], doc["unverified"], doc["unretained"]) == (2, 1, 0)
    assert "malformed" in doc["first_errors"][0]
    assert sum(c["attempts"] for c in doc["cohorts"]) == len(facts) == 2


def test_worker_processes_give_the_longitudinal_report_one_process_gives(disk_store, monkeypatch):
    fabricate(disk_store, Spec(["m/a", "m/b"], ["c1", "c2"], attempts=3))
    fabricate(disk_store, Spec(["m/a"], ["c1", "c2"], attempts=2, network="allowed"))
    alone = longitudinal.build_longitudinal(disk_store)
    monkeypatch.setattr(fanout, "MINIMUM", 1)
    monkeypatch.setattr(fanout, "CHUNK", 2)
    monkeypatch.setenv("YYB_WORKERS", "2")
    assert longitudinal.build_longitudinal(disk_store) == alone


def test_the_longitudinal_html_page_lists_every_cohort_and_incompatibility(
    disk_store, yyb, tmp_path, monkeypatch
):
    pytest.importorskip("matplotlib")
    from yyb.reports import html

    fabricate(disk_store, Spec(["m/a", "m/b"], ["c1", "c2"], attempts=3))
    fabricate(disk_store, Spec(["m/a"], ["c1", "c2"], attempts=2, network="allowed"))
    monkeypatch.setattr(html, "CHART_COHORTS", 3)
    out = tmp_path / "longitudinal.html"
    result = yyb("report", "--longitudinal", "--format", "html", "--output", str(out))
    assert result.exit_code == 0, result.stderr
    page = out.read_text()
    doc, _ = longitudinal.build_longitudinal(disk_store)
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 1
    assert f"(first 3 of {len(doc['cohorts'])})" in page
    for cohort in doc["cohorts"]:
        assert cohort["key_hash"] in page
    assert f"Incompatibilities ({len(doc['incompatibilities'])})" in page
    assert any(found["differs"] == ["tool_policy_hash"] for found in doc["incompatibilities"])
    for found in doc["incompatibilities"]:
        assert found["first"] in page and found["second"] in page
        assert f"<td>{', '.join(found['differs'])}</td>" in page
    lowered = page.lower()
    assert "<script" not in lowered and "<link" not in lowered and 'src="' not in lowered


def test_a_grader_version_pins_the_longitudinal_report(fabricated, tmp_path):
    """Pinned, only the attempts that version graded pool, with its verdicts; the others
    are counted as not graded by the pin, as in a per-experiment report."""
    whole, _ = longitudinal.build_longitudinal(fabricated)
    pinned, facts = longitudinal.build_longitudinal(fabricated, grader_version="2")
    assert pinned["filters"]["grader_version"] == "2"
    assert [(c["case_id"], c["attempts"]) for c in pinned["cohorts"]] == [("c1", 2)]
    assert pinned["attempts"] == 2 and len(facts) == 2
    assert pinned["not_graded_by_pin"] == whole["attempts"] - 2
    assert "grader_version" not in whole["filters"]  # an unpinned report is as it was
    by_id, _ = longitudinal.build_longitudinal(fabricated, grader_version="grader-x@2")
    assert by_id["attempts"] == 0 and by_id["not_graded_by_pin"] == whole["attempts"]
    stored = longitudinal.store_layer(fabricated, pinned, facts)
    schema.validate(fabricated.objects.get_record(stored["oid"]), longitudinal.LONGITUDINAL)


def test_the_longitudinal_cli_takes_a_grader_version(bench):
    bench.configure()
    bench.run(["zz/fixer"])
    bench.configure({"tests": bench.command("honest", version="2")})
    bench.run(["zz/fixer"])
    result = bench.yyb("report", "--longitudinal", "--grader-version", "2", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [c["attempts"] for c in doc["cohorts"]] == [1] and doc["not_graded_by_pin"] == 1
    text = bench.yyb("report", "--longitudinal", "--grader-version", "2", "--no-layer")
    assert text.exit_code == 0 and "grader version 2" in text.stdout, text.stdout
    refused = bench.yyb("report", "--longitudinal", "--verify-objects")
    assert refused.exit_code == 2 and "--verify-objects" in refused.stderr
