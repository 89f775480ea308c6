"""The viewer's HTTP server: the standard library's, bound to 127.0.0.1, answering GET and HEAD.

``Viewer.respond`` turns one request into one response without touching a socket (the tests
call it directly); ``Server`` is a ``ThreadingHTTPServer`` around it. Every response carries
the headers of ``HEADERS``: a Content-Security-Policy under which a page can load only the
viewer's own stylesheet and script (no inline script or style, no frame, no form posting
elsewhere, no base URL), no MIME sniffing, no referrer, no framing. A request whose Host is
not the address the viewer listens on is refused, so that a web page the user visits cannot
read the store through a name it made resolve to 127.0.0.1 (DNS rebinding). Nothing here
writes to the store: the pages read it through its API only.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import BinaryIO
from urllib.parse import parse_qs

from yyb.errors import CorruptObject, NotFound, UsageError, YybError
from yyb.view import assets, experiments, objects, pages, urls
from yyb.view.chain import NotInStore
from yyb.view.markup import Markup
from yyb.view.markup import document as html_document

HOST = "127.0.0.1"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
# The `yyb report --format html` page is one self-contained file: its style and charts are
# inline, so it may use inline style; it has no script, and may load nothing.
REPORT_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    # Refs move and objects can be damaged while the viewer runs: never show a stale answer.
    "Cache-Control": "no-store",
}
HTML = "text/html; charset=utf-8"
METHODS = ("GET", "HEAD")
# Pages that read the store are made at most HEAVY_PAGES at a time (each holds up to a diff
# page's read, diff.LIMIT bytes, and its HTML); one more waits up to BUSY_WAIT seconds for a
# turn, then is answered 503 with Retry-After. The stylesheet, script, icon and the /find
# redirect never wait.
HEAVY_PAGES = 4
BUSY_WAIT = 2.0
RETRY_AFTER = 1
LIGHT_PAGES = frozenset({"static", "find"})


@dataclass
class Response:
    status: int
    content_type: str
    body: bytes | BinaryIO  # a stream (a raw body) is copied, then closed
    length: int
    headers: dict[str, str] = field(default_factory=dict)
    csp: str = CSP


class Viewer:
    """The pages of one store; ``trusted`` are the public keys signatures are checked with."""

    busy_wait = BUSY_WAIT  # seconds a page that reads the store waits for a turn

    def __init__(self, store, trusted: list | None = None):
        self.store = store
        self.trusted = list(trusted or [])
        self._turns = threading.BoundedSemaphore(HEAVY_PAGES)

    def respond(self, method: str, target: str, host: str | None, port: int) -> Response:
        """The response to ``method target`` sent to ``host`` (the Host header)."""
        if method not in METHODS:
            answer = self.error(HTTPStatus.METHOD_NOT_ALLOWED, "the viewer only reads: GET, HEAD")
            answer.headers["Allow"] = ", ".join(METHODS)
            return answer
        if host not in (f"{HOST}:{port}", f"localhost:{port}"):
            return self.error(HTTPStatus.FORBIDDEN, f"this viewer answers {HOST}:{port} only")
        path, _, query = target.partition("?")
        try:
            return self.route(path, parse_qs(query, keep_blank_values=True))
        except NotInStore as exc:
            return self.error(HTTPStatus.NOT_FOUND, exc.message)
        except NotFound as exc:
            return self.error(HTTPStatus.NOT_FOUND, exc.message)
        except UsageError as exc:
            return self.error(HTTPStatus.BAD_REQUEST, exc.message)
        except CorruptObject as exc:
            return self.error(HTTPStatus.CONFLICT, f"it fails verification: {exc.message}")
        except YybError as exc:
            return self.error(HTTPStatus.INTERNAL_SERVER_ERROR, exc.message)

    def route(self, path: str, query: dict[str, list[str]]) -> Response:
        found = urls.route(path)
        if found is None:
            return self.error(HTTPStatus.NOT_FOUND, "no such page")
        if found.page in LIGHT_PAGES:
            return self.make(found, query)
        if not self._turns.acquire(timeout=self.busy_wait):
            answer = self.error(
                HTTPStatus.SERVICE_UNAVAILABLE,
                f"the viewer is making {HEAVY_PAGES} pages already; try again in a moment",
            )
            answer.headers["Retry-After"] = str(RETRY_AFTER)
            return answer
        try:
            return self.make(found, query)
        finally:
            self._turns.release()

    def make(self, found: urls.Route, query: dict[str, list[str]]) -> Response:
        """The response of the page ``found`` names."""
        store, oids = self.store, found.oids
        urls.page_number(query)  # a malformed page number is refused on every page (400)
        if found.page == "static":
            content_type, text = assets.FILES[found.name]
            data = text.encode()
            return Response(200, content_type, data, len(data))
        if found.page == "raw":
            size, stream = objects.raw(store, oids[0])
            disposition = f'attachment; filename="{oids[0]}"'
            headers = {"Content-Disposition": disposition}
            return Response(200, "application/octet-stream", stream, size, headers)
        if found.page == "find":
            target = objects.find(store, (query.get("name") or [""])[-1])
            return Response(303, HTML, b"", 0, {"Location": target})
        if found.page == "report":
            data = experiments.report_html(store, oids[0]).encode()
            return Response(200, HTML, data, len(data), csp=REPORT_CSP)
        title, body = pages.render(store, self.trusted, found, query)
        return self.page(200, title, body)

    def page(self, status: int, title: str, body: Markup) -> Response:
        data = html_document(title, body, self.store.path)
        return Response(status, HTML, data, len(data))

    def error(self, status: HTTPStatus, message: str) -> Response:
        return self.page(status.value, *pages.error(status, message))


class Handler(BaseHTTPRequestHandler):
    """One connection: every request answered by the server's Viewer."""

    server: Server
    server_version = "yyb-view"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    # Headers and body are two writes: without TCP_NODELAY the body waits for the client's
    # delayed ACK of the headers (about 40 ms a response on Linux).
    disable_nagle_algorithm = True

    def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
        self.answer()

    def do_HEAD(self) -> None:  # noqa: N802
        self.answer()

    def __getattr__(self, name: str):
        # http.server answers a method it finds no ``do_`` for with 501; every method but GET
        # and HEAD, known or not, is refused here with 405 instead.
        if name.startswith("do_"):
            return self.answer
        raise AttributeError(name)

    def answer(self) -> None:
        try:
            response = self.server.viewer.respond(
                self.command, self.path, self.headers.get("Host"), self.server.port
            )
        except Exception as exc:  # noqa: BLE001 - one page fails, the viewer goes on
            # The request line is the client's: quoted, so no control byte reaches a terminal.
            self.server.log(f"{self.command!r} {self.path!r}: {type(exc).__name__}: {exc!r}")
            response = self.server.viewer.error(
                HTTPStatus.INTERNAL_SERVER_ERROR, f"the page failed: {type(exc).__name__}"
            )
        self.send_response(response.status)
        for name, value in {**HEADERS, **response.headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Security-Policy", response.csp)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(response.length))
        self.end_headers()
        if isinstance(response.body, bytes):
            if self.command != "HEAD":
                self.wfile.write(response.body)
            return
        with response.body as stream:  # a raw body, copied a MiB at a time
            while self.command != "HEAD" and (chunk := stream.read(1 << 20)):
                self.wfile.write(chunk)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (http.server's name)
        """Requests are not logged (the library never prints); failures go to server.log."""


class Server(ThreadingHTTPServer):
    """The viewer on ``127.0.0.1:port``; ``log`` receives one line per page that failed."""

    daemon_threads = True

    def __init__(self, viewer: Viewer, port: int, log: Callable[[str], None]):
        self.viewer, self.log = viewer, log
        self._closed = False
        super().__init__((HOST, port), Handler)

    def server_close(self) -> None:
        super().server_close()
        if not self._closed:  # SIGPIPE as it was before ``start`` once no server is left
            from yyb.store import pipes

            self._closed = True
            pipes.restore_sigpipe()

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/"

    def handle_error(self, request, client_address) -> None:
        """A browser that closes a connection early is not a failure; anything else is one
        line for ``log``, never a traceback."""
        import sys

        error = sys.exc_info()[1]
        if not isinstance(error, ConnectionError | socket.timeout):
            self.log(f"connection from {client_address[0]}: {type(error).__name__}: {error!r}")


def start(store, port: int = 0, trusted: list | None = None, log=None) -> Server:
    """A viewer of ``store`` listening on 127.0.0.1:``port`` (0: a free port the system picks),
    not yet serving (call ``serve_forever``).

    Raises:
        UsageError: the port cannot be listened on (in use, or not allowed).
    """
    from yyb.store import pipes

    pipes.ignore_sigpipe("view")  # a browser closing a connection must not end the viewer
    try:
        return Server(Viewer(store, trusted), port, log or (lambda line: None))
    except OSError as exc:
        pipes.restore_sigpipe()
        raise UsageError(f"cannot listen on {HOST}:{port}: {exc.strerror}") from None
    except BaseException:
        pipes.restore_sigpipe()
        raise
