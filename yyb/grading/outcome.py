"""What one evaluation produced, before it is stored as its four artifacts."""

from __future__ import annotations

from dataclasses import dataclass, field

VERDICTS = ("pass", "fail", "invalid")


@dataclass
class Outcome:
    verdict: str = "invalid"  # pass | fail | invalid (invalid: unknown quality, never pass/fail)
    reason: str = ""
    input_bytes: bytes = b""  # exactly what the evaluator was given
    output_bytes: bytes | None = None  # exactly what it answered (None: nothing)
    log: bytes = b""
    wall_ms: int = 0
    exit_code: int | None = None
    details: dict = field(default_factory=dict)
    judge_cost: dict | None = None

    @classmethod
    def invalid(cls, reason: str) -> Outcome:
        return cls("invalid", reason)

    def with_verdict(self, verdict: str, reason: str) -> Outcome:
        self.verdict, self.reason = verdict, reason
        return self
