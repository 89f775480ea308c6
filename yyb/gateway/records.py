"""An attempt's meter as evidence: blobs for the bodies, a record per call, a summary.

``records`` gives them in an order a store can put them in one pass (what a record links comes
before it): per call its request blob, its response blob and its ``yyb_gateway_call.v1``;
then the price table (when there is one) and the ``yyb_gateway_meter.v1`` linking the calls
in order. The oids are computed here, as the store will compute them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from yyb.evidence.kinds.gateway import (
    GatewayCost,
    GatewayMeter,
    GatewayMeterLinks,
    GatewayUsage,
    PriceTable,
)
from yyb.evidence.records import CostCompleteness
from yyb.gateway.meter import Call, Meter
from yyb.store.objects import codec
from yyb.store.objects.format import hash_object

USAGE_FIELDS = ("input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens")


def records(meter: Meter, prices: PriceTable | None = None) -> list[tuple[str, Any]]:
    """``(kind, body)`` pairs: ``("blob", bytes)`` and ``("record", value)``, in store order.

    Args:
        meter: an attempt's meter (``Gateway.retire``).
        prices: the price table the calls were costed by, stored and linked from the meter.
    """
    out: list[tuple[str, Any]] = []
    call_oids = []
    for call in meter.calls:
        out += [("blob", call.request), ("blob", call.response)]
        value = call.record.to_value()
        out.append(("record", value))
        call_oids.append(hash_object("record", codec.encode(value)))
    prices_oid = None
    if prices is not None:
        table = prices.to_value()
        out.append(("record", table))
        prices_oid = hash_object("record", codec.encode(table))
    out.append(("record", meter_record(meter, call_oids, prices_oid).to_value()))
    return out


def _cost(completeness: CostCompleteness, micros: int | None) -> GatewayCost:
    return GatewayCost(completeness=completeness, currency="USD", micros=micros)


def _usage(calls: list[Call]) -> GatewayUsage:
    usages = [c.record.usage for c in calls if c.record.usage is not None]
    return GatewayUsage(**{f: sum(getattr(u, f) for u in usages) for f in USAGE_FIELDS})


def _total(calls: list[Call]) -> GatewayCost:
    unpriced = any(c.cost_micros is None for c in calls)
    return _cost("partial" if unpriced else "complete", sum(c.cost_micros or 0 for c in calls))


def meter_record(meter: Meter, call_oids: list[str], prices_oid: str | None) -> GatewayMeter:
    """The ``yyb_gateway_meter.v1`` of an attempt, linking its calls (``call_oids``, in
    order) and the price table."""
    by_model: dict[str, list[Call]] = {}
    for call in meter.calls:
        if call.record.served_model is not None:
            by_model.setdefault(call.record.served_model, []).append(call)
    models = {
        model: {
            "calls": len(calls),
            "usage": _usage(calls).to_value(),
            "cost": _total(calls).to_value(),
        }
        for model, calls in sorted(by_model.items())
    }
    links = GatewayMeterLinks(calls=tuple(call_oids))
    if prices_oid is not None:
        links = GatewayMeterLinks(calls=tuple(call_oids), prices=prices_oid)
    return GatewayMeter(
        attempt=meter.attempt,
        model=meter.model,
        ceiling_micros=meter.ceiling_micros,
        ceiling_reached=meter.ceiling_reached,
        calls=len(meter.calls),
        outcomes=dict(sorted(Counter(c.record.outcome for c in meter.calls).items())),
        models=models,
        usage=_usage(list(meter.calls)),
        cost=_total(list(meter.calls)),
        unanswered=tuple(c.record.request_sha256 for c in meter.unanswered),
        links=links,
    )
