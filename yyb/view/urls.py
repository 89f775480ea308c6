"""The viewer's URL layout, in one place (docs/view.md lists it; the offline HTML report links
into it).

Every link a page makes is a ``Url``, and a ``Url`` is only ever made here, from an oid or a
ref name that passed the store's own grammar (64 lowercase hex digits; docs/format.md's
ref-name rules) or from a fixed path. So no byte a candidate produced can become a link target:
a file name, a line of stdout or an envelope field is at most text on a page.
"""

from __future__ import annotations

from dataclasses import dataclass

from yyb.errors import UsageError
from yyb.store.objects.format import check_oid
from yyb.store.refs.names import check_ref_name

STATIC = ("view.css", "view.js", "icon.svg")


class Url(str):
    """A path inside the viewer, made by this module only (see the module docstring)."""


def home() -> Url:
    return Url("/")


def plan(plan_oid: str) -> Url:
    return Url(f"/plan/{check_oid(plan_oid)}")


def attempt(plan_oid: str, attempt_oid: str) -> Url:
    return Url(f"/plan/{check_oid(plan_oid)}/attempt/{check_oid(attempt_oid)}")


def layers(plan_oid: str) -> Url:
    return Url(f"/plan/{check_oid(plan_oid)}/layers")


def report(plan_oid: str) -> Url:
    """The `yyb report --format html` page of the plan's newest layer."""
    return Url(f"/plan/{check_oid(plan_oid)}/report.html")


def longitudinal() -> Url:
    return Url("/longitudinal")


def obj(oid: str) -> Url:
    return Url(f"/object/{check_oid(oid)}")


def raw(oid: str) -> Url:
    return Url(f"/raw/{check_oid(oid)}")


def diff(oid: str, page: int = 1) -> Url:
    return paged(Url(f"/diff/{check_oid(oid)}"), page)


def refs(under: str | None = None, page: int = 1) -> Url:
    if under is None:
        return paged(Url("/refs"), page)
    url = f"/refs?under={check_ref_name(under)}"
    return Url(url if page == 1 else f"{url}&page={int(page)}")


def ref(name: str) -> Url:
    return Url(f"/ref/{check_ref_name(name)}")


def static(name: str) -> Url:
    if name not in STATIC:
        raise ValueError(f"no static file {name!r}")
    return Url(f"/static/{name}")


def find() -> Url:
    return Url("/find")


def compare(first: str, second: str) -> Url:
    return Url(f"/compare/{check_oid(first)}/{check_oid(second)}")


def compare_form() -> Url:
    """Where the comparison form sends its two choices (``?first=OID&second=OID``)."""
    return Url("/compare")


def paged(url: Url, page: int) -> Url:
    """``url`` at page ``page`` (1 is the page without a query)."""
    return url if page == 1 else Url(f"{url}?page={int(page)}")


def anchor(url: Url, name: str) -> Url:
    """``url`` with a fragment; ``name`` is one of the page's own ids (``[a-z0-9-]``)."""
    if not name or not all(c.isascii() and (c.isalnum() or c == "-") for c in name):
        raise ValueError(f"not an anchor name: {name!r}")
    return Url(f"{url}#{name.lower()}")


@dataclass(frozen=True)
class Route:
    """A request path parsed: which page, and its validated arguments."""

    page: str
    oids: tuple[str, ...] = ()
    name: str | None = None  # a ref name or a static file's name


def route(path: str) -> Route | None:
    """The page ``path`` (without its query) names, or None when it names none.

    Nothing is unquoted: oids and ref names need no escapes, so ``%2e%2e`` stays a refused
    name rather than becoming ``..``.

    Raises:
        UsageError: an oid or ref name that the store's grammar refuses.
    """
    if path == "/":
        return Route("home")
    if path == "/longitudinal":
        return Route("longitudinal")
    if path == "/refs":
        return Route("refs")
    if path == "/find":
        return Route("find")
    if path == "/compare":
        return Route("compare")
    parts = path.split("/")[1:]
    if len(parts) == 2 and parts[0] == "static" and parts[1] in STATIC:
        return Route("static", name=parts[1])
    if len(parts) == 2 and parts[0] in ("object", "raw", "diff"):
        return Route(parts[0], (check_oid(parts[1]),))
    if len(parts) == 3 and parts[0] == "compare":
        return Route("compare", (check_oid(parts[1]), check_oid(parts[2])))
    if len(parts) >= 2 and parts[0] == "ref":
        return Route("ref", name=check_ref_name("/".join(parts[1:])))
    if len(parts) >= 2 and parts[0] == "plan":
        oid = check_oid(parts[1])
        rest = parts[2:]
        if not rest:
            return Route("plan", (oid,))
        if rest == ["layers"]:
            return Route("layers", (oid,))
        if rest == ["report.html"]:
            return Route("report", (oid,))
        if len(rest) == 2 and rest[0] == "attempt":
            return Route("attempt", (oid, check_oid(rest[1])))
    return None


def page_number(query: dict[str, list[str]]) -> int:
    """The ``page`` query parameter (1 when absent).

    Raises:
        UsageError: not a positive integer.
    """
    values = query.get("page", ["1"])
    text = values[-1]
    if not text.isdigit() or not 0 < int(text) < 10**9:
        raise UsageError(f"page {text!r} is not a positive integer")
    return int(text)
