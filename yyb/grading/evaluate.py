"""Evaluations: four artifacts per graded attempt, appended as generations, never rewritten.

One evaluation stores the exact grader input (blob), the exact grader output (blob), the typed
result (``yylo_benchmark_evaluation_result.v2``) and a receipt
(``yylo_benchmark_evaluation.v2``) linking them with the evaluator's identity, the hash of its
bytes, its version, the generation and the measured time. The receipt of generation N links
generation N-1 as ``previous``; ``refs/runs/<plan>/<attempt>/evaluations/<profile>`` points at
the newest, moved only by compare-and-swap from the one before it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from yyb.errors import RefMismatch, UsageError, YybError
from yyb.evidence import names
from yyb.evidence import plan as planned
from yyb.evidence.chain import history
from yyb.evidence.records import EVALUATION, EVALUATION_RESULT, JUDGE_INTENT
from yyb.grading import command, judge, pairwise, testsuite
from yyb.grading.outcome import Outcome
from yyb.store.objects import codec


class GenerationError(YybError):
    """An evaluation that is not exactly the next generation (a replay, or a skip)."""

    def __init__(self, profile: str, attempt: str, asked: int, expected: int):
        super().__init__(
            f"evaluation {profile} of attempt {attempt[:12]}: generation {asked} "
            f"refused; the next generation is {expected}"
        )
        self.asked = asked
        self.expected = expected


def profile_spec(plan: dict, profile: str) -> dict:
    catalog = plan["evaluators"]["catalog"]
    if profile not in catalog:
        raise UsageError(
            f"evaluator profile {profile!r} is not in the plan's evaluator catalog "
            f"({', '.join(sorted(catalog)) or 'empty'})"
        )
    return catalog[profile]


@dataclass
class Truth:
    """The retained candidate result an evaluation judges (from the terminal's links)."""

    manifest: str
    listing: str
    patch: str | None
    stdout: str | None
    stderr: str | None
    prompt: bytes
    evidence: str | None = None
    receipt: str | None = None  # the workspace receipt (whose listing is the base's)

    def links(self) -> dict[str, str | None]:
        """What a judge's payload is built from (judge.evidence_parts)."""
        return {
            "patch": self.patch,
            "manifest": self.manifest,
            "listing": self.listing,
            "stdout": self.stdout,
            "stderr": self.stderr,
        }

    def base_listing(self, store) -> str | None:
        """The oid of the listing of the workspace the candidate started from."""
        if self.receipt is None:
            return None
        return store.objects.get_record(self.receipt)["links"].get("listing")

    @classmethod
    def of(cls, store, terminal: dict, evidence: str | None = None) -> Truth:
        links = terminal["links"]
        post = store.objects.get_record(links["manifest"])
        attempt = store.objects.get_record(links["attempt"])
        prompt = b""
        if attempt.get("links", {}).get("case"):
            case = store.objects.get_record(attempt["links"]["case"])
            prompt = store.objects.get(case["links"]["prompt"]).body
        return cls(
            links["manifest"],
            post["links"]["listing"],
            links.get("patch"),
            links.get("stdout"),
            links.get("stderr"),
            prompt,
            evidence,
            post["links"].get("receipt"),
        )


def run_evaluator(
    store,
    plan: dict,
    spec: dict,
    profile: str,
    truth: Truth,
    attempt: dict,
    identities: list[str],
    generation: int,
    protected: list[str],
    cancel=None,
    environ: dict | None = None,
    place: tuple[str, str] | None = None,
) -> Outcome:
    """One evaluation's outcome; ``place`` is (plan oid, attempt oid), which a pairwise judge
    needs to find the attempt's partner."""
    if spec.get("kind") == "tests":
        case_oid = attempt.get("links", {}).get("case")
        header = {
            "profile": profile,
            "grader_id": spec["grader_id"],
            "version": spec["version"],
            "generation": generation,
            "case_id": attempt.get("case_id"),
        }
        return testsuite.run(
            store,
            spec,
            store.objects.get_record(case_oid) if case_oid else None,
            truth.listing,
            truth.base_listing(store),
            protected,
            header,
            cancel,
            read_only=plan["tool_policy"]["read_only_paths"],
        )
    if spec.get("kind") == "command":
        grader_input = {
            "schema_version": command.INPUT,
            "profile": profile,
            "grader_id": spec["grader_id"],
            "version": spec["version"],
            "generation": generation,
            "case_id": attempt.get("case_id"),
        }
        return command.run(
            store,
            spec,
            truth.listing,
            truth.patch,
            grader_input,
            protected,
            cancel,
            read_only=plan["tool_policy"]["read_only_paths"],
            base_listing=truth.base_listing(store),
        )
    harnesses = plan["evaluators"].get("harnesses", {})
    harness = harnesses.get(spec.get("harness"))
    if harness is None:
        return Outcome.invalid(
            f"the judge harness {spec.get('harness')!r} is not bound in the plan"
        )
    truth_links = truth.links()
    missing = [n for n in harness.get("secrets", []) if n not in (environ or {})]
    if missing:
        return Outcome.invalid(f"the judge harness needs the secret {missing[0]}, which is not set")
    secrets = {name: (environ or {})[name] for name in harness.get("secrets", [])}
    if spec.get("mode") == "pairwise":
        partner, problem = _partner(store, plan, place, attempt, spec)
        if problem is not None:
            return Outcome.invalid(problem)
        return pairwise.run(
            store,
            spec,
            harness,
            truth_links,
            partner,
            truth.prompt,
            identities,
            "/".join([*place, profile, str(generation)]),
            protected,
            cancel,
            read_only=plan["tool_policy"]["read_only_paths"],
            secrets=secrets,
        )
    return judge.run(
        store,
        spec,
        harness,
        truth_links,
        truth.prompt,
        identities,
        protected,
        cancel,
        read_only=plan["tool_policy"]["read_only_paths"],
        secrets=secrets,
    )


def evaluate(
    store,
    plan_oid: str,
    plan: dict,
    attempt_oid: str,
    attempt: dict,
    profile: str,
    truth: Truth,
    identities: list[str],
    protected: list[str],
    generation: int | None = None,
    cancel=None,
    environ: dict | None = None,
    signer=None,
) -> tuple[str, dict]:
    """Run ``profile`` on the attempt's retained truth and append it as the next generation,
    signed with ``signer`` (when given) before its ref moves.

    A receipt of exactly that generation whose publishing a crash cut short (found pending on
    the evaluation ref) is published instead: the evaluator never runs twice for one
    generation.

    Raises:
        UsageError: the profile is not in the plan's catalog.
        GenerationError: ``generation`` is given and is not exactly the next one.
    """
    spec = profile_spec(plan, profile)
    previous = history(store, plan_oid, attempt_oid, profile)
    expected = previous[-1][1]["generation"] + 1 if previous else 1
    if generation is None:
        generation = expected
    if generation != expected:
        raise GenerationError(profile, attempt_oid, generation, expected)
    ref = names.evaluation(plan_oid, attempt_oid, profile)
    old = previous[-1][0] if previous else None
    pending = _pending(store, ref, old, (plan_oid, attempt_oid, profile, generation))
    if pending is not None:  # graded before a crash cut its publishing short: never again
        _publish(store, ref, old, *pending, signer)
        return pending
    if spec["kind"] == "llm_judge" and not _judge_intent(
        store, plan_oid, attempt_oid, profile, generation
    ):
        outcome = Outcome(
            "invalid",
            f"a judge was dispatched for generation {generation} before an interruption; it "
            "is not dispatched again (a judge may be paid): its answer, if any, is lost",
            problem="interrupted",
        )
    else:
        outcome = run_evaluator(
            store,
            plan,
            spec,
            profile,
            truth,
            attempt,
            identities,
            generation,
            protected,
            cancel,
            environ,
            (plan_oid, attempt_oid),
        )
    links = {
        "plan": plan_oid,
        "attempt": attempt_oid,
        "manifest": truth.manifest,
        "input": store.objects.put("blob", outcome.input_bytes),
    }
    if truth.evidence:
        links["evidence"] = truth.evidence
    if outcome.output_bytes is not None:
        links["output"] = store.objects.put("blob", outcome.output_bytes)
    if outcome.log:
        links["log"] = store.objects.put("blob", outcome.log)
    result = {
        "schema_version": EVALUATION_RESULT,
        "verdict": outcome.verdict,
        "quality": {"pass": "pass", "fail": "fail"}.get(outcome.verdict, "unknown"),
        "reason": outcome.reason[:4096],
        "exit_code": outcome.exit_code,
        "details": codec.from_json(_json(outcome.details)),
    }
    if outcome.signal is not None:
        result["signal"] = outcome.signal
    links["result"] = store.objects.put_record(result)
    if old is not None:
        links["previous"] = old
    receipt = {
        "schema_version": EVALUATION,
        "plan": plan_oid,
        "attempt": attempt_oid,
        "profile": profile,
        "kind": spec["kind"],
        "generation": generation,
        "evaluator": planned.evaluator(spec, profile),
        "required": spec.get("required", True),
        "purpose": spec.get("purpose", "correctness"),
        "verdict": outcome.verdict,
        "wall_ms": outcome.wall_ms,
        "judge_cost": outcome.judge_cost,
        "links": links,
    }
    if outcome.verdict == "invalid" and outcome.problem is not None:
        receipt["problem"] = outcome.problem
    if outcome.protected is not None:
        receipt["protected"] = outcome.protected["touched"]
        links["graded_listing"] = outcome.protected["listing"]
    oid = store.objects.put_record(receipt)
    _publish(store, ref, old, oid, receipt, signer)
    return oid, receipt


def _partner(store, plan: dict, place, attempt: dict, spec: dict) -> tuple[dict | None, str | None]:
    """(the pairwise partner of ``attempt``: the baseline model's attempt on the same case with
    the same attempt number, with its retained truth and identities, None), or (None, why
    there is no pair)."""
    baseline = spec.get("baseline")
    if place is None or not baseline:
        return None, "a pairwise judge needs its baseline model and the attempt's plan"
    if attempt["model"]["resolved"] == baseline:
        return None, f"the baseline {baseline}'s own attempts are not judged against themselves"
    plan_oid, _ = place
    for oid in plan["links"]["attempts"]:
        other = store.objects.get_record(oid)
        if (other["model"]["resolved"], other.get("case_id"), other["attempt"]) != (
            baseline,
            attempt.get("case_id"),
            attempt["attempt"],
        ):
            continue
        terminal_oid = store.refs.read(names.attempt(plan_oid, oid, "terminal"))
        if terminal_oid is None:
            return None, (
                f"the baseline {baseline}'s attempt {oid} has no terminal yet: list the "
                "baseline first and run with --jobs 1, or rejudge this profile after the run"
            )
        terminal = store.objects.get_record(terminal_oid)
        if terminal["class"] in pairwise.NO_PAIR:
            return None, f"the baseline {baseline}'s attempt {oid} ended {terminal['class']}"
        theirs = Truth.of(store, terminal)
        identity = terminal["identity"]
        return {
            "attempt": oid,
            "model": baseline,
            "truth": theirs.links(),
            "identities": [identity["requested"], identity["resolved"], identity["observed"] or ""],
        }, None
    return None, (
        f"the plan has no attempt of the baseline {baseline} on this case with attempt "
        f"number {attempt['attempt']}"
    )


def _judge_intent(store, plan_oid: str, attempt_oid: str, profile: str, generation: int) -> bool:
    """Write the intent to dispatch the judge of ``profile`` for ``generation``, durably,
    before it is dispatched; False when one for that generation is already there (a crash cut
    that dispatch short: it is never made twice).

    Raises:
        GenerationError: another process wrote that intent first.
    """
    ref = names.judge_intent(plan_oid, attempt_oid, profile)
    held = store.refs.read(ref)
    if held is not None and store.objects.get_record(held).get("generation") == generation:
        return False
    links = {"plan": plan_oid, "attempt": attempt_oid}
    if held is not None:
        links["previous"] = held
    intent = {
        "schema_version": JUDGE_INTENT,
        "plan": plan_oid,
        "attempt": attempt_oid,
        "profile": profile,
        "generation": generation,
        "created_ms": time.time_ns() // 1_000_000,
        "links": links,
    }
    try:
        store.refs.update(
            ref, store.objects.put_record(intent), old=held, reason=f"judge {generation}"
        )
    except RefMismatch:
        raise GenerationError(profile, attempt_oid, generation, generation + 1) from None
    return True


def _pending(store, ref: str, old: str | None, place: tuple) -> tuple[str, dict] | None:
    """The receipt a cut-short update of ``ref`` was publishing, when it is exactly the
    next generation after ``old`` for ``place`` (plan, attempt, profile, generation)."""
    oid = store.refs.pending(ref)
    if oid is None or not store.objects.contains(oid):
        return None
    receipt = store.objects.get_record(oid)
    fields = ("plan", "attempt", "profile", "generation")
    if receipt.get("schema_version") != EVALUATION or tuple(map(receipt.get, fields)) != place:
        return None
    return (oid, receipt) if receipt.get("links", {}).get("previous") == old else None


def _publish(store, ref: str, old: str | None, oid: str, receipt: dict, signer) -> None:
    """Move ``ref`` from ``old`` to the receipt ``oid``, signed with ``signer`` (when given)
    once the move is on record and before the ref names it: a published receipt is signed,
    and a crash while signing leaves the move pending for the next evaluation to finish.

    Raises:
        GenerationError: another evaluation moved the ref first.
    """

    def seal() -> None:
        if signer is not None:
            from yyb import signing

            signing.sign(store, oid, signer)

    profile, generation = receipt["profile"], receipt["generation"]
    reason = f"evaluation {profile} generation {generation}"
    try:
        store.refs.update(ref, oid, old=old, reason=reason, before_move=seal)
    except RefMismatch:
        raise GenerationError(profile, receipt["attempt"], generation, generation + 1) from None


def _json(value) -> str:
    import json

    return json.dumps(value, sort_keys=True, default=str)
