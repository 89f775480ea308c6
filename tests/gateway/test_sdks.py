"""The official OpenAI and Anthropic Python SDKs through the gateway, as a stand-in agent
would use them: the gateway's URL and the attempt's token are all they are given."""

from __future__ import annotations

import pytest

from tests.gateway.conftest import ANTHROPIC_KEY, OPENAI_KEY, SERVED, TEXT

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

MESSAGES = [{"role": "user", "content": "Fix the failing test in calc.py."}]


def _openai(gateway, token):
    return openai.OpenAI(base_url=gateway.url + "/v1", api_key=token, max_retries=0)


def _anthropic(gateway, token):
    return anthropic.Anthropic(base_url=gateway.url, api_key=token, max_retries=0)


def _check(gateway, token, upstream, calls, api, stream):
    meter = gateway.retire(token)
    assert [c.record.api for c in meter.calls] == [api] * calls
    for call in meter.calls:
        record = call.record
        assert (record.served_model, record.outcome) == (SERVED, "answered")
        assert record.usage is not None and record.cost.completeness == "complete"
        assert record.cost.micros > 0
    assert meter.spent_micros == sum(c.cost_micros for c in meter.calls)
    assert upstream.keys and all(OPENAI_KEY in k or ANTHROPIC_KEY in k for k in upstream.keys)
    assert all(token not in k for k in upstream.keys)
    return meter


def test_openai_chat_completions(gateway, upstream):
    token = gateway.admit("sdk", "openai/gpt-5", 10**9)
    client = _openai(gateway, token)
    whole = client.chat.completions.create(model="gpt-5", messages=MESSAGES)
    assert whole.model == SERVED and whole.choices[0].message.content == TEXT
    assert whole.choices[0].message.tool_calls[0].function.name == "bash"
    parts = client.chat.completions.create(model="gpt-5", messages=MESSAGES, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in parts if c.choices)
    assert text == TEXT
    meter = _check(gateway, token, upstream, 2, "chat_completions", None)
    assert [c.record.stream for c in meter.calls] == [False, True]


def test_openai_responses(gateway, upstream):
    token = gateway.admit("sdk", "openai/gpt-5", 10**9)
    client = _openai(gateway, token)
    whole = client.responses.create(model="gpt-5", input="Fix calc.py.")
    assert whole.model == SERVED and whole.output_text == TEXT
    with client.responses.stream(model="gpt-5", input="Fix calc.py.") as stream:
        final = stream.get_final_response()
    assert final.output_text == TEXT and final.usage.output_tokens > 0
    meter = _check(gateway, token, upstream, 2, "responses", None)
    assert meter.calls[1].record.usage.output_tokens == final.usage.output_tokens


def test_anthropic_messages(gateway, upstream):
    token = gateway.admit("sdk", "anthropic/claude-sonnet-4-5", 10**9)
    client = _anthropic(gateway, token)
    whole = client.messages.create(model="claude-sonnet-4-5", max_tokens=512, messages=MESSAGES)
    assert whole.model == SERVED and whole.content[0].text == TEXT
    with client.messages.stream(
        model="claude-sonnet-4-5", max_tokens=512, messages=MESSAGES
    ) as stream:
        final = stream.get_final_message()
    assert final.content[0].text == TEXT
    counted = client.messages.count_tokens(model="claude-sonnet-4-5", messages=MESSAGES)
    assert counted.input_tokens > 0
    meter = gateway.retire(token)
    assert [c.record.api for c in meter.calls] == ["messages", "messages", "count_tokens"]
    assert meter.calls[1].record.usage.output_tokens == final.usage.output_tokens
    assert meter.spent_micros == sum(c.cost_micros for c in meter.calls[:2]) > 0


def test_sdk_errors_are_the_providers_own(gateway, upstream):
    token = gateway.admit("sdk", "openai/gpt-5", 0)
    with pytest.raises(openai.RateLimitError) as raised:
        _openai(gateway, token).chat.completions.create(model="gpt-5", messages=MESSAGES)
    assert raised.value.code == "yyb_spend_ceiling"
    assert raised.value.body["type"] == "insufficient_quota"
    with pytest.raises(openai.AuthenticationError):
        _openai(gateway, "yyb-gw-" + "0" * 48).chat.completions.create(
            model="gpt-5", messages=MESSAGES
        )
    with pytest.raises(openai.PermissionDeniedError):
        _openai(gateway, token).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    token = gateway.admit("sdk2", "anthropic/claude-sonnet-4-5", 0)
    with pytest.raises(anthropic.BadRequestError) as refused:
        _anthropic(gateway, token).messages.create(
            model="claude-sonnet-4-5", max_tokens=512, messages=MESSAGES
        )
    assert refused.value.body["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.AuthenticationError):
        _anthropic(gateway, "nope").messages.create(
            model="claude-sonnet-4-5", max_tokens=512, messages=MESSAGES
        )
    assert upstream.server.requests == []
