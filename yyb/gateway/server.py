"""The gateway: an aiohttp server in a thread of the controller, on a UNIX socket.

Built on aiohttp: one well-kept library that is both an async HTTP server and a streaming
client, so a call's answer is relayed from the upstream's socket to the candidate's chunk by
chunk with no thread per call and no buffering in between.

``admit`` gives an attempt a token; a request carrying it (as its Bearer key or its
``x-api-key``) is checked (model, ceiling, size, concurrency), sent on with the provider's
real credential in its place (or answered by ``Replay``), relayed, and kept as a ``Call`` in
the attempt's meter, which ``retire`` hands back.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import stat
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

import aiohttp
from aiohttp import web

from yyb.errors import InvalidArgument
from yyb.evidence.kinds.gateway import PriceTable
from yyb.evidence.records import CallOutcome
from yyb.gateway.meter import Account, Call, Limits, Meter
from yyb.gateway.observe import KIND_OF, api_of
from yyb.gateway.providers import ANTHROPIC_VERSION, Providers
from yyb.gateway.refusals import Reason, refusal
from yyb.gateway.relay import Exchange, read_body, relay
from yyb.gateway.replay import Replay, canonical_path
from yyb.store import pipes

TOKEN_PREFIX = "yyb-gw-"
# Request headers sent on to the upstream; every other one (credentials, cookies, whatever a
# candidate adds) stays at the gateway.
FORWARDED = ("content-type", "accept", "anthropic-version", "anthropic-beta", "openai-beta")
DEFAULT_LIMITS = Limits()
REFUSAL_OUTCOME: dict[Reason, CallOutcome] = {
    "model": "refused_model",
    "ceiling": "refused_ceiling",
    "too_large": "refused_size",
    "busy": "refused_busy",
    "unanswered": "unanswered",
    "upstream": "failed",
}


class Gateway:
    """The controller's model gateway (docs/gateway.md).

    Args:
        providers: the upstreams; their credentials are read from ``environ`` at start.
        prices: the price table calls are costed by (None: every call unpriced).
        socket_path: the UNIX socket to serve on.
        tcp: also serve on 127.0.0.1 at a free port (``url``), for tests and benchmarks.
        replay: answer from these recorded calls instead of any upstream (no credential read).
        limits: the bounds.
        environ: where credentials are read (the process's environment by default).
    """

    def __init__(
        self,
        providers: Providers,
        prices: PriceTable | None,
        socket_path: Path,
        *,
        tcp: bool = False,
        replay: Replay | None = None,
        limits: Limits = DEFAULT_LIMITS,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.providers, self.prices, self.socket_path = providers, prices, Path(socket_path)
        self.replay, self.limits, self._tcp, self._environ = replay, limits, tcp, environ
        self._accounts: dict[str, Account] = {}
        self._retired: set[str] = set()
        self._sites: dict[str, web.UnixSite] = {}  # attempts' own sockets, by path
        self._lock = threading.Lock()
        self._keys: dict[str, str] = {}
        self._in_flight = 0
        self.unauthorized = 0
        self.url: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Gateway:
        """Read the credentials, bind the socket, serve from a thread.

        Raises:
            InvalidArgument: a provider's credential variable is unset.
            OSError: the socket cannot be bound.
        """
        self._keys = {} if self.replay is not None else self.providers.credentials(self._environ)
        pipes.ignore_sigpipe("gateway")
        if self.socket_path.exists() and stat.S_ISSOCK(self.socket_path.lstat().st_mode):
            self.socket_path.unlink()  # a stale socket of a gateway that died
        self._loop = asyncio.new_event_loop()
        try:
            ready = self._loop.run_until_complete(self._serve())
        except BaseException:
            if self._runner is not None:
                self._loop.run_until_complete(self._runner.cleanup())
            self._loop.close()
            self._loop = None
            pipes.restore_sigpipe()
            raise
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="yyb-gateway", daemon=True
        )
        self._thread.start()
        return ready

    async def _serve(self) -> Gateway:
        app = web.Application(client_max_size=self.limits.max_body_bytes)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # Stopping cuts calls still in flight after a second: the controller stops the
        # gateway when the attempt is over, and a stream left open must not hold it.
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=1.0
        )
        await self._runner.setup()
        await web.UnixSite(self._runner, str(self.socket_path)).start()
        os.chmod(self.socket_path, 0o600)
        if self._tcp:
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            port = next(a[1] for a in self._runner.addresses if isinstance(a, tuple))
            self.url = f"http://127.0.0.1:{port}"
        timeout = aiohttp.ClientTimeout(total=self.limits.upstream_timeout_s)
        connector = aiohttp.TCPConnector(limit=self.limits.total_concurrency)
        self._session = aiohttp.ClientSession(timeout=timeout, connector=connector)
        return self

    def stop(self) -> None:
        """Stop serving (calls in flight are cut) and remove the socket."""
        if self._loop is None or self._thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()
        self._loop = self._thread = None
        self.socket_path.unlink(missing_ok=True)
        for path in self._sites:
            Path(path).unlink(missing_ok=True)
        self._sites.clear()
        pipes.restore_sigpipe()

    async def _close(self) -> None:
        await self._session.close()
        await self._runner.cleanup()

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- tokens ------------------------------------------------------------------------------

    def admit(
        self,
        attempt_id: str,
        model: str,
        ceiling_micros: int | None = None,
        socket_path: Path | None = None,
        on_call: Callable[[Call], None] | None = None,
    ) -> str:
        """A new token for one attempt that may call ``model`` (``provider/model``) until its
        metered spend reaches ``ceiling_micros`` (None: no ceiling). With ``socket_path``, the
        gateway also serves on a socket of the attempt's own there (mode 0600, removed when
        the token is retired), and the token is accepted on that socket only: a token carried
        out of one sandbox is refused through any other. ``on_call`` is called with each of
        the attempt's calls once it has ended, from the gateway's thread (it must not block).

        Raises:
            InvalidArgument: the model routes to no provider, or the ceiling is negative.
            OSError: the attempt's socket cannot be bound.
        """
        route = self.providers.route(model)
        if ceiling_micros is not None and ceiling_micros < 0:
            raise InvalidArgument("ceiling_micros", "a non-negative integer", ceiling_micros)
        own = None
        if socket_path is not None:
            own = str(socket_path)
            self._sites[own] = self._on_loop(self._site(own))
        token = TOKEN_PREFIX + secrets.token_hex(24)
        with self._lock:
            self._accounts[token] = Account(attempt_id, route, ceiling_micros, own, on_call)
        return token

    def _on_loop(self, coroutine):
        """Run ``coroutine`` on the gateway's loop from the caller's thread; its result."""
        if self._loop is None:
            coroutine.close()
            raise InvalidArgument("gateway", "a started gateway")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=30)

    async def _site(self, path: str) -> web.UnixSite:
        site = web.UnixSite(self._runner, path)
        await site.start()
        os.chmod(path, 0o600)
        return site

    def meter(self, token: str) -> Meter:
        """The attempt's calls so far (the token stays valid).

        Raises:
            InvalidArgument: not a token this gateway admitted.
        """
        with self._lock:
            account = self._accounts.get(token)
        if account is None:
            raise InvalidArgument("token", "a token this gateway admitted and did not retire")
        return account.meter()

    def retire(self, token: str, wait_s: float = 5.0) -> Meter:
        """Refuse the token from now on; the attempt's calls and totals, once the calls in
        flight have ended (waiting at most ``wait_s``; one still going then is not in the
        meter returned).

        Raises:
            InvalidArgument: not a live token of this gateway.
        """
        with self._lock:
            account = self._accounts.pop(token, None)
            if account is not None:
                self._retired.add(token)
        if account is None:
            raise InvalidArgument("token", "a token this gateway admitted and did not retire")
        account.retired = True
        deadline = time.monotonic() + wait_s
        while account.in_flight and time.monotonic() < deadline:
            time.sleep(0.01)
        site = self._sites.pop(account.socket, None) if account.socket else None
        if site is not None:
            self._on_loop(site.stop())
            Path(account.socket).unlink(missing_ok=True)
        return account.meter()

    def _account(self, request: web.Request) -> Account | None:
        header = request.headers.get("Authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else None
        token = token or request.headers.get("x-api-key", "").strip()
        with self._lock:
            account = self._accounts.get(token) if token else None
        if account is not None and account.socket is not None:
            if request.transport is None or (
                request.transport.get_extra_info("sockname") != account.socket
            ):
                return None  # its attempt's own socket only
        return account

    # -- one request -------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        api = api_of(request.method, request.path)
        kind = KIND_OF[api] if api is not None else _kind_by_headers(request)
        account = self._account(request)
        if account is None:
            self.unauthorized += 1
            return _refused("unauthorized", kind)
        if api is None:
            return _refused("not_found", kind, request.path)
        if api == "models":
            return _models(account, request)
        if kind not in account.route.provider.apis:
            return _refused("not_found", kind, f"{account.route.provider.name} speaks no {kind}")
        index = account.begin(self.limits.per_token_concurrency)
        began = index is not None
        exchange = Exchange(
            account, index if began else account.index(), api, kind, request.method,
            request.path_qs, began, self.limits,
        )  # fmt: skip
        if not began or self._in_flight >= self.limits.total_concurrency:
            return self._refuse(exchange, "busy")
        self._in_flight += 1
        try:
            return await self._call(request, exchange)
        finally:
            self._in_flight -= 1

    async def _call(self, request: web.Request, exchange: Exchange) -> web.StreamResponse:
        if not await read_body(request, exchange):
            return self._refuse(exchange, "too_large", f"over {self.limits.max_body_bytes} bytes")
        if not exchange.account.route.same_model(exchange.requested_model):
            detail = f"{exchange.requested_model!r} is not {exchange.account.route.planned!r}"
            return self._refuse(exchange, "model", detail)
        if exchange.account.over_ceiling():
            return self._refuse(exchange, "ceiling")
        if self.replay is not None:
            return await self._replayed(request, exchange)
        return await self._forwarded(request, exchange)

    def _refuse(self, exchange: Exchange, reason: Reason, detail: str | None = None):
        status, body = refusal(reason, exchange.kind, detail)
        exchange.answered(status, "application/json")
        exchange.response.add(body)
        exchange.close(REFUSAL_OUTCOME[reason], 0)
        return _response(status, body)

    async def _replayed(self, request: web.Request, exchange: Exchange) -> web.StreamResponse:
        exchange.source = "replay"
        exchange.upstream_body()  # what the recording asked upstream (the usage chunk too)
        answer = self.replay.take(exchange.key)
        if answer is None:
            return self._refuse(exchange, "unanswered", exchange.key)
        exchange.answered(answer.status, answer.content_type)
        outcome = "answered" if answer.status < 400 else "upstream_error"
        try:
            return await relay(
                request, exchange, _pieces(answer.body), lambda: exchange.close(outcome, 0)
            )
        finally:
            exchange.close("failed", 0)  # the client went away before the end

    async def _forwarded(self, request: web.Request, exchange: Exchange) -> web.StreamResponse:
        route = exchange.account.route
        url = route.provider.base_url.rstrip("/") + canonical_path(exchange.path)
        body = exchange.upstream_body()
        headers = self._upstream_headers(request, exchange.kind, route.provider.name)
        exchange.source = "upstream"
        try:
            async with self._session.post(url, data=body, headers=headers) as upstream:
                exchange.answered(upstream.status, upstream.headers.get("Content-Type"))
                outcome = "answered" if upstream.status < 400 else "upstream_error"

                def done() -> None:
                    exchange.close(outcome, exchange.cost(self.prices, complete=True))

                return await relay(request, exchange, upstream.content.iter_any(), done)
        except (TimeoutError, aiohttp.ClientError, ConnectionError):
            if exchange.status != 0:
                raise  # cut mid-answer: the client sees the cut; the call is kept below
            return self._refuse(exchange, "upstream")  # nothing was answered: nothing spent
        finally:
            exchange.close("failed", exchange.cost(self.prices, complete=False))

    def _upstream_headers(self, request: web.Request, kind: str, provider: str) -> dict:
        headers = {name: request.headers[name] for name in FORWARDED if name in request.headers}
        headers["Accept-Encoding"] = "identity"
        key = self._keys[provider]
        if kind == "anthropic":
            headers["x-api-key"] = key
            headers.setdefault("anthropic-version", ANTHROPIC_VERSION)
        else:
            headers["Authorization"] = f"Bearer {key}"
        return headers


def _kind_by_headers(request: web.Request) -> str:
    anthropic = "x-api-key" in request.headers or "anthropic-version" in request.headers
    return "anthropic" if anthropic else "openai"


def _response(status: int, body: bytes) -> web.Response:
    return web.Response(
        status=status,
        body=body,
        content_type="application/json",
        headers={"x-should-retry": "false"},
    )


def _refused(reason: Reason, kind: str, detail: str | None = None) -> web.Response:
    return _response(*refusal(reason, kind, detail))


def _models(account: Account, request: web.Request) -> web.Response:
    """The attempt's one routed model, in the list shape of the API the client speaks."""
    route = account.route
    if _kind_by_headers(request) == "anthropic":
        entry = {"type": "model", "id": route.model, "display_name": route.model,
                 "created_at": "1970-01-01T00:00:00Z"}  # fmt: skip
        body = {"data": [entry], "has_more": False, "first_id": route.model,
                "last_id": route.model}  # fmt: skip
    else:
        entry = {"id": route.model, "object": "model", "created": 0,
                 "owned_by": route.provider.name}  # fmt: skip
        body = {"object": "list", "data": [entry]}
    return web.json_response(body)


async def _pieces(body: bytes, size: int = 64 * 1024) -> AsyncIterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]
