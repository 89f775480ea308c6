"""Pairwise judging's figures (docs/grading.md): per pairwise judge profile and model, its
attempts' newest pairwise evaluations counted as wins, ties, losses or invalid, with the
score, the win rate and position consistency, each with its Wilson interval."""

from __future__ import annotations

from yyb.evidence.records import PAIRWISE_BOTH_ORDERS
from yyb.reports import stats

__all__ = ["pairwise_figures", "pairwise_table"]


def pairwise_table(store, plan: dict, facts: list, models: list[str]) -> list[dict]:
    """For every pairwise judge profile (docs/grading.md) and every model but its baseline:
    the newest pairwise evaluation of each of the model's attempts counted as a win, tie, loss
    or invalid (no pair, or the judge gave no answer), the score over the decided ones (a tie
    is half a win) and the win rate, each with its Wilson interval, and how many repetitions
    were position-consistent. Attempts with no evaluation of the profile are not counted."""
    rows = []
    for profile, spec in sorted(plan["evaluators"]["catalog"].items()):
        if spec.get("kind") != "llm_judge" or spec.get("mode") != "pairwise":
            continue
        for model in [m for m in models if m != spec["baseline"]]:
            judged = []  # each evaluation's details.pairwise, None when invalid
            for f in facts:
                if f.model != model:
                    continue
                newest = [(oid, r) for oid, r in f.evaluations if r["profile"] == profile]
                if not newest:
                    continue
                oid, receipt = newest[-1]
                if receipt["verdict"] == "invalid":
                    judged.append(None)
                    continue
                result_oid = store.objects.get_record(oid)["links"]["result"]
                judged.append(store.objects.get_record(result_oid)["details"]["pairwise"])
            rows.append(
                {"profile": profile, "baseline": spec["baseline"], "model": model}
                | pairwise_figures(judged)
            )
    return rows


def pairwise_figures(judged: list[dict | None]) -> dict:
    """The figures of one pairwise row from its evaluations' ``details.pairwise`` (None: an
    invalid evaluation). Repetitions judged in one order only (results written before both
    orders were shown) count in no position-consistency figure."""
    counts = {"win": 0, "tie": 0, "loss": 0}
    consistent = shown = 0
    for pair in judged:
        if pair is None:
            continue
        counts[pair["outcome"]] += 1
        if pair.get("design") == PAIRWISE_BOTH_ORDERS:
            consistent += pair["consistent_repetitions"]
            shown += len(pair["repetitions"])
    decided = sum(counts.values())
    points = 2 * counts["win"] + counts["tie"]
    return {
        "wins": counts["win"],
        "ties": counts["tie"],
        "losses": counts["loss"],
        "invalid": len(judged) - decided,
        "win_rate": stats.rate(counts["win"], decided),
        "interval": stats.wilson(counts["win"], decided),
        "score": stats.rate(points, 2 * decided),
        "score_interval": stats.wilson_halves(points, decided),
        "position_consistency": {
            "rate": stats.rate(consistent, shown),
            "interval": stats.wilson(consistent, shown),
            "inconsistent": 2 * consistent < shown,
        },
    }
