"""A report over a family of retries: each cell counted once (docs/reports.md, "Families").

A retry plan's family is the plan and its ``retry_of`` ancestors (``yyb.evidence.retries``).
Every attempt of every plan of the family is gated and kept as a row; the figures count, of
each cell (the root attempt and the attempts that retry it, through their attempt plans'
``links.retry_of``), its newest attempt with a valid outcome if there is one, else its newest
attempt. Each other attempt of the cell is superseded: its row names the attempt counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# An attempt's facts (``yyb.reports.build.Facts``, which builds the report from this module):
# its ``attempt`` oid, ``model``, ``outcome`` and ``pinned_out``.
Facts = Any


@dataclass(frozen=True)
class Counted:
    """The family's attempts as the figures count them.

    Attributes:
        facts: the attempt counted for each cell, in row order.
        superseded: attempt -> the attempt counted in its cell instead of it.
        plans: attempt -> the plan of the family it belongs to.
    """

    facts: list[Facts]
    superseded: dict[str, str]
    plans: dict[str, str]


def cells(store, members: list[tuple[str, dict]]) -> dict[str, str]:
    """Attempt -> its cell (the root plan's attempt it retries, through every retry between),
    for every attempt of the family (``members``, root first). An attempt whose retry_of
    names no attempt of the family (doctor's finding) is a cell of its own."""
    cell: dict[str, str] = {}
    for index, (_, plan) in enumerate(members):
        for attempt_oid in plan["links"]["attempts"]:
            target = None
            if index:
                target = store.objects.get_record(attempt_oid)["links"].get("retry_of")
            cell[attempt_oid] = cell.get(target, attempt_oid) if target else attempt_oid
    return cell


def count(store, members: list[tuple[str, dict]], facts: list[Facts]) -> Counted:
    """Which of ``facts`` (every attempt of the family, root plan first, oldest first within a
    cell) the figures count."""
    cell = cells(store, members)
    plans = {a: oid for oid, plan in members for a in plan["links"]["attempts"]}
    chosen: dict[str, Facts] = {}
    for f in facts:
        key = cell.get(f.attempt, f.attempt)
        held = chosen.get(key)
        if held is None or _valid(f) or not _valid(held):
            chosen[key] = f
    counted = {id(f) for f in chosen.values()}
    superseded = {
        f.attempt: chosen[cell.get(f.attempt, f.attempt)].attempt
        for f in facts
        if id(f) not in counted
    }
    return Counted([f for f in facts if id(f) in counted], superseded, plans)


def across(store, plans: dict[str, dict], pooled: list[tuple[str, Facts]]) -> list[bool]:
    """For a report over every plan of the store (the longitudinal one): whether each of
    ``pooled`` ((plan oid, facts), in any order) is counted, by the rule of ``count``: of
    each cell, its newest attempt with a valid outcome if any, else its newest. ``plans``: every
    stored plan by oid; a plan that retries nothing and is retried by none changes nothing."""
    retry_plans = {oid: plan for oid, plan in plans.items() if plan["links"].get("retry_of")}
    if not retry_plans:
        return [True] * len(pooled)
    parent: dict[str, str] = {}
    for plan in retry_plans.values():
        for attempt_oid in plan["links"]["attempts"]:
            target = store.objects.get_record(attempt_oid)["links"].get("retry_of")
            if target:
                parent[attempt_oid] = target

    def depth(plan_oid: str, seen: int = 0) -> int:
        up = plans.get(plan_oid, {}).get("links", {}).get("retry_of")
        return depth(up, seen + 1) if up and seen < len(plans) else seen

    def cell(attempt_oid: str) -> str:
        for _ in range(len(parent) + 1):  # a forged loop ends (doctor names it)
            if attempt_oid not in parent:
                break
            attempt_oid = parent[attempt_oid]
        return attempt_oid

    chosen: dict[str, int] = {}
    order = sorted(range(len(pooled)), key=lambda i: depth(pooled[i][0]))
    for i in order:
        key = cell(pooled[i][1].attempt)
        held = chosen.get(key)
        if held is None or _valid(pooled[i][1]) or not _valid(pooled[held][1]):
            chosen[key] = i
    counted = set(chosen.values())
    return [i in counted for i in range(len(pooled))]


def _valid(f: Facts) -> bool:
    return not f.pinned_out and f.outcome in ("resolved", "failed")


def summary(members: list[tuple[str, dict]], counted: Counted, facts, models) -> dict:
    """The report's ``family``: its plans, root first, and per model the retry attempts (those
    of every plan but the root) and the attempts superseded."""
    root = members[0][0]
    rows = []
    for model in models:
        mine = [f for f in facts if f.model == model]
        rows.append(
            {
                "model": model,
                "retries": sum(1 for f in mine if counted.plans.get(f.attempt) != root),
                "superseded": sum(1 for f in mine if f.attempt in counted.superseded),
            }
        )
    return {"plans": [oid for oid, _ in members], "retries": rows}


def annotate(row: dict, counted: Counted) -> dict:
    """An attempt row of a family report: with its plan and the attempt counted instead."""
    row["plan"] = counted.plans.get(row["attempt"])
    row["superseded_by"] = counted.superseded.get(row["attempt"])
    if row["plan"] is None:  # an attempt the gate could not read keeps its place
        del row["plan"]
    return row
