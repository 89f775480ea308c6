"""``yyb compare``'s formats: aligned text, Markdown for a pull request, JSON with stable keys."""

from __future__ import annotations

import json

from yyb.reports.render import rate_text, usd_text
from yyb.reports.stats import p_text


def _key_lines(document: dict) -> list[str]:
    compatibility = document["compatibility"]
    compared = compatibility["cases_compared"]
    if not compatibility["differs"]:
        return [f"compatibility keys: identical in all {compared} case(s) compared"]
    parts = ", ".join(f"{d['part']} ({d['cases']} of {compared})" for d in compatibility["differs"])
    return [f"compatibility keys differ: {parts}"]


def side_text(side: dict | None, separator: str = ", ", none: str = "-") -> str:
    """One side of one case in words: outcome, resolved of valid, verdicts, cost, tokens and
    the median wall time."""
    if side is None:
        return none
    outcome = side["outcome"] or "no valid attempt"
    verdicts = ", ".join(f"{k} {n}" for k, n in side["verdicts"].items()) or "no verdict"
    parts = [f"{outcome} {side['resolved']}/{side['valid']}", verdicts, usd_text(side["cost"])]
    if side["tokens"] is not None:
        tokens = side["tokens"]
        parts.append(f"{tokens['input_tokens']:,} in/{tokens['output_tokens']:,} out")
    if side["median_ms"] is not None:
        parts.append(f"{side['median_ms']} ms median")
    return separator.join(parts)


def _paired_line(label: str, paired: dict) -> str:
    test = paired["mcnemar_exact"]
    return (
        f"{label}: {paired['cases_paired']} paired case(s), both {paired['both_resolved']}, "
        f"only first {paired['only_first']}, only second {paired['only_second']}, neither "
        f"{paired['neither']}; exact McNemar p = {p_text(test)}"
    )


def _pair_lines(pair: dict) -> tuple[list[str], list[list[str]]]:
    lines = [
        f"{pair['first_model']} (first) vs {pair['second_model']} (second)",
        f"  valid resolved rate: {rate_text(pair['first'])} -> {rate_text(pair['second'])}",
        "  intent-to-treat rate: "
        f"{rate_text(pair['first']['intent_to_treat'], '-')} -> "
        f"{rate_text(pair['second']['intent_to_treat'], '-')}",
        "  " + _paired_line("valid attempts", pair["paired"]),
        "  " + _paired_line("intent to treat", pair["intent_to_treat"]),
        f"  flipped: lost {', '.join(pair['lost']) or '-'}; "
        f"gained {', '.join(pair['gained']) or '-'}",
    ]
    rows = [
        [
            case["case_id"],
            side_text(case["first"]),
            side_text(case["second"]),
            case["change"],
            ", ".join(case["key_differs"]) or "-",
        ]
        for case in pair["cases"]
    ]
    return lines, rows


HEADER = ["case", "first", "second", "change", "key differs in"]


def _head(document: dict) -> list[str]:
    lines = []
    if document["status"] != "complete":
        lines.append("!! INCOMPLETE: a plan's chain is incomplete; its figures are incomplete !!")
    for name in ("first", "second"):
        side = document[name]
        lines.append(
            f"{name}: plan {side['plan']} ({side['status']}, {side['attempts']} attempts, "
            f"models {', '.join(side['models'])})"
        )
    lines += _key_lines(document)
    unpaired = document["unpaired_models"]
    for name in ("first", "second"):
        if unpaired[name]:
            lines.append(f"only in {name}: {', '.join(unpaired[name])} (not compared)")
    return lines


def text(document: dict) -> str:
    lines = _head(document)
    for pair in document["pairs"]:
        said, rows = _pair_lines(pair)
        lines += [""] + said
        widths = [max(len(r[i]) for r in rows + [HEADER]) for i in range(len(HEADER))]
        for row in [HEADER] + rows:
            cells = zip(row, widths, strict=True)
            lines.append("  " + "  ".join(c.ljust(w) for c, w in cells).rstrip())
    return "\n".join(lines) + "\n"


def markdown(document: dict) -> str:
    lines = [f"- {line}" for line in _head(document)]
    for pair in document["pairs"]:
        said, rows = _pair_lines(pair)
        lines += ["", f"**{said[0]}**", ""] + [f"- {line.strip()}" for line in said[1:]] + [""]
        lines.append("| " + " | ".join(HEADER) + " |")
        lines.append("|" + "---|" * len(HEADER))
        for row in rows:
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    return "\n".join(lines) + "\n"


def as_json(document: dict) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


FORMATS = {"text": text, "markdown": markdown, "json": as_json}
