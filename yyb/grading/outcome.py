"""What one evaluation produced, before it is stored as its four artifacts."""

from __future__ import annotations

from dataclasses import dataclass, field

from yyb.evidence.records import EvaluationProblem

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
    signal: int | None = None  # the signal that ended the evaluator (an exit above 128 counts)
    details: dict = field(default_factory=dict)
    judge_cost: dict | None = None
    # Protected paths put back before grading (yyb/evidence/protect.py): the oid of the listing
    # graded and the protected paths the candidate had touched; None when the profile has none.
    protected: dict | None = None
    # What made an invalid verdict invalid, kept on the receipt: the report tells invalidity a
    # candidate can cause from the infrastructure's by it (yyb/evidence/invalidity.py).
    problem: EvaluationProblem | None = None

    @classmethod
    def invalid(cls, reason: str) -> Outcome:
        """An evaluation that could not start (nothing was run)."""
        return cls("invalid", reason, problem="not_started")

    def with_verdict(
        self, verdict: str, reason: str, problem: EvaluationProblem | None = None
    ) -> Outcome:
        """This outcome with ``verdict``; an invalid one names its ``problem``."""
        self.verdict, self.reason, self.problem = verdict, reason, problem
        return self
