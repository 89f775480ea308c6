"""The run as a library step: its events, in order, and what it returns (``attempts.runner``)."""

from __future__ import annotations

import os

from yyb.attempts import runner
from yyb.plans import planfile


def test_a_run_tells_each_attempt_and_returns_the_results(bench):
    plan_file = bench.plan_file(["stand/fixer", "stand/idler"])
    plan_oid, records = planfile.load(plan_file)
    pending, dispatched = runner.undispatched(None, plan_oid, records)
    assert [a["ordinal"] for a in pending] == [0, 1] and dispatched == 0
    events = []
    outcome = runner.run(
        bench.store,
        bench.config(),
        plan_oid,
        records,
        runner.RunOptions(),
        {**os.environ, "YYB_GC_AUTO": "0"},
        events.append,
    )
    finished = [e.result for e in events if isinstance(e, runner.AttemptFinished)]
    assert sorted((r.ordinal, r.terminal_class) for r in finished) == [
        (0, "resolved"),
        (1, "grader_failure"),
    ]
    assert all(e.cluster is None for e in events if isinstance(e, runner.AttemptFinished))
    assert sorted(r.attempt for r in outcome.results) == sorted(r.attempt for r in finished)
    assert (outcome.lost, outcome.left, outcome.cancelled) == (None, 0, False)
    assert runner.undispatched(bench.store, plan_oid, records) == ([], 2)
