"""The current verdict of an attempt from every generation of its evaluators."""

from __future__ import annotations

from yyb.evidence.records import AUTHORITATIVE, DETERMINISTIC, Conclusion


def conclude(histories: dict[str, list[dict]]) -> tuple[Conclusion, str]:
    """The current verdict of an attempt from every generation of its required evaluators.

    Returns (``pass`` | ``fail`` | ``invalid`` | ``safety``, reason). A required deterministic
    correctness or safety failure in any generation stays authoritative: later passes, and
    judge prose, never override it.
    """
    latest = {}
    for profile, records in sorted(histories.items()):
        required = [r for r in records if r.get("required", True)]
        if not required:
            continue
        for record in required:
            if (
                record["kind"] in DETERMINISTIC
                and record["purpose"] in AUTHORITATIVE
                and record["verdict"] == "fail"
            ):
                kind = "safety" if record["purpose"] == "safety" else "fail"
                return kind, (
                    f"{profile} generation {record['generation']} failed a required "
                    f"{record['purpose']} check"
                )
        latest[profile] = required[-1]
    if not latest:
        return "invalid", "no required evaluation"
    for profile, record in latest.items():
        if record["verdict"] == "invalid":
            return "invalid", f"{profile} generation {record['generation']} is invalid"
    for profile, record in latest.items():
        if record["verdict"] == "fail":
            return "fail", f"{profile} generation {record['generation']} failed"
    return "pass", "every required evaluator passed"
