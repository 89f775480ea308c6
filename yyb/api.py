"""yyb from Python: a plan's attempts, evaluations and model calls as typed records, or as
pandas dataframes (docs/api.md).

Every function reads only: nothing is stored, no report layer written. ``plan`` is a plan
file, or a plan oid, abbreviation or ref in the store; ``store`` a store folder (default: the
one ``yyb`` would use from the current folder: ``$YYB_STORE``, else the repository's).
Attempts come through the report's gate, as ``yyb report --plan`` counts them; evaluations
and calls are read from the chains of the plan's attempts, each record proved by its hash.

    >>> from yyb import api
    >>> frame = api.attempts_df("plan.json", store="store")
    >>> frame.groupby("model").outcome.value_counts()

Errors are ``yyb.errors.YybError`` (a missing plan, a store that cannot be read).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from yyb.errors import UsageError
from yyb.reports.export import AttemptRow

__all__ = [
    "AttemptRow",
    "CallRow",
    "EvaluationRow",
    "attempts",
    "attempts_df",
    "calls",
    "calls_df",
    "evaluations",
    "evaluations_df",
    "open_store",
    "report",
]


@dataclass(frozen=True)
class EvaluationRow:
    """One evaluation generation of one attempt: who graded it, how, and what it cost."""

    plan: str
    attempt: str
    ordinal: int
    model: str
    case_id: str | None
    profile: str
    generation: int
    evaluator_id: str
    evaluator_version: str
    verdict: str
    wall_ms: int
    judge_cost_micros: int | None
    judge_cost_completeness: str | None
    evaluation: str  # the evaluation receipt's oid
    current: bool  # the newest generation of its profile


@dataclass(frozen=True)
class CallRow:
    """One model call the gateway metered for an attempt (docs/gateway.md)."""

    plan: str
    attempt: str
    ordinal: int
    model: str  # the attempt's model as planned
    case_id: str | None
    index: int
    api: str
    stream: bool
    outcome: str
    status: int | None
    requested_model: str | None
    served_model: str | None
    input_tokens: int | None
    cached_input_tokens: int | None
    cache_write_input_tokens: int | None
    output_tokens: int | None
    cost_micros: int | None
    cost_completeness: str | None
    started_ms: int | None
    first_byte_ms: int | None
    latency_ms: int | None
    request_sha256: str
    call: str  # the call record's oid


def open_store(store: str | None = None):
    """The store at ``store`` (default: as ``yyb`` finds it from the current folder)."""
    from yyb.store.location import resolve_store_path
    from yyb.store.repo import Store

    return Store.open(resolve_store_path(store, os.getcwd(), os.environ))


def _plan(plan: str, store) -> str:
    from yyb.plans import planfile

    return planfile.plan_oid(plan, lambda: store)


def report(plan: str, store: str | None = None, grader_version: str | None = None) -> dict:
    """The report document of ``yyb report --plan PLAN --format json`` (without ``layer``)."""
    from yyb.reports import build

    opened = open_store(store)
    document, _ = build.build(opened, _plan(plan, opened), grader_version)
    return document


def attempts(plan: str, store: str | None = None, grader_version: str | None = None):
    """The plan's attempts as ``AttemptRow`` records, in plan order, as the report counts
    them (an attempt whose chain the gate refuses has outcome ``missing``)."""
    from yyb.reports import export

    return export.rows(report(plan, store, grader_version))


def _chains(plan: str, store):
    """(the plan oid, each attempt's handle) of the plan's attempts, in plan order."""
    from yyb.evidence.attempt import AttemptHandle

    opened = open_store(store)
    plan_oid = _plan(plan, opened)
    value = opened.objects.get_record(plan_oid)
    if "attempts" not in value.get("links", {}):
        raise UsageError(f"{plan_oid} is not an experiment plan")
    for attempt_oid in value["links"]["attempts"]:
        yield opened, plan_oid, AttemptHandle.read(opened, plan_oid, attempt_oid, plan=value)


def evaluations(plan: str, store: str | None = None) -> list[EvaluationRow]:
    """Every evaluation generation of every attempt of the plan, oldest first per profile."""
    found = []
    for _, plan_oid, handle in _chains(plan, store):
        for profile, chain in sorted(handle.chains.items()):
            for i, (oid, receipt) in enumerate(chain):
                cost = receipt.get("judge_cost") or {}
                found.append(
                    EvaluationRow(
                        plan_oid,
                        handle.oid,
                        handle.ordinal,
                        handle.model,
                        handle.case_id,
                        profile,
                        receipt["generation"],
                        receipt["evaluator"]["id"],
                        receipt["evaluator"]["version"],
                        receipt["verdict"],
                        receipt["wall_ms"],
                        cost.get("micros"),
                        cost.get("completeness"),
                        oid,
                        i == len(chain) - 1,
                    )
                )
    return found


def calls(plan: str, store: str | None = None) -> list[CallRow]:
    """Every model call the gateway kept for the plan's attempts (their terminals' meters, or
    the calls ref of an attempt a crash left without a terminal), in call order."""
    from yyb.evidence import names

    found = []
    for opened, plan_oid, handle in _chains(plan, store):
        meter_oid = None
        if handle.terminal is not None:
            meter_oid = handle.terminal.record["links"].get("gateway")
        if meter_oid is None:
            meter_oid = opened.refs.read(names.calls(plan_oid, handle.oid))
        if meter_oid is None:
            continue
        meter = opened.objects.get_record(meter_oid)
        for call_oid in meter["links"].get("calls", []):
            found.append(_call_row(plan_oid, handle, call_oid, opened.objects.get_record(call_oid)))
    return found


def _call_row(plan_oid: str, handle, call_oid: str, call: dict) -> CallRow:
    usage = call.get("usage") or {}
    cost = call.get("cost") or {}
    return CallRow(
        plan_oid,
        handle.oid,
        handle.ordinal,
        handle.model,
        handle.case_id,
        call["index"],
        call["api"],
        call["stream"],
        call["outcome"],
        call.get("status"),
        call.get("requested_model"),
        call.get("served_model"),
        usage.get("input_tokens"),
        usage.get("cached_input_tokens"),
        usage.get("cache_write_input_tokens"),
        usage.get("output_tokens"),
        cost.get("micros"),
        cost.get("completeness"),
        call.get("started_ms"),
        call.get("first_byte_ms"),
        call.get("latency_ms"),
        call["request_sha256"],
        call_oid,
    )


def _frame(records: list, kind: type):
    """``records`` as a pandas DataFrame with one column per field of ``kind`` (also when
    there are none)."""
    try:
        import pandas
    except ImportError:
        raise UsageError("yyb.api's dataframes need pandas: pip install 'yyb[analysis]'") from None
    from dataclasses import fields

    columns = [f.name for f in fields(kind)]
    return pandas.DataFrame([asdict(r) for r in records], columns=columns)


def attempts_df(plan: str, store: str | None = None, grader_version: str | None = None):
    """``attempts`` as a DataFrame (``verdicts`` a column of dicts; see also
    ``yyb report --format parquet`` for one column per evaluator profile)."""
    return _frame(attempts(plan, store, grader_version), AttemptRow)


def evaluations_df(plan: str, store: str | None = None):
    """``evaluations`` as a DataFrame."""
    return _frame(evaluations(plan, store), EvaluationRow)


def calls_df(plan: str, store: str | None = None):
    """``calls`` as a DataFrame."""
    return _frame(calls(plan, store), CallRow)
