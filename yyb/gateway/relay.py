"""One call's way through the gateway: its request read within bounds, its answer relayed.

An answer is relayed as it arrives, chunk by chunk (never gathered whole first); what is kept
of it for evidence is capped (``Keeper``), and a stream is parsed event by event on the way
(``Observation``), holding at most one unfinished event. When the gateway asked a Chat
Completions upstream for the usage chunk the client did not ask for, that chunk is relayed
no further; everything else reaches the client byte for byte.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from yyb.evidence.kinds.gateway import (
    GatewayBody,
    GatewayCall,
    GatewayCallLinks,
    GatewayCost,
)
from yyb.evidence.records import Api, CallOutcome, CallSource
from yyb.gateway.meter import Account, Call, Limits
from yyb.gateway.observe import EventSplitter, Observation, event_data, is_usage_chunk
from yyb.gateway.prices import call_cost
from yyb.gateway.replay import request_sha256
from yyb.store.objects.format import hash_object

SSE = "text/event-stream"


@dataclass
class Keeper:
    """The first ``limit`` bytes of a body, and its whole size."""

    limit: int
    size: int = 0
    kept: bytearray = field(default_factory=bytearray)

    def add(self, chunk: bytes) -> None:
        """Count ``chunk`` and keep what fits."""
        self.size += len(chunk)
        room = self.limit - len(self.kept)
        if room > 0:
            self.kept += chunk[:room]

    def body(self, content_type: str | None) -> GatewayBody:
        """What the record says of the body."""
        return GatewayBody(
            bytes=self.size,
            kept_bytes=len(self.kept),
            truncated=len(self.kept) < self.size,
            content_type=content_type,
        )


@dataclass
class Exchange:
    """A call in progress: what was asked, what has been seen of the answer."""

    account: Account
    index: int
    api: Api
    kind: str
    method: str
    path: str
    began: bool
    limits: Limits
    started_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    clock: float = field(default_factory=time.perf_counter)
    raw: bytes = b""
    request_size: int = 0
    request_type: str | None = None
    parsed: dict | None = None
    stream: bool = False
    strip_usage: bool = False
    first_byte_ms: int | None = None
    status: int = 0
    response_type: str | None = None
    source: CallSource = "gateway"
    closed: bool = False

    def __post_init__(self) -> None:
        self.observation = Observation(self.api)
        self.response = Keeper(self.limits.keep_bytes)

    @property
    def requested_model(self) -> str | None:
        """The request body's ``model``."""
        model = (self.parsed or {}).get("model")
        return model if isinstance(model, str) else None

    @property
    def key(self) -> str:
        """The request's replay hash."""
        return request_sha256(self.method, self.path, self.raw, self.account.route)

    def upstream_body(self) -> bytes:
        """The body sent on: the model without its prefix, the usage chunk asked for."""
        if self.parsed is None:
            return self.raw
        value, changed = dict(self.parsed), False
        if value.get("model") == self.account.route.planned:
            value["model"], changed = self.account.route.model, True
        if self.api == "chat_completions" and value.get("stream") is True:
            options = value.get("stream_options")
            if not (isinstance(options, dict) and options.get("include_usage")):
                value["stream_options"] = {**(options or {}), "include_usage": True}
                self.strip_usage = changed = True
        return json.dumps(value).encode() if changed else self.raw

    def answered(self, status: int, content_type: str | None) -> None:
        """The answer's head arrived."""
        self.status = status
        self.response_type = content_type
        self.stream = (content_type or "").split(";")[0].strip() == SSE
        self.first_byte_ms = int((time.perf_counter() - self.clock) * 1000)

    def close(self, outcome: CallOutcome, cost: int | None) -> None:
        """Keep the call in the attempt's meter (once: later calls are no-ops)."""
        if not self.closed:
            self.closed = True
            self.account.end(self.finish(outcome, cost), self.began)

    def finish(self, outcome: CallOutcome, cost: int | None) -> Call:
        """The call as kept: its record and the bodies the record links."""
        request = Keeper(self.limits.keep_bytes)
        request.add(self.raw)
        request.size = max(request.size, self.request_size)
        record = GatewayCall(
            attempt=self.account.attempt,
            index=self.index,
            api=self.api,
            method=self.method,
            path=self.path,
            stream=self.stream,
            source=self.source,
            outcome=outcome,
            status=self.status,
            request_sha256=self.key,
            requested_model=self.requested_model,
            served_model=self.observation.served_model,
            usage=self.observation.usage,
            reported_usage=self.observation.reported_usage,
            cost=_cost(cost),
            started_ms=self.started_ms,
            first_byte_ms=self.first_byte_ms,
            latency_ms=int((time.perf_counter() - self.clock) * 1000),
            request=request.body(self.request_type),
            response=self.response.body(self.response_type),
            links=GatewayCallLinks(
                request=hash_object("blob", bytes(request.kept)),
                response=hash_object("blob", bytes(self.response.kept)),
            ),
        )
        return Call(record=record, request=bytes(request.kept), response=bytes(self.response.kept))

    def cost(self, table: Any, complete: bool) -> int | None:
        """What the call cost as observed: None when it cannot be priced.

        Free: replayed calls, token counts, error answers with no usage, calls that failed
        before an answer. Unpriced: an answer with no usage or served model (a stream cut
        before its usage), a served model the table lacks.
        """
        if self.source != "upstream" or self.api == "count_tokens":
            return 0
        usage, served = self.observation.usage, self.observation.served_model
        if usage is None:
            no_answer = self.status == 0 or (self.status >= 400 and complete)
            return 0 if no_answer else None
        if served is None:
            return None
        return call_cost(table, usage, served, self.account.route.provider.name)


def _cost(micros: int | None) -> GatewayCost:
    """A call's cost: unavailable when unpriced, genuine_zero when it cost nothing (refused,
    replayed, free), else complete."""
    if micros is None:
        return GatewayCost(completeness="unavailable", currency="USD", micros=None)
    completeness = "complete" if micros else "genuine_zero"
    return GatewayCost(completeness=completeness, currency="USD", micros=micros)


async def read_body(request: web.Request, exchange: Exchange) -> bool:
    """Read the request body into ``exchange``; False when it is over the limit (read no
    further than the limit: a flood of large bodies costs at most limit bytes each)."""
    limit = exchange.limits.max_body_bytes
    exchange.request_type = request.headers.get("Content-Type")
    declared = request.content_length
    if declared is not None and declared > limit:
        exchange.request_size = declared
        return False
    held = bytearray()
    async for chunk in request.content.iter_chunked(64 * 1024):
        held += chunk
        if len(held) > limit:
            exchange.raw = bytes(held[: exchange.limits.keep_bytes])
            exchange.request_size = len(held)
            return False
    exchange.raw, exchange.request_size = bytes(held), len(held)
    try:
        value = json.loads(exchange.raw) if exchange.raw else None
    except ValueError:
        value = None
    exchange.parsed = value if isinstance(value, dict) else None
    return True


async def relay(
    request: web.Request,
    exchange: Exchange,
    chunks: AsyncIterator[bytes],
    done: Callable[[], None],
) -> web.StreamResponse:
    """Relay an answer's ``chunks`` to the client as they come, observing them; ``done`` is
    called before the answer's last byte goes, so the call is in the meter by the time the
    client has it all."""
    response = web.StreamResponse(status=exchange.status)
    response.content_type = (exchange.response_type or "application/json").split(";")[0]
    if exchange.stream:
        response.headers["Cache-Control"] = "no-cache"
    await response.prepare(request)
    splitter = EventSplitter(exchange.limits.max_event_bytes) if exchange.stream else None
    async for chunk in chunks:
        exchange.response.add(chunk)
        out = chunk
        if splitter is not None:
            passed = _events(exchange, splitter.feed(chunk))
            out = passed if exchange.strip_usage else chunk
        if out:
            await response.write(out)
    if splitter is not None:
        rest = splitter.flush()  # relayed already unless events are being filtered
        if rest and exchange.strip_usage:
            await response.write(rest)
    elif exchange.response.size == len(exchange.response.kept):
        exchange.observation.body(bytes(exchange.response.kept))
    done()
    await response.write_eof()
    return response


def _events(exchange: Exchange, events: list[tuple[bytes, bool]]) -> bytes:
    """Observe whole events; what of them goes on (all, unless a usage chunk is stripped)."""
    out = bytearray()
    observation = exchange.observation
    for event, whole in events:
        # Only the events that can name the model or carry usage are parsed (a long answer is
        # thousands of deltas); the usage chunk to strip carries "usage" too.
        wanted = whole and (observation.served_model is None or b'"usage"' in event)
        data = event_data(event) if wanted else None
        if data is not None:
            observation.event(data)
        if exchange.strip_usage and is_usage_chunk(data):
            continue
        out += event
    return bytes(out)
