"""Canonical MessagePack: round trips, one encoding per value, non-canonical bodies refused."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from yyb.errors import InvalidRecord, NonCanonical
from yyb.store.objects import codec

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=codec.INT_MIN, max_value=codec.INT_MAX)
    | st.text(max_size=40)
    | st.binary(max_size=40)
)
keys = st.text(max_size=12).filter(lambda k: k != codec.BIN_KEY)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=30,
)
records = st.dictionaries(keys, values, max_size=8)


@given(records)
@example({})
@example({"b": 1, "a": {"z": [1, 2], "é": b"\x00"}, "": None})
@example({"n": 2**64 - 1, "m": -(2**63), "s": "x" * 300, "b": b"y" * 70000})
def test_round_trip(value):
    body = codec.encode(value)
    assert codec.decode(body) == value
    assert codec.encode(codec.decode(body)) == body


@given(records)
def test_key_order_does_not_change_the_encoding(value):
    reordered = dict(reversed(list(value.items())))
    assert codec.encode(reordered) == codec.encode(value)


@given(records)
def test_keys_are_sorted_by_utf8_bytes(value):
    decoded = msgpack.unpackb(codec.encode(value), raw=False, strict_map_key=False)
    encoded_keys = [k.encode() for k in decoded]
    assert encoded_keys == sorted(encoded_keys)


@given(records)
def test_json_view_round_trips(value):
    import json

    text = json.dumps(codec.to_json(value))
    assert codec.from_json(text) == value


def _long_form_int(n: int) -> bytes:
    return b"\xd1" + n.to_bytes(2, "big", signed=True)  # int16 for a value that fits fixint


@pytest.mark.parametrize(
    "body, reason",
    [
        (b"\x82\xa1b\x01\xa1a\x02", "not sorted"),
        (b"\x82\xa1a\x01\xa1a\x02", "duplicate map key"),
        (b"\x81\xa1a" + _long_form_int(1), "shortest form"),
        (b"\x81\xa1a\xcb" + b"\x3f\xf0" + b"\x00" * 6, "floats are not allowed"),
        (b"\x81\xa1a\xd4\x05\x00", "ext type"),
        (b"\x81\x01\x02", "not a string"),
        (b"\x81\xa1a\xa2\xff\xfe", "UTF-8"),
        (b"\x81\xa1a\x01\x00", "trailing bytes"),
        (b"\x92\x01\x02", "not a map"),
        (b"\x81\xd9\x01a\x01", "shortest form"),  # str8 for a 1-byte key
        (b"\xde\x00\x01\xa1a\x01", "shortest form"),  # map16 holding one pair
        (b"\x81\xa1a\x81\xa4$bin\xa0", "reserved for bytes"),
        (b"\x81\xa1a", "not decodable"),
    ],
)
def test_non_canonical_bodies_are_refused_with_a_reason(body, reason):
    with pytest.raises(NonCanonical) as caught:
        codec.decode(body)
    assert reason in caught.value.reason


@given(records)
def test_a_widened_header_is_refused(value):
    """Re-encode the top-level map with a map32 header: same value, other bytes, refused."""
    body = codec.encode(value)
    if body[0] & 0xF0 == 0x80:  # fixmap
        widened = b"\xdf" + len(value).to_bytes(4, "big") + body[1:]
        with pytest.raises(NonCanonical):
            codec.decode(widened)


def test_nesting_limit():
    deep: dict = {}
    cursor = deep
    for _ in range(codec.MAX_DEPTH - 1):
        cursor["a"] = {}
        cursor = cursor["a"]
    codec.decode(codec.encode(deep))  # 64 levels: fine
    cursor["a"] = {}
    with pytest.raises(InvalidRecord, match="nesting deeper than 64"):
        codec.encode(deep)


@pytest.mark.parametrize(
    "value, path, reason",
    [
        ({"a": 1.5}, "$.a", "float"),
        ({"a": [1, {"b": 2.0}]}, "$.a[1].b", "float"),
        ({"a": {1: 2}}, "$.a", "not a string"),
        ({"a": 2**64}, "$.a", "out of range"),
        ({"a": -(2**63) - 1}, "$.a", "out of range"),
        ({"a": {"$bin": "x"}}, "$.a", "reserved"),
        ({"a": "\ud800"}, "$.a", "surrogate"),
        ({"a": {"weird key": {1.0}}}, '$.a["weird key"]', "type set"),
    ],
)
def test_encode_names_the_json_path(value, path, reason):
    with pytest.raises(InvalidRecord) as caught:
        codec.encode(value)
    assert caught.value.path == path
    assert reason in caught.value.reason


@pytest.mark.parametrize(
    "text, path, reason",
    [
        ('{"a": 1.0}', "$.a", "float"),
        ('{"a": {"b": [1, 2e3]}}', "$.a.b[1]", "float"),
        ('{"a": NaN}', "$.a", "float"),
        ('{"a": Infinity}', "$.a", "float"),
        ('{"a": 1, "a": 2}', "$.a", "duplicate key"),
        ('{"x": {"a": 1, "a": 1}}', "$.x.a", "duplicate key"),
        ("[1, 2]", "$", "JSON object"),
        ("{", "$", "not valid JSON"),
        ('{"a": {"$bin": "***"}}', "$.a", "invalid base64"),
    ],
)
def test_from_json_names_the_json_path(text, path, reason):
    with pytest.raises(InvalidRecord) as caught:
        codec.from_json(text)
    assert caught.value.path == path
    assert reason in caught.value.reason


def test_bytes_travel_through_json_as_base64():
    value = codec.from_json('{"a": {"$bin": "AAEC"}}')
    assert value == {"a": b"\x00\x01\x02"}
    assert codec.to_json(value) == {"a": {"$bin": "AAEC"}}


@given(records)
def test_the_quick_encoder_agrees_with_the_careful_one(value):
    careful = msgpack.packb(codec._canon(value, 0, ()), **codec._packer_options)
    assert codec.encode(value) == careful


@given(records)
def test_decode_value_reads_canonical_bodies_as_decode_does(value):
    body = codec.encode(value)
    assert codec.decode_value(body) == codec.decode(body) == value


def test_decode_value_reads_what_only_decode_refuses():
    unsorted = b"\x82\xa1b\x01\xa1a\x02"  # {"b": 1, "a": 2}: keys out of order
    with pytest.raises(NonCanonical, match="not sorted"):
        codec.decode(unsorted)
    assert codec.decode_value(unsorted) == {"a": 2, "b": 1}
    with pytest.raises(NonCanonical, match="not a map"):
        codec.decode_value(b"\x01")
