"""The per-attempt checks of `yyb doctor --plan`: one attempt's chain, link by link.

Every attempt of the immutable plan must have the complete chain (intent, receipt, manifest,
envelope or its retained failure, terminal, evidence, evaluations) and every link must be the
exact one: the terminal belongs to this attempt of this plan and names this intent, the
manifest belongs to this receipt, each evaluation to this attempt's manifest and evidence and
to a profile of the plan's catalog, made by that profile's pinned evaluator, generations count
1, 2, 3 without a gap. Identities are the planned ones. Each write-once run ref (intent,
execution, terminal, evidence) was created exactly once, from nothing; each evaluation ref
moved only from one generation to the next. Listed paths stay inside their folder.
"""

from __future__ import annotations

from dataclasses import replace

from yyb.errors import YybError
from yyb.evidence import chain, cost, names, protect, testpatch
from yyb.evidence import plan as planned
from yyb.evidence.attempt import AttemptHandle, Held
from yyb.evidence.record import kind_of
from yyb.evidence.records import (
    CASE,
    DETERMINISTIC,
    EVALUATION,
    EVIDENCE,
    EXECUTION,
    GATEWAY_CALL,
    GATEWAY_METER,
    INTENT,
    LISTING,
    MANIFEST,
    NO_WORKSPACE,
    RECEIPT,
    RECEIPT_V2,
    REF_UPDATE,
    TERMINAL,
)
from yyb.evidence.terminal import CLOSED_UNRUN, observed_as_planned, replay
from yyb.store.fsck import Finding, error, info

# Classes of a terminal whose candidate finished and was graded: it must have observed the
# planned model (``terminal.gradeable`` refuses anything else).
GRADED = ("resolved", "grader_failure", "safety_failure")


class AttemptCheck:
    """Checks for one attempt; collects findings and whether its chain is complete.

    Each record is read once, proved by its hash (``read_record``); its canonical form and
    schema are proved by ``verify_objects``, which doctor runs after these checks. What the
    checks read stays available as one ``handle`` (yyb/evidence/attempt.py), so a reader of
    the same evidence (the report, a regrade) needs no second read and sees exactly the state
    that was checked: its terminal, receipt, execution, evidence and chains (profile ->
    generations, oldest first; filled once the terminal proved a retained workspace).

    ``thorough`` (doctor --plan, regrade) checks everything. Without it (the report's default
    gate) the checks cover what the figures rest on and skip the rest: the write-once proof
    of the intent and execution refs (the terminal's and evidence's are kept), the listing
    paths, and the history of an evaluation ref beyond its last move.
    """

    def __init__(self, store, given: AttemptHandle, profiles: list, thorough: bool = True):
        """``given``: the attempt's handle, its chain not read yet (``AttemptHandle.planned``);
        ``profiles``: those with an evaluations ref."""
        self.store, self.given, self.thorough = store, given, thorough
        self.plan_oid, self.plan, self.oid = given.plan_oid, given.plan, given.oid
        self.attempt = given.attempt
        self.evaluation_profiles = profiles
        self.findings: list[Finding] = []
        self.complete = True
        self.intent: Held | None = None
        self.terminal: tuple[str, dict] | None = None
        self.receipt: dict | None = None
        self.evidence_oid: str | None = None
        self.evidence: dict | None = None
        self.chains: dict[str, list[tuple[str, dict]]] = {}
        self.execution: dict | None = None
        self.meter: dict | None = None  # the gateway meter the terminal links, once checked
        self.listings: tuple[str | None, str | None] | None = None  # (base, final) oids

    @property
    def handle(self) -> AttemptHandle:
        """The attempt's handle holding exactly what these checks read of its chain (what
        did not read, or was refused, is None; without a terminal, nothing it links)."""
        read = replace(
            self.given,
            intent=self.intent,
            evidence=None if self.evidence is None else Held(self.evidence_oid, self.evidence),
            chains={p: tuple(Held(*g) for g in chain) for p, chain in self.chains.items()},
        )
        if self.terminal is None:
            return read
        links = self.terminal[1]["links"]
        return replace(
            read,
            receipt=None if self.receipt is None else Held(links["receipt"], self.receipt),
            execution=(
                None if self.execution is None else Held(links["execution"], self.execution)
            ),
            terminal=Held(*self.terminal),
        )

    def fail(self, code: str, detail: str) -> None:
        self.findings.append(error(code, self.oid, detail))
        self.complete = False

    def record(self, oid: str | None, schema: str | tuple[str, ...], what: str) -> dict | None:
        """The record ``oid`` when it reads and is a ``schema`` (one version or several)."""
        if oid is None:
            return None
        try:
            value = self.store.objects.read_record(oid)  # the full walk proves the form
        except YybError as exc:
            self.fail("unreadable", f"{what} {oid}: {exc}")
            return None
        accepted = (schema,) if isinstance(schema, str) else schema
        if kind_of(value) not in accepted:
            self.fail(
                "wrong-record",
                f"{what} {oid} is a {kind_of(value)}, not a {accepted[-1]}",
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

    def leaf(self, which: names.Leaf) -> str | None:
        """The value of a write-once run ref, proved to have been created once from nothing."""
        ref = names.attempt(self.plan_oid, self.oid, which)
        oid = self.store.refs.read(ref)
        if oid is not None and (self.thorough or which in ("terminal", "evidence")):
            self.created_once(ref, oid)
        return oid

    def created_once(self, ref: str, oid: str) -> None:
        """``ref``'s update chain is one update, from nothing to ``oid`` (an update a crash
        cut short may be linked as discarded; it never took effect)."""
        head = self.store.refs.log_head(ref)
        update = None if head is None else self.record(head, REF_UPDATE, "update")
        if update is None:
            self.fail("rewritten-ref", f"{ref} has no update record")
        elif (
            update.get("old") is not None
            or update.get("new") != oid
            or "previous" in update.get("links", {})
        ):
            self.fail(
                "rewritten-ref",
                f"{ref} was moved after it was written (update {head} from "
                f"{update.get('old')}); a run ref is created once and never moved",
            )

    def check(self) -> None:
        intent_oid = self.leaf("intent")
        if intent_oid is None:
            self.fail("incomplete", "never dispatched (no intent)")
            return
        intent = self.record(intent_oid, INTENT, "intent")
        if intent is not None:
            self.intent = Held(intent_oid, intent)
        if intent is not None and self.owned(intent, "intent", intent_oid):
            problem = planned.intent_mismatch(self.plan, self.attempt, intent)
            if problem:
                self.fail("wrong-identity", f"intent {intent_oid}: {problem}")
        execution_oid = self.leaf("execution")
        terminal_oid = self.leaf("terminal")
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
        if execution_oid is not None and links.get("execution") != execution_oid:
            self.fail(
                "wrong-link",
                f"terminal {terminal_oid} names execution {links.get('execution')}, "
                f"not {execution_oid}",
            )
        self.check_identity(terminal_oid, terminal)
        self.check_workspace(terminal_oid, terminal)
        self.check_gateway(terminal_oid, terminal)
        self.check_evidence(terminal_oid, terminal)
        self.check_evaluations(terminal)
        self.check_class(terminal_oid, terminal)

    def check_identity(self, terminal_oid: str, terminal: dict) -> None:
        if terminal.get("ordinal") != self.attempt["ordinal"]:
            self.fail(
                "wrong-identity",
                f"terminal {terminal_oid} is ordinal {terminal.get('ordinal')}, "
                f"the plan's attempt {self.attempt['ordinal']}",
            )
        identity = terminal["identity"]
        problem = planned.identity_mismatch(self.plan, self.attempt, identity)
        if problem is None and terminal["class"] in GRADED:
            if not observed_as_planned(identity, self.attempt["model"]):
                problem = (
                    f"it is {terminal['class']} with observed model "
                    f"{identity.get('observed')!r}, not the planned one"
                )
        if problem:
            self.fail("wrong-identity", f"terminal {terminal_oid}: {problem}")

    def check_listing(self, oid: str | None, what: str) -> None:
        from yyb.errors import UnsafeListing
        from yyb.harness import manifest

        if not self.thorough:
            return
        listing = self.record(oid, LISTING, f"{what} listing")
        if listing is None:
            return
        try:
            manifest.entries_of(listing)
        except UnsafeListing as exc:
            self.fail("unsafe-listing", f"{what} listing {oid}: {exc.reason}")

    def check_workspace(self, terminal_oid: str, terminal: dict) -> None:
        links = terminal["links"]
        closed_early = (
            terminal["class"] in NO_WORKSPACE
            or "receipt" not in links
            and terminal["reason"].startswith(CLOSED_UNRUN)
        )
        if closed_early:
            return
        receipt = self.record(links.get("receipt"), (RECEIPT_V2, RECEIPT), "receipt")
        if receipt is None:
            self.fail("incomplete", f"terminal {terminal_oid} has no workspace receipt")
            return
        self.receipt = receipt
        if receipt["links"].get("intent") != links.get("intent"):
            self.fail("wrong-link", f"receipt {links['receipt']} belongs to another intent")
        self.check_listing(receipt["links"].get("listing"), "base")
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
        self.check_listing(post["links"].get("listing"), "final")
        self.listings = (receipt["links"].get("listing"), post["links"].get("listing"))
        self.check_execution(terminal_oid, terminal, post)
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

    def check_execution(self, terminal_oid: str, terminal: dict, post: dict) -> None:
        links = terminal["links"]
        execution = self.record(links.get("execution"), EXECUTION, "execution")
        if execution is None:
            self.fail("incomplete", f"terminal {terminal_oid} has no execution record")
            return
        if not self.owned(execution, "execution", links["execution"]):
            return
        self.execution = execution
        for role in (
            "intent", "receipt", "manifest", "patch", "stdout", "stderr", "envelope", "gateway"
        ):  # fmt: skip
            if execution["links"].get(role) != links.get(role):
                self.fail(
                    "wrong-link",
                    f"execution {links['execution']} and terminal "
                    f"{terminal_oid} disagree on the {role}",
                )
        if execution["links"].get("listing") != post["links"].get("listing"):
            self.fail("wrong-link", f"execution {links['execution']} names another listing")
        for field in ("identity", "runtime", "outputs", "candidate_cost", "metered"):
            if execution.get(field) != terminal.get(field):
                self.fail(
                    "wrong-link",
                    f"execution {links['execution']} and terminal {terminal_oid} "
                    f"disagree on the {field}",
                )

    def check_gateway(self, terminal_oid: str, terminal: dict) -> None:
        """A gateway plan's terminal that ran links its attempt's meter (docs/recovery.md):
        the meter and each call it links are this attempt's, the meter's cost is its calls'
        sum, the terminal's cost is the meter's, and the attempt's ``calls`` ref names it."""
        meter_oid = terminal["links"].get("gateway")
        through = self.plan["tool_policy"]["network"] == "gateway"
        if meter_oid is None or not through:
            if meter_oid is None and through and "execution" in terminal["links"]:
                self.fail("incomplete", f"terminal {terminal_oid} links no gateway meter")
            elif meter_oid is not None:
                self.fail("wrong-link", f"terminal {terminal_oid} links a gateway meter in a "
                          "plan whose candidates do not use the gateway")  # fmt: skip
            return
        meter = self.record(meter_oid, GATEWAY_METER, "gateway meter")
        if meter is None:
            return
        if meter["attempt"] != self.oid or meter["model"] != self.attempt["model"]["resolved"]:
            self.fail("wrong-attempt", f"gateway meter {meter_oid} is another attempt's")
            return
        self.meter = meter
        # Each call is read by doctor's every check; the report's gate trusts the meter's sum.
        micros, priced = meter["cost"]["micros"], meter["cost"]["completeness"] != "partial"
        if self.thorough:
            micros, priced = self.calls_cost(meter)
            if micros is None:
                return
        if meter["cost"]["micros"] != micros or meter["calls"] != len(meter["links"]["calls"]):
            self.fail("wrong-cost", f"gateway meter {meter_oid} does not add up its calls")
        elif terminal["candidate_cost"] != cost.metered(micros, priced):
            self.fail(
                "wrong-cost",
                f"terminal {terminal_oid}'s candidate cost is not its gateway meter's",
            )
        ref = names.calls(self.plan_oid, self.oid)
        if self.store.refs.read(ref) != meter_oid:
            self.fail("wrong-link", f"{ref} does not name the gateway meter {meter_oid}")

    def calls_cost(self, meter: dict) -> tuple[int | None, bool]:
        """The sum of the meter's calls' known costs and whether every call was priced;
        (None, False) when a call is unreadable or another attempt's (said)."""
        micros, priced = 0, True
        for oid in meter["links"]["calls"]:
            call = self.record(oid, GATEWAY_CALL, "gateway call")
            if call is None:
                return None, False
            if call["attempt"] != self.oid:
                self.fail("wrong-attempt", f"gateway call {oid} is another attempt's")
                return None, False
            micros += call["cost"]["micros"] or 0
            priced = priced and call["cost"]["micros"] is not None
        return micros, priced

    def check_evidence(self, terminal_oid: str, terminal: dict) -> None:
        evidence_oid = self.leaf("evidence")
        evidence = self.record(evidence_oid, EVIDENCE, "evidence")
        if evidence is not None:
            self.evidence_oid, self.evidence = evidence_oid, evidence
        if evidence is None:
            if evidence_oid is None:
                self.fail("incomplete", "no attempt evidence")
            return
        if not self.owned(evidence, "evidence", evidence_oid):
            return
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
        for role in ("manifest", "patch", "evaluations"):
            if evidence["links"].get(role) != terminal["links"].get(role):
                self.fail("wrong-link", f"evidence {evidence_oid} names another {role}")
        if self.execution is not None:
            if evidence["links"].get("listing") != self.execution["links"].get("listing"):
                self.fail("wrong-link", f"evidence {evidence_oid} names another listing")

    def check_evaluations(self, terminal: dict) -> None:
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
            generations = self.generations(profile)
            self.chains[profile] = generations
            for n, (oid, value) in enumerate(generations, start=1):
                if not self.owned(value, "evaluation", oid):
                    continue
                if value.get("profile") != profile:
                    self.fail(
                        "wrong-link",
                        f"evaluation {oid} is for {value.get('profile')}, under {profile}",
                    )
                problem = planned.evaluator_mismatch(self.plan, profile, value)
                if problem:
                    self.fail("wrong-evaluator", f"evaluation {oid}: {problem}")
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
                self.check_protection(profile, oid, value)
                self.check_judge_meters(oid, value)
                if n == 1:
                    seen_first.add(oid)
        for oid in sorted(first - seen_first):
            self.fail(
                "wrong-link",
                f"the terminal's evaluation {oid} is not generation 1 of "
                "any profile of this attempt",
            )

    def check_judge_meters(self, oid: str, value: dict) -> None:
        """An evaluation's judge meters (docs/gateway.md, "Judges"): only in a gateway plan,
        each a judge's meter of the profile's model, and a judge cost known in full equal
        to their sum."""
        meters = value["links"].get("gateway")
        if meters is None:
            return
        if self.plan["tool_policy"]["network"] != "gateway":
            self.fail("wrong-link", f"evaluation {oid} links gateway meters in a plan without it")
            return
        model = (self.plan["evaluators"]["catalog"].get(value["profile"]) or {}).get("model")
        total = 0
        for meter_oid in meters:
            meter = self.record(meter_oid, GATEWAY_METER, "judge's gateway meter")
            if meter is None:
                return
            if not meter["attempt"].startswith("judge ") or meter["model"] != model:
                self.fail("wrong-link", f"evaluation {oid}'s meter {meter_oid} is not its judge's")
                return
            total += meter["cost"]["micros"] or 0
        spent = value["judge_cost"]
        if spent["completeness"] in ("complete", "genuine_zero") and spent["micros"] != total:
            self.fail("wrong-cost", f"evaluation {oid}'s judge cost is not its meters' sum")

    def check_protection(self, profile: str, oid: str, value: dict) -> None:
        """A command evaluation of a profile with protected paths graded exactly the final
        listing with those paths put back as the base had them, and names the touched paths
        (docs/grading.md, "Protected paths"); one of a profile without them graded the final
        listing as it is. A ``tests`` evaluation always protects the paths of its case's test
        patch and grades with that patch applied (yyb/evidence/testpatch.py)."""
        from yyb.errors import UnsafeListing
        from yyb.harness import manifest

        if not self.thorough or self.listings is None:
            return
        spec = self.plan["evaluators"]["catalog"].get(profile, {})
        patterns = spec.get("protected_paths") or []
        graded_oid = value["links"].get("graded_listing")
        tests = spec.get("kind") == "tests"
        if not patterns and not tests:
            if graded_oid is not None or "protected" in value:
                self.fail(
                    "wrong-graded-listing",
                    f"evaluation {oid} put back paths its profile {profile} does not protect",
                )
            return
        if graded_oid is None:
            if value["kind"] in DETERMINISTIC and value["verdict"] in ("pass", "fail"):
                self.fail(
                    "wrong-graded-listing",
                    f"evaluation {oid} graded without putting back the protected paths of "
                    f"{profile}",
                )
            return
        records = [self.record(x, LISTING, "listing") for x in (*self.listings, graded_oid)]
        if None in records:
            return
        try:
            base, final, graded = (manifest.entries_of(r) for r in records)
        except UnsafeListing as exc:
            self.fail("unsafe-listing", f"evaluation {oid}: {exc.reason}")
            return
        if tests:
            found = self.tests_graded(oid, base, final, patterns)
            if found is None:
                return
            expected, touched = found
        else:
            expected, touched = protect.restore(base, final, patterns)
        if graded != expected or value.get("protected") != touched:
            self.fail(
                "wrong-graded-listing",
                f"evaluation {oid} graded listing {graded_oid}, which is not the final listing "
                f"with the protected paths of {profile} put back as the base had them",
            )

    def tests_graded(self, oid: str, base: dict, final: dict, patterns: list[str]):
        """What a ``tests`` evaluation must have graded, from the case's test patch (None,
        with a finding, when the case or its patch cannot be read)."""
        from yyb.harness import manifest

        case = self.record(self.attempt.get("links", {}).get("case"), CASE, "case")
        patch_oid = (case or {}).get("links", {}).get("test_patch")
        if patch_oid is None or not self.store.objects.contains(patch_oid):
            self.fail("wrong-graded-listing", f"evaluation {oid}: its case has no test patch")
            return None

        def read(blob: str) -> bytes:
            return self.store.objects.get(blob).body

        try:
            tests = case.get("tests") or {}
            listed = [*tests.get("fail_to_pass", []), *tests.get("pass_to_pass", [])]
            patch = read(patch_oid)
            return testpatch.graded(base, final, patterns, patch, listed, read, manifest.blob_oid)
        except YybError as exc:  # a patch that does not apply, a missing blob
            self.fail("wrong-graded-listing", f"evaluation {oid}: its test patch: {exc}")
            return None

    def check_class(self, terminal_oid: str, terminal: dict) -> None:
        """The terminal's class is the one its execution facts and its generation-1
        evaluations decide (a run cancelled while grading says cancelled instead)."""
        if self.execution is None or terminal["class"] == "cancelled":
            return
        first = {chain[0][0]: chain[0][1] for chain in self.chains.values() if chain}
        linked = [first[oid] for oid in terminal["links"].get("evaluations", []) if oid in first]
        decided, _ = replay(self.execution["facts"], linked)
        if decided != terminal["class"]:
            self.fail(
                "wrong-class",
                f"terminal {terminal_oid} says {terminal['class']}; its retained execution "
                f"and evaluations decide {decided}",
            )

    def moves(self, ref: str, generations: int) -> list[tuple]:
        """(old, new) of the ref's updates, newest first: all of them when thorough, else the
        last two (one of them may be an update a crash cut short)."""
        moves = []
        for _, update in self.store.refs.log(ref):
            moves.append((update.get("old"), update.get("new")))
            if not self.thorough and len(moves) == 2:
                break
        return moves

    def generations(self, profile: str) -> list[tuple[str, dict]]:
        """The profile's generations, oldest first, and proof that its ref moved only from
        each generation to the next (one update per generation, each from its predecessor)."""
        ref = names.evaluation(self.plan_oid, self.oid, profile)
        found: list[tuple[str, dict]] = []
        oid = self.store.refs.read(ref)
        while oid is not None and len(found) < chain.MAX_GENERATIONS:
            value = self.record(oid, EVALUATION, "evaluation")
            if value is None:
                break
            found.append((oid, value))
            oid = value["links"].get("previous")
        found.reverse()
        olds = [None] + [oid for oid, _ in found[:-1]]
        expected = [(old, new) for old, (new, _) in zip(olds, found, strict=True)]
        try:
            moves = self.moves(ref, len(found))
        except YybError as exc:
            self.fail("rewritten-ref", f"{ref}: {exc}")
            return found
        current = found[-1][0] if found else None
        if moves and moves[0][1] != current and moves[0][0] == current:
            moves = moves[1:]  # an update a crash cut short: it never took effect
        if not self.thorough:  # the last move alone: from the generation before, to this one
            expected, moves = expected[-1:], moves[:1]
        if list(reversed(moves)) != expected:
            self.fail(
                "rewritten-ref",
                f"{ref} moved other than one generation at a time "
                f"({len(moves)} updates for {len(found)} generations)",
            )
        return found


def check_attempt(
    store,
    plan_oid: str,
    plan: dict,
    attempt_oid: str,
    attempt: dict | None = None,
    thorough: bool = True,
) -> AttemptCheck:
    """Check one attempt's chain and links (every record it reads is hash-verified);
    ``attempt`` is its attempt plan record when the caller has read it already; ``thorough``
    as ``AttemptCheck`` says. What the check read is its ``handle``."""
    given = AttemptHandle(plan_oid, plan, attempt_oid, attempt or {})
    return checked(store, given, thorough, attempt is None)


def checked(store, given: AttemptHandle, thorough: bool = True, read: bool = False) -> AttemptCheck:
    """Check the chain of the attempt the handle ``given`` names (``read``: its attempt plan
    record is still to be read, and proved by its hash, here)."""
    profiles = chain.profiles(store, given.plan_oid, given.oid)
    check = AttemptCheck(store, given, profiles, thorough)
    try:
        if read:
            check.attempt = store.objects.read_record(given.oid)
            check.given = replace(given, attempt=check.attempt)
        check.check()
    except YybError as exc:
        check.fail("unreadable", str(exc))
    except (KeyError, TypeError, AttributeError) as exc:
        # A record proved by its hash but not of its schema's shape: verify_objects names it.
        check.fail("malformed", f"a record of this chain lacks or mistypes {exc}")
        check.terminal = None
    return check
