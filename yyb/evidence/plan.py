"""What the plan promises about each attempt: its identity, its evaluators, its spend."""

from __future__ import annotations

import hashlib

from yyb.store.objects import codec


def first_generation_profiles(plan: dict, case: dict | None) -> list[str]:
    """The evaluators generation 1 runs for an attempt: the defaults and its case's grader."""
    wanted = set(plan["evaluators"].get("defaults", []))
    if case is not None:
        wanted.add(case["grader_profile"])
    return sorted(wanted & set(plan["evaluators"]["selected"]))


def protects_nothing(plan: dict) -> list[str]:
    """The command profiles of the plan's catalog with no protected path (``protected_paths``
    empty or, in a plan made before it was required, absent), sorted: each grades the
    workspace as the candidate left it, test files and test configuration included."""
    catalog = plan["evaluators"]["catalog"]
    return sorted(
        name
        for name, spec in catalog.items()
        if spec.get("kind") == "command" and not spec.get("protected_paths")
    )


def bytes_hash(spec: dict) -> str:
    """What pins an evaluator's behaviour: its executable's sha256, or a judge's bound config."""
    if spec.get("kind") == "command":
        return spec["sha256"]
    return hashlib.sha256(codec.encode({"spec": spec})).hexdigest()


def evaluator(spec: dict, profile: str) -> dict:
    """The ``evaluator`` block an evaluation receipt of ``profile`` must carry."""
    return {
        "id": spec.get("grader_id", profile),
        "version": spec["version"],
        "bytes_sha256": bytes_hash(spec),
        "model": spec.get("model"),
    }


def evaluator_mismatch(plan: dict, profile: str, receipt: dict) -> str | None:
    """Why an evaluation receipt was not made by the plan's evaluator ``profile``, or None."""
    spec = plan["evaluators"]["catalog"].get(profile)
    if spec is None:
        return f"{profile} is not in the plan's evaluator catalog"
    expected = {
        "kind": spec["kind"],
        "evaluator": evaluator(spec, profile),
        "required": spec.get("required", True),
        "purpose": spec.get("purpose", "correctness"),
    }
    for field, value in expected.items():
        if receipt.get(field) != value:
            return f"its {field} is {receipt.get(field)!r}, the plan's {profile} has {value!r}"
    return None


def identity_mismatch(plan: dict, attempt: dict, identity: dict) -> str | None:
    """Why a record's ``identity`` block is not the attempt's planned model, or None.

    ``observed`` may be null (nothing was observed) or any spelling the harness reported; only
    a terminal that claims a graded result needs it to equal the planned model (see
    ``terminal.gradeable``).
    """
    model = attempt["model"]
    for field in ("requested", "resolved"):
        if identity.get(field) != model[field]:
            return f"its {field} model is {identity.get(field)!r}, the plan's is {model[field]!r}"
    return None


def intent_mismatch(plan: dict, attempt: dict, intent: dict) -> str | None:
    """Why a dispatch intent does not name the attempt's planned model and harness, or None."""
    if intent.get("model") != attempt["model"]["resolved"]:
        return f"it names model {intent.get('model')!r}, not {attempt['model']['resolved']!r}"
    if intent.get("harness") != plan["candidate_harness"]["id"]:
        return (
            f"it names harness {intent.get('harness')!r}, not {plan['candidate_harness']['id']!r}"
        )
    if intent.get("ordinal") != attempt["ordinal"]:
        return f"it names ordinal {intent.get('ordinal')!r}, not {attempt['ordinal']}"
    return None


def ceiling(attempt: dict) -> int | None:
    """The attempt's spend ceiling in micro-USD, None when the plan has no budget."""
    spend = attempt.get("budget")
    return spend["ceiling_micros"] if spend else None
