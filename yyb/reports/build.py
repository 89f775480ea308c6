"""The per-experiment report: figures per model and per case, from retained evidence only.

Nothing here writes. Each attempt is read once: the doctor gate (``check_attempt``, the
per-attempt checks of ``yyb doctor --plan``) reads its chain, proving every record it reads by
its hash and every link, and the figures come from exactly those records. With
``verify_objects`` the gate also re-verifies every object reachable from the plan, as
``yyb doctor --plan`` does. The result is one report document made of strings, integers,
booleans and nulls; docs/reports.md defines every figure and the gate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from yyb.errors import UsageError, YybError
from yyb.evidence import check as verify
from yyb.evidence import cost, experiment, invalidity, retries
from yyb.evidence import plan as planned
from yyb.evidence.attempt import AttemptHandle
from yyb.evidence.kinds.plan import ExperimentPlan
from yyb.evidence.records import (
    COST_COMPLETENESS,
    INVALIDITY_CAUSES,
    VALID_CLASSES,
)
from yyb.evidence.terminal import gradeable
from yyb.evidence.verdict import conclude
from yyb.reports import family, stats
from yyb.reports.pairwise import pairwise_figures, pairwise_table  # noqa: F401 (both its names)
from yyb.store import heap

VERDICT_OUTCOME = {"pass": "resolved", "fail": "failed", "safety": "failed", "invalid": "invalid"}


@dataclass
class Facts:
    """What the retained evidence says about one attempt."""

    attempt: str
    ordinal: int
    model: str
    case_id: str | None
    terminal: str | None = None
    evidence: str | None = None
    terminal_class: str | None = None
    verdict: str | None = None  # pass | fail | safety | invalid; None when not graded
    verdict_reason: str = ""
    outcome: str = "missing"  # resolved | failed | invalid | missing
    invalid_cause: str | None = None  # candidate | infrastructure, for an invalid outcome
    wall_ms: int | None = None  # measured candidate wall time (None: not measured)
    candidate_cost: dict | None = None
    evaluations: list[tuple[str, dict]] = field(default_factory=list)
    generations: dict[str, int] = field(default_factory=dict)
    pinned_out: bool = False
    over_ceiling: bool = False  # its reported cost exceeded the attempt's spend ceiling
    cost_note: str | None = None  # why its candidate cost is unavailable, when it is
    tokens: dict | None = None  # the gateway's metered usage (None: not metered)
    number: int | None = None  # the attempt's number in its cell (the attempt plan's attempt)
    environment: str | None = None  # the built environment record it ran in (None: the host)

    @property
    def evaluator_ms(self) -> int | None:
        """The evaluations' wall time (None: no evaluation)."""
        if not self.evaluations:
            return None
        return sum(receipt["wall_ms"] for _, receipt in self.evaluations)


def _matches(receipt: dict, version: str) -> bool:
    """``V`` matches an evaluator version; ``ID@V`` an evaluator id and version."""
    evaluator = receipt["evaluator"]
    if "@" in version:
        wanted_id, _, wanted = version.rpartition("@")
        return evaluator["id"] == wanted_id and evaluator["version"] == wanted
    return evaluator["version"] == version


def collect(handle: AttemptHandle, version: str | None) -> Facts:
    """Decide one attempt's outcome from what the gate read of it (``check.handle``)."""
    attempt = handle.attempt
    facts = Facts(
        handle.oid, attempt["ordinal"], attempt["model"]["resolved"], attempt.get("case_id")
    )
    facts.number = attempt.get("attempt")
    facts.evidence = handle.evidence.oid if handle.evidence is not None else None
    if handle.receipt is not None:
        facts.environment = handle.receipt.record.get("built_environment", {}).get("environment")
    histories: dict[str, list[dict]] = {}
    for profile in sorted(handle.plan["evaluators"]["catalog"]):
        chain = handle.generations(profile)
        if version is not None:
            chain = [(oid, r) for oid, r in chain if _matches(r, version)]
        if chain:
            histories[profile] = [r for _, r in chain]
            facts.evaluations += [(oid, {k: r[k] for k in EVALUATION_FACTS}) for oid, r in chain]
            facts.generations[profile] = chain[-1][1]["generation"]
    if handle.terminal is None:
        facts.pinned_out = version is not None and not histories
        return facts
    facts.terminal, terminal = handle.terminal
    facts.terminal_class = terminal["class"]
    execution = handle.execution.record if handle.execution is not None else None
    facts.candidate_cost, facts.cost_note = candidate_cost(terminal, execution)
    # A refused envelope's claim is no spend either (terminals written before it was refused
    # may flag one).
    spend = (terminal.get("spend") or {}).get("over_ceiling_micros")
    facts.over_ceiling = bool(spend) and facts.cost_note is None
    if "execution" in terminal["links"]:  # measured by the supervisor, not filled in
        facts.wall_ms = terminal["runtime"]["wall_ms"]
    graded = bool(histories) and gradeable(terminal, handle.attempt["model"]) is None
    if version is not None and not graded:
        facts.pinned_out = True
        return facts
    if graded:
        facts.verdict, facts.verdict_reason = conclude(histories)
        facts.outcome = VERDICT_OUTCOME[facts.verdict]
        if facts.outcome == "invalid":
            facts.invalid_cause = invalidity.of_verdict(histories)
    elif terminal["class"] == "resolved":
        facts.outcome = "resolved"
    elif terminal["class"] in VALID_CLASSES:
        facts.outcome = "failed"
    else:
        facts.outcome = "invalid"
        facts.invalid_cause = invalidity.of_terminal(
            terminal["class"], execution and execution["facts"]
        )
    return facts


def candidate_cost(terminal: dict, execution: dict | None) -> tuple[dict, str | None]:
    """(the candidate cost the figures count, why it is unavailable or None).

    An envelope the controller refused (the execution's ``facts.envelope_problem``) is no
    evidence, whatever cost it claims: the cost is unavailable, never the claimed amount,
    also for terminals written before the controller stopped copying such a claim.
    """
    problem = execution and execution["facts"].get("envelope_problem")
    if not problem or "gateway" in terminal["links"]:  # metered: the gateway's, whatever
        return terminal["candidate_cost"], None
    if "envelope" in terminal["links"]:
        return cost.UNAVAILABLE, f"envelope rejected ({problem})"
    return cost.UNAVAILABLE, f"no usable envelope ({problem})"


def _distribution(pairs: list[tuple[int, str]]) -> dict:
    """Count, nearest-rank median and p90 (each naming the record measured at that rank, ties
    ordered by oid) and total of (ms, oid) pairs."""
    pairs = sorted(pairs)
    median = stats.nearest_rank(pairs, 50)
    p90 = stats.nearest_rank(pairs, 90)
    return {
        "count": len(pairs),
        "median_ms": median and median[0],
        "median_id": median and median[1],
        "p90_ms": p90 and p90[0],
        "p90_id": p90 and p90[1],
        "total_ms": sum(v for v, _ in pairs),
    }


# What the gateway meters of an attempt's tokens (yyb_gateway_meter.v1's ``usage``).
TOKEN_FIELDS = ("input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens")


class Tally:
    """Everything ``summarize`` reports about a group of attempts, gathered in one pass over
    the attempts and mergeable, so a model's figures are its cells' tallies merged."""

    def __init__(self) -> None:
        self.attempts = self.pinned_out = self.unmeasured = self.over_ceiling = 0
        self.outcomes = dict.fromkeys(("resolved", "failed", "invalid", "missing"), 0)
        self.causes = dict.fromkeys(INVALIDITY_CAUSES, 0)
        self.classes: dict[str, int] = {}
        self.generations: dict[str, dict[str, int]] = {}
        self.candidate: list[tuple[int, str]] = []  # (wall ms, terminal)
        self.evaluator: list[tuple[int, str]] = []  # (wall ms, evaluation receipt)
        self.combined: list[tuple[int, str]] = []  # (candidate + evaluators, evidence)
        self.candidate_costs = cost.counter()
        self.judge_costs = cost.counter()
        self.candidate_micros = self.judge_micros = 0
        self.tokens = dict.fromkeys(TOKEN_FIELDS, 0)
        self.metered = 0  # attempts whose tokens the gateway metered
        self.cells: list[tuple[int, int]] = []  # (valid, resolved) of each case, for pass@k

    @classmethod
    def of(cls, group: list[Facts]) -> Tally:
        tally = cls()
        for f in group:
            tally.add(f)
        return tally

    @classmethod
    def of_cell(cls, cell: list[Facts]) -> Tally:
        """The tally of one case's attempts, which counts as one case in pass@k."""
        tally = cls.of(cell)
        resolved = tally.outcomes["resolved"]
        tally.cells.append((resolved + tally.outcomes["failed"], resolved))
        return tally

    def add(self, f: Facts) -> None:
        if f.pinned_out:
            self.pinned_out += 1
            return
        self.attempts += 1
        self.over_ceiling += f.over_ceiling
        self.outcomes[f.outcome] += 1
        if f.invalid_cause:
            self.causes[f.invalid_cause] += 1
        if f.terminal_class:
            self.classes[f.terminal_class] = self.classes.get(f.terminal_class, 0) + 1
        for profile, generation in f.generations.items():
            used = self.generations.setdefault(profile, {})
            used[str(generation)] = used.get(str(generation), 0) + 1
        if f.wall_ms is None:
            self.unmeasured += 1
        else:
            self.candidate.append((f.wall_ms, f.terminal))
            self.combined.append((f.wall_ms + (f.evaluator_ms or 0), f.evidence or f.terminal))
        # An attempt with no terminal has no cost evidence: unavailable, never 0.
        self.candidate_micros += cost.add(
            f.candidate_cost or cost.UNAVAILABLE, self.candidate_costs
        )
        if f.tokens is not None:
            self.metered += 1
            for name in TOKEN_FIELDS:
                self.tokens[name] += f.tokens[name]
        for oid, receipt in f.evaluations:
            self.evaluator.append((receipt["wall_ms"], oid))
            self.judge_micros += cost.add(receipt["judge_cost"], self.judge_costs)

    def merge(self, other: Tally) -> None:
        self.attempts += other.attempts
        self.pinned_out += other.pinned_out
        self.over_ceiling += other.over_ceiling
        self.unmeasured += other.unmeasured
        for mine, theirs in (
            (self.outcomes, other.outcomes),
            (self.causes, other.causes),
            (self.classes, other.classes),
            (self.candidate_costs, other.candidate_costs),
            (self.judge_costs, other.judge_costs),
        ):
            for key, count in theirs.items():
                mine[key] = mine.get(key, 0) + count
        for profile, used in other.generations.items():
            mine = self.generations.setdefault(profile, {})
            for generation, count in used.items():
                mine[generation] = mine.get(generation, 0) + count
        self.candidate += other.candidate
        self.evaluator += other.evaluator
        self.combined += other.combined
        self.candidate_micros += other.candidate_micros
        self.judge_micros += other.judge_micros
        self.metered += other.metered
        for name in TOKEN_FIELDS:
            self.tokens[name] += other.tokens[name]
        self.cells += other.cells

    def summary(self) -> dict:
        resolved, failed = self.outcomes["resolved"], self.outcomes["failed"]
        valid = resolved + failed
        invalid = self.outcomes["invalid"]
        dispatched = valid + invalid
        candidate = cost.total(self.candidate_costs, self.candidate_micros)
        judge = cost.total(self.judge_costs, self.judge_micros)
        return {
            "attempts": self.attempts,
            "valid": valid,
            "resolved": resolved,
            "failed": failed,
            "invalid": self.outcomes["invalid"],
            "missing": self.outcomes["missing"],
            "not_graded_by_pin": self.pinned_out,
            "over_ceiling": self.over_ceiling,
            "rate": stats.rate(resolved, valid),
            "interval": stats.wilson(resolved, valid),
            # Over every attempt with a terminal: an invalid attempt counts as not resolved,
            # so making failures invalid cannot raise it.
            "intent_to_treat": {
                "rate": stats.rate(resolved, dispatched),
                "interval": stats.wilson(resolved, dispatched),
            },
            "invalidity": {
                "rate": stats.rate(invalid, dispatched),
                "interval": stats.wilson(invalid, dispatched),
                "causes": dict(self.causes),
            },
            "terminal_classes": dict(sorted(self.classes.items())),
            "generations": {
                p: dict(sorted(g.items())) for p, g in sorted(self.generations.items())
            },
            # Each median and p90 names the record it was measured in; each total is the sum
            # of the attempt rows' wall_ms and evaluator_ms, which list the ids behind them.
            "runtime": {
                "candidate": _distribution(self.candidate),
                "evaluator": _distribution(self.evaluator),
                "combined": _distribution(self.combined),
                "unmeasured_attempts": self.unmeasured,
            },
            "cost": {
                "candidate": candidate,
                "judge": judge,
                "total": cost.combine(candidate, judge),
            },
            # The gateway's metered tokens, over the attempts it metered (absent: none was).
            **(
                {"tokens": {**self.tokens, "metered_attempts": self.metered}}
                if self.metered
                else {}
            ),
            # Over the cases of several valid attempts (absent: no case had two).
            **({"pass_at_k": stats.pass_at_k(self.cells)} if self._repeated() else {}),
        }

    def _repeated(self) -> bool:
        return any(valid > 1 for valid, _ in self.cells)


def summarize(group: list[Facts]) -> dict:
    """Counts, the valid and intent-to-treat resolved rates and the invalidity rate with their
    Wilson intervals, invalid attempts by cause, classes, generations, runtime and cost of a
    group of attempts (a model, or a model on one case)."""
    return Tally.of(group).summary()


def case_outcome(group: list[Facts], intent_to_treat: bool = False) -> str | None:
    """A model's outcome on one case: ``resolved`` when a strict majority of its valid
    attempts resolved, ``failed`` otherwise (a tie fails), None with no valid attempt.

    With ``intent_to_treat`` the attempts counted are the valid and the invalid ones (an
    invalid attempt is not resolved), as in the intent-to-treat rate.
    """
    counted = ("resolved", "failed", "invalid") if intent_to_treat else ("resolved", "failed")
    valid = [f for f in group if not f.pinned_out and f.outcome in counted]
    if not valid:
        return None
    resolved = sum(1 for f in valid if f.outcome == "resolved")
    return "resolved" if 2 * resolved > len(valid) else "failed"


def invalidity_test(first: dict, second: dict) -> dict:
    """Whether two models' invalidity rates differ: the exact two-sided Fisher test of their
    invalid and valid attempt counts (``summarize`` results), significant below p = 0.05.

    A model whose failures are made invalid more often than another's would win a comparison
    of valid attempts only; the report warns when this test is significant.
    """
    return stats.fisher_exact(first["invalid"], first["valid"], second["invalid"], second["valid"])


def paired(first: dict[str, str | None], second: dict[str, str | None]) -> dict:
    """Pair two models' per-case outcomes and test the difference (exact McNemar).

    Args:
        first, second: case id -> ``resolved`` | ``failed`` | None (no valid attempt).
    """
    both = sorted(c for c in first if c in second and first[c] and second[c])
    table = {"both_resolved": 0, "only_first": 0, "only_second": 0, "neither": 0}
    for case_id in both:
        a, b = first[case_id] == "resolved", second[case_id] == "resolved"
        if a and b:
            key = "both_resolved"
        else:
            key = "only_first" if a else "only_second" if b else "neither"
        table[key] += 1
    return {
        "cases_paired": len(both),
        "cases_unpaired": len(set(first) | set(second)) - len(both),
        **table,
        "mcnemar_exact": stats.mcnemar_exact(table["only_first"], table["only_second"]),
    }


# Of an evaluation receipt, what the figures and the longitudinal key use (the rest stays in
# the store, linked by oid): small facts travel cheaply from worker processes.
EVALUATION_FACTS = ("profile", "generation", "evaluator", "verdict", "wall_ms", "judge_cost")


def read_attempt(store, attempt_oid: str) -> dict | str:
    """The attempt plan record, or why it cannot be read."""
    try:
        return store.objects.read_record(attempt_oid)
    except YybError as exc:
        return f"attempt plan: {exc}"


def examine(
    store,
    plan_oid: str,
    plan: dict,
    attempt_oid: str,
    attempt: dict | str,
    version: str | None,
    thorough: bool = False,
) -> tuple[verify.AttemptCheck, Facts]:
    """Gate one attempt and decide its facts from what the gate read (``attempt``: its plan
    record, or why that could not be read; ``thorough``: doctor's every check, else those the
    figures rest on). An attempt whose chain fails the gate keeps its place in the rows but
    counts as missing."""
    record = None if isinstance(attempt, str) else attempt
    check = verify.check_attempt(store, plan_oid, plan, attempt_oid, record, thorough)
    if isinstance(attempt, str):
        check.fail("unreadable", attempt)
        return check, Facts(attempt_oid, -1, "?", None)
    try:
        facts = collect(check.handle, version)
        if check.meter is not None and facts.terminal is not None:
            facts.tokens = {name: check.meter["usage"][name] for name in TOKEN_FIELDS}
        problem = shape_problem(facts)
    except (KeyError, TypeError, AttributeError) as exc:
        problem = f"lacks or mistypes {exc}"
    if problem is not None:  # records proved by their hash, yet not of their schema's shape
        check.fail("malformed", f"the figures' evidence {problem}")
        facts = Facts(attempt_oid, -1, "?", None)
    elif not check.complete and facts.terminal is not None:
        # Evidence the gate refused is no evidence: the attempt counts as missing, never
        # with the verdict a forged or broken chain claims.
        facts = Facts(facts.attempt, facts.ordinal, facts.model, facts.case_id)
    return check, facts


def _gather_chunk(
    store, plan_oid: str, plan: dict, version: str | None, thorough: bool, attempts: list[str]
) -> tuple[list[Facts], list, int]:
    facts, findings, complete = [], [], 0
    for attempt_oid in attempts:
        attempt = read_attempt(store, attempt_oid)
        check, fact = examine(store, plan_oid, plan, attempt_oid, attempt, version, thorough)
        findings += check.findings
        complete += check.complete
        facts.append(fact)
    return facts, findings, complete


def _is_ms(value) -> bool:
    return type(value) is int and value >= 0


def _is_cost(value) -> bool:
    return (
        type(value) is dict
        and value.get("completeness") in COST_COMPLETENESS
        and (value.get("micros") is None or _is_ms(value["micros"]))
    )


def shape_problem(facts: Facts) -> str | None:
    """What is wrong with the types of the values the figures use, or None."""
    if type(facts.ordinal) is not int or type(facts.model) is not str:
        return "has an attempt plan without an integer ordinal and a model"
    if facts.case_id is not None and type(facts.case_id) is not str:
        return f"has a case id of {facts.case_id!r}"
    if facts.wall_ms is not None and not _is_ms(facts.wall_ms):
        return f"has a wall time of {facts.wall_ms!r}"
    if facts.terminal is not None and not _is_cost(facts.candidate_cost):
        return f"has a candidate cost of {facts.candidate_cost!r}"
    for oid, receipt in facts.evaluations:
        if not _is_ms(receipt["wall_ms"]) or not (
            receipt["judge_cost"] is None or _is_cost(receipt["judge_cost"])
        ):
            return f"has evaluation {oid} with a wall time or cost of the wrong type"
    return None


def gather(
    store, plan_oid: str, plan: dict, version: str | None, thorough: bool = False
) -> tuple[list[Facts], list, int]:
    """Gate and read every attempt of the plan, its run refs held to the log: (facts,
    findings, complete chains), the attempts the log refutes not counted complete."""
    facts, findings, complete = [], [], 0
    parts, logged = experiment.checked_with_log(
        store,
        plan_oid,
        plan["links"]["attempts"],
        _gather_chunk,
        (store, plan_oid, plan, version, thorough),
    )
    for part in parts:
        facts += part[0]
        findings += part[1]
        complete += part[2]
    facts, complete = _refuse(facts, complete, experiment.refused(plan_oid, logged))
    return facts, findings + logged, complete


@heap.without_gc
def build(
    store, plan_oid: str, version: str | None = None, verify_objects: bool = False
) -> tuple[dict, list[Facts]]:
    """The report document of one experiment and the per-attempt facts it came from.

    Raises:
        UsageError: ``plan_oid`` is not an experiment plan in the store.
    """
    plan = store.objects.get_record(plan_oid)
    if not ExperimentPlan.holds(plan):
        raise UsageError(f"{plan_oid} is not an experiment plan")
    plan, findings = experiment.check_plan(store, plan_oid, plan)
    members = retries.family(store, plan_oid, plan)
    if len(members) > 1:
        findings += retries.check_links(store, plan_oid, plan)
    facts, complete = [], 0
    for oid, member in members:
        if oid != plan_oid:
            findings += experiment.check_plan(store, oid, member)[1]
        part, more, done = _member(store, oid, member, version, verify_objects)
        facts += part
        findings += more
        complete += done
    doctor = experiment.summary(plan_oid, len(facts), complete, findings)
    errors = [f for f in findings if f.level == "error"]
    counted = family.count(store, members, facts) if len(members) > 1 else None
    figures = facts if counted is None else counted.facts
    models = [m["resolved"] for m in plan["models"]]
    by_model, outcomes, treated, totals = _tally(figures, models)
    comparisons = [
        {
            "first": first,
            "second": second,
            **paired(outcomes[first], outcomes[second]),
            "invalidity_fisher_exact": invalidity_test(by_model[first], by_model[second]),
            "intent_to_treat": paired(treated[first], treated[second]),
        }
        for i, first in enumerate(models)
        for second in models[i + 1 :]
    ]
    pairs = pairwise_table(store, plan, figures, models)
    complete = doctor["status"] == "complete"
    report = {
        "plan": plan_oid,
        "comparison_classification": plan["comparison"],
        "grader_version": version,
        "status": "complete" if complete else "incomplete",
        "doctor": {
            "gate": "objects" if verify_objects else "chains",
            "attempts": doctor["attempts"],
            "complete_chains": doctor["complete"],
            "errors": len(errors),
            "first_errors": [f.line() for f in errors[:5]],
        },
        "totals": totals.summary(),
        "models": [by_model[m] for m in models],
        "comparisons": comparisons,
        "attempts": [_row(f) for f in facts],
    }
    if counted is not None:
        report["family"] = family.summary(members, counted, facts, models)
        report["attempts"] = [family.annotate(row, counted) for row in report["attempts"]]
    if pairs:
        report["pairwise"] = pairs
    exposed = planned.protects_nothing(plan)
    if exposed:
        report["unprotected"] = exposed
    return report, facts


def _member(
    store, plan_oid: str, plan: dict, version: str | None, thorough: bool
) -> tuple[list[Facts], list, int]:
    """One plan's gated facts in ordinal order, the findings about its chains and log (and,
    ``thorough``, its objects), and its complete chains."""
    facts, findings, complete = gather(store, plan_oid, plan, version, thorough=thorough)
    if thorough:
        findings += list(experiment.verify_objects(store, plan_oid))
    facts.sort(key=lambda f: f.ordinal)
    return facts, findings, complete


def _tally(facts: list[Facts], models: list[str]) -> tuple[dict, dict, dict, Tally]:
    """Per model: its summary with a row per case, each case's outcome over its valid
    attempts and its intent-to-treat outcome; and the totals (attempts of other models too)."""
    cells: dict[str, dict[str, list[Facts]]] = {model: {} for model in models}
    for f in facts:
        if f.model in cells:
            cells[f.model].setdefault(f.case_id or "-", []).append(f)
    by_model = {}
    outcomes: dict[str, dict[str, str | None]] = {}
    treated: dict[str, dict[str, str | None]] = {}  # intent-to-treat outcomes
    totals = Tally.of([f for f in facts if f.model not in cells])
    for model in models:
        tally = Tally()
        rows = []
        outcomes[model], treated[model] = {}, {}
        for case_id, cell in sorted(cells[model].items()):
            cell_tally = Tally.of_cell(cell)
            tally.merge(cell_tally)
            row = cell_tally.summary()
            row["case_id"] = case_id
            row["outcome"] = case_outcome(cell)
            rows.append(row)
            outcomes[model][case_id] = row["outcome"]
            treated[model][case_id] = case_outcome(cell, intent_to_treat=True)
        by_model[model] = {**tally.summary(), "model": model, "cases": rows}
        totals.merge(tally)
    return by_model, outcomes, treated, totals


def _refuse(facts: list[Facts], complete: int, attempts: set[str]) -> tuple[list[Facts], int]:
    """``facts`` with each of ``attempts`` (whose run refs the log does not bear out) counted
    as missing, as the gate counts a chain it refuses; the complete chains less those."""
    if not attempts:
        return facts, complete
    kept = []
    for f in facts:
        if f.attempt in attempts and f.terminal is not None:
            f = Facts(f.attempt, f.ordinal, f.model, f.case_id)
            complete -= 1
        kept.append(f)
    return kept, complete


def _row(f: Facts) -> dict:
    row = {
        "ordinal": f.ordinal,
        "attempt": f.attempt,
        "model": f.model,
        "case_id": f.case_id,
        "terminal": f.terminal,
        "evidence": f.evidence,
        "terminal_class": f.terminal_class,
        "verdict": f.verdict,
        "outcome": "not_graded_by_pin" if f.pinned_out else f.outcome,
        "wall_ms": f.wall_ms,
        "evaluator_ms": f.evaluator_ms,
        "evaluations": [oid for oid, _ in f.evaluations],
        "displaced": None,
        "number": f.number,
        "environment": f.environment,
        "candidate_cost": f.candidate_cost,
        "tokens": f.tokens,
        # Each evaluator profile's newest verdict among the evaluations counted.
        "verdicts": {r["profile"]: r["verdict"] for _, r in f.evaluations},
    }
    if f.cost_note is not None:  # only then: rows of every other attempt keep their bytes
        row["cost_note"] = f.cost_note
    return row
