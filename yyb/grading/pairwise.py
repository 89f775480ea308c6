"""Pairwise judging: an attempt against its partner, the baseline model's attempt.

A ``pairwise`` judge profile names a ``baseline`` model of the plan. The partner of an
attempt is the baseline's attempt on the same case with the same attempt number, in the same
plan; it must have a terminal that was graded (not a harness, environment, case or
cancellation failure). Each repetition shows the judge both candidates' evidence under
``# Candidate A`` and ``# Candidate B`` twice, once in each order, so position cannot decide
it: the order shown first is drawn from a seed derived from the plan, attempt, profile,
generation and repetition (so it can be derived again and is retained), the second is its
mirror, and both sides are blinded. The judge answers which is better, or a tie; each
judgement is worth 2 half-points to the judged attempt for a win, 1 for a tie and 0 for a
loss, and the evaluation's outcome is a win when the judged attempt has more than half of
all the half-points, a loss when it has fewer, else a tie. A repetition is position-consistent
when both orders give the judged attempt the same result; a judge that prefers a position
(always "A") is consistent in none. Its verdict is ``pass`` for a win and ``fail`` for a tie
or a loss (the judged attempt was not preferred); ``details.pairwise`` keeps the outcome, the
partner, the half-points, the consistent repetitions and each repetition's seed and orders.
"""

from __future__ import annotations

import hashlib

from yyb.errors import UnsafeListing
from yyb.evidence.records import PAIRWISE_BOTH_ORDERS
from yyb.grading import judge
from yyb.grading.invocation import Invocation
from yyb.grading.outcome import Outcome

# Classes whose attempt has nothing a judge could compare (no candidate work was graded).
NO_PAIR = ("harness_failure", "environment_failure", "invalid_case", "cancelled")


def side(seed: str, repetition: int) -> tuple[str, str]:
    """(the repetition's seed, the side the judged attempt is shown on first: A or B)."""
    digest = hashlib.sha256(f"{seed}/{repetition}".encode()).hexdigest()
    return digest, "A" if int(digest[:2], 16) % 2 == 0 else "B"


# What one judgement is worth to the judged attempt, in half-points: a tie is half a win.
HALF_POINTS = {"win": 2, "tie": 1, "loss": 0}


def orders(seed: str, repetition: int) -> tuple[str, tuple[str, str]]:
    """(the repetition's seed, the sides the judged attempt is shown on: the drawn one, then
    its mirror)."""
    digest, first = side(seed, repetition)
    return digest, (first, "B" if first == "A" else "A")


def run(
    store,
    call: Invocation,
    truth: dict,
    partner: dict,
    prompt: bytes,
    identities: list[str],
    seed: str,
) -> Outcome:
    """Judge ``truth`` against ``partner`` (``{"attempt", "model", "truth", "identities"}``)
    with the pairwise judge ``call.spec``, each repetition's sides drawn from ``seed``."""
    spec = call.spec
    _, _, problem = judge.pins(spec)
    if problem is not None:
        return Outcome.invalid(problem)
    repetitions = [orders(seed, n) for n in range(spec.get("repetitions", 1))]
    try:
        payloads = [
            _payload(store, spec, prompt, truth, partner["truth"], ours)
            for _, sides in repetitions
            for ours in sides
        ]
    except UnsafeListing as exc:
        return Outcome.invalid(f"a workspace cannot be shown to the judge: {exc}")
    outcome = Outcome(
        input_bytes=b"".join(
            f"# Repetition {n // 2 + 1}, order {n % 2 + 1}\n".encode() + payload
            for n, payload in enumerate(payloads)
        )
    )
    everyone = [*identities, *partner["identities"]]
    for payload in payloads:  # both sides are blinded, whatever the profile says
        hit = judge.privacy_hit(payload, everyone)
        if hit is not None:
            return outcome.with_verdict(
                "invalid",
                f"privacy failure: the blinded payload names a candidate ({hit!r}); "
                "the judge was not run",
            )
    answers, problem = judge.repeat(outcome, call, payloads)
    if problem is not None:
        return outcome.with_verdict("invalid", problem)
    return _scored(outcome, partner, repetitions, answers)


def _payload(store, spec: dict, prompt: bytes, truth: dict, theirs: dict, ours: str) -> bytes:
    """The payload with the judged attempt's evidence on side ``ours`` (A or B)."""
    first, second = (truth, theirs) if ours == "A" else (theirs, truth)
    parts = [
        *judge.header_parts(spec, prompt),
        b"\n# Candidate A\n",
        *judge.evidence_parts(store, spec, first, "Candidate A"),
        b"\n# Candidate B\n",
        *judge.evidence_parts(store, spec, second, "Candidate B"),
    ]
    return judge.truncate(b"".join(parts), spec.get("byte_limit", judge.DEFAULT_LIMIT))


def _scored(outcome: Outcome, partner: dict, repetitions: list, answers: list[dict]) -> Outcome:
    """``outcome`` with the verdict and details of the answers, two to a repetition."""
    tally = {"win": 0, "tie": 0, "loss": 0}
    draws, consistent = [], 0
    for n, (digest, sides) in enumerate(repetitions):
        shown = []
        for ours, answer in zip(sides, answers[2 * n : 2 * n + 2], strict=True):
            winner = answer["verdict"]
            got = "tie" if winner == "tie" else "win" if winner == ours else "loss"
            tally[got] += 1
            shown.append({"side": ours, "winner": winner, "result": got})
        agreed = shown[0]["result"] == shown[1]["result"]
        consistent += agreed
        draws.append({"seed": digest, "orders": shown, "consistent": agreed})
    points = sum(HALF_POINTS[got] * count for got, count in tally.items())
    half = len(answers)  # half of all the half-points (2 per judgement)
    result = "win" if points > half else "loss" if points < half else "tie"
    outcome.details = {
        "mode": "pairwise",
        "pairwise": {
            "baseline": partner["model"],
            "partner": partner["attempt"],
            "outcome": result,
            "design": PAIRWISE_BOTH_ORDERS,
            "half_points": points,
            "of_half_points": 2 * len(answers),
            "consistent_repetitions": consistent,
            "repetitions": draws,
        },
        "identities": [a["identity"] for a in answers],
    }
    return outcome.with_verdict(
        "pass" if result == "win" else "fail",
        f"against the baseline {partner['model']}: {result} ({tally['win']} win, "
        f"{tally['tie']} tie, {tally['loss']} loss in {len(answers)} judgements, each "
        f"repetition in both orders; {consistent} of {len(repetitions)} repetitions "
        "position-consistent)",
    )
