"""`yyb doctor --plan`: re-verify one experiment end to end from retained evidence.

Every attempt of the immutable plan must have the complete chain (intent, receipt, manifest,
envelope or its retained failure, terminal, evidence, evaluations) and every link must be the
exact one: the terminal belongs to this attempt of this plan and names this intent, the
manifest belongs to this receipt, each evaluation to this attempt's manifest and evidence and
to a profile of the plan's catalog, generations count 1, 2, 3 without a gap. Every object
reached is checked as fsck checks it (hash, canonical form, schema). A plan with no attempt or
with any attempt short of a complete chain is incomplete, never complete.
"""

from __future__ import annotations

from yyb.errors import YybError
from yyb.evidence import chain, names
from yyb.evidence.records import (
    EVALUATION,
    EVIDENCE,
    EXECUTION,
    INTENT,
    MANIFEST,
    NO_WORKSPACE,
    PLAN,
    RECEIPT,
    TERMINAL,
)
from yyb.store import fanout, heap
from yyb.store.chain import verify_many
from yyb.store.fsck import Finding, error, info


class AttemptCheck:
    """Checks for one attempt; collects findings and whether its chain is complete.

    Each record is read once, proved by its hash (``read_record``); its canonical form and
    schema are proved by ``verify_objects``, which doctor runs after these checks. What the
    checks read stays available, so a reader of the same evidence (the report) needs no
    second read and sees exactly the state that was checked: ``terminal`` (oid, record),
    ``receipt`` (the workspace receipt's record), ``evidence_oid`` and ``chains`` (profile ->
    [(oid, evaluation)], oldest first; filled once the terminal proved a retained workspace).
    """

    def __init__(self, store, plan_oid: str, plan: dict, attempt_oid: str, evaluations: list):
        self.store, self.plan_oid, self.plan, self.oid = store, plan_oid, plan, attempt_oid
        self.evaluation_profiles = evaluations  # profiles with an evaluations ref
        self.findings: list[Finding] = []
        self.complete = True
        self.terminal: tuple[str, dict] | None = None
        self.receipt: dict | None = None
        self.evidence_oid: str | None = None
        self.chains: dict[str, list[tuple[str, dict]]] = {}

    def fail(self, code: str, detail: str) -> None:
        self.findings.append(error(code, self.oid, detail))
        self.complete = False

    def record(self, oid: str | None, schema: str, what: str) -> dict | None:
        if oid is None:
            return None
        try:
            value = self.store.objects.read_record(oid)  # the full walk proves the form
        except YybError as exc:
            self.fail("unreadable", f"{what} {oid}: {exc}")
            return None
        if value.get("schema_version") != schema:
            self.fail(
                "wrong-record", f"{what} {oid} is a {value.get('schema_version')}, not a {schema}"
            )
            return None
        return value

    def owned(self, value: dict, what: str, oid: str) -> bool:
        """The record names this plan and this attempt, in its fields and its links."""
        links = value.get("links", {})
        if (
            value.get("plan", self.plan_oid) != self.plan_oid
            or links.get("plan", self.plan_oid) != self.plan_oid
        ):
            self.fail("wrong-plan", f"{what} {oid} belongs to plan {value.get('plan')}")
            return False
        if value.get("attempt", self.oid) != self.oid or links.get("attempt", self.oid) != self.oid:
            self.fail("wrong-attempt", f"{what} {oid} belongs to attempt {value.get('attempt')}")
            return False
        return True

    def check(self) -> None:
        refs = self.store.refs
        intent_oid = refs.read(names.attempt(self.plan_oid, self.oid, "intent"))
        if intent_oid is None:
            self.fail("incomplete", "never dispatched (no intent)")
            return
        intent = self.record(intent_oid, INTENT, "intent")
        if intent is not None:
            self.owned(intent, "intent", intent_oid)
        terminal_oid = refs.read(names.attempt(self.plan_oid, self.oid, "terminal"))
        if terminal_oid is None:
            self.fail("incomplete", "dispatched but no terminal (run 'yyb run' again to close it)")
            return
        terminal = self.record(terminal_oid, TERMINAL, "terminal")
        if terminal is None or not self.owned(terminal, "terminal", terminal_oid):
            return
        self.terminal = (terminal_oid, terminal)
        links = terminal["links"]
        if links.get("intent") != intent_oid:
            self.fail(
                "wrong-link",
                f"terminal {terminal_oid} names intent {links.get('intent')}, not {intent_oid}",
            )
        self.check_workspace(terminal_oid, terminal)
        self.check_evidence(terminal_oid, terminal)
        self.check_evaluations(terminal)

    def check_workspace(self, terminal_oid: str, terminal: dict) -> None:
        links = terminal["links"]
        closed_early = (
            terminal["class"] in NO_WORKSPACE
            or "receipt" not in links
            and terminal["reason"].startswith("dispatched earlier without a terminal")
        )
        if closed_early:
            return
        receipt = self.record(links.get("receipt"), RECEIPT, "receipt")
        if receipt is None:
            self.fail("incomplete", f"terminal {terminal_oid} has no workspace receipt")
            return
        self.receipt = receipt
        if receipt["links"].get("intent") != links.get("intent"):
            self.fail("wrong-link", f"receipt {links['receipt']} belongs to another intent")
        post = self.record(links.get("manifest"), MANIFEST, "manifest")
        if post is None:
            self.fail("incomplete", f"terminal {terminal_oid} has no post-execution manifest")
            return
        if post["links"].get("receipt") != links["receipt"]:
            self.fail(
                "wrong-link",
                f"manifest {links['manifest']} belongs to receipt "
                f"{post['links'].get('receipt')}, not {links['receipt']}",
            )
        if post["links"].get("patch") != links.get("patch"):
            self.fail("wrong-link", f"manifest {links['manifest']} names another patch")
        execution = self.record(links.get("execution"), EXECUTION, "execution")
        if execution is None:
            self.fail("incomplete", f"terminal {terminal_oid} has no execution record")
        elif self.owned(execution, "execution", links["execution"]):
            for role in ("intent", "receipt", "manifest", "patch", "stdout", "stderr"):
                if execution["links"].get(role) != links.get(role):
                    self.fail(
                        "wrong-link",
                        f"execution {links['execution']} and terminal "
                        f"{terminal_oid} disagree on the {role}",
                    )
        if (
            "envelope" not in links
            and "envelope_raw" not in links
            and terminal["class"] != "harness_failure"
            and terminal["class"] not in ("timeout", "cancelled", "model_failure")
        ):
            self.fail(
                "incomplete",
                f"terminal {terminal_oid} is {terminal['class']} without an execution envelope",
            )

    def check_evidence(self, terminal_oid: str, terminal: dict) -> None:
        evidence_oid = self.store.refs.read(names.attempt(self.plan_oid, self.oid, "evidence"))
        evidence = self.record(evidence_oid, EVIDENCE, "evidence")
        if evidence is not None:
            self.evidence_oid = evidence_oid
        if evidence is None:
            if evidence_oid is None:
                self.fail("incomplete", "no attempt evidence")
            return
        if self.owned(evidence, "evidence", evidence_oid):
            if evidence["links"].get("terminal") != terminal_oid:
                self.fail(
                    "wrong-link",
                    f"evidence {evidence_oid} names terminal "
                    f"{evidence['links'].get('terminal')}, not {terminal_oid}",
                )
            if evidence.get("class") != terminal["class"]:
                self.fail(
                    "wrong-link",
                    f"evidence {evidence_oid} says {evidence.get('class')},"
                    f" the terminal {terminal['class']}",
                )

    def check_evaluations(self, terminal: dict) -> None:
        catalog = self.plan["evaluators"]["catalog"]
        manifest_oid = terminal["links"].get("manifest")
        if manifest_oid is None:
            if self.evaluation_profiles:
                self.findings.append(
                    info(
                        "orphan-evaluation",
                        self.oid,
                        "evaluations retained from a run that "
                        "ended without a terminal; the attempt was closed without them",
                    )
                )
            return
        first = set(terminal["links"].get("evaluations", []))
        seen_first = set()
        for profile in self.evaluation_profiles:
            if profile not in catalog:
                self.fail("unknown-profile", f"evaluation {profile} is not in the plan's catalog")
            chain = []
            oid = self.store.refs.read(names.evaluation(self.plan_oid, self.oid, profile))
            while oid is not None and len(chain) < 100_000:
                value = self.record(oid, EVALUATION, "evaluation")
                if value is None:
                    break
                chain.append((oid, value))
                oid = value["links"].get("previous")
            chain.reverse()
            self.chains[profile] = chain
            for n, (oid, value) in enumerate(chain, start=1):
                if not self.owned(value, "evaluation", oid):
                    continue
                if value.get("profile") != profile:
                    self.fail(
                        "wrong-link",
                        f"evaluation {oid} is for {value.get('profile')}, under {profile}",
                    )
                if value["generation"] != n:
                    self.fail(
                        "generation-gap",
                        f"{profile}: generation {value['generation']} where {n} belongs",
                    )
                if value["links"].get("manifest") != manifest_oid:
                    self.fail("wrong-link", f"evaluation {oid} judged another manifest")
                evidence = value["links"].get("evidence")
                if evidence is not None and evidence != self.evidence_oid:
                    self.fail("wrong-link", f"evaluation {oid} names other evidence {evidence}")
                if n == 1:
                    seen_first.add(oid)
        missing = first - seen_first
        for oid in sorted(missing):
            self.fail(
                "wrong-link",
                f"the terminal's evaluation {oid} is not generation 1 of "
                "any profile of this attempt",
            )


def check_plan(store, plan_oid: str, plan: dict | None = None) -> tuple[dict | None, list[Finding]]:
    """The experiment plan of ``plan_oid`` (None when it is not one) and what is wrong with it;
    ``plan`` is its record when the caller has read it already."""
    findings: list[Finding] = []
    if plan is None:
        try:
            plan = store.objects.get_record(plan_oid)
        except YybError as exc:
            findings.append(error("unreadable", plan_oid, f"plan: {exc}"))
    if plan is not None and plan.get("schema_version") != PLAN:
        findings.append(error("wrong-record", plan_oid, "not an experiment plan"))
        plan = None
    if plan is not None and store.refs.read(names.plan(plan_oid)) != plan_oid:
        findings.append(error("unlogged-plan", plan_oid, "refs/plans/<oid> does not name it"))
    return plan, findings


def check_attempt(store, plan_oid: str, plan: dict, attempt_oid: str) -> AttemptCheck:
    """Check one attempt's chain and links (every record it reads is hash-verified)."""
    profiles = chain.profiles(store, plan_oid, attempt_oid)
    check = AttemptCheck(store, plan_oid, plan, attempt_oid, profiles)
    try:
        check.check()
    except YybError as exc:
        check.fail("unreadable", str(exc))
    except (KeyError, TypeError, AttributeError) as exc:
        # A record proved by its hash but not of its schema's shape: verify_objects names it.
        check.fail("malformed", f"a record of this chain lacks or mistypes {exc}")
        check.terminal = None
    return check


def summary(plan_oid: str, attempts: int, complete: int, findings: list[Finding]) -> dict:
    errors = any(f.level == "error" for f in findings)
    status = "complete" if attempts and complete == attempts and not errors else "incomplete"
    return {"plan": plan_oid, "attempts": attempts, "complete": complete, "status": status}


def _check_chunk(store, plan_oid: str, plan: dict, attempts: list[str]) -> tuple[list, int]:
    findings, complete = [], 0
    for attempt_oid in attempts:
        check = check_attempt(store, plan_oid, plan, attempt_oid)
        findings += check.findings
        complete += check.complete
    return findings, complete


@heap.without_gc
def verify_experiment(store, plan_oid: str) -> tuple[list[Finding], dict]:
    """(findings, summary) for the experiment of ``plan_oid``; summary counts complete chains."""
    plan, findings = check_plan(store, plan_oid)
    if plan is None:
        return findings, summary(plan_oid, 0, 0, findings)
    attempts = plan["links"]["attempts"]
    complete = 0
    for part, count in fanout.map_chunks(_check_chunk, (store, plan_oid, plan), attempts):
        findings += part
        complete += count
    findings += verify_objects(store, plan_oid)
    return findings, summary(plan_oid, len(attempts), complete, findings)


def _walk_chunk(store, seen: set[str], refs: list[str]) -> list[Finding]:
    return list(verify_many(store, refs, set(seen)))


def verify_objects(store, plan_oid: str) -> list[Finding]:
    """Object-level checks (as fsck makes them) of everything reachable from the plan and its
    run refs, the refs' update chains included.

    The plan's own graph (attempt plans, cases) is walked first; the run refs are then walked
    in parts, by worker processes for a large experiment, each part skipping what the plan's
    walk verified. An object shared by two parts is verified by both; a finding about it is
    reported once.
    """
    seen: set[str] = set()
    findings = list(verify_many(store, [plan_oid], seen))
    refs = store.refs.names(under=names.runs(plan_oid))
    for part in fanout.map_chunks(_walk_chunk, (store, seen), refs, scale=5):  # ~5 per attempt
        findings += part
    return list(dict.fromkeys(findings))
