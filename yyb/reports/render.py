"""Report formats: an aligned text table, JSON with stable keys, Markdown for pull requests."""

from __future__ import annotations

import json

from yyb.reports.stats import p_text, ppm_text


def rate_text(entry: dict, none: str = "- (no valid attempt)") -> str:
    """``n/d rate [low, high]`` of an entry with ``rate`` and ``interval``; ``none`` for 0/0."""
    rate = entry["rate"]
    if rate["denominator"] == 0:
        return none
    interval = entry["interval"]
    return (
        f"{rate['numerator']}/{rate['denominator']} {ppm_text(rate['ppm'])} "
        f"[{ppm_text(interval['low_ppm'])}, {ppm_text(interval['high_ppm'])}]"
    )


def _causes(entry: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in entry["invalidity"]["causes"].items() if v) or "-"


def usd_text(cost: dict) -> str:
    if cost["micros"] is None:
        return cost["completeness"]
    micros = cost["micros"]
    text = f"${micros // 1_000_000}.{micros % 1_000_000:06d}"
    return text if cost["completeness"] == "complete" else f">={text} ({cost['completeness']})"


def _cost_counts(cost: dict) -> str:
    counts = cost.get("counts", {})
    hidden = ("complete", "genuine_zero", cost["completeness"])
    shown = [f"{k} {v}" for k, v in counts.items() if v and k not in hidden]
    return f" [{', '.join(shown)}]" if shown else ""


def _ms(dist: dict) -> str:
    if not dist["count"]:
        return "-"
    return f"{dist['median_ms']}/{dist['p90_ms']}/{dist['total_ms']}"


def table_rows(report: dict) -> list[list[str]]:
    """The per-model and per-case table, one row of cells (text) per model and per case."""
    rows = []
    for model in report["models"]:
        for entry, label in [(model, "(all)")] + [(c, c["case_id"]) for c in model["cases"]]:
            rows.append(
                [
                    model["model"],
                    label,
                    str(entry["attempts"]),
                    str(entry["valid"]),
                    str(entry["resolved"]),
                    rate_text(entry),
                    rate_text(entry["intent_to_treat"], "-"),
                    str(entry["invalid"]),
                    rate_text(entry["invalidity"], "-"),
                    _causes(entry),
                    str(entry["missing"]),
                    ", ".join(f"{k} {v}" for k, v in entry["terminal_classes"].items()) or "-",
                    "; ".join(f"{p} g{','.join(g)}" for p, g in entry["generations"].items())
                    or "-",
                    _ms(entry["runtime"]["candidate"]),
                    _ms(entry["runtime"]["evaluator"]),
                    usd_text(entry["cost"]["candidate"]) + _cost_counts(entry["cost"]["candidate"]),
                    usd_text(entry["cost"]["judge"]) + _cost_counts(entry["cost"]["judge"]),
                    usd_text(entry["cost"]["total"]),
                ]
            )
    return rows


HEADER = [
    "model",
    "case",
    "attempts",
    "valid",
    "resolved",
    "valid resolved rate [95% Wilson]",
    "intent-to-treat rate [95% Wilson]",
    "invalid",
    "invalidity rate [95% Wilson]",
    "invalid by cause",
    "missing",
    "terminal classes",
    "generations",
    "candidate ms med/p90/total",
    "evaluator ms med/p90/total",
    "candidate cost",
    "judge cost",
    "total cost",
]


GATES = {
    "chains": "gate: every chain and link the figures rest on checked, each record read "
    "proved by its hash; 'yyb doctor --plan' checks the rest and re-verifies every object",
    "objects": "gate: every chain and link checked and every reachable object re-verified",
}


def layer_line(layer: dict) -> str:
    if layer["oid"] is None:
        return "layer: not stored (--no-layer)"
    return f"layer: {layer['oid']}" + (" (unchanged)" if layer["reused"] else "")


def banner_lines(report: dict) -> list[str]:
    """The warnings every rendering opens with (an incomplete or unverified experiment)."""
    doctor = report["doctor"]
    if report["status"] == "complete":
        return []
    lines = [
        "!! INCOMPLETE EXPERIMENT: the figures below are NOT complete !!",
        f"!! doctor: {doctor['complete_chains']} of {doctor['attempts']} attempts have a "
        f"complete chain; {doctor['errors']} error finding(s) (run 'yyb doctor --plan') !!",
    ]
    lines += [f"!!   {line}" for line in doctor["first_errors"]]
    return lines


def _spend(report: dict) -> list[str]:
    """A warning for every model whose attempts reported costs above their ceilings."""
    return [
        f"!! {m['model']}: {m['over_ceiling']} attempt(s) reported a cost above the "
        "attempt's spend ceiling !!"
        for m in report["models"]
        if m.get("over_ceiling")
    ]


def unprotected_warnings(report: dict) -> list[str]:
    """A warning for every command profile of the plan that protects no path."""
    return [
        f"!! evaluator profile {name} protects nothing: it grades the workspace as the "
        "candidate left it, its tests and test configuration included !!"
        for name in report.get("unprotected", [])
    ]


# How many attempts whose cost is unavailable the text and markdown name one by one.
COST_NOTES_SHOWN = 5


def cost_notes(report: dict) -> list[str]:
    """A line for each attempt whose candidate cost the figures count as unavailable because
    of its envelope (the first ``COST_NOTES_SHOWN``, then how many more there are)."""
    noted = [row for row in report["attempts"] if row.get("cost_note")]
    lines = [
        f"attempt {row['ordinal']} ({row['model']}, {row['case_id'] or '-'}): "
        f"cost unavailable: {row['cost_note']}"
        for row in noted[:COST_NOTES_SHOWN]
    ]
    if len(noted) > COST_NOTES_SHOWN:
        more = len(noted) - COST_NOTES_SHOWN
        lines.append(f"... and {more} more (each has its cost_note in the JSON rows)")
    return lines


def _rate_of(report: dict, model: str) -> str:
    entry = next(m for m in report["models"] if m["model"] == model)
    return rate_text(entry["invalidity"], "- (no attempt)")


def invalidity_warnings(report: dict) -> list[str]:
    """A warning for every pair of models whose invalidity rates differ significantly."""
    lines = []
    for c in report["comparisons"]:
        test = c["invalidity_fisher_exact"]
        if test["significant"]:
            lines.append(
                f"!! invalidity differs: {c['first']} {_rate_of(report, c['first'])} vs "
                f"{c['second']} {_rate_of(report, c['second'])} invalid; exact Fisher "
                f"p = {p_text(test)} < 0.05: compare their intent-to-treat rates, not only "
                "their valid ones !!"
            )
    return lines


def _paired_text(c: dict) -> str:
    test = c["mcnemar_exact"]
    return (
        f"{c['cases_paired']} paired case(s) ({c['cases_unpaired']} unpaired), both "
        f"{c['both_resolved']}, only first {c['only_first']}, only second {c['only_second']}, "
        f"neither {c['neither']}; exact McNemar p = {p_text(test)} "
        f"({test['p_numerator']}/{test['p_denominator']})"
    )


def _comparisons(report: dict) -> list[str]:
    """Per pair of models, the intent-to-treat test first (it cannot be raised by making
    failures invalid), then the one on valid attempts only; a layer written before the
    intent-to-treat test existed shows the latter alone."""
    lines = []
    for c in report["comparisons"]:
        pair = f"{c['first']} vs {c['second']}"
        if "intent_to_treat" in c:
            lines.append(f"{pair} (intent to treat): {_paired_text(c['intent_to_treat'])}")
            lines.append(f"{pair} (valid attempts only): {_paired_text(c)}")
        else:
            lines.append(f"{pair}: {_paired_text(c)}")
    return lines


def win_rate_text(row: dict) -> str:
    """A pairwise row's win rate, ``rate_text`` style."""
    return rate_text({"rate": row["win_rate"], "interval": row["interval"]}, "- (none decided)")


def pairwise_figures_text(row: dict) -> str:
    """A pairwise row's score (in half-points: a tie is half a win) and position
    consistency; the win rate of a layer written before they were reported."""
    if "score" not in row:
        return f"win rate {win_rate_text(row)}"
    score = rate_text({"rate": row["score"], "interval": row["score_interval"]}, "-")
    position = row["position_consistency"]
    text = f"score {score}; position-consistent {rate_text(position, '- (none in both orders)')}"
    return text + (" POSITION-INCONSISTENT" if position["inconsistent"] else "")


def pairwise_lines(report: dict) -> list[str]:
    return [
        f"{row['model']} vs {row['baseline']} ({row['profile']}): {row['wins']} win, "
        f"{row['ties']} tie, {row['losses']} loss, {row['invalid']} invalid; "
        + pairwise_figures_text(row)
        for row in report.get("pairwise", [])
    ]


def _changes(report: dict) -> list[str]:
    return [
        f"attempt {row['ordinal']} ({row['model']}, {row['case_id'] or '-'}): verdict "
        f"{row['verdict']} (was {row['displaced']['verdict']} in layer "
        f"{row['displaced']['layer'][:12]})"
        for row in report["attempts"]
        if row["displaced"]
    ]


def family_lines(report: dict) -> list[str]:
    """Of a report over a family of retries: its plans, each model's retries, and a line for
    each attempt a retry superseded (docs/reports.md, "Families")."""
    family = report.get("family")
    if family is None:
        return []
    plans = family["plans"]
    lines = [
        f"family of {len(plans)} plans, root {plans[0]}: each cell counted once, its newest "
        "attempt with a valid outcome, else its newest attempt"
    ]
    lines += [
        f"{row['model']}: {row['retries']} retry attempt(s), {row['superseded']} attempt(s) "
        "superseded"
        for row in family["retries"]
    ]
    lines += [
        f"attempt {row['ordinal']} of plan {row['plan'][:12]} ({row['model']}, "
        f"{row['case_id'] or '-'}): {row['terminal_class'] or 'no terminal'}, superseded by "
        f"retry {row['superseded_by'][:12]}"
        for row in report["attempts"]
        if row.get("superseded_by") and row.get("plan")
    ]
    return lines


def head_lines(report: dict, layer: dict) -> list[str]:
    """The lines that say which plan, pin and report layer the report is."""
    pin = report["grader_version"]
    lines = [
        f"plan {report['plan']} ({report['comparison_classification']})",
        "verdicts: "
        + (f"graded by evaluator version {pin}" if pin else "current verdict of every attempt"),
        f"status: {report['status']} ({GATES[report['doctor']['gate']]})",
        layer_line(layer),
    ]
    return lines


def token_lines(report: dict) -> list[str]:
    """Per model and per case, the tokens the gateway metered (docs/gateway.md), for the
    entries it metered any of."""
    lines = []
    for model in report["models"]:
        for entry, label in [(model, "(all)")] + [(c, c["case_id"]) for c in model["cases"]]:
            tokens = entry.get("tokens")
            if tokens:
                lines.append(
                    f"{model['model']}  {label}: {tokens['input_tokens']:,} in, "
                    f"{tokens['cached_input_tokens']:,} cached, "
                    f"{tokens['cache_write_input_tokens']:,} cache writes, "
                    f"{tokens['output_tokens']:,} out over {tokens['metered_attempts']} "
                    f"attempt(s); cost {usd_text(entry['cost']['candidate'])}"
                )
    return lines


def pass_at_k_lines(report: dict) -> list[str]:
    """Per model with a case of several valid attempts: its pass@k for each k
    (docs/reports.md, "pass@k")."""
    return [
        f"{model['model']}: "
        + ", ".join(
            f"pass@{entry['k']} {ppm_text(entry['ppm'])} ({entry['cases']} case(s))"
            for entry in model["pass_at_k"]
        )
        for model in report["models"]
        if model.get("pass_at_k")
    ]


def text(report: dict, layer: dict) -> str:
    rows = table_rows(report)
    widths = [max(len(r[i]) for r in rows + [HEADER]) for i in range(len(HEADER))]
    mark = report["status"] != "complete"
    lines = banner_lines(report) + head_lines(report, layer) + [""]
    lines.append("  ".join(h.ljust(w) for h, w in zip(HEADER, widths, strict=True)).rstrip())
    for row in rows:
        line = "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        lines.append(line + ("  (incomplete)" if mark else ""))
    lines += _spend(report) + unprotected_warnings(report)
    notes = cost_notes(report)
    if notes:
        lines += ["", "candidate costs not counted"] + ["  " + line for line in notes]
    metered = token_lines(report)
    if metered:
        lines += ["", "tokens metered by the gateway"] + ["  " + line for line in metered]
    repeated = pass_at_k_lines(report)
    if repeated:
        lines += ["", "pass@k (unbiased estimator over each case's valid attempts)"]
        lines += ["  " + line for line in repeated]
    if report["comparisons"]:
        lines += ["", "paired comparison (per case: a strict majority of its attempts resolved)"]
        lines += ["  " + line for line in _comparisons(report)]
        lines += invalidity_warnings(report)
    if report.get("pairwise"):
        lines += ["", "pairwise judging (each attempt against its baseline's attempt)"]
        lines += ["  " + line for line in pairwise_lines(report)]
    retried = family_lines(report)
    if retried:
        lines += ["", "retries"] + ["  " + line for line in retried]
    changes = _changes(report)
    if changes:
        lines += ["", "verdicts changed by a regrade since an earlier layer"]
        lines += ["  " + line for line in changes]
    lines += banner_lines(report)
    return "\n".join(lines) + "\n"


def markdown(report: dict, layer: dict) -> str:
    lines = [f"> **{line.strip('! ')}**" for line in banner_lines(report)]
    if lines:
        lines.append("")
    lines += [f"- {line}" for line in head_lines(report, layer)] + [""]
    lines.append("| " + " | ".join(HEADER) + " |")
    lines.append("|" + "---|" * len(HEADER))
    for row in table_rows(report):
        cells = [c.replace("|", "\\|") for c in row]
        if report["status"] != "complete":
            cells[5] += " (incomplete)"
        lines.append("| " + " | ".join(cells) + " |")
    lines += [f"> **{line.strip('! ')}**" for line in _spend(report) + unprotected_warnings(report)]
    notes = cost_notes(report)
    if notes:
        lines += ["", "**Candidate costs not counted**", ""] + [f"- {line}" for line in notes]
    repeated = pass_at_k_lines(report)
    if repeated:
        lines += ["", "**pass@k** (unbiased estimator over each case's valid attempts)", ""]
        lines += [f"- {line}" for line in repeated]
    if report["comparisons"]:
        heading = "**Paired comparison** (per case: a strict majority of its attempts resolved)"
        lines += ["", heading, ""]
        lines += [f"- {line}" for line in _comparisons(report)]
        warnings = [f"> **{line.strip('! ')}**" for line in invalidity_warnings(report)]
        lines += [""] + warnings if warnings else []
    if report.get("pairwise"):
        lines += ["", "**Pairwise judging** (each attempt against its baseline's attempt)", ""]
        lines += [f"- {line}" for line in pairwise_lines(report)]
    retried = family_lines(report)
    if retried:
        lines += ["", "**Retries**", ""] + [f"- {line}" for line in retried]
    changes = _changes(report)
    if changes:
        lines += ["", "**Verdicts changed by a regrade**", ""] + [f"- {c}" for c in changes]
    return "\n".join(lines) + "\n"


def as_json(report: dict, layer: dict) -> str:
    document = dict(report, layer=layer)
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


FORMATS = {"text": text, "json": as_json, "markdown": markdown}
