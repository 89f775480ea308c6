"""The price table and the cost of one call, in exact integer micro-USD.

A table entry is micro-USD per million tokens. A call's cost is the sum over its token classes
of tokens times price, divided by 1,000,000 and rounded up: integers all the way, so the same
usage costs the same on every machine, and a fraction of a micro-dollar is never lost.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from yyb.evidence.kinds.gateway import GatewayUsage, PriceTable
from yyb.evidence.prices import read_price_table  # noqa: F401 - re-exported
from yyb.store.objects import codec
from yyb.store.objects.format import hash_object

PER_TOKENS = 1_000_000


def price_table(models: Mapping[str, Mapping[str, int]]) -> PriceTable:
    """A price table record from ``{model: {input, output, cached_input[, cache_write_input]}}``.

    Raises:
        SchemaViolation: a price missing, negative or not an integer.
    """
    value = {
        "schema_version": PriceTable.schema_version,
        "currency": "USD",
        "models": {m: dict(p) for m, p in models.items()},
    }
    return PriceTable.from_value(value)


def table_oid(table: PriceTable) -> str:
    """The object id the table has once stored (what a plan binds)."""
    return hash_object("record", codec.encode(table.to_value()))


def call_cost(
    table: PriceTable | None, usage: GatewayUsage, served: str, provider: str
) -> int | None:
    """The micro-USD ``usage`` of ``served`` costs, or None when the table has no price for it.

    The model is looked up as served, then as ``provider/served``.
    """
    if table is None:
        return None
    prices = table.models.get(served) or table.models.get(f"{provider}/{served}")
    if prices is None:
        return None
    total = (
        usage.input_tokens * prices["input"]
        + usage.cached_input_tokens * prices["cached_input"]
        + usage.cache_write_input_tokens * prices.get("cache_write_input", prices["input"])
        + usage.output_tokens * prices["output"]
    )
    return -(-total // PER_TOKENS)


def table_json(table: PriceTable) -> str:
    """The table's JSON view, as read_price_table reads it."""
    return json.dumps(codec.to_json(table.to_value()), indent=2, sort_keys=True) + "\n"
