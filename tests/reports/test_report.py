"""yyb report on real retained evidence: layers, the doctor gate, cost, pins, regrades."""

from __future__ import annotations

import json
import re

import pytest

from yyb.evidence import cost as costs
from yyb.reports import layer
from yyb.reports.stats import wilson
from yyb.store import schema

# Passes at generation 1, fails at every later generation.
PASSES_FIRST_ONLY = r"""#!/bin/sh
if grep -q '"generation": 1,' "$YYB_GRADER_INPUT"; then passed=true; else passed=false; fi
printf '{"schema_version": "yylo_benchmark_grader_output.v2", "passed": %s}\n' "$passed" \
  > "$YYB_GRADER_OUTPUT"
"""
ALWAYS_PASS = r"""#!/bin/sh
printf '{"schema_version": "yylo_benchmark_grader_output.v2", "passed": true}\n' \
  > "$YYB_GRADER_OUTPUT"
"""


def envelope_with(cost: str) -> str:
    """A behaviour that fixes the bug and reports ``cost`` (JSON) in its own envelope."""
    return (
        "\nsed -i 's/\\$1 - \\$2/$1 + $2/' calc.sh\n"
        'commit "fix add"\n'
        'cat > "$ENVELOPE" <<END\n'
        '{"schema_version": "juno_execution_envelope.v1", "provider": "zz", "model": "$NAME",\n'
        f' "status": "succeeded", "cost": {cost},\n'
        ' "started_ms": 0, "ended_ms": 0, "elapsed_ms": 0}\n'
        "END\n"
    )


def report_json(bench, plan, *args):
    result = bench.yyb("report", "--plan", plan.oid, "--format", "json", *args)
    return result, json.loads(result.stdout) if result.stdout else None


def test_report_of_a_complete_experiment(bench, tmp_path):
    bench.configure()
    plan, results = bench.run(["zz/fixer", "zz/idler"], attempts=2)
    result, doc = report_json(bench, plan)
    assert result.exit_code == 0, result.stderr
    assert doc["status"] == "complete" and doc["comparison_classification"] == "model_only"
    fixer, idler = doc["models"]
    assert (fixer["model"], fixer["valid"], fixer["resolved"], fixer["invalid"]) == (
        "zz/fixer",
        2,
        2,
        0,
    )
    assert fixer["interval"] == wilson(2, 2)
    assert idler["terminal_classes"] == {"grader_failure": 2}
    assert idler["rate"] == {"numerator": 0, "denominator": 2, "ppm": 0}
    assert fixer["generations"] == {"tests": {"1": 2}}
    comparison = doc["comparisons"][0]
    assert (comparison["cases_paired"], comparison["only_first"]) == (1, 1)
    # Runtime traces back to the terminals and evaluations it came from.
    mine = [r for r in results if r.model == "zz/fixer"]
    walls = sorted((bench.terminal(r)["runtime"]["wall_ms"], r.terminal) for r in mine)
    candidate = fixer["runtime"]["candidate"]
    assert candidate["total_ms"] == sum(ms for ms, _ in walls)
    assert (candidate["median_ms"], candidate["median_id"]) == walls[0]
    assert (candidate["p90_ms"], candidate["p90_id"]) == walls[1]
    rows = [row for row in doc["attempts"] if row["model"] == "zz/fixer"]
    assert sum(row["wall_ms"] for row in rows) == candidate["total_ms"]
    evaluator = fixer["runtime"]["evaluator"]
    assert evaluator["count"] == 2
    assert evaluator["total_ms"] == sum(row["evaluator_ms"] for row in rows)
    evaluated = {oid for row in rows for oid in row["evaluations"]}
    assert {evaluator["median_id"], evaluator["p90_id"]} <= evaluated
    assert fixer["cost"]["judge"]["completeness"] == "not_applicable"
    # The layer is stored, schema-valid, links what it read; a second report reuses it.
    store = bench.store
    head = store.refs.read(layer.layer_ref(plan.oid))
    assert doc["layer"] == {"oid": head, "previous": None, "reused": False}
    stored = store.objects.get_record(head)
    schema.validate(stored, layer.LAYER)
    assert stored["links"]["plan"] == plan.oid and "attempts" not in stored["report"]
    assert layer.layer_report(store, stored) == {k: v for k, v in doc.items() if k != "layer"}
    assert all("cases" not in model for model in stored["report"]["models"])
    cases = [store.objects.get_record(oid) for oid in stored["links"]["cases"]]
    for part in cases:
        schema.validate(part, layer.CASES)
    assert [(part["model"], part["cases"]) for part in cases] == [
        (model["model"], model["cases"]) for model in doc["models"] if model["cases"]
    ]
    (rows_oid,) = stored["links"]["rows"]  # four attempts: one rows record
    rows = store.objects.get_record(rows_oid)
    schema.validate(rows, layer.ROWS)
    assert rows["rows"] == doc["attempts"]
    assert set(rows["links"]["terminals"]) == {r.terminal for r in results}
    assert len(rows["links"]["evaluations"]) == 4
    _, again = report_json(bench, plan)
    assert again["layer"]["reused"] and again["layer"]["oid"] == head
    # Text and markdown; --output never overwrites.
    text = bench.yyb("report", "--plan", plan.oid)
    assert "valid resolved rate" in text.stdout and "zz/fixer" in text.stdout
    out = tmp_path / "report.md"
    written = bench.yyb("report", "--plan", plan.oid, "--format", "markdown", "--output", str(out))
    assert written.exit_code == 0 and out.read_text().count("| zz/") == 4
    refused = bench.yyb("report", "--plan", plan.oid, "--output", str(out))
    assert refused.exit_code == 2 and "never overwritten" in refused.stderr


def test_partial_and_unavailable_candidate_cost_are_shown_not_zeroed(bench):
    usd = '"currency": "USD"'
    bench.behaviour(
        "partial", envelope_with(f'{{"completeness": "partial", {usd}, "micros": 1200}}')
    )
    bench.behaviour(
        "unknown", envelope_with(f'{{"completeness": "unavailable", {usd}, "micros": null}}')
    )
    bench.behaviour("paid", envelope_with(f'{{"completeness": "complete", {usd}, "micros": 3000}}'))
    bench.configure()
    plan, results = bench.run(["zz/partial", "zz/unknown", "zz/paid"])
    assert [r.terminal_class for r in results] == ["resolved"] * 3
    result, doc = report_json(bench, plan)
    assert result.exit_code == 0, result.stderr
    partial, unknown, paid = (m["cost"] for m in doc["models"])
    assert partial["candidate"]["completeness"] == "partial"
    assert partial["candidate"]["micros"] == 1200
    assert unknown["candidate"] == {
        "completeness": "unavailable",
        "currency": "USD",
        "micros": None,
        "counts": {**dict.fromkeys(costs.COST_COMPLETENESS, 0), "unavailable": 1},
    }
    assert unknown["total"]["micros"] is None
    assert paid["total"] == {"completeness": "complete", "currency": "USD", "micros": 3000}
    totals = doc["totals"]["cost"]["candidate"]
    assert (totals["completeness"], totals["micros"]) == ("partial", 4200)
    assert totals["counts"]["partial"] == 1 and totals["counts"]["unavailable"] == 1
    text = bench.yyb("report", "--plan", plan.oid).stdout
    assert ">=$0.001200 (partial)" in text and "unavailable" in text


def test_an_incomplete_chain_is_reported_as_incomplete(bench):
    bench.configure()
    plan, results = bench.run(["zz/fixer", "zz/idler"])
    store = bench.store
    ref = f"refs/runs/{plan.oid}/{results[0].attempt}/evidence"
    store.refs.update(ref, None, old=store.refs.read(ref), reason="test: lose the evidence ref")
    result, doc = report_json(bench, plan)
    assert result.exit_code == 1
    assert "incomplete" in result.stderr
    assert doc["status"] == "incomplete"
    assert doc["doctor"]["complete_chains"] == 1 and doc["doctor"]["errors"] >= 1
    text = bench.yyb("report", "--plan", plan.oid)
    assert text.exit_code == 1
    assert text.stdout.startswith("!! INCOMPLETE EXPERIMENT")
    rows = [line for line in text.stdout.splitlines() if line.startswith("zz/")]
    assert rows and all(line.endswith("(incomplete)") for line in rows)
    # Never dispatched at all: every attempt missing, no rate, still incomplete.
    other = bench.plan(["zz/fixer"], attempts=2)
    result, doc = report_json(bench, other)
    assert result.exit_code == 1 and doc["status"] == "incomplete"
    assert doc["models"][0]["missing"] == 2 and doc["models"][0]["interval"] is None
    assert doc["models"][0]["cost"]["candidate"]["micros"] is None


def test_grader_version_pin_after_a_regrade(bench):
    bench.configure(
        {
            "tests": bench.command("honest"),
            "lenient": bench.command("lenient", ALWAYS_PASS, version="2"),
        }
    )
    plan, results = bench.run(["zz/fixer", "zz/idler"])
    regraded = bench.yyb("regrade", "--plan", plan.oid, "--profile", "lenient")
    assert regraded.exit_code == 0, regraded.stderr
    _, current = report_json(bench, plan)
    assert [m["resolved"] for m in current["models"]] == [1, 0]  # tests' failure stands
    assert current["models"][0]["generations"] == {"lenient": {"1": 1}, "tests": {"1": 1}}
    _, pinned = report_json(bench, plan, "--grader-version", "2")
    assert pinned["grader_version"] == "2"
    assert [m["resolved"] for m in pinned["models"]] == [1, 1]  # what version 2 said
    assert pinned["models"][1]["generations"] == {"lenient": {"1": 1}}
    lenient = {bench.history(plan, r.attempt, "lenient")[0][0] for r in results}
    assert {e for a in pinned["attempts"] for e in a["evaluations"]} == lenient
    _, by_id = report_json(bench, plan, "--grader-version", "grader-honest@1")
    assert [m["resolved"] for m in by_id["models"]] == [1, 0]
    _, nobody = report_json(bench, plan, "--grader-version", "9")
    assert [m["not_graded_by_pin"] for m in nobody["models"]] == [1, 1]
    assert {a["outcome"] for a in nobody["attempts"]} == {"not_graded_by_pin"}
    assert nobody["totals"]["interval"] is None


def test_a_regrade_shows_the_displaced_verdict(bench):
    bench.configure({"tests": bench.command("flaky", PASSES_FIRST_ONLY)})
    plan, _ = bench.run(["zz/fixer"])
    _, first = report_json(bench, plan)
    assert first["attempts"][0]["verdict"] == "pass" and first["attempts"][0]["displaced"] is None
    assert bench.yyb("regrade", "--plan", plan.oid, "--profile", "tests").exit_code == 0
    _, second = report_json(bench, plan)
    row = second["attempts"][0]
    assert (row["verdict"], row["outcome"]) == ("fail", "failed")
    assert row["displaced"] == {
        "verdict": "pass",
        "outcome": "resolved",
        "layer": first["layer"]["oid"],
    }
    assert second["layer"]["previous"] == first["layer"]["oid"]
    assert second["models"][0]["generations"] == {"tests": {"2": 1}}
    text = bench.yyb("report", "--plan", plan.oid).stdout
    assert f"verdict fail (was pass in layer {first['layer']['oid'][:12]})" in text
    # Later layers keep showing the disagreement; the older layers are all kept.
    store = bench.store
    chain = []
    oid = store.refs.read(layer.layer_ref(plan.oid))
    while oid:
        chain.append(oid)
        oid = store.objects.get_record(oid)["links"].get("previous")
    assert chain == [second["layer"]["oid"], first["layer"]["oid"]]


def test_html_report_is_one_self_contained_file(bench, tmp_path):
    pytest.importorskip("matplotlib")
    bench.configure()
    plan, results = bench.run(["zz/fixer", "zz/idler"])
    out = tmp_path / "report.html"
    result = bench.yyb("report", "--plan", plan.oid, "--format", "html", "--output", str(out))
    assert result.exit_code == 0, result.stderr
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 3
    assert "Wilson" in page and "exact McNemar p" in page and "terminal classes" in page
    for r in results:  # every attempt's evidence ids are in the table
        assert r.terminal in page and r.attempt in page
    # Offline: nothing to fetch.
    lowered = page.lower()
    assert "<script" not in lowered and "<link" not in lowered and "@import" not in lowered
    assert 'src="' not in lowered and 'href="http' not in lowered
    assert not re.search(r"url\((?!#)", lowered)  # only references inside the page


def test_html_without_matplotlib_names_the_extra(bench, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    bench.configure()
    plan, _ = bench.run(["zz/fixer"])
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    result = bench.yyb("report", "--plan", plan.oid, "--format", "html")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "yyb: error: --format html needs matplotlib: pip install 'yyb[html]'"
    ]
