"""Pairwise judging counterbalances position: every repetition shows the pair in both orders,
a tie is half a win, and a judge whose answer follows the position is reported as such.

The stand-in judges replace one judge run (``judge._judge_once``), so each test judges a dozen
attempts nine times over in well under a second; tests/grading/test_judge_modes.py runs a
pairwise judge for real under the sandbox.
"""

from __future__ import annotations

import pytest

from yyb.grading import judge, pairwise
from yyb.reports import build, render, stats
from yyb.store.objects import codec
from yyb.store.repo import Store

ATTEMPTS, REPETITIONS = 12, 9
SPEC = {
    "kind": "llm_judge",
    "mode": "pairwise",
    "model": "judges/j1",
    "baseline": "m/baseline",
    "prompt": "Compare two patches.",
    "rubric": "Which is better?",
    "evidence": ["patch"],
    "repetitions": REPETITIONS,
    "required": False,
}


def stand_in(answer):
    """A judge run that answers ``answer(payload)`` ("A", "B" or "tie") at no cost."""

    def run(spec, harness, payload, *rest) -> dict:
        return {
            "stdout": "",
            "stderr": "",
            "exit_code": 0,
            "wall_ms": 1,
            "verdict": answer(payload),
            "reason": "",
            "problem": None,
            "cost": {"completeness": "genuine_zero", "currency": "USD", "micros": 0},
            "identity": {
                "requested": spec["model"],
                "resolved": spec["model"],
                "observed": spec["model"],
                "session_id": "s",
            },
        }

    return run


def judged(monkeypatch, answer, patches=(b"same patch\n", b"same patch\n")) -> dict:
    """Judge ATTEMPTS attempts of m/judged against their partners (``patches``: the judged
    attempt's and the partner's, identical by default) with the stand-in judge ``answer``;
    return the report's pairwise row of them."""
    monkeypatch.setattr(judge, "_judge_once", stand_in(answer))
    store = Store.memory()
    ours, theirs = (store.objects.put("blob", p) for p in patches)
    facts = []
    for n in range(ATTEMPTS):
        partner = {
            "attempt": f"{n:064x}",
            "model": "m/baseline",
            "truth": {"patch": theirs},
            "identities": ["m/baseline", "m/baseline", "m/baseline"],
        }
        ids = ["m/judged", "m/judged", "m/judged"]
        outcome = pairwise.run(
            store, SPEC, {}, {"patch": ours}, partner, b"task", ids, f"seed/{n}", []
        )
        result = {"details": outcome.details, "verdict": outcome.verdict}
        result_oid = store.objects.put("record", codec.encode(result))
        receipt = {"links": {"result": result_oid}}
        oid = store.objects.put("record", codec.encode(receipt))
        fact = build.Facts(f"{n:064x}", n, "m/judged", "c")
        fact.evaluations = [(oid, {"profile": "pw", "verdict": outcome.verdict})]
        facts.append(fact)
    plan = {"evaluators": {"catalog": {"pw": SPEC}}}
    (row,) = build.pairwise_table(store, plan, facts, ["m/baseline", "m/judged"])
    return row


def test_a_judge_that_always_answers_a_scores_half_and_is_position_inconsistent(monkeypatch):
    row = judged(monkeypatch, lambda payload: "A")
    # Every repetition is won in one order and lost in the other: each attempt ties.
    assert (row["wins"], row["ties"], row["losses"]) == (0, ATTEMPTS, 0)
    assert row["score"] == {"numerator": ATTEMPTS, "denominator": 2 * ATTEMPTS, "ppm": 500_000}
    assert row["score_interval"] == stats.wilson(ATTEMPTS // 2, ATTEMPTS)  # 6 of 12
    consistency = row["position_consistency"]
    assert consistency["rate"] == {
        "numerator": 0,
        "denominator": ATTEMPTS * REPETITIONS,
        "ppm": 0,
    }
    assert consistency["inconsistent"] is True
    (line,) = render.pairwise_lines({"pairwise": [row]})
    assert "score 12/24 50.0% [25.4%, 74.6%]" in line
    assert "position-consistent 0/108 0.0% [" in line and "POSITION-INCONSISTENT" in line


def test_each_repetition_shows_both_orders(monkeypatch):
    seen: list[bytes] = []

    def answer(payload):
        seen.append(payload)
        return "A"

    judged(monkeypatch, answer, (b"OURS\n", b"THEIRS\n"))
    assert len(seen) == 2 * ATTEMPTS * REPETITIONS
    for first, second in zip(seen[::2], seen[1::2], strict=True):
        order = [first.index(b"OURS"), first.index(b"THEIRS")]
        mirrored = [second.index(b"THEIRS"), second.index(b"OURS")]
        assert (order[0] < order[1]) == (mirrored[0] < mirrored[1])


def test_a_judge_that_always_ties_scores_half_and_is_consistent(monkeypatch):
    row = judged(monkeypatch, lambda payload: "tie")
    assert row["score"]["ppm"] == 500_000
    assert row["position_consistency"]["rate"]["ppm"] == 1_000_000
    assert row["position_consistency"]["inconsistent"] is False


@pytest.mark.parametrize(
    ("better", "ppm", "wins"), [(b"OURS", 1_000_000, ATTEMPTS), (b"THEIRS", 0, 0)]
)
def test_a_judge_that_reads_the_work_is_consistent(monkeypatch, better, ppm, wins):
    def answer(payload):
        first, _, _ = payload.partition(b"# Candidate B")
        return "A" if better in first else "B"

    row = judged(monkeypatch, answer, (b"OURS\n", b"THEIRS\n"))
    assert (row["score"]["ppm"], row["wins"]) == (ppm, wins)
    assert row["position_consistency"]["rate"]["ppm"] == 1_000_000


def test_results_judged_in_one_order_count_in_no_consistency_figure():
    """Results written before both orders were shown: their outcome counts, their
    repetitions tell nothing of position."""
    older = {"outcome": "tie", "repetitions": [{"seed": "0" * 64, "side": "A", "winner": "A"}]}
    row = build.pairwise_figures([older, None])
    assert (row["ties"], row["invalid"], row["score"]["ppm"]) == (1, 1, 500_000)
    assert row["position_consistency"] == {
        "rate": {"numerator": 0, "denominator": 0, "ppm": None},
        "interval": None,
        "inconsistent": False,
    }
    line = render.pairwise_figures_text(row)
    assert line.endswith("position-consistent - (none in both orders)")
