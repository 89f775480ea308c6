"""How a verification shows on a page: one mark per check, a word for the whole, the problems.

Every mark is a word as well as a colour (``ok``, ``FAILED``), so the status reads the same
without colour and can be found by a test or a screen reader.
"""

from __future__ import annotations

from yyb.view.markup import Markup, badge, el, join, oid, table
from yyb.view.verify import CHECKS, FAILED, NOT_APPLICABLE, PASSED, Signature, Verification

MARKS = {PASSED: ("ok", "ok"), FAILED: ("FAILED", "bad"), NOT_APPLICABLE: ("n/a", "info")}
HEADER = ["verified", *CHECKS, "signature"]


def overall(check: Verification) -> Markup:
    return badge("verified", "ok") if check.verified else badge("FAILED", "bad")


def mark(result: str) -> Markup:
    word, state = MARKS.get(result, (result, "warn"))
    return badge(word, state)


def signature(sig: Signature | None) -> Markup:
    """The signature badge: verified, failed, or signed but unchecked; nothing when unsigned."""
    if sig is None:
        return Markup("")
    word, state = {
        "verified": ("signed: verified", "ok"),
        "failed": ("signature FAILED", "bad"),
    }.get(sig.state, ("signed: unchecked", "warn"))
    return el("span", badge(word, state), title=sig.detail)


def cells(check: Verification, sig: Signature | None) -> list[object]:
    """The cells HEADER names, for one object."""
    return [overall(check), *(mark(check.results[c]) for c in CHECKS), signature(sig)]


def kind(check: Verification) -> str:
    """What the object is: a record's schema_version, or ``blob``."""
    return check.schema_version or check.kind or "-"


def problems(check: Verification) -> Markup:
    """The problems found, one per line (nothing when verified)."""
    if check.verified:
        return Markup("")
    return el("ul", *(el("li", problem) for problem in check.problems), class_="problems")


def row(role: str, check: Verification, sig: Signature | None) -> list[object]:
    """A chain table row: what it is, its oid, its kind, its checks and its problems."""
    return [role, oid(check.oid), kind(check), *cells(check, sig), problems(check)]


ROW_HEADER = ["role", "oid", "schema", *HEADER, "problems"]


def table_of(checks: list[Verification], sigs: list[Signature | None] | None = None) -> Markup:
    """The checks of a few objects, one row each."""
    sigs = sigs or [None] * len(checks)
    rows = [
        [oid(c.oid), kind(c), *cells(c, s), problems(c)] for c, s in zip(checks, sigs, strict=True)
    ]
    return table(["oid", "schema", *HEADER, "problems"], rows)


def summary(checks: list[Verification]) -> Markup:
    """A banner: every object verified, or how many failed."""
    failed = [c for c in checks if not c.verified]
    if not failed:
        return el("p", f"all {len(checks)} objects verified", class_="banner ok")
    return el(
        "p",
        f"{len(failed)} of {len(checks)} objects FAILED verification: ",
        join((oid(c.oid) for c in failed), ", "),
        class_="banner bad",
    )
