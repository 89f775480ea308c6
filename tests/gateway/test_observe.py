"""Observing calls: events cut from any split of the bytes, usage as each API names it, and
cost in exact integers rounded up."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from yyb.errors import SchemaViolation
from yyb.evidence.kinds.gateway import GatewayUsage
from yyb.gateway import call_cost, price_table
from yyb.gateway.observe import (
    EventSplitter,
    Observation,
    api_of,
    event_data,
    is_usage_chunk,
    normalize,
)

STREAM = (
    b'event: message_start\ndata: {"type": "message_start", "message": {"model": "m-1", '
    b'"usage": {"input_tokens": 10, "cache_read_input_tokens": 4, '
    b'"cache_creation_input_tokens": 2, "output_tokens": 1}}}\n\n'
    b'event: ping\r\ndata: {"type": "ping"}\r\n\r\n'
    b'event: message_delta\ndata: {"type": "message_delta", "usage": {"output_tokens": 30}}\n\n'
)


def _usage(i, c, w, o):
    return GatewayUsage(
        input_tokens=i, cached_input_tokens=c, cache_write_input_tokens=w, output_tokens=o
    )


@given(st.lists(st.integers(0, len(STREAM)), max_size=8))
@example([])
@example(list(range(len(STREAM))))
def test_events_are_the_same_whatever_the_chunks(cuts):
    points = sorted(set(cuts))
    chunks = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)], strict=True)]
    splitter = EventSplitter(limit=1 << 20)
    events = [e for chunk in chunks for e in splitter.feed(chunk)]
    assert splitter.flush() == b""
    assert b"".join(e for e, _ in events) == STREAM
    assert [event_data(e)["type"] for e, whole in events if whole] == [
        "message_start", "ping", "message_delta",
    ]  # fmt: skip
    observation = Observation("messages")
    for event, _ in events:
        observation.event(event_data(event))
    assert observation.served_model == "m-1"
    assert observation.usage == _usage(10, 4, 2, 30)


def test_an_event_over_the_limit_is_passed_on_unparsed():
    splitter = EventSplitter(limit=16)
    out = splitter.feed(b"data: " + b"x" * 40)
    assert out == [(b"data: " + b"x" * 40, False)] and splitter.overflowed
    assert splitter.feed(b"\n\ndata: {}\n\n") == [(b"\n\n", True), (b"data: {}\n\n", True)]


def test_usage_as_each_api_names_it():
    chat = {"prompt_tokens": 100, "completion_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 60}}  # fmt: skip
    assert normalize("chat_completions", chat) == _usage(40, 60, 0, 7)
    assert normalize("chat_completions", {"prompt_tokens": 5, "completion_tokens": 1}) == _usage(
        5, 0, 0, 1
    )
    responses = {"input_tokens": 9, "output_tokens": 3,
                 "input_tokens_details": {"cached_tokens": 9}}  # fmt: skip
    assert normalize("responses", responses) == _usage(0, 9, 0, 3)
    messages = {"input_tokens": 3, "cache_read_input_tokens": 50,
                "cache_creation_input_tokens": 20, "output_tokens": 8}  # fmt: skip
    assert normalize("messages", messages) == _usage(3, 50, 20, 8)
    for bad in (None, {}, {"prompt_tokens": -1, "completion_tokens": 1},
                {"prompt_tokens": 1, "completion_tokens": 1,
                 "prompt_tokens_details": {"cached_tokens": 2}},
                {"prompt_tokens": True, "completion_tokens": 1}):  # fmt: skip
        assert normalize("chat_completions", bad) is None
    assert normalize("count_tokens", {"input_tokens": 3}) is None


def test_the_usage_chunk_and_done():
    usage = {"choices": [], "usage": {"prompt_tokens": 1}}
    assert is_usage_chunk(usage)
    assert not is_usage_chunk({"choices": [{}], "usage": {"prompt_tokens": 1}})
    assert event_data(b"data: [DONE]\n\n") is None
    assert event_data(b"data: " + json.dumps(usage).encode() + b"\n\n") == usage


def test_paths():
    assert api_of("POST", "/v1/chat/completions") == "chat_completions"
    assert api_of("POST", "/chat/completions?x=1") == "chat_completions"
    assert api_of("POST", "/v1/messages/count_tokens") == "count_tokens"
    assert api_of("GET", "/v1/models") == "models"
    assert api_of("GET", "/v1/chat/completions") is None
    assert api_of("POST", "/v1/files") is None


PRICES = price_table({
    "m-1": {"input": 3_000_000, "output": 15_000_000, "cached_input": 300_000},
    "p/m-2": {"input": 1, "output": 1, "cached_input": 1, "cache_write_input": 7},
})  # fmt: skip


@pytest.mark.parametrize(
    ("usage", "model", "micros"),
    [
        (_usage(0, 0, 0, 0), "m-1", 0),
        (_usage(1, 0, 0, 0), "m-1", 3),
        (_usage(0, 1, 0, 0), "m-1", 1),  # 0.3 micro-USD rounds up to 1
        (_usage(0, 3, 0, 0), "m-1", 1),  # 0.9
        (_usage(0, 4, 0, 0), "m-1", 2),  # 1.2
        (_usage(10, 4, 2, 30), "m-1", 30 + 2 + 6 + 450),  # writes at the input price
        (_usage(1, 0, 0, 0), "m-2", 1),  # found as provider/served
        (_usage(0, 0, 1_000_000, 0), "m-2", 7),
        (_usage(10**12, 0, 0, 10**12), "m-1", 18 * 10**12),  # exact, no float
        (_usage(1, 0, 0, 0), "unknown", None),
    ],
)
def test_cost_is_exact_and_rounded_up(usage, model, micros):
    assert call_cost(PRICES, usage, model, "p") == micros
    assert call_cost(None, usage, model, "p") is None


def test_a_price_table_refuses_non_integer_prices():
    with pytest.raises(SchemaViolation):
        price_table({"m": {"input": 1.5, "output": 1, "cached_input": 1}})
    with pytest.raises(SchemaViolation):
        price_table({"m": {"input": 1, "output": 1}})
