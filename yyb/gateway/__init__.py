"""The metering model gateway (docs/gateway.md): the candidate's one path to a model.

``Gateway`` serves the OpenAI and Anthropic APIs on a UNIX socket, admits each attempt with a
token, puts the real credential in the token's place, meters every call against the
attempt's ceiling and keeps it as a ``Call``; ``records`` turns an attempt's ``Meter`` into
the records and blobs the store keeps; ``Replay`` answers a run from recorded calls.
"""

from yyb.gateway.meter import Call, Limits, Meter
from yyb.gateway.prices import call_cost, price_table, read_price_table, table_oid
from yyb.gateway.providers import Provider, Providers, Route
from yyb.gateway.records import records
from yyb.gateway.replay import Replay, request_sha256
from yyb.gateway.server import Gateway

__all__ = [
    "Call",
    "Gateway",
    "Limits",
    "Meter",
    "Provider",
    "Providers",
    "Replay",
    "Route",
    "call_cost",
    "price_table",
    "read_price_table",
    "records",
    "request_sha256",
    "table_oid",
]
