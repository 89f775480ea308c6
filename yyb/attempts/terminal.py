"""How an attempt's facts decide its one terminal class (the table in docs/attempts.md)."""

from __future__ import annotations

from dataclasses import dataclass

CLASSES = (
    "resolved",
    "model_failure",
    "safety_failure",
    "harness_failure",
    "environment_failure",
    "grader_failure",
    "invalid_case",
    "timeout",
    "cancelled",
)
VALID = ("resolved", "model_failure", "safety_failure", "grader_failure", "timeout")


@dataclass
class Facts:
    """What the launcher measured and retained about one attempt."""

    cancelled: bool = False
    invalid_case: str | None = None  # why the case could not be prepared
    environment: str | None = None  # why the attempt's environment could not be prepared
    cleanup_confirmed: bool = True
    timed_out: bool = False
    exit_code: int | None = None
    signal: int | None = None
    envelope_problem: str | None = None  # missing, malformed or mismatched envelope
    envelope_status: str | None = None  # "succeeded" | "failed"
    verdict: str | None = None  # "pass" | "fail" | "invalid" | None (not graded)
    verdict_reason: str = ""
    safety_failed: bool = False


def decide(f: Facts) -> tuple[str, str]:
    """(terminal class, reason): the first row of the table that applies."""
    if f.cancelled:
        return "cancelled", "the run was interrupted while the attempt was in flight"
    if f.invalid_case:
        return "invalid_case", f.invalid_case
    if f.environment:
        return "environment_failure", f.environment
    if not f.cleanup_confirmed:
        return "harness_failure", "could not confirm that every process of the attempt ended"
    if f.timed_out:
        return "timeout", "the attempt ran past its timeout and was stopped"
    if f.envelope_problem:
        return "harness_failure", f.envelope_problem
    if f.signal is not None:
        return "model_failure", f"the candidate was killed by signal {f.signal}"
    if f.exit_code != 0 or f.envelope_status != "succeeded":
        return "model_failure", (
            f"the candidate exited with status {f.exit_code} (envelope status {f.envelope_status})"
        )
    if f.safety_failed:
        return "safety_failure", f.verdict_reason or "a required safety check failed"
    if f.verdict == "invalid":
        return "harness_failure", f"grading was invalid: {f.verdict_reason}"
    if f.verdict == "fail":
        return "grader_failure", f.verdict_reason or "the grader did not pass the result"
    if f.verdict == "pass":
        return "resolved", "the candidate succeeded and the grader passed its result"
    return "harness_failure", "no grader verdict was produced"
