"""A price table file (``yyb_price_table.v1``, docs/gateway.md "Prices and cost"), read as the
record's JSON view: what a plan pins and the gateway costs calls by."""

from __future__ import annotations

from pathlib import Path

from yyb.errors import SchemaViolation
from yyb.evidence.kinds.gateway import PriceTable
from yyb.store.objects import codec


def read_price_table(path: Path) -> PriceTable:
    """A price table from its JSON file (the record's JSON view).

    Raises:
        SchemaViolation: the file is unreadable or not a valid ``yyb_price_table.v1``.
    """
    try:
        value = codec.from_json(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise SchemaViolation(PriceTable.schema_version, "$", f"{path}: {exc}") from None
    return PriceTable.from_value(value)
