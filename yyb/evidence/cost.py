"""Cost algebra: known costs add up, unknown ones are counted and never become 0.

A cost is ``{"completeness", "currency", "micros"}`` with integer micro-USD; ``micros`` is null
when the cost is not known (``unavailable``) or does not apply (``not_applicable``).
"""

from __future__ import annotations

from yyb.evidence.records import COST_COMPLETENESS, CostCompleteness

CURRENCY = "USD"


def unknown(completeness: CostCompleteness = "unavailable") -> dict:
    """A cost that carries no amount: unavailable, or not applicable."""
    return {"completeness": completeness, "currency": CURRENCY, "micros": None}


UNAVAILABLE = unknown()


def reported(envelope: dict | None) -> dict:
    """The candidate's cost as its envelope reported it; unavailable without an envelope."""
    return dict(envelope["cost"]) if envelope is not None else unknown()


def metered(micros: int, priced_every_call: bool) -> dict:
    """An attempt's cost as the model gateway metered it (docs/gateway.md, "In a run"): the
    sum of its calls' known costs, ``partial`` when a call could not be priced, a genuine
    zero when nothing priced was spent."""
    if not priced_every_call:
        return {"completeness": "partial", "currency": CURRENCY, "micros": micros}
    if micros == 0:
        return {"completeness": "genuine_zero", "currency": CURRENCY, "micros": 0}
    return {"completeness": "complete", "currency": CURRENCY, "micros": micros}


def over_ceiling(cost: dict | None, ceiling_micros: int | None) -> int | None:
    """The micro-USD by which a reported cost exceeds ``ceiling_micros``, or None when it does
    not (or when there is no ceiling, or no known amount)."""
    if ceiling_micros is None or cost is None or cost.get("micros") is None:
        return None
    excess = cost["micros"] - ceiling_micros
    return excess if excess > 0 else None


def add(part: dict | None, counts: dict[str, int]) -> int:
    """Count ``part`` under its completeness; return the micro-USD it makes known (0 when
    unknown)."""
    state = "not_applicable" if part is None else part["completeness"]
    counts[state] += 1
    if state in ("complete", "genuine_zero", "partial") and part["micros"] is not None:
        return part["micros"]
    return 0


def total(counts: dict[str, int], micros: int) -> dict:
    """The sum of parts counted by completeness (``counts``) whose known amounts add up to
    ``micros``, with the counts kept."""
    known = counts["complete"] + counts["genuine_zero"] + counts["partial"]
    missing = counts["partial"] + counts["unavailable"]
    if known == 0 and counts["unavailable"] == 0:
        completeness, amount = "not_applicable", None
    elif known == 0:
        completeness, amount = "unavailable", None
    elif missing:
        completeness, amount = "partial", micros
    else:
        completeness, amount = "complete", micros
    return {
        "completeness": completeness,
        "currency": CURRENCY,
        "micros": amount,
        "counts": dict(counts),
    }


def counter() -> dict[str, int]:
    return dict.fromkeys(COST_COMPLETENESS, 0)


def sum_costs(parts: list[dict | None]) -> dict:
    """Add costs without inventing any: known parts add up, unknown ones are only counted.

    ``complete`` only when every part is complete (or a genuine zero); ``partial`` when some
    part is partial or unavailable but something is known; ``unavailable`` (micros null, never
    0) when nothing is known; ``not_applicable`` when no part has a cost at all. A ``None``
    part (an evaluator with no cost, such as a command grader) is not applicable.
    """
    counts = counter()
    micros = sum(add(part, counts) for part in parts)
    return total(counts, micros)


def combine(candidate: dict, judge: dict) -> dict:
    """Candidate plus judge: complete only when both are (or the judge has no cost)."""
    states = {candidate["completeness"], judge["completeness"]} - {"not_applicable"}
    known = [c["micros"] for c in (candidate, judge) if c["micros"] is not None]
    if not states:
        return unknown("not_applicable")
    if states == {"complete"}:
        return {"completeness": "complete", "currency": CURRENCY, "micros": sum(known)}
    if states == {"unavailable"}:
        return unknown()
    return {"completeness": "partial", "currency": CURRENCY, "micros": sum(known)}


def sum_runs(costs: list[dict]) -> dict:
    """One cost for several runs of one evaluator (a judge's repetitions): complete only when
    every run's is, a genuine zero only when every run's is."""
    states = {c["completeness"] for c in costs}
    known = [c["micros"] for c in costs if c["micros"] is not None]
    if states == {"genuine_zero"}:
        return {"completeness": "genuine_zero", "currency": CURRENCY, "micros": 0}
    if states <= {"complete", "genuine_zero"}:
        return {"completeness": "complete", "currency": CURRENCY, "micros": sum(known)}
    if states <= {"not_applicable"}:
        return unknown("not_applicable")
    if known:
        return {"completeness": "partial", "currency": CURRENCY, "micros": sum(known)}
    return unknown()
