"""Which function makes which page: the one table the server and the bundle writer share.

``render`` turns a parsed URL (``urls.Route``) and its query into a page's title and body,
which ``markup.document`` wraps into a whole page. The server answers a request with them;
the bundle writer (``yyb.view.bundle``) writes the same pages to files.
"""

from __future__ import annotations

from http import HTTPStatus

from yyb.store.refs.names import check_ref_name
from yyb.view import attempt, compare, experiments, objects, urls
from yyb.view.markup import Markup, el, join, link

# The pages ``render`` makes (every page but the static files, raw bodies, /find and the
# HTML report, which are not HTML pages of the viewer's own frame).
HTML_PAGES = frozenset(
    {
        "home",
        "plan",
        "layers",
        "longitudinal",
        "attempt",
        "object",
        "diff",
        "refs",
        "ref",
        "compare",
    }
)


def render(
    store, trusted: list, found: urls.Route, query: dict[str, list[str]]
) -> tuple[str, Markup]:
    """The title and body of the HTML page ``found`` names.

    Raises:
        NotInStore, UsageError, YybError: as the page functions raise them.
    """
    oids, number = found.oids, urls.page_number(query)
    if found.page == "home":
        return experiments.home(store)
    if found.page == "plan":
        return experiments.experiment(store, trusted, oids[0], number)
    if found.page == "layers":
        return experiments.layers(store, oids[0])
    if found.page == "longitudinal":
        return experiments.longitudinal(store)
    if found.page == "attempt":
        return attempt.page(store, trusted, oids[0], oids[1])
    if found.page == "object":
        return objects.object_page(store, trusted, oids[0], number)
    if found.page == "diff":
        return objects.diff_page(store, oids[0], number)
    if found.page == "refs":
        under = query.get("under")
        return objects.refs_page(store, check_ref_name(under[-1]) if under else None, number)
    if found.page == "ref":
        return objects.ref_page(store, found.name)
    if found.page == "compare":
        first, second = oids if oids else compare.chosen(query)
        return compare.page(store, first, second)
    raise ValueError(f"{found.page} is not an HTML page")


def error(status: HTTPStatus, message: str) -> tuple[str, Markup]:
    """The title and body of a page saying what went wrong."""
    body = join(
        [
            el("h1", f"{status.value} {status.phrase}"),
            el("p", message),
            el("p", link(urls.home(), "experiments")),
        ]
    )
    return status.phrase, body
