"""Replay: answer a new run's calls from recorded ones, by the hash of the request.

The request hash (docs/gateway.md, "Replay") is the SHA-256 of
``METHOD \\n PATH \\n BODY``: PATH is the request path with ``/v1`` in front if it was sent
without, BODY the canonical JSON of the request body (keys sorted, no spaces, UTF-8 as is)
with ``stream_options`` removed (the gateway adds it) and ``model`` written without the
provider prefix when it was sent with one. Headers are not hashed: credentials and tokens
differ between runs and do not change what is asked. A body that is not a JSON object is
hashed as its raw bytes.

Identical requests are answered in the order they were recorded; one more than was recorded
has no answer and fails closed.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from yyb.evidence.kinds.gateway import GatewayCall, GatewayMeter
from yyb.gateway.meter import Call
from yyb.gateway.providers import Route


def canonical_path(path: str) -> str:
    """The path with its ``/v1`` prefix (added when it was sent without)."""
    return path if path.startswith("/v1/") else "/v1" + path


def canonical_body(raw: bytes, route: Route | None) -> bytes:
    """The request body as hashed (see the module docstring)."""
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    if not isinstance(value, dict):
        return raw
    value.pop("stream_options", None)
    if route is not None and value.get("model") == route.planned:
        value["model"] = route.model
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def request_sha256(method: str, path: str, raw: bytes, route: Route | None) -> str:
    """The replay key of one request."""
    digest = hashlib.sha256(f"{method}\n{canonical_path(path)}\n".encode())
    digest.update(canonical_body(raw, route))
    return digest.hexdigest()


@dataclass(frozen=True)
class Answer:
    """A recorded answer: status, content type, the whole body as it was sent."""

    status: int
    content_type: str | None
    body: bytes
    stream: bool


class Replay:
    """Recorded answers by request hash; each is given once, in recorded order."""

    def __init__(self, answers: Iterable[tuple[str, Answer]]) -> None:
        self._answers: dict[str, deque[Answer]] = {}
        for key, answer in answers:
            self._answers.setdefault(key, deque()).append(answer)
        self._lock = threading.Lock()

    @classmethod
    def of(cls, calls: Iterable[Call]) -> Replay:
        """Replay from observed calls: those the upstream answered with the whole body kept
        (a truncated answer cannot be given back, so its request fails closed)."""
        return cls((c.record.request_sha256, _recorded(c)) for c in calls if _replayable(c.record))

    @classmethod
    def from_store(cls, objects: Any, meter_oids: Iterable[str]) -> Replay:
        """Replay from stored meters (``yyb_gateway_meter.v1``) and the calls they link.

        Args:
            objects: a store's objects (``get_record``, ``get``).
            meter_oids: the meters of the run to replay, in order.
        """
        answers = []
        for meter_oid in meter_oids:
            meter = GatewayMeter.read(objects, meter_oid)
            for call_oid in meter.links.calls:
                call = GatewayCall.read(objects, call_oid)
                if not _replayable(call):
                    continue
                body = objects.get(call.links.response).body
                answer = _answer(call.status, call.response.content_type, body, call.stream)
                answers.append((call.request_sha256, answer))
        return cls(answers)

    def take(self, key: str) -> Answer | None:
        """The next recorded answer to the request ``key``, or None (fail closed)."""
        with self._lock:
            queue = self._answers.get(key)
            return queue.popleft() if queue else None


def _replayable(call: GatewayCall) -> bool:
    """An answer the provider gave (or replay gave back) that was kept whole."""
    answered = call.outcome in ("answered", "upstream_error")
    return call.source != "gateway" and answered and not call.response.truncated


def _recorded(call: Call) -> Answer:
    record = call.record
    return _answer(record.status, record.response.content_type, call.response, record.stream)


def _answer(status: int, content_type: str | None, body: bytes, stream: bool) -> Answer:
    return Answer(status=status, content_type=content_type, body=bytes(body), stream=stream)
