"""Fabricated retained attempts, written straight through the store API (no sandbox, no agent).

The records follow the shapes yyb/attempts/ and yyb/grading/evaluate.py write (intent,
workspace receipt, listing, manifest, execution, terminal, evidence, evaluation receipts and
results) and are schema-valid, so ``yyb doctor --plan`` finds each chain complete; they skip
validation while being written, for speed. Everything is a function of the arguments, so a
fabricated store is the same on every machine: golden tests and tools/bench_report.py use it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from yyb.evidence.names import attempt as attempt_ref
from yyb.evidence.names import evaluation as eval_ref
from yyb.evidence.terminal import CLOSED_UNRUN
from yyb.store.objects import codec

T0 = 1_700_000_000_000


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Spec:
    """One fabricated experiment: what its compatibility key parts are made of."""

    models: list[str]
    cases: list[str]
    attempts: int = 1
    yyb_version: str = "0.1.0"
    yylo_version: str = "test"
    network: str = "denied"
    per_attempt_micros: int = 2_000_000
    grader_version: str = "1"
    harness_argv: list[str] = field(default_factory=lambda: ["agent", "{model}"])
    # outcome(ordinal) -> (terminal class, verdict or None, wall_ms[, problem]). A verdict of
    # None closes the attempt before its workspace existed, unless a problem is given: then
    # the candidate ran and ``problem`` is its envelope problem (a harness_failure with no
    # envelope and no evaluation). With verdict "invalid", ``problem`` is the receipt's.
    outcome: object = None
    salt: str = ""


def _put(store, value: dict) -> str:
    return store.objects.put("record", codec.encode(value))


def _ref(store, name: str, oid: str, reason: str) -> None:
    store.refs.update(name, oid, old=None, reason=reason)


def default_outcome(ordinal: int) -> tuple[str, str | None, int]:
    if ordinal % 5 == 4:
        return "harness_failure", None, 0
    verdict = "pass" if ordinal % 3 != 2 else "fail"
    return "resolved" if verdict == "pass" else "grader_failure", verdict, 1000 + 37 * ordinal


def fabricate(store, spec: Spec) -> str:
    """Write one experiment plan and every attempt's chain; return the plan oid."""
    outcome = spec.outcome or default_outcome
    grader = {
        "kind": "command",
        "grader_id": "grader-tests",
        "version": spec.grader_version,
        "executable": "/graders/tests.sh",
        "sha256": sha("grader " + spec.grader_version),
        "argv": [],
        "timeout_ms": 5000,
        "purpose": "correctness",
        "required": True,
    }
    cases, inputs = {}, {}
    for case_id in spec.cases:
        prompt = store.objects.put("blob", f"Fix {case_id}.{spec.salt}".encode())
        identity = {
            "case_id": case_id,
            "repository": "src",
            "base_commit": sha("base")[:40],
            "case_version": "1",
            "category": "bugfix",
            "grader_profile": "tests",
            "task_hash": sha("task " + case_id),
            "prompt_hash": sha("prompt " + case_id + spec.salt),
            "wiki": [],
        }
        identity["input_hash"] = inputs[case_id] = hashlib.sha256(
            codec.encode(identity)
        ).hexdigest()
        task = store.objects.put("blob", f"task {case_id}".encode())
        value = {
            "schema_version": "yylo_benchmark_case.v2",
            "title": case_id,
            "tags": ["benchmark-case"],
        }
        links = {"task": task, "prompt": prompt}
        cases[case_id] = _put(store, {**value, **identity, "links": links})
    attempts = []
    ordinal = 0
    for case_id in spec.cases:
        for model in spec.models:
            for k in range(1, spec.attempts + 1):
                attempt = {
                    "schema_version": "yylo_benchmark_attempt_plan.v2",
                    "kind": "task",
                    "ordinal": ordinal,
                    "case_id": case_id,
                    "model": {"requested": model, "resolved": model},
                    "attempt": k,
                    "budget": {"currency": "USD", "ceiling_micros": spec.per_attempt_micros},
                    "links": {"case": cases[case_id]},
                }
                attempts.append((_put(store, attempt), attempt))
                ordinal += 1
    count = len(attempts)
    plan = {
        "schema_version": "yylo_benchmark_experiment_plan.v2",
        "kind": "task",
        "versions": {"yyb": spec.yyb_version, "yylo": spec.yylo_version, "python": "3.11"},
        "cases": [{"case_id": c, "input_hash": inputs[c]} for c in spec.cases],
        "models": [{"requested": m, "resolved": m} for m in spec.models],
        "attempts_per_cell": spec.attempts,
        "attempt_count": count,
        "budget": {
            "currency": "USD",
            "total_micros": spec.per_attempt_micros * count,
            "per_attempt_micros": spec.per_attempt_micros,
            "remainder_micros": 0,
        },
        "tool_policy": {"network": spec.network, "read_only_paths": []},
        "timeout_ms": 60_000,
        "excluded_paths": [],
        "candidate_harness": {
            "id": "candidate",
            "config": {"kind": "command", "argv": spec.harness_argv},
        },
        "evaluators": {
            "selected": ["tests"],
            "defaults": [],
            "catalog": {"tests": grader},
            "harnesses": {},
        },
        "comparison": "model_only",
        "links": {"cases": sorted(cases.values()), "attempts": [oid for oid, _ in attempts]},
    }
    plan_oid = _put(store, plan)
    _ref(store, f"refs/plans/{plan_oid}", plan_oid, "plan")
    for attempt_oid, attempt in attempts:
        _attempt(store, plan_oid, attempt_oid, attempt, outcome(attempt["ordinal"]), grader)
    return plan_oid


def _attempt(store, plan_oid, attempt_oid, attempt, result, grader) -> None:
    cls, verdict, wall_ms, *rest = result
    problem = rest[0] if rest else None
    # A fifth item is the cost a refused envelope claimed, kept on the terminal as yyb did
    # before it stopped copying such claims.
    claimed = rest[1] if len(rest) > 1 else None
    envelope_problem = problem if verdict is None else None
    ordinal, model = attempt["ordinal"], attempt["model"]["resolved"]
    start = T0 + ordinal * 100_000
    base = {"plan": plan_oid, "attempt": attempt_oid}
    both = {"plan": plan_oid, "attempt": attempt_oid}
    intent = {
        "schema_version": "yylo_benchmark_dispatch_intent.v2",
        **base,
        "ordinal": ordinal,
        "model": model,
        "harness": "candidate",
        "time_ms": start,
        "host": "bench",
        "pid": 1,
        "links": both,
    }
    intent_oid = _put(store, intent)
    _ref(store, attempt_ref(plan_oid, attempt_oid, "intent"), intent_oid, "dispatch intent")
    links = {**both, "intent": intent_oid}
    identity = {"requested": model, "resolved": model, "observed": None}
    runtime = {"wall_ms": 0, "started_ms": start, "ended_ms": start}
    exit_info = {"code": None, "signal": None, "timed_out": False, "cleanup_confirmed": True}
    outputs: dict = {}
    if verdict is not None or envelope_problem is not None:
        listing = _put(
            store,
            {
                "schema_version": "yylo_benchmark_file_listing.v2",
                "entries": [["calc.sh", 33261, 0]],
                "omitted": [],
                "links": {"files": [store.objects.put("blob", b"echo $((1+1))\n")]},
            },
        )
        receipt = {
            "schema_version": "yylo_benchmark_workspace_receipt.v2",
            "base_commit": sha("base")[:40],
            "snapshot_commit": sha("snapshot " + attempt["case_id"])[:40],
            "snapshot_tree": sha("tree " + attempt["case_id"]),
            "excluded_paths": [],
            "excluded": [],
            "file_count": 1,
            "sandbox": {"kind": "bubblewrap", "version": "0.8.0", "network": "denied"},
            "environment": {"variables": ["HOME", "PATH"], "path": ["/usr/bin"], "secrets": []},
            "links": {"intent": intent_oid, "listing": listing},
        }
        links["receipt"] = _put(store, receipt)
        out = f"output of attempt {ordinal}\n".encode() * 3
        links["stdout"] = store.objects.put("blob", out)
        links["stderr"] = store.objects.put("blob", b"warning: fabricated\n")
        links["patch"] = store.objects.put(
            "blob", f"--- a/calc.sh\n+++ b/calc.sh\n@@ {ordinal}\n".encode()
        )
        cost = {"completeness": "complete", "currency": "USD", "micros": 1000 + ordinal}
        runtime = {"wall_ms": wall_ms, "started_ms": start + 10, "ended_ms": start + 10 + wall_ms}
        if envelope_problem is None or claimed is not None:
            cost = cost if claimed is None else claimed
            links["envelope"] = _put(
                store,
                {
                    "schema_version": "juno_execution_envelope.v1",
                    "provider": model.partition("/")[0] or "bench",
                    "model": model if claimed is None else "someone-else",
                    "status": "succeeded",
                    "cost": cost,
                    "started_ms": runtime["started_ms"],
                    "ended_ms": runtime["ended_ms"],
                    "elapsed_ms": wall_ms,
                },
            )
        else:  # no envelope: no observed identity, no reported cost
            cost = {"completeness": "unavailable", "currency": "USD", "micros": None}
        links["manifest"] = _put(
            store,
            {
                "schema_version": "yylo_benchmark_post_execution_manifest.v2",
                "git": {"head": sha("snapshot " + attempt["case_id"])[:40], "dirty": True},
                "file_count": 1,
                "added": [],
                "changed": ["calc.sh"],
                "deleted": [],
                "omitted": [],
                "links": {"receipt": links["receipt"], "listing": listing, "patch": links["patch"]},
            },
        )
        if envelope_problem is None:
            identity = {**identity, "observed": model.lower()}
        exit_info = {**exit_info, "code": 0}
        outputs = {"stdout": {"bytes": len(out), "retained": len(out), "truncated": False}}
        facts = {"exit_code": 0, "signal": None, "cancelled": False, "timed_out": False}
        execution = {
            "schema_version": "yylo_benchmark_execution.v2",
            **base,
            "facts": {
                **facts,
                "cleanup_confirmed": True,
                "envelope_problem": envelope_problem,
                "envelope_status": None if envelope_problem else "succeeded",
            },
            "identity": identity,
            "runtime": runtime,
            "outputs": outputs,
            "candidate_cost": cost,
            "links": {**links, "listing": listing},
        }
        links["execution"] = _put(store, execution)
        _ref(
            store,
            attempt_ref(plan_oid, attempt_oid, "execution"),
            links["execution"],
            "execution retained",
        )
    if verdict is not None:
        grader_output = store.objects.put(
            "blob", f'{{"passed": {str(verdict == "pass").lower()}}}\n'.encode()
        )
        grader_input = store.objects.put("blob", f'{{"attempt": "{attempt_oid}"}}\n'.encode())
        result = {
            "schema_version": "yylo_benchmark_evaluation_result.v2",
            "verdict": verdict,
            "quality": verdict if verdict in ("pass", "fail") else "unknown",
            "reason": "fabricated",
            "exit_code": 0 if verdict == "pass" else 1,
            "details": {},
        }
        evaluation = {
            "schema_version": "yylo_benchmark_evaluation.v2",
            **base,
            "profile": "tests",
            "kind": "command",
            "generation": 1,
            "evaluator": {
                "id": grader["grader_id"],
                "version": grader["version"],
                "bytes_sha256": grader["sha256"],
                "model": None,
            },
            "required": True,
            "purpose": "correctness",
            "verdict": verdict,
            "wall_ms": 200 + ordinal % 50,
            "judge_cost": None,
            "links": {
                **both,
                "manifest": links["manifest"],
                "input": grader_input,
                "output": grader_output,
                "result": _put(store, result),
            },
        }
        if problem is not None:
            evaluation["problem"] = problem
        evaluation_oid = _put(store, evaluation)
        _ref(
            store,
            eval_ref(plan_oid, attempt_oid, "tests"),
            evaluation_oid,
            "evaluation tests generation 1",
        )
        links["evaluations"] = [evaluation_oid]
    elif envelope_problem is None:
        cost = {"completeness": "unavailable", "currency": "USD", "micros": None}
    closed = f"{CLOSED_UNRUN} (fabricated)"
    terminal = {
        "schema_version": "yylo_benchmark_terminal.v2",
        "class": cls,
        "reason": f"fabricated {cls}" if "receipt" in links else closed,
        **base,
        "ordinal": ordinal,
        "identity": identity,
        "runtime": runtime,
        "exit": exit_info,
        "outputs": outputs,
        "candidate_cost": cost,
        "links": links,
    }
    if claimed is not None and claimed["micros"]:  # flagged as the claim stood, then
        ceiling = attempt["budget"]["ceiling_micros"]
        over = claimed["micros"] - ceiling if claimed["micros"] > ceiling else None
        terminal["spend"] = {"ceiling_micros": ceiling, "over_ceiling_micros": over}
    terminal_oid = _put(store, terminal)
    _ref(store, attempt_ref(plan_oid, attempt_oid, "terminal"), terminal_oid, f"terminal {cls}")
    evidence_links = {"terminal": terminal_oid}
    for key in ("manifest", "patch", "evaluations"):
        if key in links:
            evidence_links[key] = links[key]
    if "execution" in links:  # as the runner does: the final listing of what ran
        evidence_links["listing"] = store.objects.get_record(links["execution"])["links"]["listing"]
    evidence = {
        "schema_version": "yylo_benchmark_attempt_evidence.v2",
        **base,
        "class": cls,
        "links": evidence_links,
    }
    evidence_oid = _put(store, evidence)
    _ref(store, attempt_ref(plan_oid, attempt_oid, "evidence"), evidence_oid, "attempt evidence")
