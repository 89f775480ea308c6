"""Longitudinal report formats: cohorts as an aligned table, JSON, Markdown."""

from __future__ import annotations

import json

from yyb.reports.render import layer_line, rate_text

HEADER = [
    "case",
    "model",
    "cohort",
    "plans",
    "attempts",
    "valid",
    "resolved",
    "valid resolved rate [95% Wilson]",
    "invalid",
    "terminal classes",
]


def table_rows(report: dict) -> list[list[str]]:
    """The cohort table, one row of cells (text) per cohort."""
    return [
        [
            c["case_id"] or "-",
            c["model"],
            c["key_hash"][:12],
            str(len(c["plans"])),
            str(c["attempts"]),
            str(c["valid"]),
            str(c["resolved"]),
            rate_text(c),
            str(c["invalid"]),
            ", ".join(f"{k} {v}" for k, v in c["terminal_classes"].items()) or "-",
        ]
        for c in report["cohorts"]
    ]


def _incompatibilities(report: dict) -> list[str]:
    return [
        f"{i['case_id'] or '-'} / {i['model']}: cohort {i['first'][:12]} vs {i['second'][:12]} "
        f"differ in {', '.join(i['differs'])}"
        for i in report["incompatibilities"]
    ]


def head_lines(report: dict, layer: dict) -> list[str]:
    """The lines that say which filters and report layer the longitudinal report is."""
    filters = report["filters"]
    shown = [
        f"{k} {v}" for k, v in (("case", filters["case_id"]), ("model", filters["model"])) if v
    ]
    return [
        f"longitudinal report: {report['attempts']} retained attempt(s) from "
        f"{len(report['plans'])} plan(s) in {len(report['cohorts'])} cohort(s)"
        + (f" ({', '.join(shown)})" if shown else ""),
        f"attempts without a retained terminal (not pooled): {report['unretained']}",
        *(
            [
                f"pinned to grader version {filters['grader_version']}: attempts it did not "
                f"grade (not pooled): {report['not_graded_by_pin']}"
            ]
            if "grader_version" in filters
            else []
        ),
        f"attempts whose chain fails its checks (not pooled; run 'yyb doctor --plan'): "
        f"{report['unverified']}",
        *[f"  {line}" for line in report["first_errors"]],
        *(
            [f"attempts superseded by a retry of their cell (not pooled): {report['superseded']}"]
            if report.get("superseded")
            else []
        ),
        "only identical compatibility keys pool; see 'yyb report --longitudinal --format json' "
        "for every key",
        layer_line(layer),
    ]


def text(report: dict, layer: dict) -> str:
    rows = table_rows(report)
    widths = [max(len(r[i]) for r in rows + [HEADER]) for i in range(len(HEADER))]
    lines = head_lines(report, layer) + [""]
    lines.append("  ".join(h.ljust(w) for h, w in zip(HEADER, widths, strict=True)).rstrip())
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    found = _incompatibilities(report)
    lines += [
        "",
        f"incompatibilities (cohorts of one case and model that cannot pool): {len(found)}",
    ]
    lines += ["  " + line for line in found]
    return "\n".join(lines) + "\n"


def markdown(report: dict, layer: dict) -> str:
    lines = [f"- {line}" for line in head_lines(report, layer)] + [""]
    lines.append("| " + " | ".join(HEADER) + " |")
    lines.append("|" + "---|" * len(HEADER))
    for row in table_rows(report):
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    found = _incompatibilities(report)
    lines += ["", f"**Incompatibilities** ({len(found)}): cohorts that cannot pool", ""]
    lines += [f"- {line}" for line in found]
    return "\n".join(lines) + "\n"


def as_json(report: dict, layer: dict) -> str:
    document = dict(report, layer=layer)
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


FORMATS = {"text": text, "json": as_json, "markdown": markdown}
