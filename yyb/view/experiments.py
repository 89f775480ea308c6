"""The experiment pages: every plan, one plan with its newest report layer and its model x
case matrix, its layers over time, and the longitudinal report.

The figures are the stored report layers' (``yyb report`` computed them; the viewer writes
none). The matrix takes each attempt's outcome from the newest layer's rows when that layer
covers every attempt of the plan, else each attempt's terminal class from its terminal
record. Each layer shown is verified like any object (its verified badge).
"""

from __future__ import annotations

from yyb.errors import YybError
from yyb.evidence import names
from yyb.evidence.kinds.plan import ExperimentPlan
from yyb.evidence.kinds.report import LongitudinalLayer, LongitudinalLayerV2
from yyb.reports import layer as layers_of
from yyb.reports.render import rate_text
from yyb.store.objects.format import is_oid
from yyb.view import compare, status, urls
from yyb.view.chain import NotInStore, read_plan
from yyb.view.markup import Markup, badge, el, facts, join, link, oid, pager, table, usd, when
from yyb.view.values import word
from yyb.view.verify import signature, verify

MATRIX_CASES = 100  # cases per page of the matrix
CHIPS = 30  # attempts shown in one cell of the matrix
LAYERS_SHOWN = 1000  # earlier longitudinal layers listed
# Outcomes (and terminal classes, shown when no layer covers the plan), by the colour they get.
OUTCOME_STATE = {"resolved": "ok", "failed": "warn"} | dict.fromkeys(
    ("model_failure", "grader_failure", "safety_failure", "timeout"), "warn"
)


def home(store) -> tuple[str, Markup]:
    """Every experiment plan under ``refs/plans``, with its newest layer's rates."""
    rows, listed = [], []
    for _, plan_oid in _refs(store, names.PLANS):
        try:
            plan = store.objects.read_record(plan_oid)
        except YybError as exc:
            rows.append([oid(plan_oid), badge("FAILED", "bad"), str(exc), "", "", ""])
            continue
        if not ExperimentPlan.holds(plan):
            continue
        head = _read(store, names.report(plan_oid))
        layer = _record(store, head)
        rates = "-"
        if layer is not None:
            rates = join(
                el("div", f"{word(m.get('model'))}: {_rate(m)}") for m in layer["report"]["models"]
            )
        models = ", ".join(word(m.get("resolved")) for m in plan.get("models", []))
        listed.append((plan_oid, f"{plan_oid[:12]} ({models})"))
        rows.append(
            [
                link(urls.plan(plan_oid), el("code", plan_oid[:12]), title=plan_oid),
                word(plan.get("kind")),
                ", ".join(word(m.get("resolved")) for m in plan.get("models", [])),
                str(len(plan.get("cases", []))),
                word(plan.get("attempt_count")),
                rates if layer else "no report layer",
            ]
        )
    body = [
        el("h1", "Experiments"),
        table(["plan", "kind", "models", "cases", "attempts", "newest report layer"], rows)
        if rows
        else el("p", "no experiment plan in this store (refs/plans/ is empty)"),
        compare.form(listed),
        el(
            "p",
            link(urls.longitudinal(), "the longitudinal report"),
            " · ",
            link(urls.refs(), "every ref"),
        ),
    ]
    return "experiments", join(body)


def experiment(store, trusted: list, plan_oid: str, page: int) -> tuple[str, Markup]:
    plan = read_plan(store, plan_oid)
    attempts = plan.get("links", {}).get("attempts", [])
    head = _read(store, names.report(plan_oid))
    layer = _record(store, head)
    rows = _rows(store, plan_oid, plan, layer)
    body = [
        el("h1", "Experiment ", oid(plan_oid)),
        status.table_of([verify(store, plan_oid)]),
        facts(
            [
                ("kind", word(plan.get("kind"))),
                ("comparison", word(plan.get("comparison"))),
                (
                    "models",
                    ", ".join(
                        f"{word(m.get('requested'))} = {word(m.get('resolved'))}"
                        for m in plan.get("models", [])
                    ),
                ),
                ("cases", str(len(plan.get("cases", [])))),
                ("attempts", f"{len(attempts)} ({word(plan.get('attempts_per_cell'))} per cell)"),
                ("evaluators", ", ".join((plan.get("evaluators") or {}).get("selected", []))),
                ("timeout", f"{word(plan.get('timeout_ms'))} ms"),
                (
                    "versions",
                    ", ".join(f"{k} {word(v)}" for k, v in (plan.get("versions") or {}).items()),
                ),
            ]
        ),
        el("h2", "Newest report layer"),
        _layer_summary(store, trusted, plan_oid, head, layer),
        el("h2", "Model x case"),
        _matrix(plan_oid, plan, rows, page),
    ]
    return f"experiment {plan_oid[:12]}", join(body)


def _layer_summary(
    store, trusted: list, plan_oid: str, head: str | None, layer: dict | None
) -> Markup:
    if head is None:
        return el("p", "no report layer: run 'yyb report --plan ", plan_oid[:12], "'")
    if layer is None:
        return join(
            [el("p", "the newest layer cannot be read:"), status.table_of([verify(store, head)])]
        )
    report = layer["report"]
    doctor = report.get("doctor") or {}
    state = "ok" if report.get("status") == "complete" else "bad"
    rows = [
        [
            word(m.get("model")),
            word(m.get("attempts")),
            word(m.get("valid")),
            word(m.get("resolved")),
            _rate(m),
            rate_text(m["intent_to_treat"], "-") if "intent_to_treat" in m else "-",
            word(m.get("invalid")),
            word(m.get("missing")),
            ", ".join(f"{k} {v}" for k, v in (m.get("terminal_classes") or {}).items()) or "-",
            usd((m.get("cost") or {}).get("total")),
        ]
        for m in report.get("models", [])
    ]
    header = ["model", "attempts", "valid", "resolved", "valid resolved rate [95% Wilson]"]
    header += ["intent-to-treat rate", "invalid", "missing", "terminal classes", "total cost"]
    return join(
        [
            el(
                "p",
                "layer ",
                oid(head),
                " ",
                status.overall(verify(store, head)),
                " ",
                status.signature(signature(store, head, trusted)),
                " ",
                badge(word(report.get("status")), state),
                f" gate {word(doctor.get('gate'))}: {word(doctor.get('complete_chains'))} of "
                f"{word(doctor.get('attempts'))} chains complete · ",
                link(urls.layers(plan_oid), "every layer"),
                " · ",
                link(urls.report(plan_oid), "as the HTML report"),
            ),
            table(header, rows),
        ]
    )


def _rate(entry: dict) -> str:
    try:
        return rate_text(entry)
    except (KeyError, TypeError):
        return "-"


def _rows(store, plan_oid: str, plan: dict, layer: dict | None) -> list[dict]:
    """One row per attempt: ordinal, attempt, model, case_id, and what it ``shown`` as (its
    outcome in the newest layer when that covers every attempt, else its terminal class)."""
    attempts = plan.get("links", {}).get("attempts", [])
    if layer is not None:
        try:
            rows = layers_of.layer_rows(store, layer)
        except YybError:
            rows = []
        if {r.get("attempt") for r in rows} == set(attempts):
            return [dict(r, shown=r.get("outcome")) for r in rows]
    out = []
    for ordinal, attempt_oid in enumerate(attempts):
        try:
            record = store.objects.read_record(attempt_oid)
        except YybError:
            record = {}
        out.append(
            {
                "ordinal": record.get("ordinal", ordinal),
                "attempt": attempt_oid,
                "model": (record.get("model") or {}).get("resolved", "?"),
                "case_id": record.get("case_id"),
                "shown": _terminal_class(store, plan_oid, attempt_oid),
            }
        )
    return out


def _terminal_class(store, plan_oid: str, attempt_oid: str) -> str:
    """The attempt's terminal class; ``no terminal`` when it has none (or none readable)."""
    terminal = _record(store, _read(store, names.attempt(plan_oid, attempt_oid, "terminal")))
    return str((terminal or {}).get("class", "no terminal"))


def _matrix(plan_oid: str, plan: dict, rows: list[dict], page: int) -> Markup:
    models = [m.get("resolved", "?") for m in plan.get("models", [])]
    cases = sorted({r.get("case_id") or "-" for r in rows})
    pages = max(1, -(-len(cases) // MATRIX_CASES))
    if page > pages:
        raise NotInStore(f"the matrix has {pages} page(s)")
    shown = cases[(page - 1) * MATRIX_CASES : page * MATRIX_CASES]
    cells: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        cells.setdefault((row.get("case_id") or "-", row.get("model")), []).append(row)
    body = []
    for case in shown:
        line: list[object] = [case]
        for model in models:
            found = sorted(cells.get((case, model), []), key=lambda r: r.get("ordinal", 0))
            chips = [_chip(plan_oid, r) for r in found[:CHIPS]]
            if len(found) > CHIPS:
                chips.append(f" +{len(found) - CHIPS} more")
            line.append(join(chips) if chips else "-")
        body.append(line)
    return join(
        [
            el(
                "p",
                "each attempt by ordinal, with its outcome in the newest layer (or its "
                "terminal class when no layer covers every attempt)",
            ),
            table(["case", *models], body, class_="matrix"),
            pager(lambda n: urls.paged(urls.plan(plan_oid), n), page, pages),
        ]
    )


def _chip(plan_oid: str, row: dict) -> Markup:
    shown = str(row.get("shown") or "-")
    attempt = row.get("attempt")
    if not is_oid(attempt):
        return badge(shown, "bad")
    return link(
        urls.attempt(plan_oid, attempt),
        f"#{row.get('ordinal')} {shown}",
        class_=f"chip badge {OUTCOME_STATE.get(shown, 'bad')}",
        title=f"attempt {attempt}: {shown}",
    )


def layers(store, plan_oid: str) -> tuple[str, Markup]:
    """Every report layer of the plan, newest first, with the verdicts each displaced."""
    read_plan(store, plan_oid)
    ref = names.report(plan_oid)
    times = _update_times(store, ref)
    rows, changes = [], []
    oid_ = _read(store, ref)
    seen: set[str] = set()
    while is_oid(oid_) and oid_ not in seen:
        seen.add(oid_)
        check = verify(store, oid_)
        layer = check.value or {}
        report = layer.get("report") or {}
        rows.append(
            [
                oid(oid_),
                status.overall(check),
                when(times.get(oid_)),
                word(report.get("status")),
                word(layer.get("grader_version")),
                join(
                    el("div", f"{word(m.get('model'))}: {_rate(m)}")
                    for m in report.get("models", [])
                ),
            ]
        )
        try:
            displaced = [r for r in layers_of.layer_rows(store, layer) if r.get("displaced")]
        except (YybError, KeyError, TypeError):
            displaced = []
        for r in displaced:
            was = r["displaced"]
            changes.append(
                [
                    oid(oid_),
                    _chip(plan_oid, dict(r, shown=r.get("outcome"))),
                    f"{word(r.get('verdict'))} (was {word(was.get('verdict'))})",
                    oid(was["layer"]) if is_oid(was.get("layer")) else "-",
                ]
            )
        oid_ = (layer.get("links") or {}).get("previous")
    body = [
        el("h1", "Report layers of ", link(urls.plan(plan_oid), el("code", plan_oid[:12]))),
        table(["layer", "verified", "stored", "status", "grader pin", "valid resolved rate"], rows)
        if rows
        else el("p", "no report layer"),
        el("h2", f"Displaced verdicts ({len(changes)})"),
        table(["in layer", "attempt", "verdict", "displaced from layer"], changes)
        if changes
        else el("p", "no verdict changed between layers"),
    ]
    return f"layers of {plan_oid[:12]}", join(body)


def longitudinal(store) -> tuple[str, Markup]:
    """The newest longitudinal layer: cohorts and incompatibilities; older layers listed."""
    head = _read(store, names.LONGITUDINAL)
    if head is None:
        body = el("p", "no longitudinal layer: run 'yyb report --longitudinal'")
        return "longitudinal", join([el("h1", "Longitudinal report"), body])
    check = verify(store, head)
    layer = check.value or {}
    if not (LongitudinalLayer.holds(layer) or LongitudinalLayerV2.holds(layer)):
        what = f"{names.LONGITUDINAL} names {head}, which is not a longitudinal layer"
        return "longitudinal", join(
            [el("h1", "Longitudinal report"), el("p", what), status.table_of([check])]
        )
    report = layer.get("report") or {}
    cohorts = report.get("cohorts")
    if cohorts is None:
        try:
            cohorts = layers_of.part_items(store, layer["links"].get("cohorts", []), "cohorts")
        except (YybError, KeyError, TypeError):
            cohorts = []
    cohort_rows = [
        [
            word(c.get("case_id")),
            word(c.get("model")),
            el("code", str(c.get("key_hash"))[:12], title=str(c.get("key_hash"))),
            join((oid(p, urls.plan(p)) for p in c.get("plans", []) if is_oid(p)), " "),
            word(c.get("attempts")),
            word(c.get("valid")),
            word(c.get("resolved")),
            _rate(c),
            word(c.get("invalid")),
            ", ".join(f"{k} {v}" for k, v in (c.get("terminal_classes") or {}).items()) or "-",
        ]
        for c in cohorts
    ]
    found = report.get("incompatibilities") or []
    incompatible = [
        [
            word(i.get("case_id")),
            word(i.get("model")),
            el("code", str(i.get("first"))[:12], title=str(i.get("first"))),
            el("code", str(i.get("second"))[:12], title=str(i.get("second"))),
            ", ".join(map(str, i.get("differs", []))),
        ]
        for i in found
    ]
    times = _update_times(store, names.LONGITUDINAL)
    older: dict[str, int | None] = {}  # every layer, newest first, with when it was stored
    oid_ = head
    while is_oid(oid_) and oid_ not in older and len(older) < LAYERS_SHOWN:
        older[oid_] = times.get(oid_)
        oid_ = ((_record(store, oid_) or {}).get("links") or {}).get("previous")
    header = ["case", "model", "cohort key", "plans", "attempts", "valid", "resolved"]
    header += ["valid resolved rate [95% Wilson]", "invalid", "terminal classes"]
    body = [
        el("h1", "Longitudinal report"),
        el(
            "p",
            "layer ",
            oid(head),
            " ",
            status.overall(check),
            f" {word(report.get('attempts'))} attempt(s) from {len(report.get('plans', []))} "
            f"plan(s); not pooled: {word(report.get('unretained'))} without a terminal, "
            f"{word(report.get('unverified'))} whose chain fails its checks",
        ),
        el("h2", f"Cohorts ({len(cohorts)}): only identical compatibility keys pool"),
        table(header, cohort_rows),
        el("h2", f"Incompatibilities ({len(found)})"),
        table(
            ["case", "model", "cohort", "cannot pool with", "key parts that differ"], incompatible
        )
        if found
        else el("p", "none"),
        el("h2", "Layers over time"),
        table(["layer", "stored"], ([oid(o), when(t)] for o, t in older.items())),
    ]
    return "longitudinal", join(body)


def report_html(store, plan_oid: str) -> str:
    """The plan's newest layer as `yyb report --format html` renders it (its links lead into
    this viewer).

    Raises:
        NotInStore: no layer, or matplotlib (the ``html`` extra) is not installed.
    """
    from yyb.reports import html

    read_plan(store, plan_oid)
    head = _read(store, names.report(plan_oid))
    layer = _record(store, head)
    if layer is None:
        raise NotInStore(f"plan {plan_oid} has no report layer")
    try:
        html.require()
    except YybError as exc:
        raise NotInStore(str(exc)) from None
    report = layers_of.layer_report(store, layer)
    stored = {"oid": head, "previous": layer["links"].get("previous"), "reused": False}
    return html.document(report, stored)


def _refs(store, under: str) -> list[tuple[str, str]]:
    try:
        return list(store.refs.iter_refs(under))
    except YybError:
        return []


def _read(store, ref: str) -> str | None:
    try:
        return store.refs.read(ref)
    except YybError:
        return None


def _record(store, oid_: str | None) -> dict | None:
    """A record proved by its hash, or None (a page shows the failure where it verifies it)."""
    if oid_ is None:
        return None
    try:
        return store.objects.read_record(oid_)
    except YybError:
        return None


def _update_times(store, ref: str) -> dict[str, int]:
    """When each value of ``ref`` was set, from its update chain."""
    times: dict[str, int] = {}
    try:
        for _, update in store.refs.log(ref):
            if is_oid(update.get("new")):
                times.setdefault(update["new"], update.get("time_ms"))
    except YybError:
        pass
    return times
