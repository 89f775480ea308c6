"""yyb investigate: bounded answers about one attempt from retained evidence, zero dispatch."""

from __future__ import annotations

import pytest

from yyb.errors import UsageError
from yyb.reports import investigate


def test_investigate_answers_each_question_about_one_attempt(bench):
    bench.configure()
    plan, results = bench.run(["zz/fixer", "zz/idler"])
    fixer, idler = results
    store = bench.store
    before = sorted(store.refs.names())

    def ask(attempt: str, show: str, *extra: str):
        result = bench.yyb(
            "investigate", "--plan", plan.oid, "--attempt", attempt, "--show", show, *extra
        )
        assert result.exit_code == 0, result.stderr
        return result.stdout

    # The attempt by oid, by prefix and by ordinal: the same answer.
    by_oid = ask(fixer.attempt, "terminal")
    assert ask(fixer.attempt[:10], "terminal") == by_oid == ask("0", "terminal")
    assert "class: resolved" in by_oid and f"terminal {fixer.terminal}" in by_oid
    assert "agrees with the stored terminal: yes" in by_oid
    assert "exit_code: 0" in by_oid
    failed = ask("1", "terminal")
    assert "class: grader_failure" in failed and "grader_failure: tests generation 1" in failed
    timeline = ask(fixer.attempt, "timeline").splitlines()
    leaves = [line.split()[1] for line in timeline[1:]]
    assert leaves[0] == "intent" and "evaluations/tests" in leaves
    assert leaves.index("candidate") < leaves.index("terminal") < leaves.index("evidence")
    grader = ask(fixer.attempt, "grader")
    assert "tests generation 1: pass" in grader and "current verdict: pass" in grader
    assert "grader_output" in grader or "passed" in grader
    assert "current verdict: fail" in ask(idler.attempt, "grader")
    assert "calc.sh" in ask(fixer.attempt, "patch")
    outputs = ask(fixer.attempt, "outputs")
    assert "== stdout" in outputs and "== stderr" in outputs
    # Bounded, with a marker; nothing was written or dispatched.
    cut = ask(fixer.attempt, "timeline", "--max-bytes", "300")
    assert len(cut.encode()) <= 300 and "[truncated:" in cut
    assert sorted(store.refs.names()) == before
    bad = bench.yyb("investigate", "--plan", plan.oid, "--attempt", "7")
    assert bad.exit_code == 2 and "ordinals 0..1" in bad.stderr


def test_bound_marks_the_cut():
    assert investigate.bound(b"abc", 10) == b"abc"
    cut = investigate.bound(b"x" * 1000, 100)
    assert len(cut) <= 100 and b"[truncated: 1000 bytes" in cut


def test_resolve_attempt_refuses_ambiguity():
    plan = {"links": {"attempts": ["ab" + "0" * 62, "ab" + "1" * 62]}}
    assert investigate.resolve_attempt(plan, "1") == plan["links"]["attempts"][1]
    assert investigate.resolve_attempt(plan, "ab11") == plan["links"]["attempts"][1]
    with pytest.raises(UsageError, match="ambiguous"):
        investigate.resolve_attempt(plan, "ab")
    with pytest.raises(UsageError, match="no attempt"):
        investigate.resolve_attempt(plan, "cd00")
