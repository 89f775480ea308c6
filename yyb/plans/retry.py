"""Freezing a retry plan: the cells of a plan whose terminal the infrastructure caused, as new
attempts of a new plan that measures what the original measured (docs/plans.md, "Retries").

Nothing of the original changes and nothing is run here: the retry plan is built in memory from
the original's records and retained evidence (never from the current configuration) and then
written like any plan, so `yyb authorize` and `yyb run --plan` take it as they take any plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from yyb.errors import UsageError, YybError
from yyb.evidence import names, retries
from yyb.evidence.check import check_attempt
from yyb.evidence.kinds.plan import AttemptPlan, ExperimentPlan
from yyb.evidence.plan import ceiling
from yyb.evidence.record import kind_of
from yyb.evidence.records import PLAN, VALID_CLASSES
from yyb.evidence.verdict import conclude
from yyb.plans import budget
from yyb.plans.build import Plan


@dataclass(frozen=True)
class Selection:
    """What a retry of one plan finds among its attempts.

    Attributes:
        retried: (attempt plan oid, record) of each attempt whose cell the retry runs again,
            in the plan's order.
        graded_invalid: attempts invalid only because of their grading (a regrade's job).
        unfinished: attempts without a terminal (a rerun of the plan finishes them).
        candidate: attempts invalid by a harness failure the candidate caused (never retried).
        unverified: attempts with a terminal whose chain the gate refuses.
        elsewhere: plan oid -> how many attempts another stored retry plan retries already.
    """

    retried: tuple[tuple[str, dict], ...] = ()
    graded_invalid: int = 0
    unfinished: int = 0
    candidate: int = 0
    unverified: int = 0
    elsewhere: dict[str, int] = field(default_factory=dict)

    def notes(self) -> list[str]:
        """One line per kind of attempt not retried that a user may want to act on."""
        lines = []
        if self.graded_invalid:
            lines.append(
                f"{self.graded_invalid} attempt(s) invalid only because of their grading are "
                "not retried: regrade them (yyb regrade)"
            )
        if self.unfinished:
            lines.append(
                f"{self.unfinished} attempt(s) without a terminal are not retried: "
                "running the plan again (yyb run) finishes them"
            )
        if self.candidate:
            lines.append(
                f"{self.candidate} harness failure(s) the candidate caused are not retried"
            )
        if self.unverified:
            lines.append(f"{self.unverified} attempt(s) whose chain doctor refuses are not retried")
        for other, count in sorted(self.elsewhere.items()):
            lines.append(
                f"{count} attempt(s) are retried already by plan {other} (retry that plan instead)"
            )
        return lines


class NothingToRetry(YybError):
    """A plan none of whose attempts a retry may run again; ``selection`` says what it has."""

    def __init__(self, plan_oid: str, selection: Selection):
        found = "; ".join(selection.notes())
        super().__init__(
            f"nothing to retry in plan {plan_oid}: no attempt has a terminal the "
            f"infrastructure caused{': ' + found if found else ''}"
        )
        self.plan = plan_oid
        self.selection = selection


def retried_elsewhere(store, plan_oid: str) -> dict[str, str]:
    """Attempt of ``plan_oid`` -> the stored retry plan (under refs/plans/) that retries it."""
    out: dict[str, str] = {}
    for ref in store.refs.names(under=names.PLANS):
        oid = store.refs.read(ref)
        try:
            record = store.objects.get_record(oid)
        except YybError:
            continue  # doctor names an unreadable plan; it retries nothing here
        if kind_of(record) != PLAN or retries.parent(record) != plan_oid:
            continue
        for attempt_oid in record["links"]["attempts"]:
            target = store.objects.get_record(attempt_oid)["links"].get("retry_of")
            if target is not None:
                out.setdefault(target, oid)
    return out


def select(store, plan_oid: str, plan: dict) -> Selection:
    """Which attempts of the plan a retry runs again (``retries.retryable``, each chain
    through the report's gate), and what the others are."""
    elsewhere = retried_elsewhere(store, plan_oid)
    chosen: list[tuple[str, dict]] = []
    counts = dict.fromkeys(("graded_invalid", "unfinished", "candidate", "unverified"), 0)
    others: dict[str, int] = {}
    for attempt_oid in plan["links"]["attempts"]:
        attempt = store.objects.read_record(attempt_oid)
        check = check_attempt(store, plan_oid, plan, attempt_oid, attempt, thorough=False)
        handle = check.handle
        if store.refs.read(names.attempt(plan_oid, attempt_oid, "terminal")) is None:
            counts["unfinished"] += 1
        elif not check.complete or handle.terminal is None:
            counts["unverified"] += 1
        elif retries.graded(handle):
            counts["graded_invalid"] += conclude(handle.histories())[0] == "invalid"
        elif retries.retryable(handle):
            if attempt_oid in elsewhere:
                others[elsewhere[attempt_oid]] = others.get(elsewhere[attempt_oid], 0) + 1
            else:
                chosen.append((attempt_oid, attempt))
        elif handle.terminal.record["class"] not in VALID_CLASSES:
            counts["candidate"] += 1
    return Selection(tuple(chosen), elsewhere=others, **counts)


def retry_plan(store, plan_oid: str) -> tuple[Plan, Selection]:
    """Build (in memory) the retry plan of the stored plan ``plan_oid``.

    Raises:
        UsageError: ``plan_oid`` is not an experiment plan.
        NothingToRetry: no attempt of it may be retried (nothing is built).
    """
    original = store.objects.get_record(plan_oid)
    if not ExperimentPlan.holds(original):
        raise UsageError(f"{plan_oid} is not an experiment plan")
    selection = select(store, plan_oid, original)
    if not selection.retried:
        raise NothingToRetry(plan_oid, selection)
    built = Plan("", {})
    for case_oid in original["links"].get("cases", []):
        built.records[case_oid] = store.objects.get_record(case_oid)
    for ordinal, (attempt_oid, attempt) in enumerate(selection.retried):
        stored = AttemptPlan.from_stored(attempt)
        again = replace(stored, ordinal=ordinal, links=replace(stored.links, retry_of=attempt_oid))
        built.attempt_oids.append(built.add(again))
    value = {key: original[key] for key in original if key not in retries.OWN_FIELDS}
    value["attempt_count"] = len(built.attempt_oids)
    value["budget"] = _budget(original["budget"], [a for _, a in selection.retried])
    value["links"] = {
        **{k: v for k, v in original["links"].items() if k not in retries.OWN_LINKS},
        "attempts": list(built.attempt_oids),
        "retry_of": plan_oid,
    }
    built.experiment = ExperimentPlan.from_stored(value).to_value()
    built.oid = built.add(built.experiment)
    return built, selection


def _budget(spend: dict | None, attempts: list[dict]) -> dict | None:
    """The retry's budget: the sum of the retried attempts' ceilings, split as a plan's
    budget is (every ceiling is the original's, so the split names the largest one)."""
    if spend is None:
        return None
    total = sum(ceiling(a) or 0 for a in attempts)
    return {
        "currency": budget.CURRENCY,
        "total_micros": total,
        "per_attempt_micros": total // len(attempts),
        "remainder_micros": total % len(attempts),
    }
