"""Replay: a recorded run answered again by request hash, byte for byte, spending nothing;
a request with no recorded answer fails closed and is named."""

from __future__ import annotations

import pytest

from tests.gateway.conftest import request
from yyb.gateway import Replay, records, request_sha256
from yyb.gateway.providers import Provider, Route
from yyb.store.repo import Store

MESSAGES = [{"role": "user", "content": "Fix calc.py."}]
OPENAI_RUN = [
    ("/v1/chat/completions", {"model": "gpt-5", "messages": MESSAGES}),
    ("/v1/chat/completions", {"model": "openai/gpt-5", "messages": MESSAGES, "stream": True}),
    ("/v1/responses", {"model": "gpt-5", "input": "Fix calc.py.", "stream": True}),
    ("/v1/responses", {"model": "gpt-5", "input": "Fix calc.py."}),
    ("/v1/chat/completions", {"model": "gpt-5", "messages": MESSAGES}),  # the same again
]
ANTHROPIC_RUN = [
    ("/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": MESSAGES}),
    (
        "/v1/messages",
        {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": MESSAGES, "stream": True},
    ),  # fmt: skip
]


def _run(gateway, token, calls, anthropic=False):
    return [request(gateway, path, body, token, anthropic=anthropic) for path, body in calls]


def _record(gateway):
    openai, anthropic = (
        gateway.admit("a1", "openai/gpt-5", None),
        gateway.admit("a2", "anthropic/claude-sonnet-4-5", None),
    )
    answers = _run(gateway, openai, OPENAI_RUN) + _run(gateway, anthropic, ANTHROPIC_RUN, True)
    return answers, [gateway.retire(openai), gateway.retire(anthropic)]


def _store(meters):
    store = Store.memory()
    oids = []
    for meter in meters:
        for kind, body in records(meter):
            oid = (
                store.objects.put_record(body)
                if kind == "record"
                else store.objects.put("blob", body)
            )
        oids.append(oid)  # the meter comes last
    return store, oids


@pytest.mark.parametrize("source", ["calls", "store"])
def test_a_recorded_run_replays_identically_with_zero_spend(make_gateway, upstream, source):
    answers, meters = _record(make_gateway())
    assert all(a.status == 200 for a in answers)
    assert sum(m.spent_micros for m in meters) > 0
    seen = len(upstream.server.requests)
    if source == "calls":
        replay = Replay.of([c for m in meters for c in m.calls])
    else:
        store, oids = _store(meters)
        replay = Replay.from_store(store.objects, oids)
    replaying = make_gateway(replay=replay)
    again, replayed = _record(replaying)
    assert [(a.status, a.body) for a in again] == [(a.status, a.body) for a in answers]
    assert len(upstream.server.requests) == seen
    for before, after in zip(meters, replayed, strict=True):
        assert after.spent_micros == 0 and after.completeness == "complete"
        assert [c.record.source for c in after.calls] == ["replay"] * len(before.calls)
        assert [c.record.served_model for c in after.calls] == [
            c.record.served_model for c in before.calls
        ]
        assert [c.record.usage for c in after.calls] == [c.record.usage for c in before.calls]


def test_a_request_with_no_recorded_answer_fails_closed_and_is_named(make_gateway, upstream):
    _, meters = _record(make_gateway())
    replaying = make_gateway(replay=Replay.of([c for m in meters for c in m.calls]))
    token = replaying.admit("a1", "openai/gpt-5", None)
    new = {"model": "gpt-5", "messages": [{"role": "user", "content": "Something else."}]}
    answer = request(replaying, "/v1/chat/completions", new, token)
    assert answer.status == 502
    assert answer.json()["error"]["code"] == "yyb_unanswered"
    same = OPENAI_RUN[0][1]
    assert [request(replaying, OPENAI_RUN[0][0], same, token).status for _ in range(3)] == [
        200,
        200,
        502,
    ]  # fmt: skip  (recorded twice: answered twice, in order)
    meter = replaying.retire(token)
    route = Route(Provider("openai", "http://x", "X", ("openai",)), "gpt-5")
    assert [c.record.request_sha256 for c in meter.unanswered] == [
        request_sha256("POST", "/v1/chat/completions", _json(new), route),
        request_sha256("POST", "/chat/completions", _json(same), route),
    ]
    assert [c.record.outcome for c in meter.calls] == [
        "unanswered", "answered", "answered", "unanswered",
    ]  # fmt: skip
    assert meter.spent_micros == 0
    meter_record = records(meter)[-1][1]
    assert meter_record["unanswered"] == [c.record.request_sha256 for c in meter.unanswered]
    assert meter_record["outcomes"] == {"answered": 2, "unanswered": 2}


def _json(value) -> bytes:
    import json

    return json.dumps(value).encode()


def test_the_request_hash_ignores_what_does_not_change_the_question():
    route = Route(Provider("openai", "http://x", "X", ("openai",)), "gpt-5")
    base = b'{"model": "gpt-5", "messages": [], "stream": true}'
    key = request_sha256("POST", "/v1/chat/completions", base, route)
    same = [
        b'{"stream":true,"messages":[],"model":"openai/gpt-5"}',
        b'{"model": "gpt-5", "messages": [], "stream": true, "stream_options": {"a": 1}}',
    ]
    for body in same:
        assert request_sha256("POST", "/v1/chat/completions", body, route) == key
    assert request_sha256("POST", "/chat/completions", base, route) == key
    different = [
        ("POST", "/v1/chat/completions", b'{"model": "gpt-5", "messages": [], "stream": false}'),
        ("POST", "/v1/responses", base),
        ("GET", "/v1/chat/completions", base),
        ("POST", "/v1/chat/completions", b'{"model": "gpt-4", "messages": [], "stream": true}'),
    ]
    for method, path, body in different:
        assert request_sha256(method, path, body, route) != key


def test_an_answer_kept_truncated_is_not_replayed(make_gateway, upstream):
    from yyb.gateway import Limits

    gateway = make_gateway(Limits(keep_bytes=200))
    token = gateway.admit("a1", "openai/gpt-5", None)
    path, body = OPENAI_RUN[0]
    whole = request(gateway, path, body, token)
    (call,) = gateway.retire(token).calls
    assert call.record.response.truncated and len(call.response) == 200
    assert call.record.response.bytes == len(whole.body) > 200
    assert call.record.served_model is None and call.cost_micros is None  # not parsed
    replaying = make_gateway(replay=Replay.of([call]))
    token = replaying.admit("a1", "openai/gpt-5", None)
    assert request(replaying, path, body, token).status == 502
