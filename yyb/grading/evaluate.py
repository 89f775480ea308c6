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
from collections.abc import Mapping
from dataclasses import dataclass, replace

from yyb.errors import RefMismatch, UsageError, YybError
from yyb.evidence import environment, names
from yyb.evidence import plan as planned
from yyb.evidence.attempt import AttemptHandle, Held
from yyb.evidence.kinds.grading import (
    Evaluation,
    EvaluationEvaluator,
    EvaluationLinks,
    EvaluationResult,
    JudgeIntent,
    JudgeIntentLinks,
)
from yyb.evidence.record import ABSENT
from yyb.evidence.terminal import identities as terminal_identities
from yyb.grading import command, judge, pairwise, testsuite
from yyb.grading.invocation import Controls, Invocation
from yyb.grading.outcome import Outcome
from yyb.harness import overlay
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


# Each evaluator kind that grades on a workspace mounted over the base, and whether that
# workspace carries the base's Git repository (yyb/harness/overlay.py).
WORKSPACE_FORMS = {"tests": False, "command": True}


def warm_workspaces(store, plan: dict, case: dict | None, base_listing: str):
    """Begin building, in the background, the pristine bases that the first generation's
    evaluators of an attempt on ``case`` will mount their workspaces over (``base_listing``:
    the workspace the candidate starts from). A run calls this as the candidate starts: the
    build overlaps the candidate's run instead of adding to its grading. Returns the
    building thread, or None (no evaluator of those kinds, or no overlay here)."""
    # In the order the evaluations come (conclude grades in this order).
    profiles = planned.first_generation_profiles(plan, case)
    return overlay.warm(store, base_listing, _forms(plan, profiles))


def _forms(plan: dict, profiles) -> list[bool]:
    """The workspace forms (WORKSPACE_FORMS) the evaluators of ``profiles`` mount, in their
    order, each once."""
    kinds = [profile_spec(plan, p).get("kind") for p in profiles]
    return list(dict.fromkeys(WORKSPACE_FORMS[k] for k in kinds if k in WORKSPACE_FORMS))


def warm_profile(store, plan: dict, profile: str, handle: AttemptHandle):
    """``warm_workspaces`` for one evaluator over a retained attempt (``handle``, whose
    terminal and evidence are retained): begin building the pristine base ``profile`` will
    mount its workspace over, in the background. A regrade calls this for the attempt after
    the one it is evaluating. Returns the building thread, or None."""
    forms = _forms(plan, [profile])
    if not forms or handle.terminal is None:
        return None
    base = Truth.retained(store, handle).base_listing(store)
    return None if base is None else overlay.warm(store, base, forms)


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
    def of(
        cls, store, terminal: dict, evidence: str | None = None, attempt: dict | None = None
    ) -> Truth:
        """The truth a ``terminal`` retained (``attempt``: its attempt plan record, when the
        caller holds it already)."""
        links = terminal["links"]
        post = store.objects.get_record(links["manifest"])
        if attempt is None:
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

    @classmethod
    def retained(cls, store, handle: AttemptHandle) -> Truth:
        """The truth the handle's terminal retained, linked to its evidence."""
        evidence = handle.evidence.oid if handle.evidence is not None else None
        return cls.of(store, handle.terminal.record, evidence, handle.attempt)


def run_evaluator(
    store,
    handle: AttemptHandle,
    profile: str,
    truth: Truth,
    identities: list[str],
    generation: int,
    controls: Controls,
) -> Outcome:
    """One evaluation's outcome: ``profile`` of the handle's plan run on ``truth``."""
    plan, attempt = handle.plan, handle.attempt
    spec = profile_spec(plan, profile)
    call = Invocation(
        spec, controls.protected, plan["tool_policy"]["read_only_paths"], controls.cancel,
        gateway=controls.gateway if spec.get("kind") == "llm_judge" else None,
    )  # fmt: skip
    if spec.get("kind") in ("tests", "command"):
        header = {
            "profile": profile,
            "grader_id": spec["grader_id"],
            "version": spec["version"],
            "generation": generation,
            "case_id": attempt.get("case_id"),
        }
    case = None
    if spec.get("kind") in ("tests", "command") and attempt.get("links", {}).get("case"):
        case = store.objects.get_record(attempt["links"]["case"])
    if case is not None and case.get("environment"):
        try:
            call = replace(call, environment=environment.pinned_for(store, plan, case))
        except YybError as exc:
            return Outcome.invalid(f"the case's environment cannot be used: {exc}")
    if spec.get("kind") == "tests":
        return testsuite.run(store, call, case, truth.listing, truth.base_listing(store), header)
    if spec.get("kind") == "command":
        base_listing = truth.base_listing(store)
        return command.run(store, call, truth.listing, truth.patch, header, base_listing)
    seed = "/".join([handle.plan_oid, handle.oid, profile, str(generation)])
    return _judged(store, handle, call, truth, identities, seed, controls.environ)


def _judged(
    store,
    handle: AttemptHandle,
    call: Invocation,
    truth: Truth,
    identities: list[str],
    seed: str,
    environ: Mapping[str, str],
) -> Outcome:
    """The outcome of the judge ``call.spec`` (single or pairwise, drawn from ``seed``)
    through the harness the plan binds it to, with that harness's secrets from ``environ``."""
    spec = call.spec
    harness = handle.plan["evaluators"].get("harnesses", {}).get(spec.get("harness"))
    if harness is None:
        return Outcome.invalid(
            f"the judge harness {spec.get('harness')!r} is not bound in the plan"
        )
    missing = [n for n in harness.get("secrets", []) if n not in environ]
    if missing:
        return Outcome.invalid(f"the judge harness needs the secret {missing[0]}, which is not set")
    secrets = {name: environ[name] for name in harness.get("secrets", [])}
    call = replace(call, harness=harness, secrets=secrets)
    if spec.get("mode") == "pairwise":
        partner, problem = _partner(store, handle, spec)
        if problem is not None:
            return Outcome.invalid(problem)
        return pairwise.run(store, call, truth.links(), partner, truth.prompt, identities, seed)
    return judge.run(store, call, truth.links(), truth.prompt, identities)


def evaluate(
    store,
    handle: AttemptHandle,
    profile: str,
    truth: Truth,
    identities: list[str],
    controls: Controls,
    generation: int | None = None,
) -> Held:
    """Run ``profile`` on the attempt's retained truth and append it as the next generation
    after the handle's, signed with the controls' signer (when given) before its ref moves.

    A receipt of exactly that generation whose publishing a crash cut short (found pending on
    the evaluation ref) is published instead: the evaluator never runs twice for one
    generation.

    Returns:
        The receipt (oid, record); ``handle.with_generation`` makes it part of the chain.

    Raises:
        UsageError: the profile is not in the plan's catalog.
        GenerationError: ``generation`` is given and is not exactly the next one, or another
            evaluation took the next generation since the handle was read.
    """
    spec = profile_spec(handle.plan, profile)
    previous = handle.generations(profile)
    expected = handle.next_generation(profile)
    if generation is None:
        generation = expected
    if generation != expected:
        raise GenerationError(profile, handle.oid, generation, expected)
    ref = names.evaluation(handle.plan_oid, handle.oid, profile)
    old = previous[-1].oid if previous else None
    pending = _pending(store, ref, old, (handle.plan_oid, handle.oid, profile, generation))
    if pending is not None:  # graded before a crash cut its publishing short: never again
        _publish(store, ref, old, pending, controls.signer)
        return pending
    if spec["kind"] == "llm_judge" and not _judge_intent(store, handle, profile, generation):
        outcome = Outcome(
            "invalid",
            f"a judge was dispatched for generation {generation} before an interruption; it "
            "is not dispatched again (a judge may be paid): its answer, if any, is lost",
            problem="interrupted",
        )
    else:
        outcome = run_evaluator(store, handle, profile, truth, identities, generation, controls)
    links = _artifacts(store, handle, truth, outcome, old)
    protected = outcome.protected
    if protected is not None:
        links = replace(links, graded_listing=protected["listing"])
    invalid = outcome.verdict == "invalid" and outcome.problem is not None
    receipt = Evaluation(
        plan=handle.plan_oid,
        attempt=handle.oid,
        profile=profile,
        kind=spec["kind"],
        generation=generation,
        evaluator=EvaluationEvaluator.from_stored(planned.evaluator(spec, profile)),
        required=spec.get("required", True),
        purpose=spec.get("purpose", "correctness"),
        verdict=outcome.verdict,
        wall_ms=outcome.wall_ms,
        judge_cost=outcome.judge_cost,
        links=links,
        problem=outcome.problem if invalid else ABSENT,
        protected=tuple(protected["touched"]) if protected is not None else ABSENT,
    ).to_value()
    held = Held(store.objects.put_record(receipt), receipt)
    _publish(store, ref, old, held, controls.signer)
    return held


def _artifacts(
    store, handle: AttemptHandle, truth: Truth, outcome: Outcome, old: str | None
) -> EvaluationLinks:
    """Store the evaluation's input, output, log and typed result; the receipt's links to
    them, to what was judged and to the generation before (``old``)."""
    result = EvaluationResult(
        verdict=outcome.verdict,
        quality={"pass": "pass", "fail": "fail"}.get(outcome.verdict, "unknown"),
        reason=outcome.reason[:4096],
        exit_code=outcome.exit_code,
        details=codec.from_json(_json(outcome.details)),
        signal=outcome.signal if outcome.signal is not None else ABSENT,
    )
    return EvaluationLinks(
        plan=handle.plan_oid,
        attempt=handle.oid,
        manifest=truth.manifest,
        input=store.objects.put("blob", outcome.input_bytes),
        evidence=truth.evidence or ABSENT,
        output=(
            store.objects.put("blob", outcome.output_bytes)
            if outcome.output_bytes is not None
            else ABSENT
        ),
        log=store.objects.put("blob", outcome.log) if outcome.log else ABSENT,
        result=store.objects.put_record(result.to_value()),
        previous=old if old is not None else ABSENT,
        gateway=tuple(outcome.gateway) if outcome.gateway else ABSENT,
    )


def _partner(store, handle: AttemptHandle, spec: dict) -> tuple[dict | None, str | None]:
    """(the pairwise partner of the handle's attempt: the baseline model's attempt on the same
    case with the same attempt number, with its retained truth and identities, None), or (None,
    why there is no pair)."""
    attempt = handle.attempt
    baseline = spec.get("baseline")
    if not baseline:
        return None, "a pairwise judge needs its baseline model and the attempt's plan"
    if attempt["model"]["resolved"] == baseline:
        return None, f"the baseline {baseline}'s own attempts are not judged against themselves"
    for oid in handle.plan["links"]["attempts"]:
        other = store.objects.get_record(oid)
        if (other["model"]["resolved"], other.get("case_id"), other["attempt"]) != (
            baseline,
            attempt.get("case_id"),
            attempt["attempt"],
        ):
            continue
        terminal_oid = store.refs.read(names.attempt(handle.plan_oid, oid, "terminal"))
        if terminal_oid is None:
            return None, (
                f"the baseline {baseline}'s attempt {oid} has no terminal yet: list the "
                "baseline first and run one attempt at a time, or rejudge this profile after "
                "the run"
            )
        terminal = store.objects.get_record(terminal_oid)
        if terminal["class"] in pairwise.NO_PAIR:
            return None, f"the baseline {baseline}'s attempt {oid} ended {terminal['class']}"
        theirs = Truth.of(store, terminal, attempt=other)
        return {
            "attempt": oid,
            "model": baseline,
            "truth": theirs.links(),
            "identities": terminal_identities(terminal["identity"]),
        }, None
    return None, (
        f"the plan has no attempt of the baseline {baseline} on this case with attempt "
        f"number {attempt['attempt']}"
    )


def _judge_intent(store, handle: AttemptHandle, profile: str, generation: int) -> bool:
    """Write the intent to dispatch the judge of ``profile`` for ``generation``, durably,
    before it is dispatched; False when one for that generation is already there (a crash cut
    that dispatch short: it is never made twice).

    Raises:
        GenerationError: another process wrote that intent first.
    """
    plan_oid, attempt_oid = handle.plan_oid, handle.oid
    ref = names.judge_intent(plan_oid, attempt_oid, profile)
    held = store.refs.read(ref)
    if held is not None and store.objects.get_record(held).get("generation") == generation:
        return False
    intent = JudgeIntent(
        plan=plan_oid,
        attempt=attempt_oid,
        profile=profile,
        generation=generation,
        created_ms=time.time_ns() // 1_000_000,
        links=JudgeIntentLinks(
            plan=plan_oid, attempt=attempt_oid, previous=held if held is not None else ABSENT
        ),
    )
    try:
        store.refs.update(
            ref, store.objects.put_record(intent.to_value()), old=held, reason=f"judge {generation}"
        )
    except RefMismatch:
        raise GenerationError(profile, attempt_oid, generation, generation + 1) from None
    return True


def _pending(store, ref: str, old: str | None, place: tuple) -> Held | None:
    """The receipt a cut-short update of ``ref`` was publishing, when it is exactly the
    next generation after ``old`` for ``place`` (plan, attempt, profile, generation)."""
    oid = store.refs.pending(ref)
    if oid is None or not store.objects.contains(oid):
        return None
    receipt = store.objects.get_record(oid)
    if not Evaluation.holds(receipt):
        return None
    found = Evaluation.from_stored(receipt)
    if (found.plan, found.attempt, found.profile, found.generation) != place:
        return None
    return Held(oid, receipt) if (found.links.previous or None) == old else None


def _publish(store, ref: str, old: str | None, held: Held, signer) -> None:
    """Move ``ref`` from ``old`` to the receipt ``held``, signed with ``signer`` (when given)
    once the move is on record and before the ref names it: a published receipt is signed,
    and a crash while signing leaves the move pending for the next evaluation to finish.

    Raises:
        GenerationError: another evaluation moved the ref first.
    """

    oid, receipt = held

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
