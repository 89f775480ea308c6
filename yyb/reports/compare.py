"""Two experiments side by side (``yyb compare``, docs/reports.md, "Comparing two runs").

Each plan is reported as ``yyb report --plan`` reports it (the same gate, the same figures).
Models pair by name; when each plan has exactly one model left unpaired, those two pair (a
run of another candidate on the same cases). For each pair of models, per case: the outcome
on each side (a strict majority of its valid attempts resolved), the verdicts, cost, tokens
and runtime, and whether the case flipped; the exact McNemar test over the cases both sides
decided, on valid attempts and intent to treat. Before the figures: the parts of the
compatibility keys (docs/reports.md) in which the two sides' attempts differ, cell by cell,
so a difference in the grader, the prompt or the snapshot is said before any rate.
"""

from __future__ import annotations

from yyb.reports import build, longitudinal


def compare(store, first: str, second: str, version: str | None = None) -> dict:
    """The comparison document of plans ``first`` and ``second``."""
    sides = []
    for plan_oid in (first, second):
        document, _ = build.build(store, plan_oid, version)
        sides.append((document, longitudinal.keys_by_attempt(store, plan_oid)))
    (a, keys_a), (b, keys_b) = sides
    pairs, only_a, only_b = _pair_models(a, b)
    compared = [_pair(a, b, m1, m2, (keys_a, keys_b)) for m1, m2 in pairs]
    return {
        "first": _side(a),
        "second": _side(b),
        "status": "complete" if a["status"] == b["status"] == "complete" else "incomplete",
        "compatibility": _compatibility(compared),
        "pairs": compared,
        "unpaired_models": {"first": only_a, "second": only_b},
    }


def _side(document: dict) -> dict:
    return {
        "plan": document["plan"],
        "status": document["status"],
        "comparison_classification": document["comparison_classification"],
        "attempts": document["doctor"]["attempts"],
        "models": [m["model"] for m in document["models"]],
    }


def _pair_models(a: dict, b: dict) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    first = [m["model"] for m in a["models"]]
    second = [m["model"] for m in b["models"]]
    pairs = [(m, m) for m in first if m in second]
    only_a = [m for m in first if m not in second]
    only_b = [m for m in second if m not in first]
    if len(only_a) == len(only_b) == 1:
        pairs.append((only_a[0], only_b[0]))
        only_a, only_b = [], []
    return pairs, only_a, only_b


def _cells(document: dict, model: str) -> dict[str, list[dict]]:
    """The model's counted attempt rows by case (a family's superseded attempts left out)."""
    cells: dict[str, list[dict]] = {}
    for row in document["attempts"]:
        if row["model"] == model and not row.get("superseded_by"):
            cells.setdefault(row["case_id"] or "-", []).append(row)
    return cells


def _treated(rows: list[dict]) -> str | None:
    """The intent-to-treat outcome of one cell, as ``build.case_outcome`` decides it."""
    facts = [
        build.Facts(
            r["attempt"],
            r["ordinal"],
            r["model"],
            r["case_id"],
            outcome=r["outcome"],
            pinned_out=r["outcome"] == "not_graded_by_pin",
        )
        for r in rows
    ]
    return build.case_outcome(facts, intent_to_treat=True)


def _figures(entry: dict | None, rows: list[dict]) -> dict | None:
    """One side of one case: its outcome and what it took."""
    if entry is None:
        return None
    verdicts: dict[str, int] = {}
    for row in rows:
        if row["verdict"] is not None:
            verdicts[row["verdict"]] = verdicts.get(row["verdict"], 0) + 1
    tokens = entry.get("tokens")
    return {
        "outcome": entry["outcome"],
        "attempts": entry["attempts"],
        "valid": entry["valid"],
        "resolved": entry["resolved"],
        "invalid": entry["invalid"],
        "verdicts": dict(sorted(verdicts.items())),
        "cost": entry["cost"]["candidate"],
        "tokens": None
        if tokens is None
        else {k: tokens[k] for k in ("input_tokens", "output_tokens", "metered_attempts")},
        "median_ms": entry["runtime"]["candidate"]["median_ms"],
        "total_ms": entry["runtime"]["candidate"]["total_ms"],
    }


def _change(first: dict | None, second: dict | None) -> str:
    if first is None or second is None:
        return "unpaired"
    if first["outcome"] is None or second["outcome"] is None:
        return "undecided"
    if first["outcome"] == second["outcome"]:
        return "same"
    return "gained" if second["outcome"] == "resolved" else "lost"


def _differs(keys: tuple[dict, dict], rows: tuple[list[dict], list[dict]]) -> list[str]:
    """The key parts in which one case's attempts on the two sides differ (each side's first
    attempt with a key; none when a side has no keyed attempt)."""
    found = []
    for side_keys, side_rows in zip(keys, rows, strict=True):
        keyed = [side_keys[r["attempt"]] for r in side_rows if r["attempt"] in side_keys]
        found.append(keyed[0] if keyed else None)
    if None in found:
        return []
    return longitudinal.differing_parts(found[0], found[1])


def _pair(a: dict, b: dict, first: str, second: str, keys: tuple[dict, dict]) -> dict:
    entry_a = next(m for m in a["models"] if m["model"] == first)
    entry_b = next(m for m in b["models"] if m["model"] == second)
    by_case_a = {c["case_id"]: c for c in entry_a["cases"]}
    by_case_b = {c["case_id"]: c for c in entry_b["cases"]}
    rows_a, rows_b = _cells(a, first), _cells(b, second)
    cases, outcomes, treated = [], ({}, {}), ({}, {})
    for case_id in sorted(set(by_case_a) | set(by_case_b)):
        one = _figures(by_case_a.get(case_id), rows_a.get(case_id, []))
        two = _figures(by_case_b.get(case_id), rows_b.get(case_id, []))
        for i, (side, rows) in enumerate(((one, rows_a), (two, rows_b))):
            if side is not None:
                outcomes[i][case_id] = side["outcome"]
                treated[i][case_id] = _treated(rows.get(case_id, []))
        cells = (rows_a.get(case_id, []), rows_b.get(case_id, []))
        cases.append(
            {
                "case_id": case_id,
                "first": one,
                "second": two,
                "change": _change(one, two),
                "key_differs": _differs(keys, cells) if one and two else [],
            }
        )
    return {
        "first_model": first,
        "second_model": second,
        "first": _rates(entry_a),
        "second": _rates(entry_b),
        "paired": build.paired(*outcomes),
        "intent_to_treat": build.paired(*treated),
        "gained": [c["case_id"] for c in cases if c["change"] == "gained"],
        "lost": [c["case_id"] for c in cases if c["change"] == "lost"],
        "cases": cases,
    }


def _rates(entry: dict) -> dict:
    return {
        "attempts": entry["attempts"],
        "rate": entry["rate"],
        "interval": entry["interval"],
        "intent_to_treat": entry["intent_to_treat"],
        "cost": entry["cost"]["candidate"],
    }


def _compatibility(pairs: list[dict]) -> dict:
    """Each key part that differs, with the number of cases (over every pair) it differs in."""
    counts: dict[str, int] = {}
    compared = 0
    for pair in pairs:
        for case in pair["cases"]:
            if case["first"] is None or case["second"] is None:
                continue
            compared += 1
            for part in case["key_differs"]:
                counts[part] = counts.get(part, 0) + 1
    return {
        "cases_compared": compared,
        "differs": [{"part": part, "cases": n} for part, n in counts.items()],
    }
