"""`yyb view --bundle`: one plan's pages written as files that open without a server.

The pages are the server's own (``pages.render``), in a frame that says when they were
verified. They are written in two rounds: first the plan's pages (its experiment page and the
matrix's further pages, its layers, every attempt), then every object and diff page they link
to, which is the plan's evidence as the viewer shows it; a gateway meter brings its calls and
their bodies along. Each page's links are then made relative: a link to a page in the bundle
leads to its file, any other (the store's other plans, refs, raw bodies, the HTML report, an
object only an object page names) becomes plain text, so no link of a bundle is broken.

Layout (docs/view.md): ``index.html`` (the experiment page), ``plan/page-N.html`` (further
pages of its matrix), ``plan/layers.html``, ``attempt/<oid>.html``, ``object/<oid>.html``
(``object/<oid>-page-N.html``), ``diff/<oid>.html`` (``diff/<oid>-page-N.html``) and
``static/``. The folder is written beside its place and renamed into it at the end, so a
bundle that fails leaves nothing behind.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from urllib.parse import parse_qs

from yyb.errors import CorruptObject, NotFound, StoreIOError, UsageError, YybError
from yyb.evidence.record import kind_of
from yyb.evidence.records import GATEWAY_METER
from yyb.view import assets, pages, urls
from yyb.view.chain import NotInStore, read_plan
from yyb.view.markup import Frame, document, when
from yyb.view.verify import links_of

# A file has no headers: its policy is a <meta> element (which cannot say frame-ancestors).
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'"
)
PLAN_PAGES = frozenset({"plan", "layers", "attempt"})
OBJECT_PAGES = frozenset({"object", "diff"})
# Every link a page makes is ``<a href="URL" ...>...</a>`` (markup.link: href first, no
# anchor inside another, text escaped), and every asset ``href=``/``src=`` of ``/static/``.
_ANCHOR = re.compile(r'<a href="([^"]*)"([^>]*)>(.*?)</a>', re.S)
_ASSET = re.compile(r'((?:href|src)=")/(static/[a-z.]+)"')


@dataclass
class Written:
    """What a bundle holds: its folder, its HTML pages, its files in all, its attempts."""

    folder: str
    pages: int
    files: int
    attempts: int


def check_free(folder: str) -> None:
    """Refuse a folder that holds anything (a bundle never mixes with other files).

    Raises:
        UsageError: ``folder`` exists and is not an empty folder.
    """
    if os.path.isdir(folder) and not os.listdir(folder):
        return
    if os.path.lexists(folder):
        raise UsageError(f"{folder} exists and is not an empty folder; a bundle needs its own")


def write(store, trusted: list, plan_oid: str, folder: str, now_ms: int | None = None) -> Written:
    """Write the pages of plan ``plan_oid`` as files into ``folder`` (docs/view.md, "A
    static bundle"), every object verified now (``now_ms``: when, by default the clock's).

    Raises:
        UsageError: ``folder`` is not free (``check_free``). NotInStore: no such plan.
        StoreIOError: a file cannot be written.
    """
    check_free(folder)
    plan = read_plan(store, plan_oid)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    parent = os.path.dirname(os.path.abspath(folder))
    try:
        os.makedirs(parent, exist_ok=True)
        scratch = tempfile.mkdtemp(prefix=".yyb-bundle-", dir=parent)
    except OSError as exc:
        raise StoreIOError(folder, exc.strerror or str(exc)) from None
    try:
        writer = Writer(store, trusted, plan_oid, plan, Path(scratch), now_ms)
        writer.run()
        if os.path.isdir(folder):
            os.rmdir(folder)
        os.rename(scratch, folder)
    except OSError as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        raise StoreIOError(folder, exc.strerror or str(exc)) from None
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    attempts = len(plan.get("links", {}).get("attempts", []))
    return Written(folder, writer.pages, writer.pages + len(assets.FILES), attempts)


class Writer:
    """The pages of one plan, each rendered once and written to its file."""

    def __init__(self, store, trusted: list, plan_oid: str, plan: dict, root: Path, now_ms: int):
        self.store, self.trusted, self.plan_oid, self.root = store, trusted, plan_oid, root
        self.attempts = set(plan.get("links", {}).get("attempts", []))
        self.evidence: set[str] = {plan_oid}
        self.placed: set[str] = set()
        self.queues: dict[bool, deque[tuple[str, str]]] = {True: deque(), False: deque()}
        self.pages = 0
        note = (
            f"verified when written, at {when(now_ms)}; re-verify with yyb doctor --plan {plan_oid}"
        )
        self.frame = Frame(urls.plan(plan_oid), f"Experiment {plan_oid[:12]}", note, POLICY)

    def run(self) -> None:
        """The plan's pages first (they name the evidence), then the evidence's pages."""
        for name, (_, text) in assets.FILES.items():
            self.put(f"static/{name}", text.encode())
        self.enqueue(urls.plan(self.plan_oid), "index.html")
        for plan_page in (True, False):
            queue = self.queues[plan_page]
            while queue:
                url, target = queue.popleft()
                self.page(url, target, plan_page)

    def place(self, url: str) -> str | None:
        """The file (under the bundle's folder) of the viewer's page ``url``; None when the
        page is not in the bundle."""
        path, _, query = url.partition("?")
        try:
            found = urls.route(path)
            number = urls.page_number(parse_qs(query))
        except UsageError:
            return None
        if found is None:
            return None
        more = "" if number == 1 else f"-page-{number}"
        first = found.oids[0] if found.oids else None
        if found.page == "plan" and first == self.plan_oid:
            return "index.html" if number == 1 else f"plan/page-{number}.html"
        if found.page == "layers" and first == self.plan_oid:
            return "plan/layers.html"
        if found.page == "attempt" and first == self.plan_oid and found.oids[1] in self.attempts:
            return f"attempt/{found.oids[1]}.html"
        if found.page in OBJECT_PAGES and first in self.evidence:
            return f"{found.page}/{first}{more}.html"
        return None

    def enqueue(self, url: str, target: str) -> None:
        if target not in self.placed:
            self.placed.add(target)
            page = urls.route(url.partition("?")[0]).page
            self.queues[page in PLAN_PAGES].append((url, target))

    def page(self, url: str, target: str, plan_page: bool) -> None:
        """Render the page ``url`` as the server does, name its evidence (a plan's page),
        make its links relative and write it to ``target``."""
        path, _, query = url.partition("?")
        found = urls.route(path)
        try:
            title, body = pages.render(self.store, self.trusted, found, parse_qs(query))
        except (NotInStore, NotFound) as exc:
            title, body = pages.error(HTTPStatus.NOT_FOUND, exc.message)
        except CorruptObject as exc:
            title, body = pages.error(HTTPStatus.CONFLICT, f"it fails verification: {exc.message}")
        except YybError as exc:
            title, body = pages.error(HTTPStatus.INTERNAL_SERVER_ERROR, exc.message)
        text = document(title, body, self.store.path, self.frame).decode("utf-8")
        if plan_page:
            self.name_evidence(text)
        self.put(target, self.relative(text, target).encode("utf-8"))
        self.pages += 1

    def name_evidence(self, text: str) -> None:
        """Every object a plan's page links to is evidence of the plan, and so is what a
        gateway meter links (its calls) and what each call links (its bodies)."""
        for match in _ANCHOR.finditer(text):
            found = urls.route(html.unescape(match.group(1)).split("#")[0].split("?")[0])
            if found is not None and found.page in OBJECT_PAGES | {"raw"}:
                if found.oids[0] not in self.evidence:
                    self.evidence.add(found.oids[0])
                    self.evidence.update(calls(self.store, found.oids[0]))

    def relative(self, text: str, here: str) -> str:
        """``text`` with every link into the bundle made relative to ``here`` (each page it
        leads to queued) and every other link made plain text."""
        up = "../" * here.count("/")

        def anchor(match: re.Match) -> str:
            url, mark, fragment = html.unescape(match.group(1)).partition("#")
            target = self.place(url)
            if target is None:
                return f"<span{match.group(2)}>{match.group(3)}</span>"
            self.enqueue(url, target)
            href = html.escape(up + target + mark + fragment, quote=True)
            return f'<a href="{href}"{match.group(2)}>{match.group(3)}</a>'

        text = _ANCHOR.sub(anchor, text)
        return _ASSET.sub(lambda m: f'{m.group(1)}{up}{m.group(2)}"', text)

    def put(self, target: str, data: bytes) -> None:
        path = self.root / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def calls(store, oid: str) -> list[str]:
    """What a gateway meter links (its calls, its price table) and what each of its calls
    links (the request and response bodies); nothing for any other object."""
    try:
        kind, _, stream = store.objects.open_body(oid)
        stream.close()
        if kind != "record":
            return []
        meter = store.objects.read_record(oid)
    except YybError:
        return []
    if kind_of(meter) != GATEWAY_METER:
        return []
    found = [t for targets in links_of(meter).values() for t in targets]
    for call in links_of(meter).get("calls", []):
        try:
            record = store.objects.read_record(call)
        except YybError:
            continue
        found += [t for targets in links_of(record).values() for t in targets]
    return found
