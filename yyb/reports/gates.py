"""Gates: what fails a CI job from a report (docs/ci.md).

A gate is a threshold on a model's resolved rate (the valid rate, resolved / valid, or the
intent-to-treat rate, resolved / (valid + invalid), named) and a most of invalid attempts over
the whole plan. ``failures`` says, one line each, what a report breaks; an empty list passes.
A model with no attempt the rate counts (0/0) is under any threshold: nothing was shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from yyb.reports import stats

RateKind = Literal["valid", "intent-to-treat"]
RATE_KINDS: tuple[RateKind, ...] = ("valid", "intent-to-treat")
# The exit code of a command whose report breaks a gate (docs/cli.md, "Exit codes").
GATE_FAILED = 3


@dataclass(frozen=True)
class Gate:
    """``fail_under``: the least rate each model must reach (0 to 1; None: none);
    ``rate``: which rate; ``max_invalid``: the most invalid attempts (None: any number)."""

    fail_under: float | None = None
    rate: RateKind = "valid"
    max_invalid: int | None = None

    @property
    def set(self) -> bool:
        return self.fail_under is not None or self.max_invalid is not None


def _rate(model: dict, kind: RateKind) -> dict:
    return model["rate"] if kind == "valid" else model["intent_to_treat"]["rate"]


def failures(report: dict, gate: Gate) -> list[str]:
    """The lines saying what ``report`` (a per-experiment report document) breaks."""
    found = []
    if gate.fail_under is not None:
        least = round(gate.fail_under * stats.PPM)
        for model in report["models"]:
            rate = _rate(model, gate.rate)
            if rate["ppm"] is None or rate["ppm"] < least:
                shown = f"{rate['numerator']}/{rate['denominator']}"
                if rate["ppm"] is not None:
                    shown += f" = {rate['ppm'] / stats.PPM:.4f}"
                found.append(
                    f"gate: {model['model']}: the {gate.rate} resolved rate {shown} is under "
                    f"{gate.fail_under}"
                )
    if gate.max_invalid is not None:
        invalid = sum(model["invalid"] for model in report["models"])
        if invalid > gate.max_invalid:
            found.append(
                f"gate: {invalid} invalid attempt(s), more than the {gate.max_invalid} allowed"
            )
    return found
