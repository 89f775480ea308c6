"""HTML for the viewer's pages, escaped by construction.

A ``Markup`` is HTML this package made; anything else handed to ``el`` or ``join`` is text and
is escaped (``html.escape``, quotes included), so stdout, file names, patches and envelope
fields reach the page as characters, never as tags. An ``href`` must be a ``urls.Url``: a
link target cannot come from a string at all.
"""

from __future__ import annotations

import datetime
import html
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from yyb.store.objects.format import is_oid
from yyb.view import urls

ABBREV = 12  # hex digits of an abbreviated oid: what `yyb report` prints, unique in practice


class Markup(str):
    """HTML made by this package: passed through as it is."""


def esc(value: object) -> Markup:
    """``value`` as text in HTML (a ``Markup`` is already HTML and is kept)."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(str(value), quote=True))


def join(parts: Iterable[object], separator: str = "") -> Markup:
    """The parts one after another, each escaped unless it is Markup."""
    return Markup(esc(separator).join(esc(part) for part in parts))


# Attributes a page may set; ``href`` and ``action`` take a Url only (module docstring).
ATTRIBUTES = frozenset(
    {"class", "id", "title", "href", "action", "method", "name", "type", "placeholder"}
    | {"data-copy", "colspan", "open", "lang", "charset", "rel", "src", "defer", "value"}
    | {"aria-label", "content", "http-equiv", "selected"}
)
VOID = frozenset({"meta", "link", "input", "br"})


def el(tag: str, *children: object, **attrs: object) -> Markup:
    """The element ``tag`` with ``children`` (escaped unless Markup) and ``attrs``.

    Attribute names are spelled in Python (``class_``, ``data_copy``); a value of True is a
    bare attribute, None or False leaves it out.
    """
    out = [f"<{tag}"]
    for key, value in attrs.items():
        name = key.rstrip("_").replace("_", "-")
        if name not in ATTRIBUTES:
            raise ValueError(f"attribute {name!r} is not one a page may set")
        if value is None or value is False:
            continue
        if name in ("href", "action", "src") and not isinstance(value, urls.Url):
            raise TypeError(f"{name} must be a urls.Url, not {type(value).__name__}")
        out.append(f" {name}" if value is True else f' {name}="{esc(value)}"')
    out.append(">")
    if tag in VOID:
        return Markup("".join(out))
    return Markup("".join(out) + join(children) + f"</{tag}>")


def link(url: urls.Url, *children: object, **attrs: object) -> Markup:
    return el("a", *children, href=url, **attrs)


def oid(value: str, url: urls.Url | None = None, full: bool = False) -> Markup:
    """An oid, abbreviated (the whole one on hover), linked to ``url`` (default: its object
    page), with a button that copies the whole oid."""
    target = urls.obj(value) if url is None else url
    shown = value if full else value[:ABBREV]
    return el(
        "span",
        link(target, el("code", shown), class_="oid", title=value),
        el("button", "copy", type="button", class_="copy", data_copy=value, title="copy"),
        class_="oid",
    )


def refname(name: str) -> Markup:
    """A ref name with each oid in it abbreviated (the whole name on hover): run refs name two
    oids, which would otherwise push a table past the window's edge."""
    short = "/".join(part[:ABBREV] + "…" if is_oid(part) else part for part in name.split("/"))
    return el("code", short, title=name)


def badge(text: str, state: str) -> Markup:
    """A coloured word: ``state`` is ok, bad, warn or info (the word says it without colour)."""
    return el("span", text, class_=f"badge {state}")


def table(header: list[object], rows: Iterable[list[object]], class_: str | None = None) -> Markup:
    head = el("tr", *(el("th", cell) for cell in header))
    body = [el("tr", *(el("td", cell) for cell in row)) for row in rows]
    return scroll(el("table", head, *body, class_=class_))


def facts(pairs: Iterable[tuple[object, object]]) -> Markup:
    """A two-column table of name and value."""
    return scroll(
        el(
            "table",
            *(el("tr", el("th", name), el("td", value)) for name, value in pairs),
            class_="facts",
        )
    )


def scroll(wide: Markup) -> Markup:
    """``wide`` (a table) in a box that scrolls sideways, so a narrow window scrolls the
    table rather than the page."""
    return el("div", wide, class_="scroll")


def pre(data: bytes | str, limit: int, total: int | None = None, more: urls.Url | None = None):
    """Text (bytes decoded as UTF-8, invalid bytes shown as U+FFFD) in a ``<pre>``, cut to
    ``limit`` bytes with a line saying how much is shown and where the rest is."""
    raw = data if isinstance(data, bytes) else data.encode()
    total = len(raw) if total is None else total
    text = raw[:limit].decode("utf-8", "replace")
    parts = [el("pre", text if text else Markup("<i>(empty)</i>"), class_="text")]
    if total > limit:
        where = [" ", link(more, "the rest")] if more is not None else []
        parts.append(el("p", f"showing the first {limit:,} of {total:,} bytes;", *where))
    return join(parts)


def when(ms: object) -> str:
    """Milliseconds since the epoch as UTC ISO 8601, or ``-``."""
    if type(ms) is not int:
        return "-"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}Z"


def usd(cost: object) -> str:
    """A cost with its completeness: ``$0.001450 (complete)``; unknown amounts stay unknown."""
    if not isinstance(cost, dict):
        return "-"
    micros, state = cost.get("micros"), cost.get("completeness", "?")
    if type(micros) is not int:
        return str(state)
    amount = f"${micros // 1_000_000}.{micros % 1_000_000:06d}"
    return f"{'>=' if state == 'partial' else ''}{amount} ({state})"


def pager(at: Callable[[int], urls.Url], page: int, pages: int) -> Markup:
    """Links to the previous and next page (``at(n)``: the url of page n); nothing when there
    is one page."""
    if pages <= 1:
        return Markup("")
    parts: list[object] = [f"page {page} of {pages}"]
    if page > 1:
        parts += [" · ", link(at(page - 1), "previous")]
    if page < pages:
        parts += [" · ", link(at(page + 1), "next")]
    return el("p", *parts, class_="pager")


def document(title: str, body: Markup, store_path: str | None, bundle: Frame | None = None):
    """A whole page: the navigation, ``body`` and the store it shows; as bytes.

    ``bundle``: the page is one of a bundle's files (``yyb.view.bundle``): its navigation
    leads to the bundle's first page only, it has no search box (no server answers it), it
    says when it was verified, and its policy is in a ``<meta>`` element (a file has no
    headers)."""
    if bundle is None:
        nav = el(
            "nav",
            link(urls.home(), "Experiments"),
            link(urls.longitudinal(), "Longitudinal"),
            link(urls.refs(), "Refs"),
            el(
                "form",
                el("input", name="name", placeholder="oid, abbreviation or ref", aria_label="name"),
                el("button", "Open", type="submit"),
                action=urls.find(),
                method="get",
            ),
        )
        footer = el("footer", f"store {store_path or '(memory)'} · read-only · yyb view")
        policy = Markup("")
    else:
        nav = el("nav", link(bundle.home, bundle.home_text))
        body = join([el("p", bundle.note, class_="bundled"), body])
        footer = el("footer", f"written from store {store_path or '(memory)'} · yyb view --bundle")
        policy = el("meta", http_equiv="Content-Security-Policy", content=bundle.policy)
    page = el(
        "html",
        el(
            "head",
            el("meta", charset="utf-8"),
            policy,
            el("title", f"{title} · yyb view"),
            el("link", rel="stylesheet", href=urls.static("view.css")),
            el("link", rel="icon", href=urls.static("icon.svg")),
            el("script", src=urls.static("view.js"), defer=True),
        ),
        el("body", el("header", nav), el("main", body), footer),
        lang="en",
    )
    return ("<!DOCTYPE html>\n" + page + "\n").encode("utf-8")


@dataclass(frozen=True)
class Frame:
    """What a bundle's page says around its body (``document``)."""

    home: urls.Url  # the bundle's first page
    home_text: str
    note: str  # when the page was verified, and how to verify it again
    policy: str  # its Content-Security-Policy
