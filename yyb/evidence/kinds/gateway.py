"""Gateway records (docs/gateway.md): a price table, one call to a model, an attempt's meter.

The gateway (yyb/gateway/, porcelain) builds these; a run is to store them beside the
envelope, never merged into it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from yyb.evidence.record import ABSENT, Absent, Record, Shape, shape
from yyb.evidence.records import (
    GATEWAY_CALL,
    GATEWAY_METER,
    PRICE_TABLE,
    Api,
    CallOutcome,
    CallSource,
    CostCompleteness,
)


@shape
class PriceTable(Record):
    """Micro-USD per million tokens, by served model id: ``input``, ``output``,
    ``cached_input`` and optionally ``cache_write_input`` (else the input price)."""

    schema_version: ClassVar[str] = PRICE_TABLE

    currency: Literal["USD"]
    models: Mapping[str, Mapping[str, int]]


@shape
class GatewayCost(Shape):
    """A call's or a meter's cost (the cost object of docs/format.md)."""

    completeness: CostCompleteness
    currency: Literal["USD"]
    micros: int | None


@shape
class GatewayUsage(Shape):
    """Tokens as priced: uncached input, cache reads, cache writes, output."""

    input_tokens: int
    cached_input_tokens: int
    cache_write_input_tokens: int
    output_tokens: int


@shape
class GatewayBody(Shape):
    """One body of a call: its full size, the bytes kept (the linked blob), its type."""

    bytes: int
    kept_bytes: int
    truncated: bool
    content_type: str | None


@shape
class GatewayCallLinks(Shape):
    """The ``links`` of a GatewayCall: the kept request and response bodies."""

    request: str
    response: str


@shape
class GatewayCall(Record):
    """One model call an attempt made through the gateway, as observed there."""

    schema_version: ClassVar[str] = GATEWAY_CALL

    attempt: str
    index: int
    api: Api
    method: str
    path: str
    stream: bool
    source: CallSource
    outcome: CallOutcome
    status: int
    request_sha256: str
    requested_model: str | None
    served_model: str | None
    usage: GatewayUsage | None
    reported_usage: Mapping[str, Any] | None
    cost: GatewayCost
    started_ms: int
    first_byte_ms: int | None
    latency_ms: int
    request: GatewayBody
    response: GatewayBody
    links: GatewayCallLinks


@shape
class GatewayMeterLinks(Shape):
    """The ``links`` of a GatewayMeter: its calls in order and the price table used."""

    calls: tuple[str, ...]
    prices: str | Absent = ABSENT


@shape
class GatewayMeter(Record):
    """An attempt's calls summed: per served model, in all, against its ceiling."""

    schema_version: ClassVar[str] = GATEWAY_METER

    attempt: str
    model: str
    ceiling_micros: int | None
    ceiling_reached: bool
    calls: int
    outcomes: Mapping[str, int]
    models: Mapping[str, Mapping[str, Any]]
    usage: GatewayUsage
    cost: GatewayCost
    unanswered: tuple[str, ...]
    links: GatewayMeterLinks
