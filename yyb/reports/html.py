"""The per-experiment report as one self-contained HTML file (charts as inline SVG, offline).

Charts are drawn by matplotlib (the optional extra ``yyb[html]``) into SVG text that is
inlined in the page: no script, no stylesheet and no font is fetched, so the file opens offline.
"""

from __future__ import annotations

import io
from html import escape

from yyb.errors import UsageError
from yyb.reports import render
from yyb.reports.stats import p_text, ppm_text
from yyb.store.objects.format import is_oid

INSTALL = "pip install 'yyb[html]'"
STYLE = """
body{font-family:sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:13px}
td,th{border:1px solid #bbb;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#eee}
code{font-size:12px}
.banner{background:#fdd;border:2px solid #c00;padding:.5em;font-weight:bold}
.chart{display:inline-block;margin:0 1em 1em 0}
"""


def require() -> None:
    """Fail with one line naming the extra when matplotlib is missing.

    Raises:
        UsageError: matplotlib cannot be imported.
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError(f"--format html needs matplotlib: {INSTALL}") from None


def _figure(width: float, height: float):
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "yyb"  # stable ids: the same report, the same bytes
    matplotlib.rcParams["svg.fonttype"] = "path"  # glyphs as paths: no font to fetch
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height))
    return figure, figure.add_subplot()


def _svg(figure) -> str:
    buffer = io.StringIO()
    figure.tight_layout()
    figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _rates_chart(entries: list[dict], labels: list[str], title: str) -> str:
    """Valid resolved rate per entry with its 95% Wilson interval as an error bar."""
    shown = [
        (e, label) for e, label in zip(entries, labels, strict=True) if e["rate"]["denominator"]
    ]
    figure, axes = _figure(1.2 + (1.1 if len(shown) < 12 else 0.35) * max(1, len(shown)), 3.2)
    if shown:
        rates = [e["rate"]["ppm"] / 10_000 for e, _ in shown]
        low = [
            r - e["interval"]["low_ppm"] / 10_000 for r, (e, _) in zip(rates, shown, strict=True)
        ]
        high = [
            e["interval"]["high_ppm"] / 10_000 - r for r, (e, _) in zip(rates, shown, strict=True)
        ]
        axes.bar(range(len(shown)), rates, yerr=[low, high], capsize=6, color="#4c72b0")
        axes.set_xticks(range(len(shown)), [label for _, label in shown], rotation=20)
        if len(shown) >= 12:
            axes.tick_params(axis="x", labelsize=6, rotation=90)
    axes.set_ylim(0, 100)
    axes.set_ylabel("valid resolved rate (%)")
    axes.set_title(title, fontsize=10)
    return _svg(figure)


def rate_chart(report: dict) -> str:
    """Valid resolved rate per model, with its 95% Wilson interval as an error bar."""
    models = report["models"]
    return _rates_chart(models, [m["model"] for m in models], "resolved rate, 95% Wilson interval")


def class_chart(report: dict) -> str:
    """Terminal classes per model, stacked."""
    models = report["models"]
    classes = sorted({c for m in models for c in m["terminal_classes"]})
    figure, axes = _figure(1.6 + 1.1 * max(1, len(models)), 3.2)
    bottom = [0] * len(models)
    for cls in classes:
        counts = [m["terminal_classes"].get(cls, 0) for m in models]
        axes.bar(range(len(models)), counts, bottom=bottom, label=cls)
        bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
    axes.set_xticks(range(len(models)), [m["model"] for m in models], rotation=20)
    axes.set_ylabel("attempts")
    axes.set_title("terminal classes", fontsize=10)
    if classes:
        axes.legend(fontsize=7)
    return _svg(figure)


def runtime_chart(report: dict) -> str:
    """Measured candidate wall time per model (box plot of the attempts' ``wall_ms``)."""
    models = [m["model"] for m in report["models"]]
    series = [
        [a["wall_ms"] for a in report["attempts"] if a["model"] == m and a["wall_ms"] is not None]
        for m in models
    ]
    figure, axes = _figure(1.6 + 1.1 * max(1, len(models)), 3.2)
    shown = [(m, s) for m, s in zip(models, series, strict=True) if s]
    if shown:
        axes.boxplot([s for _, s in shown])
        axes.set_xticks(range(1, len(shown) + 1), [m for m, _ in shown], rotation=20)
    axes.set_ylabel("candidate wall time (ms)")
    axes.set_title("runtime distribution (measured)", fontsize=10)
    return _svg(figure)


def _table(header: list[str], rows: list[list[str]], raw: set[int] | None = None) -> str:
    raw = raw or set()
    out = ["<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>"]
    for row in rows:
        cells = [c if i in raw else escape(c) for i, c in enumerate(row)]
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return "\n".join(out) + "</table>"


# Oids are shown abbreviated (the whole one on hover), each a link in `yyb view`'s URL layout
# (docs/view.md): the page `yyb view` serves at /plan/<oid>/report.html opens them there; the
# file on its own still names every object in full in its titles.
ABBREV = 12


def _oid(oid: str, href: str | None = None) -> str:
    """``oid`` abbreviated and linked to ``href`` (default: its object page); anything that is
    not an oid is plain text, never a link."""
    if not is_oid(oid):
        return f"<code>{escape(str(oid))}</code>"
    target = href or f"/object/{oid}"
    return f'<a href="{target}" title="{oid}"><code>{oid[:ABBREV]}</code></a>'


def _hash(value: str) -> str:
    """A SHA-256 that names no object (a compatibility key): abbreviated, whole on hover."""
    return f'<code title="{escape(value)}">{escape(value[:ABBREV])}</code>'


def _attempt(plan: str, attempt: str) -> str:
    """An attempt plan's oid, linked to its attempt page."""
    if not is_oid(plan):
        return _oid(attempt)
    return _oid(attempt, f"/plan/{plan}/attempt/{attempt}")


def _ids(*oids) -> str:
    return "<br>".join(_oid(o) for o in oids if o) or "-"


PAIRED_COUNTS = (
    "cases_paired",
    "cases_unpaired",
    "both_resolved",
    "only_first",
    "only_second",
    "neither",
)


def _pairings(comparison: dict) -> list[tuple[str, dict]]:
    """The comparison's tests, the intent-to-treat one first (absent in older layers)."""
    tests = [("valid only", comparison)]
    if "intent_to_treat" in comparison:
        tests.insert(0, ("intent to treat", comparison["intent_to_treat"]))
    return tests


def _comparison_parts(report: dict) -> list[str]:
    """The paired comparison section: a row per test of each pair of models, the
    intent-to-treat one first, and the invalidity warnings."""
    parts = ["<h2>Paired comparison</h2>"]
    comparisons = [
        [c["first"], c["second"], counted]
        + [str(test[key]) for key in PAIRED_COUNTS]
        + [
            f"{p_text(test['mcnemar_exact'])} "
            f"({test['mcnemar_exact']['p_numerator']}/{test['mcnemar_exact']['p_denominator']})",
            p_text(c["invalidity_fisher_exact"]),
        ]
        for c in report["comparisons"]
        for counted, test in _pairings(c)
    ]
    header = ["first", "second", "attempts counted", "paired", "unpaired", "both"]
    header += ["only first", "only second", "neither", "exact McNemar p"]
    header += ["invalidity: exact Fisher p"]
    parts.append(_table(header, comparisons) if comparisons else "<p>one model: no pair</p>")
    warnings = render.invalidity_warnings(report)
    if warnings:
        parts.append('<p class="banner">' + "<br>".join(escape(w) for w in warnings) + "</p>")
    return parts


def _listed(title: str, lines: list[str]) -> list[str]:
    """A heading and a list of ``lines``; nothing when there are none."""
    if not lines:
        return []
    items = "".join(f"<li>{escape(line)}</li>" for line in lines)
    return [f"<h2>{escape(title)}</h2>", f"<ul>{items}</ul>"]


def _attempts_table(report: dict) -> str:
    rows = [
        [
            str(a["ordinal"]),
            a["model"],
            a["case_id"] or "-",
            "-" if a.get("number") is None else str(a["number"]),
            a["terminal_class"] or "-",
            a["verdict"] or "-",
            a["outcome"],
            "-" if a["wall_ms"] is None else str(a["wall_ms"]),
            render.usd_text(a["candidate_cost"]) if a.get("candidate_cost") else "-",
            _attempt(report["plan"], a["attempt"]),
            _ids(a["terminal"], a["evidence"]),
            _ids(*a["evaluations"]),
        ]
        for a in report["attempts"]
    ]
    header = ["#", "model", "case", "attempt", "terminal class", "verdict", "outcome"]
    header += ["wall ms", "cost", "attempt plan", "terminal / evidence", "evaluations"]
    return _table(header, rows, raw={9, 10, 11})


def document(report: dict, layer: dict) -> str:
    banner = render.banner_lines(report)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>yyb report {escape(report['plan'][:12])}</title>",
        f"<style>{STYLE}</style></head><body>",
    ]
    if banner:
        parts.append('<p class="banner">' + "<br>".join(escape(b) for b in banner) + "</p>")
    plan = escape(report["plan"])
    heading = f'<a href="/plan/{plan}">{plan}</a>' if is_oid(report["plan"]) else plan
    parts.append(f"<h1>Experiment <code>{heading}</code></h1>")
    unprotected = render.unprotected_warnings(report)
    if unprotected:
        parts.append('<p class="banner">' + "<br>".join(escape(w) for w in unprotected) + "</p>")
    parts.append(
        "<ul>" + "".join(f"<li>{escape(h)}</li>" for h in render.head_lines(report, layer))
    )
    parts.append("</ul>")
    parts.append('<div class="chart">' + rate_chart(report) + "</div>")
    parts.append('<div class="chart">' + class_chart(report) + "</div>")
    parts.append('<div class="chart">' + runtime_chart(report) + "</div>")
    parts.append("<h2>Per model and case</h2>")
    parts.append(_table(render.HEADER, render.table_rows(report)))
    parts += _listed("Candidate costs not counted", render.cost_notes(report))
    parts += _listed("Tokens metered by the gateway", render.token_lines(report))
    parts += _listed("pass@k (unbiased estimator)", render.pass_at_k_lines(report))
    parts += _listed("Retries", render.family_lines(report))
    parts += _comparison_parts(report)
    if report.get("pairwise"):
        parts.append("<h2>Pairwise judging</h2>")
        rows = [
            [
                row["model"],
                row["baseline"],
                row["profile"],
                str(row["wins"]),
                str(row["ties"]),
                str(row["losses"]),
                str(row["invalid"]),
                render.pairwise_figures_text(row),
            ]
            for row in report["pairwise"]
        ]
        header = ["model", "baseline", "profile", "wins", "ties", "losses", "invalid"]
        parts.append(_table([*header, "score, position consistency [95% Wilson]"], rows))
    parts.append("<h2>Attempts</h2>")
    parts.append(_attempts_table(report))
    totals = report["totals"]
    parts.append(
        f"<p>total: {totals['attempts']} attempt(s), valid resolved rate "
        f"{escape(ppm_text(totals['rate']['ppm']))}; {escape(render.layer_line(layer))}</p>"
    )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


# A chart of more cohorts than this is unreadable: the chart shows the first ones (in the
# table's order) and says so; the table lists every cohort.
CHART_COHORTS = 40


def longitudinal_document(report: dict, layer: dict) -> str:
    """The longitudinal report as one self-contained page: cohort rates, every cohort with its
    key hash and plans, and every incompatibility with the key parts that differ."""
    from yyb.reports import longitudinal_render as shape

    cohorts = report["cohorts"]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>yyb longitudinal report</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>Longitudinal report</h1>",
        "<ul>"
        + "".join(f"<li>{escape(h)}</li>" for h in shape.head_lines(report, layer))
        + "</ul>",
    ]
    charted = cohorts[:CHART_COHORTS]
    labels = [f"{c['case_id'] or '-'} {c['model']} {c['key_hash'][:6]}" for c in charted]
    title = "resolved rate per cohort, 95% Wilson interval"
    if len(cohorts) > len(charted):
        title += f" (first {len(charted)} of {len(cohorts)})"
    parts.append('<div class="chart">' + _rates_chart(charted, labels, title) + "</div>")
    parts.append("<h2>Cohorts (only identical compatibility keys pool)</h2>")
    rows = [
        row[:2]
        + [_hash(c["key_hash"]), "<br>".join(_oid(p, f"/plan/{p}") for p in c["plans"])]
        + row[4:]
        for row, c in zip(shape.table_rows(report), cohorts, strict=True)
    ]
    parts.append(_table(shape.HEADER, rows, raw={2, 3}))
    parts.append(f"<h2>Incompatibilities ({len(report['incompatibilities'])})</h2>")
    found = [
        [
            i["case_id"] or "-",
            i["model"],
            _hash(i["first"]),
            _hash(i["second"]),
            ", ".join(i["differs"]),
        ]
        for i in report["incompatibilities"]
    ]
    header = ["case", "model", "cohort", "cannot pool with", "key parts that differ"]
    parts.append(_table(header, found, raw={2, 3}) if found else "<p>none</p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


FORMATS = {"html": document}
LONGITUDINAL_FORMATS = {"html": longitudinal_document}
