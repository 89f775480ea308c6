"""The longitudinal report: every retained attempt in the store, pooled only under identical keys.

Each attempt with a retained terminal gets an explicit **compatibility key** (docs/reports.md
defines every part and every hash). Attempts pool into one cohort only when their keys are
identical; every pair of cohorts of the same case and model is listed as an incompatibility
naming the key parts that differ, so nothing is averaged away. The report is stored as a layer
under ``refs/reports/longitudinal``, chained like the per-experiment layers.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from itertools import combinations

from yyb.evidence import names
from yyb.evidence.kinds.plan import ExperimentPlan
from yyb.evidence.kinds.report import LongitudinalCohorts, LongitudinalLayer
from yyb.evidence.plan import bytes_hash, first_generation_profiles
from yyb.reports import build, family
from yyb.store import fanout, heap
from yyb.store.objects import codec

LONGITUDINAL_REF = names.LONGITUDINAL
LONGITUDINAL = LongitudinalLayer.schema_version
COHORTS = LongitudinalCohorts.schema_version
# The key's parts, in the order the report shows them.
PARTS = (
    "case",
    "snapshot_tree",
    "prompt_hash",
    "wiki_hash",
    "tool_policy_hash",
    "budget_hash",
    "agent",
    "versions",
    "topology",
    "grading",
    "environment",
)


def digest(name: str, value) -> str:
    """SHA-256 of the canonical MessagePack of ``{name: value}`` (a record body is a map)."""
    return hashlib.sha256(codec.encode({name: value})).hexdigest()


class PlanParts:
    """The key parts one experiment plan fixes for all of its attempts (computed once)."""

    def __init__(self, plan: dict):
        harness = plan["candidate_harness"]
        budget = plan["budget"]
        self.tool_policy_hash = digest("tool_policy", plan["tool_policy"])
        self.budget_hash = digest(
            "budget",
            {
                "currency": budget["currency"] if budget else None,
                "per_attempt_micros": budget["per_attempt_micros"] if budget else None,
                "timeout_ms": plan["timeout_ms"],
            },
        )
        self.harness_id = harness["id"]
        self.harness_config_hash = digest("harness", harness["config"])
        self.versions = {"yyb": plan["versions"]["yyb"], "yylo": plan["versions"]["yylo"]}
        workflow = plan.get("workflow")
        self.topology = {
            "attempt_kind": plan["kind"],
            "harness_kind": harness["config"].get("kind"),
            "workflow": plan["kind"] == "workflow",
            "controlled_model_variable": workflow["controlled_model_variable"]
            if workflow
            else None,
            "workflow_variables_hash": digest("variables", workflow["variables"])
            if workflow
            else None,
        }
        self.catalog = plan["evaluators"]["catalog"]
        self.inputs: dict = {}  # case records and workflow bytes, each read once per plan


def _identity(profile: str, spec_or_receipt: dict, from_receipt: bool) -> dict:
    if from_receipt:
        evaluator = spec_or_receipt["evaluator"]
        return {
            "profile": profile,
            "id": evaluator["id"],
            "version": evaluator["version"],
            "bytes_sha256": evaluator["bytes_sha256"],
        }
    return {
        "profile": profile,
        "id": spec_or_receipt.get("grader_id", profile),
        "version": spec_or_receipt["version"],
        "bytes_sha256": bytes_hash(spec_or_receipt),
    }


def grading_layer(plan: dict, parts: PlanParts, case: dict | None, facts: build.Facts) -> list:
    """The evaluators behind the attempt's current verdict: the ones the plan selected for it
    (generation 1) and every one whose generations were read, sorted and without repeats."""
    found = {}
    for profile in first_generation_profiles(plan, case):
        identity = _identity(profile, parts.catalog[profile], False)
        found[tuple(identity.values())] = identity
    for _, receipt in facts.evaluations:
        identity = _identity(receipt["profile"], receipt, True)
        found[tuple(identity.values())] = identity
    return [found[k] for k in sorted(found)]


def compatibility_key(
    store, plan: dict, parts: PlanParts, attempt: dict, facts, receipt: dict | None
) -> dict:
    """The stored compatibility key of one retained attempt (docs/reports.md); ``receipt`` is
    its workspace receipt's record (None when it ended before it had a workspace)."""
    case = None
    if attempt["kind"] == "workflow":
        workflow = parts.inputs.get(attempt["links"]["workflow"])
        if workflow is None:
            body = store.objects.get(attempt["links"]["workflow"]).body
            workflow = parts.inputs[attempt["links"]["workflow"]] = body
        case_part = {"case_id": None, "input_hash": hashlib.sha256(workflow).hexdigest()}
        prompt_hash = wiki_hash = None
    else:
        case = parts.inputs.get(attempt["links"]["case"])
        if case is None:
            case = parts.inputs[attempt["links"]["case"]] = store.objects.get_record(
                attempt["links"]["case"]
            )
        case_part = {"case_id": case["case_id"], "input_hash": case["input_hash"]}
        prompt_hash, wiki_hash = case["prompt_hash"], digest("wiki", case["wiki"])
    snapshot_tree = receipt["snapshot_tree"] or None if receipt is not None else None
    # A case run on a built environment has it in its key; one on the host's OS folders keys
    # as before (docs/reports.md).
    pinned = [
        p for p in plan.get("environments", ()) if case and p["spec"] == case.get("environment")
    ]
    return {
        "case": case_part,
        "snapshot_tree": snapshot_tree,
        "prompt_hash": prompt_hash,
        "wiki_hash": wiki_hash,
        "tool_policy_hash": parts.tool_policy_hash,
        "budget_hash": parts.budget_hash,
        "agent": {
            "model": attempt["model"]["resolved"],
            "harness_id": parts.harness_id,
            "harness_config_hash": parts.harness_config_hash,
        },
        "versions": parts.versions,
        "topology": parts.topology,
        "grading": grading_layer(plan, parts, case, facts),
        **({"environment": dict(pinned[0])} if pinned else {}),
    }


def key_hash(key: dict) -> str:
    return digest("compatibility_key", key)


def differing_parts(first: dict, second: dict, prefix: str = "") -> list[str]:
    """Dotted names of the key parts whose values differ (maps compared leaf by leaf)."""
    out = []
    order = {name: i for i, name in enumerate(PARTS)}
    for name in sorted(set(first) | set(second), key=lambda n: (order.get(n, len(PARTS)), n)):
        a, b = first.get(name), second.get(name)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            out += differing_parts(a, b, f"{prefix}{name}.")
        else:
            out.append(prefix + name)
    return out


def plans(store) -> list[str]:
    """Every experiment plan under ``refs/plans/``, by oid."""
    found = []
    for name in store.refs.names(under=names.PLANS):
        oid = store.refs.read(name)
        if oid is None:
            continue
        record = store.objects.get_record(oid)
        if ExperimentPlan.holds(record) and oid not in found:
            found.append(oid)
    return sorted(found)


def _cohort(key: dict, khash: str, members: list[tuple[str, build.Facts]]) -> dict:
    group = [f for _, f in members]
    summary = build.summarize(group)
    return {
        "key_hash": khash,
        "case_id": key["case"]["case_id"],
        "model": key["agent"]["model"],
        "key": key,
        "plans": sorted({plan for plan, _ in members}),
        "attempts": summary["attempts"],
        "valid": summary["valid"],
        "resolved": summary["resolved"],
        "failed": summary["failed"],
        "invalid": summary["invalid"],
        "rate": summary["rate"],
        "interval": summary["interval"],
        "terminal_classes": summary["terminal_classes"],
        "evidence": sorted(f.evidence or f.terminal for f in group),
    }


def _keyed_chunk(
    store, plan_oid: str, plan: dict, filters: dict, attempts: list
) -> tuple[dict, list]:
    """Gate and key some attempts of one plan: ({key hash: key}, [(state, facts, detail)]).

    ``state`` is ``pooled`` (detail: the key hash), ``unverified`` (detail: error lines),
    ``unretained`` or ``pinned_out`` (a grader version pin, and that version graded none of
    it); attempts the case and model filters leave out are not listed.
    """
    case_id, model = filters["case_id"], filters["model"]
    version = filters.get("grader_version")
    parts = PlanParts(plan)
    keys: dict[str, dict] = {}
    entries = []
    for attempt_oid in attempts:
        attempt = build.read_attempt(store, attempt_oid)
        if not isinstance(attempt, str):
            if model is not None and attempt.get("model", {}).get("resolved") != model:
                continue
            if case_id is not None and attempt.get("case_id") != case_id:
                continue
        check, facts = build.examine(store, plan_oid, plan, attempt_oid, attempt, version)
        if not check.complete:
            if check.handle.terminal is None and all(
                f.code == "incomplete" for f in check.findings if f.level == "error"
            ):
                entries.append(("unretained", None, None))  # no terminal yet: nothing to pool
                continue
            lines = [f.line() for f in check.findings if f.level == "error"][:5]
            entries.append(("unverified", None, lines))
            continue
        if facts.pinned_out:
            entries.append(("pinned_out", None, None))
            continue
        handle = check.handle
        receipt = handle.receipt.record if handle.receipt is not None else None
        linked = handle.terminal.record["links"]
        if receipt is None and "receipt" in linked:  # closed early
            receipt = store.objects.get_record(linked["receipt"])
        key = compatibility_key(store, plan, parts, attempt, facts, receipt)
        khash = key_hash(key)
        keys.setdefault(khash, key)
        entries.append(("pooled", facts, khash))
    return keys, entries


@dataclass
class _Gathered:
    """Every plan's attempts, gated and keyed: the pooled ones as (plan oid, facts, key hash,
    key), the others counted; each plan's record by oid."""

    records: dict = field(default_factory=dict)
    pooled: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    unretained: int = 0
    unverified: int = 0
    pinned: int = 0


def _gather(store, plan_oids: list[str], filters: dict) -> _Gathered:
    found = _Gathered()
    for plan_oid in plan_oids:
        plan = found.records[plan_oid] = store.objects.get_record(plan_oid)
        for keys, entries in fanout.map_chunks(
            _keyed_chunk,
            (store, plan_oid, plan, filters),
            plan["links"]["attempts"],
        ):
            for state, facts, detail in entries:
                if state == "unretained":
                    found.unretained += 1
                elif state == "pinned_out":
                    found.pinned += 1
                elif state == "unverified":
                    found.unverified += 1
                    found.errors += detail
                else:
                    found.pooled.append((plan_oid, facts, detail, keys[detail]))
    return found


@heap.without_gc
def build_longitudinal(
    store,
    case_id: str | None = None,
    model: str | None = None,
    grader_version: str | None = None,
) -> tuple[dict, list[build.Facts]]:
    """The longitudinal report document and the facts of every attempt it pooled.

    Only attempts with a retained terminal and a complete chain (the per-attempt checks of
    ``yyb doctor --plan``) pool; attempts without a terminal are counted as ``unretained``
    (they hold no evidence to pool), those whose chain fails its checks as ``unverified``.
    With ``grader_version`` (a version, or ``ID@VERSION``) an attempt pools with the verdict
    of that version's generations alone, and one it did not grade is counted as
    ``not_graded_by_pin`` (as ``yyb report --plan --grader-version`` does).
    """
    keyed: dict[str, tuple[dict, list]] = {}
    filters: dict = {"case_id": case_id, "model": model}
    if grader_version is not None:
        filters["grader_version"] = grader_version
    read: list[build.Facts] = []
    plan_oids = plans(store)
    gathered = _gather(store, plan_oids, filters)
    pooled, errors = gathered.pooled, gathered.errors
    unretained, unverified, pinned_out = gathered.unretained, gathered.unverified, gathered.pinned
    # A retry supersedes what it retried: each cell pools once (docs/reports.md, "Families").
    counted = family.across(store, gathered.records, [(p, f) for p, f, _, _ in pooled])
    superseded = counted.count(False)
    for (plan_oid, facts, khash, key), kept in zip(pooled, counted, strict=True):
        if kept:
            keyed.setdefault(khash, (key, []))[1].append((plan_oid, facts))
            read.append(facts)
    cohorts = [_cohort(key, khash, members) for khash, (key, members) in keyed.items()]
    cohorts.sort(key=lambda c: (c["case_id"] or "", c["model"], c["plans"], c["key_hash"]))
    incompatibilities = []
    cells: dict[tuple, list[dict]] = {}
    for cohort in cohorts:
        cells.setdefault((cohort["case_id"] or "", cohort["model"]), []).append(cohort)
    for (cell_case, cell_model), members in sorted(cells.items()):
        for first, second in combinations(members, 2):
            incompatibilities.append(
                {
                    "case_id": cell_case or None,
                    "model": cell_model,
                    "first": first["key_hash"],
                    "second": second["key_hash"],
                    "differs": differing_parts(first["key"], second["key"]),
                }
            )
    report = {
        "filters": filters,
        "plans": plan_oids,
        "attempts": len(read),
        "unretained": unretained,
        "unverified": unverified,
        "first_errors": errors[:5],
        "cohorts": cohorts,
        "incompatibilities": incompatibilities,
    }
    if grader_version is not None:
        report["not_graded_by_pin"] = pinned_out
    if superseded:
        report["superseded"] = superseded
    return report, read


@heap.without_gc
def store_layer(
    store, report: dict, facts: list[build.Facts], write: bool = True, signer=None
) -> dict:
    """Store ``report`` as the newest longitudinal layer (reusing an identical head); with
    ``write`` false, store nothing.

    Raises:
        RefMismatch: another report moved the ref meanwhile (run it again).
    """
    from yyb.reports.layer import append_layer, evidence_links, parts, put_parts, unstored

    head = store.refs.read(LONGITUDINAL_REF)
    if not write:
        return unstored(head)
    pooled = {f.evidence or f.terminal: f for f in facts}

    def links_of(cohorts: list[dict]) -> dict:
        members = [pooled[oid] for cohort in cohorts for oid in cohort["evidence"]]
        return evidence_links(
            (f.terminal for f in members),
            (f.evidence for f in members),
            (oid for f in members for oid, _ in f.evaluations),
        )

    links: dict = {}
    if report["plans"]:
        links["plans"] = sorted(report["plans"])
    cohorts = put_parts(store, parts(LongitudinalCohorts, "cohorts", report["cohorts"], links_of))
    if cohorts:
        links["cohorts"] = cohorts
    summary = {key: value for key, value in report.items() if key != "cohorts"}
    value = LongitudinalLayer(report=summary, links=links).to_value()
    return append_layer(
        store, LONGITUDINAL_REF, head, value, "longitudinal report layer", signer=signer
    )


def keys_by_attempt(store, plan_oid: str) -> dict[str, dict]:
    """The compatibility key of each attempt of the plan that would pool (a retained terminal,
    a complete chain), by attempt oid."""
    gathered = _gather(store, [plan_oid], {"case_id": None, "model": None})
    return {facts.attempt: key for _, facts, _, key in gathered.pooled}
