"""One attempt's evidence chain, read for a page: every object in chain order, each verified.

The order is docs/attempts.md's: experiment plan, attempt plan (and its case), dispatch intent,
workspace receipt (and the base listing), post-execution manifest (the final listing and the
patch), envelope, execution record (stdout, stderr), terminal, evidence, then every
generation of every evaluation profile (with its grader input or judge payload, output, log,
result and graded listing). The chain is followed through the run refs and the records' links
even where a record fails its checks, so that a damaged chain still shows everything that is
there; what ``yyb doctor --plan`` checks about the chain as a whole (``check_attempt``) is
read beside it, and each of its findings that names an object fails that object's links check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from yyb.errors import YybError
from yyb.evidence import names
from yyb.evidence.attempt import AttemptHandle, NotInPlan
from yyb.evidence.chain import MAX_GENERATIONS, profiles
from yyb.evidence.check import checked as check_chain
from yyb.evidence.kinds.plan import ExperimentPlan
from yyb.evidence.record import kind_of
from yyb.store.fsck import Finding
from yyb.store.objects.format import is_oid
from yyb.view.verify import Signature, Verification, signature, verify


class NotInStore(YybError):
    """What a page was asked for is not there (the server answers 404)."""


@dataclass
class Part:
    """One object of the chain: what it is in the chain, its checks and its signatures."""

    role: str
    oid: str
    check: Verification
    signature: Signature | None

    @property
    def value(self) -> dict:
        return self.check.value if isinstance(self.check.value, dict) else {}

    @property
    def links(self) -> dict:
        """The record's links map ({} when it has none, or a damaged record's is no map)."""
        links = self.value.get("links")
        return links if isinstance(links, dict) else {}


@dataclass
class Generation:
    """One evaluation generation: its receipt and the objects the receipt links."""

    profile: str
    number: int
    receipt: Part
    parts: dict[str, Part] = field(default_factory=dict)  # input, output, log, result, ...


@dataclass
class AttemptChain:
    plan_oid: str
    attempt_oid: str
    plan: dict
    parts: list[Part] = field(default_factory=list)
    generations: list[Generation] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    complete: bool = False
    refs: list[tuple[str, str | None]] = field(default_factory=list)  # run refs and values

    def role(self, role: str) -> Part | None:
        return next((p for p in self.parts if p.role == role), None)


class Reader:
    """Verifies each object once per page (a page may name one object in several roles)."""

    def __init__(self, store, trusted: list, chain_findings: list[Finding] = ()):
        self.store, self.trusted, self.findings = store, trusted, list(chain_findings)
        self.seen: dict[str, tuple[Verification, Signature | None]] = {}

    def part(self, role: str, oid: object) -> Part | None:
        if not is_oid(oid):
            return None
        if oid not in self.seen:
            problems = [f"{f.code}: {f.detail}" for f in self.findings if oid in f.detail]
            check = verify(self.store, oid, problems)
            self.seen[oid] = (check, signature(self.store, oid, self.trusted))
        check, sig = self.seen[oid]
        return Part(role, oid, check, sig)


def read_plan(store, plan_oid: str) -> dict:
    """The experiment plan ``plan_oid`` (its bytes proved by its hash).

    Raises:
        NotInStore: it is not in the store, or is not an experiment plan.
    """
    try:
        plan = store.objects.get_record(plan_oid)
    except YybError as exc:
        raise NotInStore(f"plan {plan_oid}: {exc}") from None
    if not ExperimentPlan.holds(plan):
        raise NotInStore(f"{plan_oid} is a {kind_of(plan)}, not an experiment plan")
    return plan


def read(store, plan_oid: str, attempt_oid: str, trusted: list) -> AttemptChain:
    """The chain of one attempt of one plan, every object verified.

    Raises:
        NotInStore: no such plan, or the attempt is not one of its attempts.
    """
    plan = read_plan(store, plan_oid)
    try:
        planned = AttemptHandle.planned(plan_oid, plan, attempt_oid, {})
    except NotInPlan:
        raise NotInStore(f"{attempt_oid} is not an attempt of plan {plan_oid}") from None
    # The attempt plan record is read (and proved) by the check, as doctor --plan reads it.
    checked = check_chain(store, planned, thorough=True, read=True)
    found = AttemptChain(plan_oid, attempt_oid, plan, findings=checked.findings)
    found.complete = checked.complete
    reader = Reader(store, trusted, checked.findings)

    def add(role: str, oid: object) -> Part | None:
        part = reader.part(role, oid)
        if part is not None:
            found.parts.append(part)
        return part

    add("experiment plan", plan_oid)
    attempt = add("attempt plan", attempt_oid)
    add("case", _link(attempt, "case"))
    refs = {leaf: _ref(store, names.attempt(plan_oid, attempt_oid, leaf)) for leaf in names.LEAVES}
    add("dispatch intent", refs["intent"])
    terminal = reader.part("terminal", refs["terminal"])
    execution = reader.part("execution record", refs["execution"] or _link(terminal, "execution"))
    links = (terminal or execution).links if (terminal or execution) else {}
    receipt = add("workspace receipt", links.get("receipt"))
    add("base listing", _link(receipt, "listing"))
    manifest = add("post-execution manifest", links.get("manifest"))
    add("final listing", _link(manifest, "listing"))
    add("patch", links.get("patch"))
    add("envelope", links.get("envelope"))
    add("envelope (raw bytes)", links.get("envelope_raw"))
    if execution is not None:
        found.parts.append(execution)
    add("stdout", links.get("stdout"))
    add("stderr", links.get("stderr"))
    if terminal is not None:
        found.parts.append(terminal)
    add("attempt evidence", refs["evidence"])
    for profile in _profiles(store, plan_oid, attempt_oid):
        for generation in _generations(store, reader, plan_oid, attempt_oid, profile):
            found.generations.append(generation)
            found.parts.append(generation.receipt)
            found.parts += generation.parts.values()
    folder = names.attempt_folder(plan_oid, attempt_oid)
    found.refs = [(name, _ref(store, name)) for name in _names(store, folder)]
    for name, oid in found.refs:
        profile = name.rsplit("/", 1)[1]
        if name == names.judge_intent(plan_oid, attempt_oid, profile):
            add(f"judge intent ({profile})", oid)
    return found


# What an evaluation receipt links, in the order a page shows them.
EVALUATION_LINKS = ("input", "output", "log", "result", "graded_listing")


def _generations(store, reader: Reader, plan_oid: str, attempt_oid: str, profile: str):
    """The generations of ``profile``, oldest first, followed through ``previous``."""
    found, visited = [], set()
    oid = _ref(store, names.evaluation(plan_oid, attempt_oid, profile))
    while is_oid(oid) and oid not in visited and len(found) < MAX_GENERATIONS:
        visited.add(oid)
        receipt = reader.part(f"evaluation: {profile}", oid)
        found.append(receipt)
        oid = receipt.links.get("previous")
    generations = []
    for number, receipt in enumerate(reversed(found), start=1):
        generation = Generation(profile, number, receipt)
        receipt.role = f"evaluation: {profile}, generation {number}"
        for role in EVALUATION_LINKS:
            part = reader.part(
                f"{role.replace('_', ' ')} ({profile} #{number})", _link(receipt, role)
            )
            if part is not None:
                generation.parts[role] = part
        generations.append(generation)
    return generations


def _link(part: Part | None, role: str) -> object:
    return None if part is None else part.links.get(role)


def _ref(store, name: str) -> str | None:
    try:
        return store.refs.read(name)
    except YybError:
        return None  # a damaged ref: check_attempt names it


def _names(store, folder: str) -> list[str]:
    try:
        return store.refs.names(under=folder)
    except YybError:
        return []


def _profiles(store, plan_oid: str, attempt_oid: str) -> list[str]:
    try:
        return profiles(store, plan_oid, attempt_oid)
    except YybError:
        return []
