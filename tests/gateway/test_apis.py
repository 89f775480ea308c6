"""Each API through the gateway, raw over HTTP: answers relayed, served model, usage and cost
observed, the real credential upstream only."""

from __future__ import annotations

import json
import socket

import pytest

from tests.gateway.conftest import (
    ANTHROPIC_KEY,
    ENVIRON,
    OPENAI_KEY,
    PRICES,
    SERVED,
    SLOW_FIRST,
    TEXT,
    UnixConnection,
    providers_for,
    request,
    short_socket,
    slow_upstream,
    sse_data,
)
from yyb.gateway import Gateway

MESSAGES = [{"role": "user", "content": "Fix the failing test in calc.py."}]
CHAT = {"model": "gpt-5", "messages": MESSAGES}
RESPONSES = {"model": "gpt-5", "input": "Fix the failing test in calc.py."}
ANTHROPIC = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": MESSAGES}


def _cost(input_tokens: int, output_tokens: int, cached: int = 0) -> int:
    """The table's prices by hand: 3 USD in, 15 out, 0.30 cached, per million, rounded up."""
    total = input_tokens * 3_000_000 + output_tokens * 15_000_000 + cached * 300_000
    return -(-total // 1_000_000)


def _only_call(gateway, token):
    meter = gateway.retire(token)
    assert len(meter.calls) == 1
    return meter.calls[0]


def _check_credentials(upstream, answer, expected_key):
    assert upstream.keys and set(upstream.keys) <= {expected_key, f"Bearer {expected_key}"}
    last = upstream.server.requests[-1]
    assert any(last.headers.get(h) == "<redacted>" for h in ("authorization", "x-api-key"))
    for key in (OPENAI_KEY, ANTHROPIC_KEY):
        assert key.encode() not in answer.body
        assert key not in json.dumps(answer.headers)


@pytest.mark.parametrize("unix", [False, True], ids=["tcp", "unix"])
def test_chat_completions_non_streaming(gateway, upstream, unix):
    token = gateway.admit("a1", "openai/gpt-5", None)
    answer = request(gateway, "/v1/chat/completions", CHAT, token, unix=unix)
    assert answer.status == 200
    body = answer.json()
    assert body["choices"][0]["message"]["content"] == TEXT
    call = _only_call(gateway, token).record
    usage = body["usage"]
    assert (call.api, call.outcome, call.stream, call.source) == (
        "chat_completions", "answered", False, "upstream",
    )  # fmt: skip
    assert (call.requested_model, call.served_model) == ("gpt-5", SERVED)
    assert call.reported_usage == usage
    assert call.usage.input_tokens == usage["prompt_tokens"]
    assert call.usage.output_tokens == usage["completion_tokens"]
    assert call.cost.micros == _cost(usage["prompt_tokens"], usage["completion_tokens"]) > 0
    assert call.cost.completeness == "complete"
    assert call.response.bytes == len(answer.body) and not call.response.truncated
    _check_credentials(upstream, answer, OPENAI_KEY)
    assert upstream.server.requests[-1].body == CHAT


def test_chat_stream_usage_is_asked_for_and_not_shown_when_the_client_did_not(gateway, upstream):
    token = gateway.admit("a1", "openai/gpt-5", None)
    answer = request(gateway, "/v1/chat/completions", {**CHAT, "stream": True}, token)
    assert answer.status == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = sse_data(answer.body)
    assert events[-1] == "[DONE]"
    assert all("usage" not in e for e in events[:-1])
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-1])
    assert text == TEXT
    sent = upstream.server.requests[-1].body
    assert sent["stream_options"] == {"include_usage": True}
    meter = gateway.retire(token)
    call = meter.calls[0]
    recorded = sse_data(call.response)
    usage = next(e["usage"] for e in recorded if e != "[DONE]" and e.get("usage"))
    assert call.record.usage.output_tokens == usage["completion_tokens"]
    assert call.record.served_model == SERVED and call.record.stream
    assert call.cost_micros == _cost(usage["prompt_tokens"], usage["completion_tokens"])
    # the client saw the upstream's bytes less exactly the usage chunk
    assert len(recorded) == len(events) + 1


def test_chat_stream_usage_shown_when_the_client_asked(gateway, upstream):
    token = gateway.admit("a1", "openai/gpt-5", None)
    body = {**CHAT, "stream": True, "stream_options": {"include_usage": True}}
    answer = request(gateway, "/v1/chat/completions", body, token)
    call = _only_call(gateway, token)
    assert answer.body == call.response
    assert any(e != "[DONE]" and e.get("usage") for e in sse_data(answer.body))
    assert call.record.usage is not None


@pytest.mark.parametrize("stream", [False, True])
def test_responses(gateway, upstream, stream):
    token = gateway.admit("a1", "openai/gpt-5", None)
    answer = request(gateway, "/v1/responses", {**RESPONSES, "stream": stream}, token)
    assert answer.status == 200
    call = _only_call(gateway, token)
    assert answer.body == call.response
    if stream:
        done = next(e for e in sse_data(answer.body) if e["type"] == "response.completed")
        usage = done["response"]["usage"]
    else:
        usage = answer.json()["usage"]
    record = call.record
    assert (record.api, record.served_model, record.stream) == ("responses", SERVED, stream)
    assert record.reported_usage == usage
    assert record.cost.micros == _cost(usage["input_tokens"], usage["output_tokens"])
    _check_credentials(upstream, answer, OPENAI_KEY)


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_messages(gateway, upstream, stream):
    token = gateway.admit("a1", "anthropic/claude-sonnet-4-5", None)
    answer = request(
        gateway, "/v1/messages", {**ANTHROPIC, "stream": stream}, token, anthropic=True
    )
    assert answer.status == 200
    call = _only_call(gateway, token)
    assert answer.body == call.response
    if stream:
        events = sse_data(answer.body)
        start = next(e for e in events if e["type"] == "message_start")["message"]["usage"]
        delta = next(e for e in events if e["type"] == "message_delta")["usage"]
        used_in, used_out = start["input_tokens"], delta["output_tokens"]
        assert start["output_tokens"] != used_out  # the delta's count is the one that stands
    else:
        usage = answer.json()["usage"]
        used_in, used_out = usage["input_tokens"], usage["output_tokens"]
    record = call.record
    assert (record.api, record.served_model) == ("messages", SERVED)
    assert (record.usage.input_tokens, record.usage.output_tokens) == (used_in, used_out)
    assert record.cost.micros == _cost(used_in, used_out)
    _check_credentials(upstream, answer, ANTHROPIC_KEY)
    sent = upstream.server.requests[-1]
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers


def test_count_tokens_is_free_and_the_prefix_is_stripped_upstream(gateway, upstream):
    token = gateway.admit("a1", "anthropic/claude-sonnet-4-5", None)
    body = {"model": "anthropic/claude-sonnet-4-5", "messages": MESSAGES}
    answer = request(gateway, "/v1/messages/count_tokens", body, token, anthropic=True)
    assert answer.status == 200 and answer.json()["input_tokens"] > 0
    assert upstream.server.requests[-1].body["model"] == "claude-sonnet-4-5"
    call = _only_call(gateway, token).record
    assert (call.api, call.cost.micros, call.cost.completeness) == (
        "count_tokens", 0, "genuine_zero",
    )  # fmt: skip


def test_models_are_answered_locally(gateway, upstream):
    token = gateway.admit("a1", "openai/gpt-5", None)
    answer = request(gateway, "/v1/models", None, token, method="GET")
    assert answer.json() == {
        "object": "list",
        "data": [{"id": "gpt-5", "object": "model", "created": 0, "owned_by": "openai"}],
    }
    answer = request(gateway, "/v1/models", None, token, method="GET", anthropic=True)
    assert [m["id"] for m in answer.json()["data"]] == ["gpt-5"]
    assert upstream.server.requests == []
    assert gateway.retire(token).calls == ()


def test_a_body_naming_no_model_is_refused_before_the_upstream(gateway, upstream):
    token = gateway.admit("a1", "openai/gpt-5", None)
    answer = request(gateway, "/v1/chat/completions", b"[1, 2]", token)
    assert answer.status == 403 and answer.json()["error"]["code"] == "yyb_model_not_planned"
    assert upstream.server.requests == []
    call = _only_call(gateway, token).record
    assert (call.outcome, call.status, call.cost.micros) == ("refused_model", 403, 0)


def test_an_unreachable_upstream_is_a_502_in_the_providers_shape(make_gateway, upstream):
    gateway = make_gateway()
    token = gateway.admit("a1", "openai/gpt-5", None)
    upstream.server.__exit__(None, None, None)
    answer = request(gateway, "/v1/chat/completions", CHAT, token)
    assert answer.status == 502
    assert answer.json()["error"]["code"] == "yyb_upstream_unreachable"
    call = _only_call(gateway, token).record
    assert (call.outcome, call.cost.micros) == ("failed", 0)


def _stream_request(gateway, token):
    connection = UnixConnection(gateway.socket_path)
    body = json.dumps({**CHAT, "stream": True})
    connection.request("POST", "/v1/chat/completions", body,
                       {"Authorization": f"Bearer {token}"})  # fmt: skip
    return connection, connection.getresponse()


def test_a_stream_is_relayed_as_it_comes_not_gathered_first(tmp_path):
    """An upstream that sends its first chunk and then waits: the client has that chunk (and
    the call is in flight) before the upstream sends the rest."""
    with (
        slow_upstream() as (url, release),
        Gateway(providers_for(url), None, short_socket(tmp_path), environ=ENVIRON) as gateway,
    ):
        token = gateway.admit("a1", "openai/gpt-5", None)
        _, answer = _stream_request(gateway, token)
        line = answer.readline()  # the first event's line, while the upstream waits
        assert json.loads(line.removeprefix(b"data: ")) == SLOW_FIRST
        assert gateway.meter(token).calls == ()
        release.set()
        rest = answer.read()
        assert b"usage" not in rest and rest.endswith(b"data: [DONE]\n\n")
        call = gateway.retire(token).calls[0]
        assert call.record.usage.output_tokens == 2 and call.cost_micros is None
        assert call.record.served_model == "slow-2025-01-01"


def test_a_client_gone_mid_stream_leaves_its_call_kept_as_failed(tmp_path):
    with (
        slow_upstream() as (url, release),
        Gateway(providers_for(url), PRICES, short_socket(tmp_path), environ=ENVIRON) as gateway,
    ):
        token = gateway.admit("a1", "openai/gpt-5", None)
        connection, answer = _stream_request(gateway, token)
        assert answer.readline().startswith(b"data: ")
        connection.sock.shutdown(socket.SHUT_RDWR)
        connection.close()
        release.set()
        meter = gateway.retire(token)
        (call,) = meter.calls
        assert (call.record.outcome, call.record.served_model) == ("failed", "slow-2025-01-01")
        assert call.response.startswith(b"data: ")
        assert call.cost_micros is None and meter.completeness == "partial"  # not priced
