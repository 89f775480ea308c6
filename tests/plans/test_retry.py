"""`yyb plan --retry-of PLAN`: the infrastructure's holes planned again, run, reported once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from tests.plans.retried import Holes, holes_fixture  # noqa: F401 (the holes fixture)
from yyb.evidence import names, retries
from yyb.plans import planfile
from yyb.store import file
from yyb.store.repo import Store


def retry(holes: Holes, parent: str, out: str):
    return holes.yyb("plan", "--retry-of", parent, "--output", out, "--json")


def test_retry_plans_exactly_the_infrastructure_holes(holes, tmp_path):
    root = holes.plan.oid
    out = str(tmp_path / "retry.json")
    done = retry(holes, root, out)
    assert done.exit_code == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["retry_of"] == root and summary["attempt_count"] == 2
    assert summary["dispatch_count"] == 0
    oid, records = planfile.load(out)
    assert oid == summary["plan"]
    store = holes.bench.store
    assert store.refs.read(names.plan(oid)) == oid
    plan, parent = records[oid], store.objects.get_record(root)
    assert plan["links"]["retry_of"] == root
    # What is measured is the parent's, not the configuration's: every field but its own.
    assert set(plan) == set(parent)
    for name in set(plan) - set(retries.OWN_FIELDS):
        assert plan[name] == parent[name], name
    assert {k: v for k, v in plan["links"].items() if k not in retries.OWN_LINKS} == {
        "cases": parent["links"]["cases"]
    }
    cancelled, interrupted = holes.attempts[:2]
    retried = [records[a] for a in plan["links"]["attempts"]]
    assert [a["links"]["retry_of"] for a in retried] == [cancelled, interrupted]
    for attempt, ordinal in zip(retried, (0, 1), strict=True):
        original = store.objects.get_record(attempt["links"]["retry_of"])
        assert attempt["ordinal"] == ordinal
        for name in ("case_id", "model", "attempt", "budget"):
            assert attempt[name] == original[name], name
    ceilings = sum(a["budget"]["ceiling_micros"] for a in retried)
    assert plan["budget"]["total_micros"] == ceilings
    assert holes.terminal_class(oid, plan["links"]["attempts"][0]) is None  # nothing ran
    # Nothing of the original changed: its attempts keep their terminals, its report its rows.
    assert [holes.terminal_class(root, a) for a in holes.attempts] == [
        "cancelled",
        "harness_failure",
        "resolved",
        "resolved",
    ]
    # Retrying the original again retries nothing: its holes are the retry plan's now.
    again = retry(holes, root, str(tmp_path / "again.json"))
    assert again.exit_code == 1
    assert again.stderr.count("\n") == 1 and "nothing to retry" in again.stderr
    assert f"retried already by plan {oid}" in again.stderr
    assert not os.path.exists(tmp_path / "again.json")


def test_nothing_retryable_writes_nothing(holes, tmp_path):
    out = str(tmp_path / "r1.json")
    assert retry(holes, holes.plan.oid, out).exit_code == 0
    oid, _ = planfile.load(out)
    # The retry plan has no terminal yet: its attempts are for `yyb run` to finish.
    before = sorted(holes.bench.store.refs.names())
    done = retry(holes, oid, str(tmp_path / "r2.json"))
    assert done.exit_code == 1
    assert "2 attempt(s) without a terminal" in done.stderr and "yyb run" in done.stderr
    assert sorted(holes.bench.store.refs.names()) == before
    assert not os.path.exists(tmp_path / "r2.json")
    refused = holes.yyb("plan", "--retry-of", oid, "--models", "m", "--output", "x.json")
    assert refused.exit_code == 2


def test_retry_runs_the_two_cells_and_the_family_counts_each_cell_once(holes, tmp_path):
    root = holes.plan.oid
    before = holes.yyb("report", "--plan", root, "--format", "json", "--no-layer")
    assert before.exit_code == 0, before.stderr
    out = str(tmp_path / "retry.json")
    assert retry(holes, root, out).exit_code == 0
    oid, records = planfile.load(out)
    assert holes.yyb("authorize", "--plan", out, "--expires", "+1h").exit_code == 0
    ran = holes.yyb("run", "--plan", out)
    assert ran.exit_code == 0, ran.stderr
    assert "dispatch_count: 2" in ran.lines
    new = records[oid]["links"]["attempts"]
    assert [holes.terminal_class(oid, a) for a in new] == ["grader_failure"] * 2

    doctor = holes.yyb("doctor", "--plan", out)
    assert doctor.exit_code == 0, doctor.stdout + doctor.stderr

    # The original's report is what it was.
    after = holes.yyb("report", "--plan", root, "--format", "json", "--no-layer")
    assert json.loads(after.stdout) == json.loads(before.stdout)
    assert "family" not in json.loads(after.stdout)

    shown = holes.yyb("report", "--plan", out, "--format", "json")
    assert shown.exit_code == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["status"] == "complete"
    assert report["family"]["plans"] == [root, oid]
    assert report["family"]["retries"] == [
        {"model": "stand/holder", "retries": 2, "superseded": 2},
        {"model": "stand/fixer", "retries": 0, "superseded": 0},
    ]
    holder, fixer = report["models"]
    assert (holder["attempts"], holder["valid"], holder["invalid"]) == (2, 2, 0)
    assert holder["terminal_classes"] == {"grader_failure": 2}
    assert (fixer["attempts"], fixer["resolved"]) == (2, 2)
    assert report["totals"]["attempts"] == 4
    assert report["doctor"]["attempts"] == 6  # every attempt of the family stays gated
    rows = {row["attempt"]: row for row in report["attempts"]}
    assert len(rows) == 6
    for original, again in zip(holes.attempts[:2], new, strict=True):
        assert rows[original]["superseded_by"] == again
        assert rows[original]["plan"] == root
        assert rows[again]["superseded_by"] is None and rows[again]["plan"] == oid
    assert rows[holes.attempts[2]]["superseded_by"] is None

    text = holes.yyb("report", "--plan", out, "--no-layer")
    assert "stand/holder: 2 retry attempt(s), 2 attempt(s) superseded" in text.stdout
    assert text.stdout.count("superseded by retry") == 2
    markdown = holes.yyb("report", "--plan", out, "--no-layer", "--format", "markdown")
    assert "**Retries**" in markdown.stdout
    from yyb.view import attempt as view  # the viewer names what a retry retried

    _, shown = view.page(holes.bench.store, [], oid, new[0])
    assert "a retry of attempt" in str(shown) and holes.attempts[0] in str(shown)
    # Across the store, the longitudinal report pools each cell once too.
    pooled = holes.yyb("report", "--longitudinal", "--format", "json", "--no-layer")
    assert pooled.exit_code == 0, pooled.stderr
    longitudinal = json.loads(pooled.stdout)
    assert (longitudinal["attempts"], longitudinal["superseded"]) == (4, 2)
    members = [m for c in longitudinal["cohorts"] for m in c["evidence"]]
    assert len(members) == 4
    text = holes.yyb("report", "--longitudinal", "--no-layer")
    assert "attempts superseded by a retry of their cell (not pooled): 2" in text.stdout
    html = holes.yyb("report", "--plan", out, "--no-layer", "--format", "html")
    assert "<h2>Retries</h2>" in html.stdout
    assert "stand/holder: 2 retry attempt(s), 2 attempt(s) superseded" in html.stdout


# A retry run killed at these durable writes (YYB_DEEP=1: every one until the run ends).
KILL_POINTS = range(1, 400) if os.environ.get("YYB_DEEP") == "1" else (3, 17, 41)


def test_a_retry_run_killed_recovers_like_any_run(holes, tmp_path):
    out = str(tmp_path / "retry.json")
    assert retry(holes, holes.plan.oid, out).exit_code == 0
    assert holes.yyb("authorize", "--plan", out, "--expires", "+1h").exit_code == 0
    oid, records = planfile.load(out)
    config = str(holes.bench.config_path)
    killed_at = []
    for point in KILL_POINTS:
        copy = str(tmp_path / f"s{point}")
        shutil.copytree(holes.bench.store_path, copy)
        argv = [sys.executable, "-m", "yyb", "--store", copy, "--config", config]
        env = {**os.environ, file.FAULT_ENV: str(point)}
        killed = subprocess.run([*argv, "run", "--plan", oid], env=env, timeout=300)
        assert killed.returncode in (0, -9), (point, killed.returncode)
        if killed.returncode == -9:
            killed_at.append(point)
        for pid, _ in holes.bench.alive():
            os.kill(pid, 9)
        again = holes.yyb("run", "--plan", oid, store=copy)
        assert again.exit_code == 0, (point, again.stderr)
        doctor = holes.yyb("doctor", "--plan", oid, store=copy)
        assert doctor.exit_code == 0, (point, doctor.stdout + doctor.stderr)
        store = Store.open(copy)
        for attempt in records[oid]["links"]["attempts"]:
            intent = names.attempt(oid, attempt, "intent")
            assert len(list(store.refs.log(intent))) == 1, f"{point}: dispatched twice"
            assert holes.terminal_class(oid, attempt, store) is not None
        report = holes.yyb("report", "--plan", oid, "--no-layer", store=copy)
        assert report.exit_code == 0, (point, report.stdout)
        if killed.returncode == 0:
            break
    assert killed_at[:2] == list(KILL_POINTS)[:2]  # the sweep did kill the retry run


def test_attempts_invalid_by_grading_are_left_to_regrade(tmp_path):
    from tests.attempts.conftest import build_bench

    bench = build_bench(tmp_path / "graded")
    bench.configure(grader="#!/bin/sh\nexit 0\n")  # ends without a verdict
    plan, results = bench.run(["stand/fixer"])
    report = bench.yyb("report", "--plan", plan.oid, "--format", "json", "--no-layer")
    [row] = json.loads(report.stdout)["attempts"]
    assert (row["outcome"], row["verdict"]) == ("invalid", "invalid"), row
    before = sorted(bench.store.refs.names())
    done = bench.yyb("plan", "--retry-of", plan.oid, "--output", str(tmp_path / "r.json"))
    assert done.exit_code == 1
    assert "1 attempt(s) invalid only because of their grading" in done.stderr
    assert "yyb regrade" in done.stderr
    assert sorted(bench.store.refs.names()) == before


def test_a_retry_of_a_retry_and_its_family_of_three(holes, tmp_path):
    from tests.plans.retried import cancel_first
    from yyb.plans.build import Plan

    root, bench = holes.plan.oid, holes.bench
    first = str(tmp_path / "r1.json")
    assert retry(holes, root, first).exit_code == 0
    oid, records = planfile.load(first)
    assert holes.yyb("authorize", "--plan", first, "--expires", "+1h").exit_code == 0
    plan = Plan(oid, records[oid], records, attempt_oids=list(records[oid]["links"]["attempts"]))
    (bench.tools / "hold").touch()
    cancel_first(bench, plan)  # the first retry is cancelled again
    (bench.tools / "hold").unlink()
    assert holes.yyb("run", "--plan", first).exit_code == 0  # the second finishes
    second = str(tmp_path / "r2.json")
    made = retry(holes, first, second)
    assert made.exit_code == 0, made.stderr
    again, more = planfile.load(second)
    [retried] = more[again]["links"]["attempts"]
    assert more[retried]["links"]["retry_of"] == records[oid]["links"]["attempts"][0]
    assert holes.yyb("authorize", "--plan", second, "--expires", "+1h").exit_code == 0
    assert holes.yyb("run", "--plan", second).exit_code == 0
    assert holes.yyb("doctor", "--plan", second).exit_code == 0

    shown = holes.yyb("report", "--plan", second, "--format", "json", "--no-layer")
    assert shown.exit_code == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["family"]["plans"] == [root, oid, again]
    assert report["family"]["retries"][0] == {
        "model": "stand/holder",
        "retries": 3,
        "superseded": 3,
    }
    holder = report["models"][0]
    assert (holder["attempts"], holder["valid"], holder["terminal_classes"]) == (
        2,
        2,
        {"grader_failure": 2},
    )
    counted = [r["attempt"] for r in report["attempts"] if r["superseded_by"] is None]
    assert retried in counted and len(counted) == 4
