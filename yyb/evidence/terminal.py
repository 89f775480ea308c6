"""How an attempt's facts decide its one terminal class (the table in docs/attempts.md), and
which terminals left a candidate result that can be graded."""

from __future__ import annotations

from dataclasses import dataclass

from yyb.evidence import identity as rules
from yyb.evidence.records import UNGRADEABLE, TerminalClass
from yyb.evidence.verdict import conclude

# The reason of a terminal closed without its execution (a dispatch an interrupted run or a
# lost worker left): the attempt may or may not have run. Such a terminal has no workspace
# receipt; doctor knows it by this beginning of its reason (more may follow it).
CLOSED_UNRUN = "dispatched earlier without a terminal"
INDETERMINATE = f"{CLOSED_UNRUN} (interrupted run): closed as indeterminate, never dispatched again"


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
    limit: str | None = None  # the resource limits the candidate ran into, in words
    verdict: str | None = None  # "pass" | "fail" | "invalid" | None (not graded)
    verdict_reason: str = ""
    safety_failed: bool = False

    @property
    def ran_cleanly(self) -> bool:
        """The candidate finished on its own, said it succeeded, and left nothing running:
        its result is worth grading."""
        return (
            not (self.cancelled or self.timed_out or self.envelope_problem)
            and self.cleanup_confirmed
            and self.exit_code == 0
            and self.envelope_status == "succeeded"
        )


def decide(f: Facts) -> tuple[TerminalClass, str]:
    """(terminal class, reason): the first row of the table that applies.

    A resource limit the candidate ran into decides the class only when the candidate did not
    finish cleanly; one that finished anyway (a test of its that ran out of memory, say) is
    graded, and the reason names the limit.
    """
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
    if f.limit and not f.ran_cleanly:
        return "model_failure", f"the candidate was stopped by its resource limits: {f.limit}"
    if f.envelope_problem:
        return "harness_failure", f.envelope_problem
    if f.signal is not None:
        return "model_failure", f"the candidate was killed by signal {f.signal}"
    if f.exit_code != 0 or f.envelope_status != "succeeded":
        return "model_failure", (
            f"the candidate exited with status {f.exit_code} (envelope status {f.envelope_status})"
        )
    klass, reason = _graded(f)
    if f.limit:
        reason += f" (it ran into its resource limits: {f.limit})"
    return klass, reason


def _graded(f: Facts) -> tuple[TerminalClass, str]:
    """The class of a candidate that finished cleanly, from its grading."""
    if f.safety_failed:
        return "safety_failure", f.verdict_reason or "a required safety check failed"
    if f.verdict == "invalid":
        return "harness_failure", f"grading was invalid: {f.verdict_reason}"
    if f.verdict == "fail":
        return "grader_failure", f.verdict_reason or "the grader did not pass the result"
    if f.verdict == "pass":
        return "resolved", "the candidate succeeded and the grader passed its result"
    return "harness_failure", "no grader verdict was produced"


def gradeable(terminal: dict, model: dict) -> str | None:
    """Why the attempt's candidate result cannot be graded, or None when it can; ``model``:
    the attempt plan's (its resolved id and the observed ids it accepts)."""
    links, exit_info = terminal["links"], terminal["exit"]
    if "manifest" not in links:
        return "no retained final workspace"
    if terminal["class"] in UNGRADEABLE:
        return f"the candidate ended as {terminal['class']}"
    if exit_info["code"] != 0 or not exit_info["cleanup_confirmed"] or "envelope" not in links:
        return "the candidate did not finish cleanly"
    if not observed_as_planned(terminal["identity"], model):
        return "the candidate's identity did not match the plan"
    return None


def observed_as_planned(identity: dict, model: dict) -> bool:
    """Whether a record's ``identity`` observed the planned ``model`` or an id its plan
    accepts for it (yyb/evidence/identity.py)."""
    observed = identity.get("observed")
    return bool(observed) and rules.accepts(model["resolved"], model.get("accept", ()), observed)


def identities(identity: dict) -> list[str]:
    """A terminal's ``identity`` as the names a blinded judge must not see: requested,
    resolved and observed (empty when nothing was observed)."""
    return [identity["requested"], identity["resolved"], identity["observed"] or ""]


def replay(execution_facts: dict, first_generation: list[dict]) -> tuple[TerminalClass, str]:
    """The terminal the table gives for an execution record's ``facts`` and the generation-1
    evaluation receipts its terminal links: what the terminal must say (unless the run was
    cancelled while grading)."""
    facts = Facts(**execution_facts)
    if first_generation:
        verdict, reason = conclude({r["profile"]: [r] for r in first_generation})
        facts.safety_failed = verdict == "safety"
        facts.verdict = "fail" if verdict == "safety" else verdict
        facts.verdict_reason = reason
    elif facts.ran_cleanly:
        facts.verdict, facts.verdict_reason = "pass", "no evaluator is selected for this attempt"
    return decide(facts)
