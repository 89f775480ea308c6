"""Report layers: each report stored as a derived record, chained under ``refs/reports/<plan>``.

A layer (``yylo_benchmark_report_layer.v3``) holds the whole report document and links the
plan, every terminal, evidence and evaluation it read, and the previous layer of the plan. The
ref moves by compare-and-swap, so older layers stay reachable through ``previous``. When an
attempt's verdict differs from the one the nearest earlier layer with the same grader pin
showed (a regrade changed it), the report shows the new verdict beside the displaced one, and
later layers carry that disagreement forward while the verdict stays the same.
"""

from __future__ import annotations

from yyb.reports.build import Facts
from yyb.store import heap

LAYER = "yylo_benchmark_report_layer.v3"


def layer_ref(plan_oid: str) -> str:
    return f"refs/reports/{plan_oid}"


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


def _displace(report: dict, earlier: tuple[str, dict] | None) -> None:
    if earlier is None:
        return
    earlier_oid, layer = earlier
    shown = {row["attempt"]: row for row in layer["report"]["attempts"]}
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


def record(plan_oid: str, report: dict, facts: list[Facts]) -> dict:
    """The layer record of ``report`` (without its ``previous`` link)."""
    links: dict = {"plan": plan_oid}
    for role, values in (
        ("terminals", {f.terminal for f in facts if f.terminal}),
        ("evidence", {f.evidence for f in facts if f.evidence}),
        ("evaluations", {oid for f in facts for oid, _ in f.evaluations}),
    ):
        if values:
            links[role] = sorted(values)
    return {
        "schema_version": LAYER,
        "plan": plan_oid,
        "grader_version": report["grader_version"],
        "status": report["status"],
        "report": report,
        "links": links,
    }


@heap.without_gc
def store_layer(store, plan_oid: str, report: dict, facts: list[Facts], write: bool = True) -> dict:
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
    _displace(report, _previous_same_pin(store, head, current, report["grader_version"]))
    if not write:
        return unstored(head)
    value = record(plan_oid, report, facts)
    return append_layer(store, ref, head, value, f"report layer ({report['status']})", current)


def unstored(head: str | None) -> dict:
    """What a report says of its layer when it was not stored (``--no-layer``)."""
    return {"oid": None, "previous": head, "reused": False}


def append_layer(
    store, ref: str, head: str | None, value: dict, reason: str, current: dict | None = None
) -> dict:
    """Chain ``value`` after the layer ``head`` under ``ref``, or reuse ``head`` if identical.

    ``current`` is the record of ``head`` when the caller has read it already. A new layer is
    signed when a signing key is configured (docs/audit.md).
    """
    if head is not None:
        if current is None:
            current = store.objects.get_record(head)
        same = dict(current, links={k: v for k, v in current["links"].items() if k != "previous"})
        if same == value:
            return {"oid": head, "previous": current["links"].get("previous"), "reused": True}
        value["links"]["previous"] = head
    oid = store.objects.put_record(value)
    store.refs.update(ref, oid, old=head, reason=reason)
    from yyb import signing

    signing.sign_if_configured(store, oid)
    return {"oid": oid, "previous": head, "reused": False}
