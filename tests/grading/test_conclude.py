"""The verdict over every generation of the required evaluators, and the terminal it makes."""

from __future__ import annotations

import pytest

from yyb.evidence.terminal import Facts, decide
from yyb.evidence.verdict import conclude


def ev(
    verdict: str,
    generation: int = 1,
    kind: str = "command",
    purpose: str = "correctness",
    required: bool = True,
) -> dict:
    return {
        "kind": kind,
        "purpose": purpose,
        "verdict": verdict,
        "generation": generation,
        "required": required,
    }


def gens(kind: str, purpose: str, *verdicts: str, required: bool = True) -> list[dict]:
    return [ev(v, i + 1, kind, purpose, required) for i, v in enumerate(verdicts)]


CASES = {
    "every required evaluator passed": (
        {
            "tests": gens("command", "correctness", "pass"),
            "judge": gens("llm_judge", "quality", "pass"),
        },
        "pass",
    ),
    "a required test failed, the judge passed": (
        {
            "tests": gens("command", "correctness", "fail"),
            "judge": gens("llm_judge", "quality", "pass"),
        },
        "fail",
    ),
    "a required correctness failure stays authoritative over later passes": (
        {"tests": gens("command", "correctness", "fail", "pass", "pass")},
        "fail",
    ),
    "a required correctness failure beats a newer invalid generation": (
        {"tests": gens("command", "correctness", "fail", "invalid")},
        "fail",
    ),
    "a required safety failure is a safety verdict": (
        {
            "safety": gens("command", "safety", "fail", "pass"),
            "tests": gens("command", "correctness", "pass"),
        },
        "safety",
    ),
    "a judge correctness failure is not authoritative once rejudged": (
        {
            "tests": gens("command", "correctness", "pass"),
            "judge": gens("llm_judge", "correctness", "fail", "pass"),
        },
        "pass",
    ),
    "a quality command failure is not authoritative once regraded": (
        {
            "style": gens("command", "quality", "fail", "pass"),
            "tests": gens("command", "correctness", "pass"),
        },
        "pass",
    ),
    "an invalid newest generation is invalid": (
        {"tests": gens("command", "correctness", "pass", "invalid")},
        "invalid",
    ),
    "an invalid generation regraded to a pass passes": (
        {"tests": gens("command", "correctness", "invalid", "pass")},
        "pass",
    ),
    "an invalid required judge makes a passing test invalid": (
        {
            "tests": gens("command", "correctness", "pass"),
            "judge": gens("llm_judge", "quality", "invalid"),
        },
        "invalid",
    ),
    "invalid outranks a non-authoritative failure": (
        {
            "tests": gens("command", "correctness", "invalid"),
            "judge": gens("llm_judge", "quality", "fail"),
        },
        "invalid",
    ),
    "a required judge failure fails": (
        {
            "tests": gens("command", "correctness", "pass"),
            "judge": gens("llm_judge", "quality", "fail"),
        },
        "fail",
    ),
    "optional evaluators do not decide": (
        {
            "tests": gens("command", "correctness", "pass"),
            "lint": gens("command", "correctness", "fail", required=False),
            "judge": gens("llm_judge", "quality", "invalid", required=False),
        },
        "pass",
    ),
    "nothing required is invalid": (
        {"judge": gens("llm_judge", "quality", "pass", required=False)},
        "invalid",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_conclude(case):
    histories, expected = CASES[case]
    verdict, reason = conclude(histories)
    assert verdict == expected, reason
    assert reason


def test_an_authoritative_failure_names_its_profile_and_generation():
    verdict, reason = conclude({"tests": gens("command", "correctness", "pass", "fail", "pass")})
    assert verdict == "fail"
    assert reason == "tests generation 2 failed a required correctness check"


@pytest.mark.parametrize(
    ("verdict", "terminal"),
    [
        ("pass", "resolved"),
        ("fail", "grader_failure"),
        ("invalid", "harness_failure"),
        (None, "harness_failure"),
    ],
)
def test_a_clean_candidates_terminal_follows_its_verdict(verdict, terminal):
    facts = Facts(exit_code=0, envelope_status="succeeded", verdict=verdict, verdict_reason="r")
    assert decide(facts)[0] == terminal


def test_a_safety_verdict_is_a_safety_failure():
    facts = Facts(exit_code=0, envelope_status="succeeded", verdict="fail", safety_failed=True)
    assert decide(facts)[0] == "safety_failure"


def test_a_candidate_that_failed_is_not_resolved_by_a_passing_grader():
    facts = Facts(exit_code=1, envelope_status="failed", verdict="pass")
    assert decide(facts)[0] == "model_failure"
