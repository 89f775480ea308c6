"""The object format: header, oid, splitting stored bytes, links."""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from yyb.errors import ChecksumMismatch, CorruptObject, InvalidOid, InvalidRecord
from yyb.store.objects import format as objects
from yyb.store.objects.format import StoredObject


def test_oid_is_sha256_of_header_and_body():
    body = b"hello\n"
    expected = hashlib.sha256(b"blob 6\x00hello\n").hexdigest()
    assert objects.hash_object("blob", body) == expected
    assert objects.hash_object("record", body) != expected


def test_empty_blob():
    assert objects.hash_object("blob", b"") == hashlib.sha256(b"blob 0\x00").hexdigest()


@pytest.mark.parametrize(
    "data, code",
    [
        (b"blob 5\x00abc", "truncated"),
        (b"blob 5", "truncated"),
        (b"", "truncated"),
        (b"blob 2\x00abc", "trailing-bytes"),
        (b"tree 3\x00abc", "malformed"),
        (b"blob 03\x00abc", "malformed"),
        (b"blob -3\x00abc", "malformed"),
        (b"blob  3\x00abc", "malformed"),
        (b"blob 99999999999999999999\x00abc", "truncated"),
        (b"blob 999999999999999999999\x00abc", "malformed"),
    ],
)
def test_split_refuses_malformed_bytes(data, code):
    with pytest.raises(CorruptObject) as caught:
        objects.split(data, "x")
    assert caught.value.code == code


def test_split_returns_kind_and_body():
    assert objects.split(b"record 2\x00\x80\x00"[:-1] + b"\x00", None) == ("record", b"\x80\x00")


def test_check_raises_checksum_mismatch_with_both_values():
    good = objects.hash_object("blob", b"a")
    obj = StoredObject(good, "blob", b"b")
    with pytest.raises(ChecksumMismatch) as caught:
        obj.check()
    assert caught.value.expected == good
    assert caught.value.got == objects.hash_object("blob", b"b")


@pytest.mark.parametrize("text", ["", "abc", "ABCD", "g" * 64, "a" * 65, "0123 "])
def test_check_prefix_refuses(text):
    with pytest.raises(InvalidOid):
        objects.check_prefix(text)


def test_links_forms():
    oid = "a" * 64
    assert objects.check_links({"links": {"one": oid, "many": [oid, oid]}}) == {
        "one": [oid],
        "many": [oid, oid],
    }
    with pytest.raises(InvalidRecord) as caught:
        objects.check_links({"links": {"bad": ["a" * 63]}})
    assert caught.value.path == "$.links.bad"
    with pytest.raises(InvalidRecord):
        objects.check_links({"links": ["x"]})


@pytest.mark.parametrize("version", [None, 3, "Note", "note", "note.v", "a.b.v1"])
def test_schema_version_is_required_and_shaped(version):
    value = {} if version is None else {"schema_version": version}
    with pytest.raises(InvalidRecord) as caught:
        objects.check_record(value)
    assert caught.value.path == "$.schema_version"


# --- the grammar, checked without regular expressions --------------------------------------
# The readers of ids, prefixes, headers and schema versions use string methods (plumbing does
# not import re); each must accept exactly what its documented pattern accepts.

_NEAR_HEX = st.text(alphabet="0123456789abcdefABCDEFg \n\x00\u0660\uff10", max_size=70)
_NEAR_HEADER = st.binary(max_size=40) | st.builds(
    lambda kind, digits, tail: kind + b" " + digits + tail,
    st.sampled_from([b"blob", b"record", b"blo", b"Blob", b" blob", b"recordx"]),
    st.sampled_from(["0", "00", "01", "10", "007", "9" * 20, "9" * 21, "", "+1", "-0", " 1"]).map(
        str.encode
    )
    | st.text(alphabet="0123456789+- ", max_size=23).map(str.encode),
    st.sampled_from([b"\x00", b"\x00body", b"", b" \x00", b"\n\x00"]),
)


@given(_NEAR_HEX)
def test_ids_and_prefixes_are_exactly_their_patterns(text):
    assert objects.is_oid(text) == bool(re.fullmatch(r"[0-9a-f]{64}", text))
    try:
        objects.check_prefix(text)
        accepted = True
    except InvalidOid:
        accepted = False
    assert accepted == bool(re.fullmatch(r"[0-9a-f]{4,64}", text))
    try:  # a list of links is checked all at once (``_all_oids``)
        objects.check_links({"links": {"x": ["0" * 64, text, "f" * 64]}})
        linked = True
    except InvalidRecord:
        linked = False
    assert linked == bool(re.fullmatch(r"[0-9a-f]{64}", text))


@given(_NEAR_HEADER)
@example(b"blob 00\x00")
@example(b"record " + b"9" * 20 + b"\x00")
@example(b"record " + b"9" * 21 + b"\x00")
@example(b"blob 5 \x00")
def test_headers_are_exactly_the_header_pattern(data):
    match = objects.header_re().match(data[: objects.MAX_HEADER])
    try:
        parsed = objects.parse_header(data)
    except CorruptObject:
        parsed = None
    expected = None if match is None else (match[1].decode(), int(match[2]), match.end())
    assert parsed == expected


@given(st.text(alphabet="abz09_.vV\u0661 ", max_size=16))
def test_schema_versions_are_exactly_their_pattern(text):
    try:
        objects.check_record({"schema_version": text, "links": {}})
        accepted = True
    except InvalidRecord:
        accepted = False
    assert accepted == bool(re.fullmatch(r"[a-z0-9_]+\.v[0-9]+", text))
