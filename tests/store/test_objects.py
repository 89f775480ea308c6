"""The object format: header, oid, splitting stored bytes, links."""

from __future__ import annotations

import hashlib

import pytest

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
