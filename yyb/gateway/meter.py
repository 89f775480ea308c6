"""What the gateway keeps of an attempt: its calls in order, its spend against its ceiling.

``Account`` is the live state of one admitted token (touched by the gateway's event loop and by
the controller's thread, so under a lock); ``Meter`` is its frozen picture, which ``retire``
returns and ``records`` turns into evidence.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from yyb.evidence.kinds.gateway import GatewayCall
from yyb.evidence.records import CostCompleteness
from yyb.gateway.providers import Route

MIB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """The gateway's bounds (docs/gateway.md, "Limits").

    Attributes:
        max_body_bytes: a larger request body is refused (413) before it is read whole.
        keep_bytes: each body kept in a Call is cut to this many bytes (flagged truncated).
        per_token_concurrency: calls one token may have in flight; more are refused (429).
        total_concurrency: calls in flight over all tokens; more are refused (429).
        max_event_bytes: one streamed event held for parsing at most (longer: relayed unparsed).
        upstream_timeout_s: an upstream answer taking longer fails the call.
    """

    max_body_bytes: int = 8 * MIB
    keep_bytes: int = 4 * MIB
    per_token_concurrency: int = 8
    total_concurrency: int = 64
    max_event_bytes: int = 1 * MIB
    upstream_timeout_s: float = 600.0


@dataclass(frozen=True)
class Call:
    """One call as observed: its record (what was asked and answered, by whom, for how much)
    and the request and response bodies as kept, which the record links as blobs."""

    record: GatewayCall
    request: bytes
    response: bytes

    @property
    def cost_micros(self) -> int | None:
        """What the call cost (None: it could not be priced)."""
        return self.record.cost.micros


@dataclass(frozen=True)
class Meter:
    """An attempt's calls, in the order they started, and what they add up to."""

    attempt: str
    model: str
    ceiling_micros: int | None
    ceiling_reached: bool
    calls: tuple[Call, ...]

    @property
    def spent_micros(self) -> int:
        """The sum of the calls' known costs."""
        return sum(c.cost_micros or 0 for c in self.calls)

    @property
    def completeness(self) -> CostCompleteness:
        """``complete`` when every call is priced, ``partial`` when one is not."""
        return "partial" if any(c.cost_micros is None for c in self.calls) else "complete"

    @property
    def unanswered(self) -> tuple[Call, ...]:
        """The calls replay had no answer for."""
        return tuple(c for c in self.calls if c.record.outcome == "unanswered")


@dataclass
class Account:
    """One admitted token's live state."""

    attempt: str
    route: Route
    ceiling_micros: int | None
    socket: str | None = None  # the one socket it is accepted on (None: the gateway's own)
    # Called with each call once it has ended (from the gateway's thread): how a run keeps
    # every call in the store as it ends, so a controller killed mid-attempt loses none.
    on_call: Callable[[Call], None] | None = None
    retired: bool = False
    ceiling_reached: bool = False
    in_flight: int = 0
    spent_micros: int = 0
    started: int = 0
    calls: list[Call] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def begin(self, limit: int) -> int | None:
        """A new call's index, or None when ``limit`` calls are already in flight."""
        with self.lock:
            if self.in_flight >= limit:
                return None
            self.in_flight += 1
            self.started += 1
            return self.started - 1

    def index(self) -> int:
        """An index for a call refused before it began."""
        with self.lock:
            self.started += 1
            return self.started - 1

    def over_ceiling(self) -> bool:
        """Whether the spend has reached the ceiling (marking it reached)."""
        with self.lock:
            if self.ceiling_micros is not None and self.spent_micros >= self.ceiling_micros:
                self.ceiling_reached = True
                return True
            return False

    def end(self, call: Call, began: bool) -> None:
        """Keep a finished call (``began``: it held a slot, now released), and hand it to
        ``on_call``."""
        with self.lock:
            if began:
                self.in_flight -= 1
            self.spent_micros += call.cost_micros or 0
            self.calls.append(call)
        if self.on_call is not None:
            self.on_call(call)

    def meter(self) -> Meter:
        """The frozen picture of the calls so far."""
        with self.lock:
            calls = tuple(sorted(self.calls, key=lambda c: c.record.index))
            return Meter(
                attempt=self.attempt,
                model=self.route.planned,
                ceiling_micros=self.ceiling_micros,
                ceiling_reached=self.ceiling_reached,
                calls=calls,
            )
