"""The comparison page: two experiments case by case, as ``yyb compare`` reports them
(docs/reports.md, "Comparing two runs"), the compatibility-key parts that differ first."""

from __future__ import annotations

from yyb.reports import compare as comparing
from yyb.reports.compare_render import side_text
from yyb.reports.render import rate_text
from yyb.reports.stats import p_text
from yyb.view import urls
from yyb.view.markup import Markup, badge, el, facts, join, oid, table
from yyb.view.values import word

CHANGE = {"gained": "ok", "lost": "bad", "same": "info", "undecided": "warn", "unpaired": "warn"}


def page(store, first: str, second: str) -> tuple[str, Markup]:
    document = comparing.compare(store, first, second)
    plans = (oid(first, urls.plan(first)), oid(second, urls.plan(second)))
    body = [el("h1", "Compare ", plans[0], " with ", plans[1])]
    if document["status"] != "complete":
        body.append(el("p", badge("INCOMPLETE", "bad"), " a plan's chain is incomplete"))
    body.append(_keys(document))
    unpaired = document["unpaired_models"]
    for side in ("first", "second"):
        if unpaired[side]:
            shown = ", ".join(unpaired[side])
            body.append(el("p", f"only in the {side} plan, not compared: {shown}"))
    for pair in document["pairs"]:
        body += _pair(pair)
    return f"compare {first[:12]} {second[:12]}", join(body)


def _keys(document: dict) -> Markup:
    """The compatibility-key parts that differ, before any figure."""
    compatibility = document["compatibility"]
    compared = compatibility["cases_compared"]
    if not compatibility["differs"]:
        said = f" compatibility keys identical in all {compared} case(s) compared"
        return el("p", badge("same keys", "ok"), said)
    rows = [[d["part"], f"{d['cases']} of {compared}"] for d in compatibility["differs"]]
    return join([el("h2", "Compatibility keys that differ"), table(["key part", "cases"], rows)])


def _pair(pair: dict) -> list[Markup]:
    test = pair["paired"]["mcnemar_exact"]
    summary = facts(
        [
            ("valid resolved rate", f"{rate_text(pair['first'])} → {rate_text(pair['second'])}"),
            (
                "intent-to-treat rate",
                f"{rate_text(pair['first']['intent_to_treat'], '—')} → "
                f"{rate_text(pair['second']['intent_to_treat'], '—')}",
            ),
            ("paired cases", f"{pair['paired']['cases_paired']}; exact McNemar p = {p_text(test)}"),
            ("lost", ", ".join(pair["lost"]) or "none"),
            ("gained", ", ".join(pair["gained"]) or "none"),
        ]
    )
    rows = [
        [
            word(case["case_id"]),
            side_text(case["first"], " · ", "—"),
            side_text(case["second"], " · ", "—"),
            badge(case["change"], CHANGE[case["change"]]),
            ", ".join(case["key_differs"]) or "—",
        ]
        for case in pair["cases"]
    ]
    heading = el("h2", f"{pair['first_model']} → {pair['second_model']}")
    header = ["case", "first", "second", "change", "key differs in"]
    return [heading, summary, table(header, rows)]


def form(plans: list[tuple[str, str]]) -> Markup:
    """A form choosing two of ``plans`` ((oid, label) pairs) to compare; nothing for fewer."""
    if len(plans) < 2:
        return Markup("")

    def choose(name: str, chosen: int) -> Markup:
        options = [
            el("option", label, value=plan_oid, selected=i == chosen)
            for i, (plan_oid, label) in enumerate(plans)
        ]
        return el("select", *options, name=name, aria_label=name)

    return el(
        "form",
        "compare ",
        choose("first", 0),
        " with ",
        choose("second", 1),
        " ",
        el("button", "Compare", type="submit"),
        action=urls.compare_form(),
        method="get",
        class_="compare",
    )


def chosen(query: dict[str, list[str]]) -> tuple[str, str]:
    """The two plans the comparison form chose.

    Raises:
        UsageError: a choice missing or not an oid.
    """
    from yyb.errors import UsageError
    from yyb.store.objects.format import check_oid

    picked = []
    for name in ("first", "second"):
        values = query.get(name)
        if not values:
            raise UsageError(f"choose the {name} plan to compare")
        picked.append(check_oid(values[-1]))
    if picked[0] == picked[1]:
        raise UsageError("choose two different plans to compare")
    return picked[0], picked[1]
