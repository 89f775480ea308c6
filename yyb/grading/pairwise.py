"""Pairwise judging: an attempt against its partner, the baseline model's attempt.

A ``pairwise`` judge profile names a ``baseline`` model of the plan. The partner of an
attempt is the baseline's attempt on the same case with the same attempt number, in the same
plan; it must have a terminal that was graded (not a harness, environment, case or
cancellation failure). Each repetition shows the judge both candidates' evidence under
``# Candidate A`` and ``# Candidate B``, the judged attempt's side drawn from a seed derived
from the plan, attempt, profile, generation and repetition (so it can be derived again and is
retained), both sides blinded. The judge answers which is better, or a tie; each repetition
is a win, tie or loss for the judged attempt, and the evaluation's outcome is the side with
more repetitions (equal: a tie). Its verdict is ``pass`` for a win and ``fail`` for a tie or a
loss (the judged attempt was not preferred); ``details.pairwise`` keeps the outcome, the
partner, and each repetition's seed, side and answer.
"""

from __future__ import annotations

import hashlib

from yyb.errors import UnsafeListing
from yyb.grading import judge
from yyb.grading.outcome import Outcome

# Classes whose attempt has nothing a judge could compare (no candidate work was graded).
NO_PAIR = ("harness_failure", "environment_failure", "invalid_case", "cancelled")


def side(seed: str, repetition: int) -> tuple[str, str]:
    """(the repetition's seed, the side the judged attempt is shown on: A or B)."""
    digest = hashlib.sha256(f"{seed}/{repetition}".encode()).hexdigest()
    return digest, "A" if int(digest[:2], 16) % 2 == 0 else "B"


def run(
    store,
    spec: dict,
    harness: dict,
    truth: dict,
    partner: dict,
    prompt: bytes,
    identities: list[str],
    seed: str,
    protected: list[str],
    cancel=None,
    read_only: list[str] = (),
    secrets: dict[str, str] | None = None,
) -> Outcome:
    """Judge ``truth`` against ``partner`` (``{"attempt", "model", "truth", "identities"}``)."""
    _, _, problem = judge.pins(spec)
    if problem is not None:
        return Outcome.invalid(problem)
    limit = spec.get("byte_limit", judge.DEFAULT_LIMIT)
    everyone = [*identities, *partner["identities"]]
    payloads, draws = [], []
    for repetition in range(spec.get("repetitions", 1)):
        digest, ours = side(seed, repetition)
        first, second = (truth, partner["truth"]) if ours == "A" else (partner["truth"], truth)
        try:
            parts = [
                *judge.header_parts(spec, prompt),
                b"\n# Candidate A\n",
                *judge.evidence_parts(store, spec, first, "Candidate A"),
                b"\n# Candidate B\n",
                *judge.evidence_parts(store, spec, second, "Candidate B"),
            ]
        except UnsafeListing as exc:
            return Outcome.invalid(f"a workspace cannot be shown to the judge: {exc}")
        payloads.append(judge.truncate(b"".join(parts), limit))
        draws.append({"seed": digest, "side": ours})
    outcome = Outcome(
        input_bytes=b"".join(
            f"# Repetition {n + 1}\n".encode() + payload for n, payload in enumerate(payloads)
        )
    )
    for payload in payloads:  # both sides are blinded, whatever the profile says
        hit = judge.privacy_hit(payload, everyone)
        if hit is not None:
            return outcome.with_verdict(
                "invalid",
                f"privacy failure: the blinded payload names a candidate ({hit!r}); "
                "the judge was not run",
            )
    answers, problem = judge.repeat(
        outcome, spec, harness, payloads, protected, cancel, read_only, secrets
    )
    if problem is not None:
        return outcome.with_verdict("invalid", problem)
    tally = {"win": 0, "tie": 0, "loss": 0}
    for draw, answer in zip(draws, answers, strict=True):
        winner = answer["verdict"]
        draw["winner"] = winner
        draw["result"] = "tie" if winner == "tie" else "win" if winner == draw["side"] else "loss"
        tally[draw["result"]] += 1
    result = (
        "win" if tally["win"] > tally["loss"] else "loss" if tally["loss"] > tally["win"] else "tie"
    )
    outcome.details = {
        "mode": "pairwise",
        "pairwise": {
            "baseline": partner["model"],
            "partner": partner["attempt"],
            "outcome": result,
            "repetitions": draws,
        },
        "identities": [a["identity"] for a in answers],
    }
    return outcome.with_verdict(
        "pass" if result == "win" else "fail",
        f"against the baseline {partner['model']}: {result} "
        f"({tally['win']} win, {tally['tie']} tie, {tally['loss']} loss)",
    )
