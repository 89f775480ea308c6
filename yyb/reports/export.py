"""A per-experiment report's attempts as a table: CSV, Parquet and JUnit XML (docs/reports.md,
"Exports"), and the typed rows ``yyb.api`` returns.

One row per attempt of the report (``report["attempts"]``), in plan order, its columns those
of ``AttemptRow``, with one ``verdict:PROFILE`` column per evaluator profile any row has a
verdict of. The figures are the report's: an attempt the gate refused is a row with outcome
``missing``, never with the verdict its broken chain claims.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, fields
from typing import Any

from yyb.errors import UsageError

TOKENS = ("input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens")


@dataclass(frozen=True)
class AttemptRow:
    """One attempt of a report, flat: what the exports and ``yyb.api.attempts`` give.

    ``number`` is the attempt's number in its (case, model) cell; ``cost_micros`` the
    candidate cost the figures count (None when unavailable or unknown, ``cost_completeness``
    saying which); the token counts are the gateway's (None: not metered); ``environment`` the
    built environment record it ran in (None: the host); ``verdicts`` each evaluator profile's
    newest verdict counted.
    """

    plan: str
    ordinal: int
    attempt: str
    number: int | None
    model: str
    case_id: str | None
    outcome: str
    terminal_class: str | None
    verdict: str | None
    verdicts: dict[str, str]
    wall_ms: int | None
    evaluator_ms: int | None
    cost_micros: int | None
    cost_completeness: str | None
    input_tokens: int | None
    cached_input_tokens: int | None
    cache_write_input_tokens: int | None
    output_tokens: int | None
    environment: str | None
    terminal: str | None
    evidence: str | None
    cost_note: str | None
    superseded_by: str | None  # in a report over a family of retries (docs/reports.md)

    @classmethod
    def of(cls, report: dict, row: dict) -> AttemptRow:
        cost = row.get("candidate_cost") or {}
        tokens = row.get("tokens") or {}
        return cls(
            plan=row.get("plan", report["plan"]),
            ordinal=row["ordinal"],
            attempt=row["attempt"],
            number=row.get("number"),
            model=row["model"],
            case_id=row["case_id"],
            outcome=row["outcome"],
            terminal_class=row["terminal_class"],
            verdict=row["verdict"],
            verdicts=dict(row.get("verdicts") or {}),
            wall_ms=row["wall_ms"],
            evaluator_ms=row["evaluator_ms"],
            cost_micros=cost.get("micros"),
            cost_completeness=cost.get("completeness"),
            **{name: tokens.get(name) for name in TOKENS},
            environment=row.get("environment"),
            terminal=row["terminal"],
            evidence=row["evidence"],
            cost_note=row.get("cost_note"),
            superseded_by=row.get("superseded_by"),
        )


INTEGER_COLUMNS = {
    f.name for f in fields(AttemptRow) if f.type in ("int", "int | None")
}  # the rest are strings (or None)


def rows(report: dict) -> list[AttemptRow]:
    """The report's attempts as typed rows, in plan order."""
    return [AttemptRow.of(report, row) for row in report["attempts"]]


def profiles(attempts: list[AttemptRow]) -> list[str]:
    """The evaluator profiles any row has a verdict of, sorted."""
    return sorted({profile for row in attempts for profile in row.verdicts})


def table(report: dict) -> tuple[list[str], list[dict[str, Any]]]:
    """(the column names, one flat mapping per attempt): ``verdicts`` spread into one
    ``verdict:PROFILE`` column per profile."""
    attempts = rows(report)
    named = profiles(attempts)
    columns = [f.name for f in fields(AttemptRow) if f.name != "verdicts"]
    at = columns.index("verdict") + 1
    columns[at:at] = [f"verdict:{p}" for p in named]
    flat = []
    for row in attempts:
        value = {f.name: getattr(row, f.name) for f in fields(AttemptRow)}
        verdicts = value.pop("verdicts")
        value.update({f"verdict:{p}": verdicts.get(p) for p in named})
        flat.append({name: value[name] for name in columns})
    return columns, flat


def as_csv(report: dict, layer: dict) -> str:
    """RFC 4180 CSV with a header line; an absent value is an empty field."""
    columns, flat = table(report)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(columns)
    for row in flat:
        writer.writerow(["" if row[c] is None else row[c] for c in columns])
    return out.getvalue()


def as_parquet(report: dict, layer: dict) -> bytes:
    """One Parquet file: int64 and string columns (nullable), the plan, status and report
    layer in the file's key-value metadata.

    Raises:
        UsageError: pyarrow is not installed (``pip install 'yyb[parquet]'``).
    """
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise UsageError("--format parquet needs pyarrow: pip install 'yyb[parquet]'") from None
    columns, flat = table(report)
    arrays = [
        pa.array([row[c] for row in flat], pa.int64() if c in INTEGER_COLUMNS else pa.string())
        for c in columns
    ]
    metadata = {
        "yyb.plan": report["plan"],
        "yyb.status": report["status"],
        "yyb.layer": layer.get("oid") or "",
    }
    data = pa.Table.from_arrays(arrays, names=columns).replace_schema_metadata(metadata)
    sink = pa.BufferOutputStream()
    pq.write_table(data, sink)
    return sink.getvalue().to_pybytes()


# How each outcome stands in JUnit: a resolved attempt passes, a failed one is a failure, an
# invalid one an error (it measured nothing), a missing or unpinned one is skipped.
JUNIT_OUTCOME = {
    "failed": "failure",
    "invalid": "error",
    "missing": "skipped",
    "not_graded_by_pin": "skipped",
}


def as_junit(report: dict, layer: dict) -> str:
    """JUnit XML: a ``testsuite`` per model, a ``testcase`` per attempt (classname the model,
    name ``CASE #NUMBER (attempt ORDINAL)``, time the candidate's wall time in seconds)."""
    from xml.etree import ElementTree as ET

    attempts = rows(report)
    top = ET.Element("testsuites", name=f"yyb plan {report['plan']}")
    by_model: dict[str, list[AttemptRow]] = {}
    for row in attempts:
        by_model.setdefault(row.model, []).append(row)
    for model, group in by_model.items():
        suite = ET.SubElement(top, "testsuite", name=model)
        props = ET.SubElement(suite, "properties")
        for name, value in (("plan", report["plan"]), ("status", report["status"])):
            ET.SubElement(props, "property", name=name, value=value)
        for row in group:
            _testcase(suite, row)
        _counts(suite, group)
    _counts(top, attempts)
    ET.indent(top)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(top, "unicode") + "\n"


def _testcase(suite, row: AttemptRow) -> None:
    from xml.etree import ElementTree as ET

    number = "-" if row.number is None else row.number
    case = ET.SubElement(
        suite,
        "testcase",
        classname=row.model,
        name=f"{row.case_id or '-'} #{number} (attempt {row.ordinal})",
        time=_seconds(row.wall_ms),
    )
    element = JUNIT_OUTCOME.get(row.outcome)
    if element is not None:
        said = f"{row.outcome}: terminal {row.terminal_class or 'none'}, verdict {row.verdict}"
        ET.SubElement(case, element, message=said, type=row.outcome)
    props = ET.SubElement(case, "properties")
    for name in ("attempt", "terminal", "evidence", "cost_micros", "environment"):
        value = getattr(row, name)
        if value is not None:
            ET.SubElement(props, "property", name=name, value=str(value))


def _counts(element, attempts: list[AttemptRow]) -> None:
    kinds = [JUNIT_OUTCOME.get(row.outcome) for row in attempts]
    element.set("tests", str(len(attempts)))
    element.set("failures", str(kinds.count("failure")))
    element.set("errors", str(kinds.count("error")))
    element.set("skipped", str(kinds.count("skipped")))
    element.set("time", _seconds(sum(row.wall_ms or 0 for row in attempts)))


def _seconds(ms: int | None) -> str:
    return "0.000" if ms is None else f"{ms // 1000}.{ms % 1000:03d}"


FORMATS = {"csv": as_csv, "parquet": as_parquet, "junit": as_junit}
BINARY = {"parquet"}
