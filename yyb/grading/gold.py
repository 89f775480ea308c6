"""Gold validation: does a case tell a fix from no fix, through the real sandbox and grader?

SWE-bench validates its harness on itself before it grades anyone: the gold patch must
resolve the case and the empty patch must not. ``validate`` does that for one case graded by a
``tests`` profile. The base is exported from the case's repository as a candidate's workspace
is (yyb/harness/snapshot.py) and listed into the store; the gold run grades the base with the
gold patch applied (on the listing, yyb/harness/apply.py), the empty run grades the base as
it is; both go through ``yyb.grading.testsuite.run``, as an attempt's evaluation would. The
case **discriminates** when the gold run passes and the empty run fails; anything else (the
gold patch fails, does not apply, or is invalid; the empty run passes or is invalid) flags it.

The result is evidence: a ``yylo_benchmark_case_validation.v2`` record linking the case, the
base listing, the gold patch and each run's input, report, log and graded listing, signed (when
a signing key is configured) before ``refs/validations/<case id>`` moves to it from the
previous validation, which it links as ``previous``. docs/swe-bench.md describes the record.
"""

from __future__ import annotations

import os
from dataclasses import replace

from yyb import cases, signing
from yyb.errors import UsageError, YybError
from yyb.evidence import environment, names
from yyb.evidence import plan as planned
from yyb.evidence.kinds.plan import (
    CaseValidation,
    CaseValidationEvaluator,
    CaseValidationLinks,
    CaseValidationRuns,
)
from yyb.evidence.records import GOLD_RUNS
from yyb.grading import collection, testsuite
from yyb.grading.invocation import Invocation
from yyb.grading.outcome import Outcome
from yyb.harness import apply, manifest, probe, sandbox, scratch, snapshot, worktree
from yyb.store.objects.codec import from_json

MAX_REASON = 4096


def protected_roots(store_path: str, config, task: cases.Task) -> list[str]:
    """What the sandbox must hide during a validation: the roots of a run (the store, home,
    temp, configuration, repositories), plus the folders of the case's hidden patches."""
    roots = sandbox.protected_roots(store_path, config, {"evaluators": {"catalog": {}}})
    tests = cases.benchmark_fields(task)["tests"] or {}
    folder = os.path.dirname(os.path.abspath(task.path))
    hidden = [
        os.path.dirname(os.path.join(folder, tests[k]))
        for k in ("test_patch", "gold_patch")
        if k in tests
    ]
    return sorted({*roots, *map(os.path.realpath, hidden)})


def validate(store, config, task_path: str, environ: dict | None = None, cancel=None):
    """Validate one case with its gold and empty patches; return (record oid, record).

    Raises:
        CaseError / UsageError: the case is invalid, is not graded by a ``tests`` profile, or
            names no gold patch; the signing key named is missing.
        SandboxUnavailable: the sandbox cannot start here.
    """
    task, case = cases.load_case(task_path, config)
    profile = case["grader_profile"]
    spec = config.evaluators()[profile]
    if spec["kind"] != "tests":
        raise UsageError(
            f"{task_path}: its grader profile {profile} is a {spec['kind']} evaluator; gold "
            "validation runs the tests kind"
        )
    gold = cases.hidden_patch(task, "gold_patch")
    if gold is None:
        raise cases.CaseError(task_path, "fields.benchmark.tests.gold_patch", "missing")
    signer = signing.configured_signer(environ or {})
    probe.probe()
    protected = protected_roots(store.path, config, task)
    case_oid = cases.write_case(store, task, case)
    record_case = store.objects.get_record(case_oid)
    declared = cases.environment_of(task)
    ready = None
    if declared is not None:  # built (or found built) and checked before anything runs
        repository = config.repository_path(case["repository"])
        ready = environment.ensure(store, declared, repository)
    base_oid = _base_listing(store, config, case)
    base = manifest.entries_at(store, base_oid)
    links = {
        "case": case_oid,
        "base_listing": base_oid,
        "gold_patch": store.objects.put("blob", gold),
    }
    listings: dict[str, str | None] = {"empty": base_oid}
    listings["gold"], unapplied = _gold_listing(store, base, gold)
    if listings["gold"] is not None:
        links["gold_listing"] = listings["gold"]
    runs = {}
    for run in GOLD_RUNS:
        header = {
            "profile": profile,
            "grader_id": spec["grader_id"],
            "version": spec["version"],
            "generation": 0,
            "case_id": case["case_id"],
            "run": run,
        }
        if listings[run] is None:
            outcome = Outcome.invalid(unapplied)
        else:
            read_only = config.tool_policy()["read_only_paths"]
            call = Invocation(spec, protected, read_only, cancel, environment=ready)
            outcome = testsuite.run(store, call, record_case, listings[run], base_oid, header)
            if outcome.exit_code == testsuite.REFUSED_ARGUMENTS and outcome.verdict == "fail":
                box = {"protected": protected, "read_only": read_only, "environment": ready}
                outcome.reason = _unknown_ids(store, spec, record_case, base, box) or outcome.reason
        runs[run] = _run(store, outcome, run, links)
    discriminating = runs["gold"]["verdict"] == "pass" and runs["empty"]["verdict"] == "fail"
    record = CaseValidation(
        case_id=case["case_id"],
        case_version=case["case_version"],
        input_hash=case["input_hash"],
        profile=profile,
        evaluator=CaseValidationEvaluator.from_stored(planned.evaluator(spec, profile)),
        discriminating=discriminating,
        reason=_reason(runs, discriminating),
        runs=CaseValidationRuns(gold=runs["gold"], empty=runs["empty"]),
        links=CaseValidationLinks.from_stored(links),
    )
    return _publish(store, record, signer)


def _gold_listing(store, base: dict, gold: bytes) -> tuple[str | None, str]:
    """(the stored listing of the base with the gold patch applied, ""), or (None, why the
    gold patch does not apply)."""
    try:
        entries = apply.apply(
            base,
            gold,
            lambda oid: store.objects.get(oid).body,
            lambda d: store.objects.put("blob", d),
        )
    except apply.PatchError as exc:
        return None, f"the gold patch does not apply to the base: {exc}"
    return store.objects.put_record(manifest.listing_of(entries)), ""


def _base_listing(store, config, case: dict) -> str:
    """The listing of the case's base, exported as a candidate's workspace is."""
    root = scratch.folder("gold")
    try:
        dest = os.path.join(root, "workspace")
        snap = snapshot.create(
            config.repository_path(case["repository"]),
            case["base_commit"],
            config.excluded_paths(),
            dest,
        )
        scan = manifest.scan(store, dest, known=snap.known)
        return store.objects.put_record(manifest.listing_record(scan))
    finally:
        worktree.remove(root)  # however deep the code it ran made it


def _unknown_ids(store, spec: dict, case: dict, base: dict, box: dict) -> str | None:
    """Why the runner refused its arguments, when pytest's collection at the base with the
    test patch applied says which listed ids it does not know (None: it does not say)."""
    pytest = collection.runner(spec["command"])
    if pytest is None:
        return None
    tests = case["tests"]
    listed = [*tests["fail_to_pass"], *tests["pass_to_pass"]]
    patch = store.objects.get(case["links"]["test_patch"]).body
    try:
        unknown = collection.resolve(
            listed, collection.collect(store, pytest, base, patch, listed, box)
        )
    except YybError:  # a patch that does not apply, a tool path refused: the reason stands
        return None
    if not unknown:
        return None
    named = "; ".join(
        f"{u.test_id!r}" + (f" (cut short? it begins {u.repaired!r})" if u.repaired else "")
        for u in unknown
    )
    return (
        f"the test runner ran no test (exit status {testsuite.REFUSED_ARGUMENTS}): "
        f"{len(unknown)} listed id(s) are not tests it collects at the base with the test "
        f"patch applied: {named}"
    )


def _run(store, outcome: Outcome, run: str, links: dict) -> dict:
    """One run's part of the record; its artifacts go into ``links`` as ``<run>_<role>``."""
    links[f"{run}_input"] = store.objects.put("blob", outcome.input_bytes)
    if outcome.output_bytes is not None:
        links[f"{run}_output"] = store.objects.put("blob", outcome.output_bytes)
    if outcome.log:
        links[f"{run}_log"] = store.objects.put("blob", outcome.log)
    if outcome.protected is not None:
        links[f"{run}_graded_listing"] = outcome.protected["listing"]
    value = {
        "verdict": outcome.verdict,
        "reason": outcome.reason[:MAX_REASON],
        "exit_code": outcome.exit_code,
        "wall_ms": outcome.wall_ms,
        "checks": outcome.details.get("checks", []),
    }
    if outcome.signal is not None:
        value["signal"] = outcome.signal
    if outcome.verdict == "invalid" and outcome.problem is not None:
        value["problem"] = outcome.problem
    if outcome.protected is not None:
        value["protected"] = outcome.protected["touched"]
    return from_json(_json(value))  # a record value: JSON's types only


def _reason(runs: dict, discriminating: bool) -> str:
    if discriminating:
        return "the gold patch resolves the case and the empty patch does not"
    gold, empty = runs["gold"], runs["empty"]
    if gold["verdict"] != "pass":
        return f"the gold patch does not resolve the case ({gold['verdict']}): {gold['reason']}"
    return f"the empty patch is not a fail ({empty['verdict']}): {empty['reason']}"


def _publish(store, record: CaseValidation, signer) -> tuple[str, dict]:
    """Store the record, linking the case's previous validation, and move its ref to it,
    signed first when a key is configured; the stored (oid, value)."""
    ref = names.validation(record.case_id)
    old = store.refs.read(ref)
    if old is not None:
        record = replace(record, links=replace(record.links, previous=old))
    value = record.to_value()
    oid = store.objects.put_record(value)

    def seal() -> None:
        if signer is not None:
            signing.sign(store, oid, signer)

    verdict = "discriminating" if record.discriminating else "not discriminating"
    store.refs.update(ref, oid, old=old, reason=f"gold validation: {verdict}", before_move=seal)
    return oid, value


def _json(value) -> str:
    import json

    return json.dumps(value, sort_keys=True)
