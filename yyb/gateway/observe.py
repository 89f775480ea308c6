"""What a call says about itself: its API by path, served model and usage by body or events.

A non-streaming answer is one JSON object; a streaming one is server-sent events, read here
incrementally: ``EventSplitter`` cuts the bytes into whole events (holding at most one
unfinished event, never the stream), ``Observation`` picks the model and usage out of each:

- Chat Completions: each chunk's ``model``; ``usage`` from the last chunk (``choices: []``),
  which the upstream sends when ``stream_options.include_usage`` is set;
- Responses: ``response.model`` and ``response.usage`` of ``response.created`` /
  ``response.completed`` (or ``.incomplete`` / ``.failed``);
- Messages: ``message_start``'s ``message.model`` and ``message.usage``, updated by each
  ``message_delta``'s ``usage`` (cumulative counts).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from yyb.evidence.kinds.gateway import GatewayUsage
from yyb.evidence.records import Api

# The API of each path (after an optional /v1), and the method it is called with.
PATHS: dict[str, tuple[str, Api]] = {
    "/chat/completions": ("POST", "chat_completions"),
    "/responses": ("POST", "responses"),
    "/messages": ("POST", "messages"),
    "/messages/count_tokens": ("POST", "count_tokens"),
    "/models": ("GET", "models"),
}
# Which provider kind's error shapes and auth headers an API uses.
KIND_OF: dict[Api, str] = {
    "chat_completions": "openai",
    "responses": "openai",
    "messages": "anthropic",
    "count_tokens": "anthropic",
    "models": "openai",
}
RESPONSE_EVENTS = frozenset(
    {"response.created", "response.completed", "response.incomplete", "response.failed"}
)
TERMINATORS = (b"\r\n\r\n", b"\n\n", b"\r\r")


def api_of(method: str, path: str) -> Api | None:
    """The API a request speaks, or None for a path the gateway does not serve."""
    bare = path.split("?", 1)[0].rstrip("/")
    if bare.startswith("/v1/"):
        bare = bare[3:]
    found = PATHS.get(bare)
    return found[1] if found is not None and found[0] == method else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def normalize(api: Api, reported: Any) -> GatewayUsage | None:
    """Tokens as priced, from a usage object as ``api`` names it (None: none, or malformed)."""
    if not isinstance(reported, dict):
        return None
    if api == "chat_completions":
        total, cached = reported.get("prompt_tokens"), _details(reported, "prompt_tokens_details")
        output, written = reported.get("completion_tokens"), 0
    elif api == "responses":
        total, cached = reported.get("input_tokens"), _details(reported, "input_tokens_details")
        output, written = reported.get("output_tokens"), 0
    elif api == "messages":
        cached = _count(reported.get("cache_read_input_tokens") or 0)
        written = _count(reported.get("cache_creation_input_tokens") or 0)
        output, uncached = reported.get("output_tokens"), _count(reported.get("input_tokens"))
        total = None if uncached is None or cached is None else uncached + cached
    else:
        return None
    numbers = [_count(total), cached, _count(output), _count(written)]
    if any(n is None for n in numbers) or numbers[1] > numbers[0]:
        return None
    total, cached, output, written = numbers
    return GatewayUsage(
        input_tokens=total - cached,
        cached_input_tokens=cached,
        cache_write_input_tokens=written,
        output_tokens=output,
    )


def _details(reported: dict, key: str) -> int | None:
    details = reported.get(key) or {}
    return _count(details.get("cached_tokens") or 0) if isinstance(details, dict) else None


@dataclass
class Observation:
    """The served model and the usage as the API reported it, filled in as a call goes."""

    api: Api
    served_model: str | None = None
    reported_usage: dict | None = None
    unparsed: bool = False

    def body(self, raw: bytes) -> None:
        """Observe a whole JSON answer."""
        try:
            value = json.loads(raw)
        except ValueError:
            self.unparsed = True
            return
        if not isinstance(value, dict) or self.api in ("count_tokens", "models"):
            return
        self._model(value.get("model"))
        if isinstance(value.get("usage"), dict):
            self.reported_usage = value["usage"]

    def event(self, data: dict) -> None:
        """Observe one streamed event's JSON data."""
        kind = data.get("type")
        if self.api == "chat_completions":
            self._model(data.get("model"))
            if isinstance(data.get("usage"), dict):
                self.reported_usage = data["usage"]
        elif self.api == "responses" and kind in RESPONSE_EVENTS:
            inner = data.get("response") or {}
            self._model(inner.get("model"))
            if isinstance(inner.get("usage"), dict):
                self.reported_usage = inner["usage"]
        elif self.api == "messages" and kind == "message_start":
            inner = data.get("message") or {}
            self._model(inner.get("model"))
            if isinstance(inner.get("usage"), dict):
                self.reported_usage = dict(inner["usage"])
        elif self.api == "messages" and kind == "message_delta":
            update = {k: v for k, v in (data.get("usage") or {}).items() if v is not None}
            self.reported_usage = {**(self.reported_usage or {}), **update}

    def _model(self, model: Any) -> None:
        if self.served_model is None and isinstance(model, str) and model:
            self.served_model = model

    @property
    def usage(self) -> GatewayUsage | None:
        """The usage as priced (None when none was reported)."""
        return normalize(self.api, self.reported_usage)


def event_data(event: bytes) -> dict | None:
    """The JSON object of one event's ``data:`` lines (None: none, ``[DONE]``, not JSON)."""
    lines = event.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    data = [line[5:].removeprefix(b" ") for line in lines if line.startswith(b"data:")]
    if not data or data == [b"[DONE]"]:
        return None
    try:
        value = json.loads(b"\n".join(data))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def is_usage_chunk(data: dict | None) -> bool:
    """A Chat Completions chunk that only carries usage (the include_usage chunk)."""
    return data is not None and data.get("choices") == [] and isinstance(data.get("usage"), dict)


@dataclass
class EventSplitter:
    """Cuts a byte stream into whole events, holding at most ``limit`` bytes of one event.

    An event longer than ``limit`` is given back as it is, unparsed (``overflowed``), so the
    relay goes on and memory stays bounded.
    """

    limit: int
    overflowed: bool = False
    _held: bytearray = field(default_factory=bytearray)

    def feed(self, chunk: bytes) -> list[tuple[bytes, bool]]:
        """The events ``chunk`` completes, each with whether it is whole (parseable)."""
        held = self._held
        # What was held has no terminator, but one may straddle the old end and the chunk.
        scan = max(0, len(held) - 3)
        held += chunk
        # The next place of each terminator present (one absent now stays absent in this
        # buffer); each is searched again only once passed, so a chunk is scanned once.
        ahead = {t: i for t in TERMINATORS if (i := held.find(t, scan)) >= 0}
        out: list[tuple[bytes, bool]] = []
        done = 0
        while ahead:
            terminator, index = min(ahead.items(), key=lambda item: item[1])
            end = index + len(terminator)
            out.append((bytes(held[done:end]), True))
            done = end
            for t, i in list(ahead.items()):
                if i < done:
                    found = held.find(t, done)
                    if found < 0:
                        del ahead[t]
                    else:
                        ahead[t] = found
        del held[:done]
        if len(held) > self.limit:
            self.overflowed = True
            out.append((bytes(held), False))
            held.clear()
        return out

    def flush(self) -> bytes:
        """What is left at the end of the stream (an unfinished event)."""
        rest = bytes(self._held)
        self._held.clear()
        return rest
