"""The run as a library step: its events, in order, and what it returns (``attempts.runner``)."""

from __future__ import annotations

import os

from yyb.attempts import runner
from yyb.plans import planfile


def run(bench, plan_oid: str, records: dict, events):
    """The bench's plan run as a library step, every event given to ``events``."""
    env = {**os.environ, "YYB_GC_AUTO": "0"}
    return runner.run(
        bench.store, bench.config(), plan_oid, records, runner.RunOptions(), env, events
    )


def test_a_run_tells_each_attempt_and_returns_the_results(bench):
    plan_file = bench.plan_file(["stand/fixer", "stand/idler"])
    plan_oid, records = planfile.load(plan_file)
    pending, dispatched = runner.undispatched(None, plan_oid, records)
    assert [a["ordinal"] for a in pending] == [0, 1] and dispatched == 0
    events = []
    outcome = run(bench, plan_oid, records, events.append)
    finished = [e.result for e in events if isinstance(e, runner.AttemptFinished)]
    assert sorted((r.ordinal, r.terminal_class) for r in finished) == [
        (0, "resolved"),
        (1, "grader_failure"),
    ]
    assert all(e.cluster is None for e in events if isinstance(e, runner.AttemptFinished))
    assert sorted(r.attempt for r in outcome.results) == sorted(r.attempt for r in finished)
    assert (outcome.lost, outcome.left, outcome.cancelled) == (None, 0, False)
    assert runner.undispatched(bench.store, plan_oid, records) == ([], 2)


def test_a_run_builds_each_evaluators_base_while_the_candidate_runs(bench, monkeypatch):
    """As each candidate starts, the run begins building the pristine base its command
    evaluator will mount the workspace over (the base the candidate starts from, with its Git
    repository), so that the build overlaps the candidate instead of adding to its grading."""
    from yyb.evidence import names
    from yyb.harness import overlay

    real, calls = overlay.warm, []

    def warm(store, key, forms):
        calls.append((key, forms))
        return real(store, key, forms)

    monkeypatch.setattr(overlay, "warm", warm)
    plan_file = bench.plan_file(["stand/fixer"])
    plan_oid, records = planfile.load(plan_file)
    outcome = run(bench, plan_oid, records, lambda event: None)
    (result,) = outcome.results
    store = bench.store
    execution = store.objects.get_record(
        store.refs.read(names.attempt(plan_oid, result.attempt, "execution"))
    )
    receipt = store.objects.get_record(execution["links"]["receipt"])
    assert calls == [(receipt["links"]["listing"], [True])]
