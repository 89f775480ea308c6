"""An attempt's meter as evidence: valid records, links to the bodies and calls in order,
totals per served model, completeness when a model has no price."""

from __future__ import annotations

from tests.gateway.conftest import PRICES, SERVED, request
from yyb.evidence.kinds import from_value
from yyb.evidence.kinds.gateway import GatewayCall, GatewayMeter, PriceTable
from yyb.gateway import price_table, records, table_oid
from yyb.store.objects import codec
from yyb.store.objects.format import hash_object
from yyb.store.repo import Store

CHAT = {"model": "gpt-5", "messages": [{"role": "user", "content": "Fix calc.py."}]}


def _oid(kind, body):
    return (
        hash_object("record", codec.encode(body)) if kind == "record" else hash_object("blob", body)
    )


def _three_calls(gateway):
    token = gateway.admit("a1", "openai/gpt-5", None)
    request(gateway, "/v1/chat/completions", CHAT, token)
    request(gateway, "/v1/chat/completions", {**CHAT, "stream": True}, token)
    request(gateway, "/v1/chat/completions", {**CHAT, "model": "gpt-4o"}, token)
    return gateway.retire(token)


def test_records_are_valid_and_link_what_comes_before_them(gateway, upstream):
    meter = _three_calls(gateway)
    out = records(meter, PRICES)
    assert [kind for kind, _ in out] == ["blob", "blob", "record"] * 3 + ["record", "record"]
    store = Store.memory()
    for kind, body in out:
        if kind == "record":
            record = from_value(body)
            for role, oid in body.get("links", {}).items():
                for target in oid if isinstance(oid, list) else [oid]:
                    assert store.objects.contains(target), role
            store.objects.put_record(record.to_value())
        else:
            store.objects.put("blob", body)
    calls = [GatewayCall.from_value(body) for _, body in out[2:9:3]]
    summary = GatewayMeter.from_value(out[-1][1])
    assert summary.links.calls == tuple(_oid("record", out[i][1]) for i in (2, 5, 8))
    assert summary.links.prices == table_oid(PRICES) == _oid("record", out[-2][1])
    assert [c.index for c in calls] == [0, 1, 2]
    assert store.objects.get(calls[1].links.response).body == meter.calls[1].response
    assert summary.cost.micros == meter.spent_micros == calls[0].cost.micros * 2
    assert summary.cost.completeness == "complete"
    assert summary.outcomes == {"answered": 2, "refused_model": 1}
    assert list(summary.models) == [SERVED]
    per_model = summary.models[SERVED]
    assert per_model["calls"] == 2 and per_model["cost"]["micros"] == meter.spent_micros
    assert per_model["usage"]["output_tokens"] == 2 * calls[0].usage.output_tokens
    assert summary.usage.to_value() == per_model["usage"]


def test_a_served_model_without_a_price_makes_the_meter_partial(make_gateway, upstream):
    other = price_table({"some-other-model": {"input": 1, "output": 1, "cached_input": 1}})
    for prices in (other, None):
        meter = _three_calls(make_gateway(prices=prices))
        assert [c.cost_micros for c in meter.calls] == [None, None, 0]
        assert meter.completeness == "partial"
        summary = records(meter, prices)[-1][1]
        assert summary["cost"] == {"completeness": "partial", "currency": "USD", "micros": 0}
        assert summary["models"][SERVED]["cost"]["completeness"] == "partial"
        call = records(meter, prices)[2][1]
        assert call["cost"] == {"completeness": "unavailable", "currency": "USD", "micros": None}
        assert ("prices" in summary["links"]) is (prices is not None)


def test_the_price_table_round_trips_through_its_json_file(tmp_path):
    from yyb.gateway import read_price_table
    from yyb.gateway.prices import table_json

    path = tmp_path / "prices.json"
    path.write_text(table_json(PRICES))
    assert read_price_table(path) == PRICES
    assert isinstance(PRICES, PriceTable)
