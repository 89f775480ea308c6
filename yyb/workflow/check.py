"""``workflow doctor`` and ``workflow report``: a governed experiment from retained evidence.

The doctor proves every step attempt's chain: plan -> step attempt -> intents (one per
dispatch, each linking the one before) -> terminal, every dispatch id derived from the plan,
the step attempt and the dispatch number, and the terminal's class derived again from the
retained envelope, so a terminal rewritten to another model or class is found. A plan with a
step attempt that has no terminal is incomplete, which is an error: no partial experiment is
verified as whole. The report counts only what the doctor would accept.
"""

from __future__ import annotations

import hashlib

from yyb.errors import YybError
from yyb.evidence import names
from yyb.evidence.kinds.governed import GovernedIntent, GovernedJudgement, GovernedTerminal
from yyb.evidence.record import ABSENT
from yyb.reports import stats
from yyb.store.fsck import Finding
from yyb.workflow import files, judging
from yyb.workflow.plan import Plan
from yyb.workflow.run import classify, dispatch_id


def doctor(store, plan: Plan) -> list[Finding]:
    found: list[Finding] = []

    def error(code: str, subject: str, message: str) -> None:
        found.append(Finding("error", code, subject, message))

    if store.refs.read(names.governed_plan(plan.oid)) != plan.oid:
        error("plan-not-stored", plan.oid, "refs/governed/<plan>/plan does not name the plan")
    for oid, value in plan.records.items():
        try:
            if store.objects.get_record(oid) != value:
                error("plan-record-differs", oid, "the stored record is not the plan's")
        except YybError as exc:
            error("plan-record-missing", oid, str(exc))
    for oid in plan.value["links"]["workflows"]:
        value = plan.records[oid]
        if hashlib.sha256(files.canonical(value["workflow"])).hexdigest() != value["sha256"]:
            error("workflow-hash", oid, "the compiled workflow does not hash to its sha256")
    for attempt_oid in plan.attempts:
        try:
            _step(store, plan, attempt_oid, error)
        except YybError as exc:
            error("chain-unreadable", attempt_oid, str(exc))
    return found


def _step(store, plan: Plan, attempt_oid: str, error) -> None:
    step = plan.records[attempt_oid]
    terminal_oid = store.refs.read(names.governed_step(plan.oid, attempt_oid, "terminal"))
    intent_oid = store.refs.read(names.governed_step(plan.oid, attempt_oid, "intent"))
    if terminal_oid is None:
        error("incomplete", attempt_oid, f"step {step['step']!r} has no terminal")
        return
    value = store.objects.get_record(terminal_oid)
    if not GovernedTerminal.holds(value):
        error("terminal-kind", attempt_oid, "the terminal ref names another kind of record")
        return
    terminal = GovernedTerminal.from_stored(value)  # the store validated it when written
    if (terminal.plan, terminal.attempt, terminal.step) != (plan.oid, attempt_oid, step["step"]):
        error("terminal-elsewhere", attempt_oid, "the terminal names another plan or step")
    if terminal.links.intent != intent_oid:
        error("terminal-intent", attempt_oid, "the terminal links another intent than the ref")
    if not _intents(store, plan, attempt_oid, terminal, error):
        return
    _judgements(store, plan, attempt_oid, step, terminal_oid, error)
    envelope_oid = terminal.links.envelope
    data = store.objects.get(envelope_oid).body if envelope_oid else None
    cls, _, observed = classify(data, terminal.exit_code, step["model"]["resolved"])
    if terminal.requested != step["model"]["resolved"]:
        error("terminal-model", attempt_oid, "the terminal names another requested model")
    if (cls, observed) != (terminal.class_, terminal.observed):
        error(
            "terminal-derivation",
            attempt_oid,
            f"the retained envelope gives {cls} (observed {observed}); the terminal says "
            f"{terminal.class_} (observed {terminal.observed})",
        )


def _intents(store, plan: Plan, attempt_oid: str, terminal: GovernedTerminal, error) -> bool:
    """Every dispatch of a step attempt, newest first, back to the first: each this step's,
    numbered down to 1, with the dispatch id derived from the plan. False when one is another
    step's (nothing after it can be checked)."""
    number, oid = None, terminal.links.intent
    while oid is not None:
        value = store.objects.get_record(oid)
        if not GovernedIntent.holds(value) or value["attempt"] != attempt_oid:
            error("intent-elsewhere", attempt_oid, f"intent {oid} is not this step's")
            return False
        intent = GovernedIntent.from_stored(value)
        if number is not None and intent.dispatch != number - 1:
            error("intent-order", attempt_oid, f"intent {oid} is not the dispatch before")
        number = intent.dispatch
        if intent.dispatch_id != dispatch_id(plan.oid, attempt_oid, number):
            error("dispatch-id", attempt_oid, f"intent {oid} names a dispatch id of its own")
        if oid == terminal.links.intent and intent.dispatch_id != terminal.dispatch_id:
            error("terminal-dispatch", attempt_oid, "the terminal is for another dispatch")
        oid = None if intent.links.previous is ABSENT else intent.links.previous
    if number != 1:
        error("intent-order", attempt_oid, "the first intent is not dispatch 1")
    return True


def _judgements(store, plan: Plan, attempt_oid: str, step: dict, terminal_oid: str, error):
    """The judgement generations of a judged step attempt: present, numbered down to 1, each
    judging this step attempt's terminal with the step's profile."""
    profile = judging.profile_of(step)
    if profile is None:
        return
    oid = store.refs.read(names.governed_judgement(plan.oid, attempt_oid, profile))
    if oid is None:
        error("unjudged", attempt_oid, f"step {step['step']!r} has no {profile} judgement")
        return
    expected = None
    while oid is not None:
        value = store.objects.get_record(oid)
        judgement = GovernedJudgement.from_stored(value) if GovernedJudgement.holds(value) else None
        if judgement is None or (
            judgement.attempt,
            judgement.profile,
            judgement.links.terminal,
        ) != (attempt_oid, profile, terminal_oid):
            error("judgement-elsewhere", attempt_oid, f"judgement {oid} is not of this terminal")
            return
        if expected is not None and judgement.generation != expected:
            error("judgement-order", attempt_oid, f"judgement {oid} is out of order")
        store.objects.get(judgement.links.input)  # the judged payload is retained
        expected = judgement.generation - 1
        oid = None if judgement.links.previous is ABSENT else judgement.links.previous
    if expected != 0:
        error("judgement-order", attempt_oid, "the first judgement is not generation 1")


def report(store, plan: Plan) -> dict:
    """Per step and model (``rows``) and per model over its steps (``models``): step
    attempts, terminals by class, the newest judgements' verdicts (``judged``), and three
    rates with their Wilson intervals, as the isolated report has them (docs/reports.md):
    ``itt`` resolved over every step attempt (an incomplete or invalid one counts as not
    resolved), ``valid`` resolved over the valid ones (a terminal that is not a harness
    failure), and ``invalidity`` (harness failures and incomplete step attempts over all).
    ``comparisons``: for each pair of models, the exact Fisher test of their invalid and
    valid counts; ``warning`` when it is significant (one model's failures are made invalid
    more often, which a comparison of valid rates alone would reward)."""
    cells: dict[tuple[str, str], dict] = {}
    for attempt_oid in plan.attempts:
        step = plan.records[attempt_oid]
        key = (step["step"], step["model"]["resolved"])
        cell = cells.setdefault(key, {"attempts": 0, "classes": {}, "incomplete": 0})
        cell["attempts"] += 1
        oid = store.refs.read(names.governed_step(plan.oid, attempt_oid, "terminal"))
        if oid is None:
            cell["incomplete"] += 1
            continue
        cls = GovernedTerminal.read(store.objects, oid).class_
        cell["classes"][cls] = cell["classes"].get(cls, 0) + 1
        profile = judging.profile_of(step)
        judged = judging.newest(store, plan, attempt_oid, profile) if profile else None
        if judged is not None:
            verdicts = cell.setdefault("judged", {})
            verdicts[judged.verdict] = verdicts.get(judged.verdict, 0) + 1
    rows, models = [], {}
    for step in plan.value["steps"]:
        for model in plan.value["models"]:
            cell = cells.get((step, model["resolved"]))
            if cell is None:
                continue
            rows.append({"step": step, "model": model["resolved"], **_rates(cell)})
            total = models.setdefault(
                model["resolved"], {"attempts": 0, "classes": {}, "incomplete": 0}
            )
            total["attempts"] += cell["attempts"]
            total["incomplete"] += cell["incomplete"]
            for cls, count in cell["classes"].items():
                total["classes"][cls] = total["classes"].get(cls, 0) + count
    by_model = {m: {"model": m, **_rates(total)} for m, total in models.items()}
    names_ = list(by_model)
    comparisons = []
    for i, first in enumerate(names_):
        for second in names_[i + 1 :]:
            a, b = by_model[first], by_model[second]
            test = stats.fisher_exact(a["invalid"], a["valid"], b["invalid"], b["valid"])
            comparisons.append(
                {
                    "first": first,
                    "second": second,
                    "invalidity_fisher_exact": test,
                    "warning": (
                        f"{first} and {second} differ in invalidity (p {stats.p_text(test)}): "
                        "compare their intent-to-treat rates, not their valid rates"
                    )
                    if test["significant"]
                    else None,
                }
            )
    return {
        "plan": plan.oid,
        "workflow": plan.value["workflow"]["name"],
        "rows": rows,
        "models": list(by_model.values()),
        "comparisons": comparisons,
    }


def _rates(cell: dict) -> dict:
    resolved = cell["classes"].get("resolved", 0)
    invalid = cell["classes"].get("harness_failure", 0) + cell["incomplete"]
    valid = cell["attempts"] - invalid
    return {
        **cell,
        "resolved": resolved,
        "valid": valid,
        "invalid": invalid,
        "resolved_rate_ppm": stats.rate_ppm(resolved, cell["attempts"]),
        "interval": stats.wilson(resolved, cell["attempts"]),
        "valid_rate_ppm": stats.rate_ppm(resolved, valid),
        "valid_interval": stats.wilson(resolved, valid),
        "invalidity_ppm": stats.rate_ppm(invalid, cell["attempts"]),
        "invalidity_interval": stats.wilson(invalid, cell["attempts"]),
    }
