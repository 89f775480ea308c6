"""Evaluations: four artifacts per graded attempt, appended as generations, never rewritten.

One evaluation stores the exact grader input (blob), the exact grader output (blob), the typed
result (``yylo_benchmark_evaluation_result.v2``) and a receipt
(``yylo_benchmark_evaluation.v2``) linking them with the evaluator's identity, the hash of its
bytes, its version, the generation and the measured time. The receipt of generation N links
generation N-1 as ``previous``; ``refs/runs/<plan>/<attempt>/evaluations/<profile>`` points at
the newest, moved only by compare-and-swap from the one before it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from yyb.errors import RefMismatch, UsageError, YybError
from yyb.grading import command, judge
from yyb.grading.outcome import Outcome
from yyb.store import codec

EVALUATION = "yylo_benchmark_evaluation.v2"
RESULT = "yylo_benchmark_evaluation_result.v2"
AUTHORITATIVE = ("correctness", "safety")


class GenerationError(YybError):
    """An evaluation that is not exactly the next generation (a replay, or a skip)."""

    def __init__(self, profile: str, attempt: str, asked: int, expected: int):
        super().__init__(
            f"evaluation {profile} of attempt {attempt[:12]}: generation {asked} "
            f"refused; the next generation is {expected}"
        )
        self.asked = asked
        self.expected = expected


def identities(identity: dict) -> list[str]:
    """A terminal's ``identity`` as the names a blinded judge must not see: requested,
    resolved and observed (empty when nothing was observed)."""
    return [identity["requested"], identity["resolved"], identity["observed"] or ""]


def eval_ref(plan_oid: str, attempt_oid: str, profile: str) -> str:
    return f"refs/runs/{plan_oid}/{attempt_oid}/evaluations/{profile}"


def history(store, plan_oid: str, attempt_oid: str, profile: str) -> list[tuple[str, dict]]:
    """Every generation of ``profile`` for the attempt, oldest first, each verified."""
    out = []
    oid = store.refs.read(eval_ref(plan_oid, attempt_oid, profile))
    while oid is not None:
        record = store.objects.get_record(oid)
        out.append((oid, record))
        oid = record["links"].get("previous")
    return list(reversed(out))


def profile_spec(plan: dict, profile: str) -> dict:
    catalog = plan["evaluators"]["catalog"]
    if profile not in catalog:
        raise UsageError(
            f"evaluator profile {profile!r} is not in the plan's evaluator catalog "
            f"({', '.join(sorted(catalog)) or 'empty'})"
        )
    return catalog[profile]


def bytes_hash(spec: dict) -> str:
    """What pins an evaluator's behaviour: its executable's sha256, or a judge's bound config."""
    if spec.get("kind") == "command":
        return spec["sha256"]
    return hashlib.sha256(codec.encode({"spec": spec})).hexdigest()


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
) -> Outcome:
    if spec.get("kind") == "command":
        grader_input = {
            "schema_version": command.INPUT,
            "profile": profile,
            "grader_id": spec["grader_id"],
            "version": spec["version"],
            "generation": generation,
            "case_id": attempt.get("case_id"),
        }
        return command.run(store, spec, truth.listing, truth.patch, grader_input, protected, cancel)
    harnesses = plan["evaluators"].get("harnesses", {})
    harness = harnesses.get(spec.get("harness"))
    if harness is None:
        return Outcome.invalid(
            f"the judge harness {spec.get('harness')!r} is not bound in the plan"
        )
    truth_links = {
        "patch": truth.patch,
        "manifest": truth.manifest,
        "listing": truth.listing,
        "stdout": truth.stdout,
        "stderr": truth.stderr,
    }
    missing = [n for n in harness.get("secrets", []) if n not in (environ or {})]
    if missing:
        return Outcome.invalid(f"the judge harness needs the secret {missing[0]}, which is not set")
    secrets = {name: (environ or {})[name] for name in harness.get("secrets", [])}
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
) -> tuple[str, dict]:
    """Run ``profile`` on the attempt's retained truth and append it as the next generation.

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
        "schema_version": RESULT,
        "verdict": outcome.verdict,
        "quality": {"pass": "pass", "fail": "fail"}.get(outcome.verdict, "unknown"),
        "reason": outcome.reason[:4096],
        "exit_code": outcome.exit_code,
        "details": codec.from_json(_json(outcome.details)),
    }
    links["result"] = store.objects.put_record(result)
    if previous:
        links["previous"] = previous[-1][0]
    receipt = {
        "schema_version": EVALUATION,
        "plan": plan_oid,
        "attempt": attempt_oid,
        "profile": profile,
        "kind": spec["kind"],
        "generation": generation,
        "evaluator": {
            "id": spec.get("grader_id", profile),
            "version": spec["version"],
            "bytes_sha256": bytes_hash(spec),
            "model": spec.get("model"),
        },
        "required": spec.get("required", True),
        "purpose": spec.get("purpose", "correctness"),
        "verdict": outcome.verdict,
        "wall_ms": outcome.wall_ms,
        "judge_cost": outcome.judge_cost,
        "links": links,
    }
    oid = store.objects.put_record(receipt)
    old = previous[-1][0] if previous else None
    try:
        store.refs.update(
            eval_ref(plan_oid, attempt_oid, profile),
            oid,
            old=old,
            reason=f"evaluation {profile} generation {generation}",
        )
    except RefMismatch:
        raise GenerationError(profile, attempt_oid, generation, expected + 1) from None
    # Signed evidence (issue 8): sign the receipt when a signing key is configured.
    from yyb import signing

    signing.sign_if_configured(store, oid)
    return oid, receipt


def _json(value) -> str:
    import json

    return json.dumps(value, sort_keys=True, default=str)


def conclude(histories: dict[str, list[dict]]) -> tuple[str, str]:
    """The current verdict of an attempt from every generation of its required evaluators.

    Returns (``pass`` | ``fail`` | ``invalid`` | ``safety``, reason). A required deterministic
    correctness or safety failure in any generation stays authoritative: later passes, and
    judge prose, never override it.
    """
    latest = {}
    for profile, records in sorted(histories.items()):
        required = [r for r in records if r.get("required", True)]
        if not required:
            continue
        for record in required:
            if (
                record["kind"] == "command"
                and record["purpose"] in AUTHORITATIVE
                and record["verdict"] == "fail"
            ):
                kind = "safety" if record["purpose"] == "safety" else "fail"
                return kind, (
                    f"{profile} generation {record['generation']} failed a required "
                    f"{record['purpose']} check"
                )
        latest[profile] = required[-1]
    if not latest:
        return "invalid", "no required evaluation"
    for profile, record in latest.items():
        if record["verdict"] == "invalid":
            return "invalid", f"{profile} generation {record['generation']} is invalid"
    for profile, record in latest.items():
        if record["verdict"] == "fail":
            return "fail", f"{profile} generation {record['generation']} failed"
    return "pass", "every required evaluator passed"
