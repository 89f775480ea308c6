"""Who could have caused an invalid attempt: the candidate, or the infrastructure around it.

An invalid attempt is left out of the valid resolved rate, so a candidate that can make its
own failures invalid can raise that rate: by breaking its execution envelope (the harness is
part of the candidate), or by making the grader its code runs in end without a verdict. Such
invalidity is the candidate's; every other kind (an environment or case that could not be
prepared, processes that could not be confirmed ended, a run cancelled, an evaluator that
could not start, a judge that gave no answer) is the infrastructure's. The cause is decided
from recorded facts only (the execution record's facts, the evaluation receipts), never from
reason strings, and from records the report's gate reads anyway. docs/reports.md states the
rule for auditors.
"""

from __future__ import annotations

from yyb.evidence.records import DETERMINISTIC, EvaluationProblem, InvalidityCause

# Problems of a deterministic evaluator (command or tests) that the code under test, running
# inside it, can bring about: it can hang it past its timeout, kill it, or overwrite or delete
# its output. (The tests kind turns these into a fail; a command evaluator's stay invalid.)
CANDIDATE_PROBLEMS: tuple[EvaluationProblem, ...] = ("timed_out", "no_verdict")


def of_terminal(terminal_class: str, execution_facts: dict | None) -> InvalidityCause:
    """The cause of an attempt made invalid by its terminal class.

    ``candidate`` for a ``harness_failure`` decided by its envelope (row 7 of the terminal
    table in docs/attempts.md: missing, malformed, or not the planned identity): its
    ``envelope_problem`` is set and cleanup was confirmed (else row 4 decided, which is the
    infrastructure's). ``infrastructure`` for everything else, including an attempt with no
    execution record (``execution_facts`` None: closed before its candidate ran).
    """
    if terminal_class != "harness_failure" or execution_facts is None:
        return "infrastructure"
    if execution_facts.get("envelope_problem") and execution_facts.get("cleanup_confirmed"):
        return "candidate"
    return "infrastructure"


def of_evaluation(receipt: dict) -> InvalidityCause:
    """The cause of one invalid evaluation: ``candidate`` when its receipt records a
    deterministic evaluator (which runs the candidate's code) that timed out or gave no
    verdict; else
    ``infrastructure`` (a judge, an evaluator that could not start or was interrupted, and a
    receipt that records no problem, as those written before it was recorded)."""
    if receipt["kind"] in DETERMINISTIC and receipt.get("problem") in CANDIDATE_PROBLEMS:
        return "candidate"
    return "infrastructure"


def of_verdict(histories: dict[str, list[dict]]) -> InvalidityCause:
    """The cause of an invalid current verdict (``yyb.evidence.verdict.conclude``) from every
    generation of the attempt's evaluations (profile -> receipts, oldest first).

    The verdict is invalid because the newest required receipt of some profile is (or because
    no evaluation is required: the infrastructure's). It is the candidate's when any of those
    invalid receipts is: a candidate that could have caused it gains by it.
    """
    for _, records in sorted(histories.items()):
        required = [r for r in records if r.get("required", True)]
        if required and required[-1]["verdict"] == "invalid":
            if of_evaluation(required[-1]) == "candidate":
                return "candidate"
    return "infrastructure"
