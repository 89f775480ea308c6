"""Report layers: each report stored as derived records, chained under ``refs/reports/<plan>``.

A layer (``yylo_benchmark_report_layer.v4``) holds the report document without its attempt
rows and without its models' case rows, and links the plan, the rows records
(``yylo_benchmark_report_rows.v3``: up to 1,000 consecutive rows each, linking the terminals,
evidence and evaluations they name), the cases records (``yylo_benchmark_report_cases.v4``: up
to 1,000 consecutive case rows of one model each) and the previous layer of the plan. Rows and
cases records are content-addressed, so what a new layer shares with an older one is stored
once, and a new layer checks and writes only its own figures and the parts that changed. The
ref moves by compare-and-swap, so older layers stay reachable through ``previous``. When an
attempt's verdict differs from the one the nearest earlier layer with the same grader pin
showed (a regrade changed it), the report shows the new verdict beside the displaced one, and
later layers carry that disagreement forward while the verdict stays the same.
"""

from __future__ import annotations

from yyb.evidence import names
from yyb.evidence.kinds.report import ReportCases, ReportLayer, ReportRows
from yyb.evidence.record import Record, kind_of
from yyb.store import heap
from yyb.store.objects import codec
from yyb.store.objects.format import hash_object
from yyb.store.objects.store import record_body

LAYER = ReportLayer.schema_version
ROWS = ReportRows.schema_version
CASES = ReportCases.schema_version
PART_SIZE = 1000


def layer_ref(plan_oid: str) -> str:
    return names.report(plan_oid)


def _previous_same_pin(
    store, head: str | None, current: dict | None, version: str | None
) -> tuple[str, dict] | None:
    oid, record = head, current
    while oid is not None:
        if record is None:
            record = store.objects.read_record(oid)
        if record["grader_version"] == version:
            return oid, record
        oid, record = record["links"].get("previous"), None
    return None


def layer_rows(store, layer: dict) -> list[dict]:
    """A layer's attempt rows: in its linked rows records (v3, v4), or in its report (v2)."""
    if "attempts" in layer["report"]:
        return layer["report"]["attempts"]
    return part_items(store, layer["links"].get("rows", []), "rows")


def layer_report(store, layer: dict) -> dict:
    """The report document a layer of any version stored (the JSON output without its
    ``layer`` key): its figures, with the attempt rows and each model's case rows put back
    from the parts it links (v4 links both, v3 the rows, v2 holds everything)."""
    report = dict(layer["report"], attempts=layer_rows(store, layer))
    if any("cases" not in model for model in report["models"]):  # v4: they are in parts
        by_model: dict[str, list] = {}
        for oid in layer["links"].get("cases", []):
            part = store.objects.read_record(oid)
            by_model.setdefault(part["model"], []).extend(part["cases"])
        report["models"] = [
            dict(model, cases=by_model.get(model["model"], [])) for model in report["models"]
        ]
    return report


def part_items(store, oids: list[str], field: str) -> list[dict]:
    """The items of the part records ``oids`` (their ``field`` lists), in order."""
    return [item for oid in oids for item in store.objects.read_record(oid)[field]]


def _displace(store, report: dict, earlier: tuple[str, dict] | None) -> None:
    if earlier is None:
        return
    earlier_oid, layer = earlier
    shown = {row["attempt"]: row for row in layer_rows(store, layer)}
    for row in report["attempts"]:
        before = shown.get(row["attempt"])
        if before is None or row["verdict"] is None:
            continue
        if before["verdict"] is not None and before["verdict"] != row["verdict"]:
            row["displaced"] = {
                "verdict": before["verdict"],
                "outcome": before["outcome"],
                "layer": earlier_oid,
            }
        elif before["verdict"] == row["verdict"] and before.get("displaced"):
            row["displaced"] = before["displaced"]


def evidence_links(terminals, evidence, evaluations, links: dict | None = None) -> dict:
    """``links`` (a new map when None) with the non-empty roles among the three, sorted."""
    links = {} if links is None else links
    for role, values in (
        ("terminals", set(terminals) - {None}),
        ("evidence", set(evidence) - {None}),
        ("evaluations", set(evaluations)),
    ):
        if values:
            links[role] = sorted(values)
    return links


def parts(
    kind: type[Record], field: str, items: list, links_of, fixed: dict | None = None
) -> list[dict]:
    """The values of part records of the class ``kind``: ``items`` in order, PART_SIZE to a
    record under ``field``, each with the links ``links_of(its items)`` and the ``fixed``
    fields."""
    records = []
    for start in range(0, len(items), PART_SIZE):
        part = items[start : start + PART_SIZE]
        fields = {**(fixed or {}), field: tuple(part), "links": links_of(part)}
        records.append(kind(**fields).to_value())
    return records


def rows_records(plan_oid: str, rows: list[dict]) -> list[dict]:
    """The rows records of ``rows`` (in order), each linking the evidence its rows name."""

    def links_of(part: list[dict]) -> dict:
        return evidence_links(
            (row["terminal"] for row in part),
            (row["evidence"] for row in part),
            (oid for row in part for oid in row["evaluations"]),
            {"plan": plan_oid},
        )

    return parts(ReportRows, "rows", rows, links_of, {"plan": plan_oid})


def cases_records(plan_oid: str, models: list[dict]) -> list[dict]:
    """The cases records of the report's ``models`` (in their order), each holding up to
    PART_SIZE consecutive case rows of one model."""
    records = []
    for model in models:
        fixed = {"plan": plan_oid, "model": model["model"]}
        records += parts(ReportCases, "cases", model["cases"], lambda _: {"plan": plan_oid}, fixed)
    return records


def put_parts(store, records: list[dict]) -> list[str]:
    """Store the part records that are not in the store yet; return every one's oid.

    A record already stored under its oid has these very bytes, so only the new ones are
    validated and written: parts an earlier layer shares cost one encoding and one hash.
    """
    oids = [hash_object("record", codec.encode(r)) for r in records]
    new = [r for r, oid in zip(records, oids, strict=True) if not store.objects.contains(oid)]
    store.objects.put_many([("record", record_body(r)) for r in new])
    return oids


def record(plan_oid: str, report: dict, rows: list[str], cases: list[str]) -> dict:
    """The layer record of ``report`` whose attempt rows are in the records ``rows`` and whose
    models' case rows are in the records ``cases`` (no ``previous``)."""
    links: dict = {"plan": plan_oid}
    if rows:
        links["rows"] = rows
    if cases:
        links["cases"] = cases
    figures = {key: value for key, value in report.items() if key != "attempts"}
    figures["models"] = [
        {key: value for key, value in model.items() if key != "cases"} for model in report["models"]
    ]
    return ReportLayer(
        plan=plan_oid,
        grader_version=report["grader_version"],
        status=report["status"],
        report=figures,
        links=links,
    ).to_value()


@heap.without_gc
def store_layer(store, plan_oid: str, report: dict, write: bool = True, signer=None) -> dict:
    """Mark displaced verdicts in ``report`` and store it as the plan's newest layer.

    A report identical to the newest layer (same figures, same evidence) reuses that layer
    instead of growing the chain. Returns ``{"oid", "previous", "reused"}``. With ``write``
    false nothing is stored (``oid`` is None): the store is only read.

    Raises:
        RefMismatch: another report moved the ref meanwhile (run it again).
    """
    ref = layer_ref(plan_oid)
    head = store.refs.read(ref)
    current = None if head is None else store.objects.read_record(head)
    _displace(store, report, _previous_same_pin(store, head, current, report["grader_version"]))
    if not write:
        return unstored(head)
    rows = put_parts(store, rows_records(plan_oid, report["attempts"]))
    cases = put_parts(store, cases_records(plan_oid, report["models"]))
    value = record(plan_oid, report, rows, cases)
    reason = f"report layer ({report['status']})"
    return append_layer(store, ref, head, value, reason, current, signer)


def unstored(head: str | None) -> dict:
    """What a report says of its layer when it was not stored (``--no-layer``)."""
    return {"oid": None, "previous": head, "reused": False}


def append_layer(
    store,
    ref: str,
    head: str | None,
    value: dict,
    reason: str,
    current: dict | None = None,
    signer=None,
) -> dict:
    """Chain ``value`` after the layer ``head`` under ``ref``, or reuse ``head`` if identical.

    ``current`` is the record of ``head`` when the caller has read it already. A new layer is
    signed with ``signer`` (when given) once its move is on record and before the ref names
    it (docs/audit.md); a layer whose move a crash cut short (while signing it) is published
    first, as it was, and ``value`` then follows it.
    """
    pending = _pending(store, ref, head, kind_of(value))
    if pending is not None:
        _move(store, ref, head, pending, "finish an interrupted report layer", signer)
        head, current = pending, None
    if head is not None:
        if current is None:
            current = store.objects.get_record(head)
        same = dict(current, links={k: v for k, v in current["links"].items() if k != "previous"})
        if same == value:
            if store.refs.abandoned_lock(ref) is not None:
                # A report that crashed writing this ref left its lock: nothing new to
                # store, so the ref is moved onto itself, which replaces the lock on record.
                _move(store, ref, head, head, "replace the lock of an interrupted report", None)
            return {"oid": head, "previous": current["links"].get("previous"), "reused": True}
        value["links"]["previous"] = head
    oid = store.objects.put_record(value)
    _move(store, ref, head, oid, reason, signer)
    return {"oid": oid, "previous": head, "reused": False}


def _pending(store, ref: str, head: str | None, kind: str) -> str | None:
    """The layer a cut-short update of ``ref`` was publishing after ``head``, or None."""
    oid = store.refs.pending(ref)
    if oid is None or not store.objects.contains(oid):
        return None
    record = store.objects.get_record(oid)
    if kind_of(record) != kind or record["links"].get("previous") != head:
        return None
    return oid


def _move(store, ref: str, head: str | None, oid: str, reason: str, signer) -> None:
    def seal() -> None:
        if signer is not None:
            from yyb import signing

            signing.sign(store, oid, signer)

    store.refs.update(ref, oid, old=head, reason=reason, before_move=seal)
