"""What a release-readiness receipt claims, derived from records, and how doctor re-derives
it from the retained attempts.

``observe`` reads what one synthetic case's attempt ended as (its terminal class, its
generation-1 verdicts and, for a leakage check, the probe's report in its retained stdout);
``check_record`` compares that with what the case expects; ``coverage`` is what the passing
checks reached. The command and ``yyb doctor`` share all three, so doctor recomputes every
claim of a receipt from the attempts its runs refs name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from yyb.errors import YybError
from yyb.evidence import names
from yyb.evidence.kinds.attempt import Terminal
from yyb.evidence.kinds.grading import Evaluation
from yyb.evidence.kinds.plan import AttemptPlan, ExperimentPlan
from yyb.evidence.kinds.readiness import (
    ReadinessCheck,
    ReadinessCheckExpected,
    ReadinessCheckObserved,
    ReleaseReadiness,
)
from yyb.evidence.record import ABSENT
from yyb.evidence.records import CHEATS, TERMINAL_CLASSES, VERDICTS
from yyb.readiness.suite import CASES, PARTS, Case, store_canary
from yyb.store.fsck import Finding, error, info
from yyb.store.objects.format import hash_object

BY_NAME = {case.name: case for case in CASES}


def probe_report(stdout: bytes, check: str) -> tuple[bool, list[str]]:
    """(whether the probe of ``check`` reported to its end, the findings it reported)."""
    lines = stdout.decode(errors="replace").splitlines()
    begin = f"probe {check} begin"
    if begin not in lines:
        return False, []
    findings = []
    for line in lines[lines.index(begin) + 1 :]:
        if line.startswith(f"probe {check} complete"):
            return True, findings
        if line.startswith("finding "):
            findings.append(line.removeprefix("finding "))
    return False, findings


def observe(store, plan_oid: str, attempt_oid: str, case: Case) -> dict:
    """What the case's attempt ended as, from its retained records alone."""
    terminal_oid = store.refs.read(names.attempt(plan_oid, attempt_oid, "terminal"))
    if terminal_oid is None:
        observed: dict = {"class": None, "verdicts": []}
        if case.leakage:
            observed.update(probe="absent", findings=[])
        return observed
    terminal = Terminal.read(store.objects, terminal_oid)
    receipts = [Evaluation.read(store.objects, o) for o in terminal.links.evaluations or ()]
    observed = {
        "class": terminal.class_,
        "verdicts": sorted([r.profile, r.verdict] for r in receipts),
    }
    if case.leakage:
        stdout = terminal.links.stdout
        completed, findings = probe_report(
            store.objects.get(stdout).body if stdout else b"", case.leakage
        )
        observed.update(probe="complete" if completed else "incomplete", findings=findings)
    return observed


def check_record(case: Case, observed: dict, changed: list[str]) -> dict:
    """The deterministic record of one synthetic case: expected, observed, passed."""
    expected = ReadinessCheckExpected(
        class_=case.expected, verdicts=tuple(sorted(list(v) for v in case.verdicts))
    )
    seen = ReadinessCheckObserved.from_stored(observed)
    passed = seen.class_ == expected.class_ and list(seen.verdicts) == list(expected.verdicts)
    if case.leakage:
        seen = dataclasses.replace(seen, changed=tuple(changed))
        passed = passed and observed["probe"] == "complete"
        passed = passed and not observed["findings"] and not changed
    record = ReadinessCheck(
        case=case.name,
        case_id=case.case_id,
        behaviour=case.behaviour,
        part=case.part,
        leakage=case.leakage or ABSENT,
        cheat=case.cheat or ABSENT,
        expected=expected,
        observed=seen,
        passed=passed,
    )
    return record.to_value()


def coverage(checks: list[dict]) -> dict:
    """Per terminal class, evaluation outcome and cheat, the cases that reached it (checks
    that passed only); ``missing`` names what none reached."""
    classes: dict[str, list[str]] = {c: [] for c in TERMINAL_CLASSES}
    outcomes: dict[str, list[str]] = {v: [] for v in VERDICTS}
    cheats: dict[str, list[str]] = {c: [] for c in CHEATS}
    for record in checks:
        if not record["passed"]:
            continue
        classes[record["observed"]["class"]].append(record["case"])
        for _, verdict in record["observed"]["verdicts"]:
            if record["case"] not in outcomes[verdict]:
                outcomes[verdict].append(record["case"])
        if record.get("cheat"):
            cheats[record["cheat"]].append(record["case"])
    missing = [f"terminal class {c}" for c, reached in classes.items() if not reached]
    missing += [f"evaluation outcome {v}" for v, reached in outcomes.items() if not reached]
    missing += [f"cheat {c}" for c, reached in cheats.items() if not reached]
    return {
        "terminal_classes": classes,
        "evaluation_outcomes": outcomes,
        "cheats": cheats,
        "missing": missing,
    }


def leakage(checks: list[dict]) -> dict[str, bool]:
    return {r["leakage"]: r["passed"] for r in checks if r.get("leakage")}


def verdict(checks: list[dict], covered: dict, harnesses: list[dict]) -> bool:
    """A receipt passes when every check passed, coverage misses nothing, and every
    configured harness's program is there."""
    return (
        all(r["passed"] for r in checks)
        and not covered["missing"]
        and not any("problem" in h and "path" not in h for h in harnesses)
    )


# --- doctor ---------------------------------------------------------------------------------


def receipts(store) -> list[str]:
    """The oid of every receipt a ref under ``refs/release-readiness/`` names: ``latest``,
    each ``<oid>/receipt`` and any other ref there (the runs refs name plans, not receipts)."""
    listed = store.refs.names(under=names.READINESS)
    return sorted(
        {
            oid
            for name in listed
            if "/runs/" not in name.removeprefix(names.READINESS) and (oid := store.refs.read(name))
        }
    )


def doctor(store) -> Iterator[Finding]:
    """Every receipt the store names, checked as ``check_receipt`` checks it; one that did
    not pass is an error when ``latest`` names it (the store's readiness gate is shut) and a
    note when it is history."""
    latest = store.refs.read(names.READINESS_LATEST)
    for oid in receipts(store):
        yield from check_receipt(store, oid, latest=oid == latest)


def check_receipt(store, oid: str, latest: bool = False) -> list[Finding]:
    """A receipt's claims against its own check records, and each check against the attempt
    its runs refs name: its terminal class, its verdicts and its probe's report, read again
    from the retained evidence (what lies on the controller's disk, ``changed``, is as
    recorded)."""
    findings: list[Finding] = []

    def fail(code: str, detail: str) -> None:
        findings.append(error(code, oid, f"release-readiness receipt: {detail}"))

    try:
        receipt = store.objects.get_record(oid)
        if not ReleaseReadiness.holds(receipt):
            fail("wrong-record", "not a release-readiness receipt")
            return findings
        checks = [store.objects.get_record(c) for c in receipt["links"]["checks"]]
    except (YybError, KeyError, TypeError) as exc:
        fail("readiness-unreadable", str(exc))
        return findings
    if receipt["links"].get("canary") != hash_object("blob", store_canary()):
        fail("readiness-canary", "it does not link the registry's canary")
    if store.refs.read(names.readiness_receipt(oid)) != oid:
        fail("readiness-unnamed", f"{names.readiness_receipt(oid)} does not name it")
    if not all(ReadinessCheck.holds(c) for c in checks):
        fail("readiness-check", "a linked check is not a release-readiness check record")
        return findings
    if [c["case"] for c in checks] != [case.name for case in CASES]:
        fail("readiness-suite", "its checks are not the suite's cases, in order")
        return findings
    for record in checks:
        case = BY_NAME[record["case"]]
        again = check_record(case, record["observed"], record["observed"].get("changed", []))
        if again != record:
            fail("readiness-check", f"check {case.name} does not follow from what it observed")
    covered = coverage(checks)
    if receipt["coverage"] != covered:
        fail("readiness-coverage", "its coverage is not what its checks reached")
    if receipt["leakage"] != leakage(checks):
        fail("readiness-leakage", "its leakage results are not its checks'")
    if receipt["passed"] != verdict(checks, covered, receipt["harnesses"]):
        fail("readiness-verdict", f"it says passed={receipt['passed']}, its checks do not")
    findings += _failed(oid, receipt, checks, latest)
    findings += _against_runs(store, oid, checks)
    return findings


def _failed(oid: str, receipt: dict, checks: list[dict], latest: bool) -> list[Finding]:
    """A receipt that did not pass, or a check of it that failed: an error behind ``latest``,
    else a note."""
    failed = [c["case"] for c in checks if not c["passed"]]
    if receipt["passed"] is True and not failed:
        return []
    what = f"failed check(s) {', '.join(failed)}" if failed else "it did not pass"
    where = "the receipt latest names" if latest else "an earlier receipt"
    level = error if latest else info
    return [level("readiness-failed", oid, f"release-readiness receipt: {where}: {what}")]


def _against_runs(store, oid: str, checks: list[dict]) -> list[Finding]:
    """Each check's observation, read again from the attempts of the plans its runs refs
    name; a receipt carried without them is noted, not failed."""
    findings: list[Finding] = []
    plans = {part: store.refs.read(names.readiness_run(oid, part)) for part in PARTS}
    if not any(plans.values()):
        return [info("readiness-no-runs", oid, "the attempts of its checks are not in this store")]
    by_case: dict[str, tuple[str, str]] = {}
    for part, plan_oid in plans.items():
        if plan_oid is None:
            findings.append(error("readiness-runs", oid, f"no runs ref for its {part} plan"))
            continue
        try:
            plan = ExperimentPlan.read(store.objects, plan_oid)
            for attempt_oid in plan.links.attempts:
                attempt = AttemptPlan.read(store.objects, attempt_oid)
                by_case[attempt.case_id] = (plan_oid, attempt_oid)
        except (YybError, KeyError, TypeError) as exc:
            findings.append(error("readiness-runs", oid, f"its {part} plan: {exc}"))
    for record in checks:
        case = BY_NAME[record["case"]]
        if case.case_id not in by_case:
            if plans.get(case.part) is not None:
                findings.append(error("readiness-runs", oid, f"no attempt ran case {case.name}"))
            continue
        try:
            seen = observe(store, *by_case[case.case_id], case)
        except (YybError, KeyError, TypeError) as exc:
            findings.append(error("readiness-runs", oid, f"case {case.name}: {exc}"))
            continue
        recorded = {k: v for k, v in record["observed"].items() if k != "changed"}
        if seen != recorded:
            findings.append(
                error(
                    "readiness-evidence",
                    oid,
                    f"check {case.name} says {recorded}, its attempt shows {seen}",
                )
            )
    return findings
