"""An independent re-implementation of docs/format.md, checked against the store.

It uses only hashlib and struct: if it and yyb disagree, either the code or the document is
wrong, which is exactly what an auditor would find.
"""

from __future__ import annotations

import hashlib
import struct

from hypothesis import given

from tests.store.test_codec import records
from yyb.store.objects import codec
from yyb.store.objects.format import hash_object


def _int(n: int) -> bytes:
    if 0 <= n <= 0x7F:
        return bytes([n])
    if -32 <= n < 0:
        return struct.pack(">b", n)
    if n >= 0:
        for tag, fmt, limit in (
            (0xCC, ">B", 2**8),
            (0xCD, ">H", 2**16),
            (0xCE, ">I", 2**32),
            (0xCF, ">Q", 2**64),
        ):
            if n < limit:
                return bytes([tag]) + struct.pack(fmt, n)
    for tag, fmt, limit in (
        (0xD0, ">b", 2**7),
        (0xD1, ">h", 2**15),
        (0xD2, ">i", 2**31),
        (0xD3, ">q", 2**63),
    ):
        if n >= -limit:
            return bytes([tag]) + struct.pack(fmt, n)
    raise ValueError(n)


def _sized(length: int, fix: tuple[int, int] | None, tags: tuple[int, int, int]) -> bytes:
    if fix is not None and length < fix[1]:
        return bytes([fix[0] | length])
    for tag, fmt, limit in zip(tags, (">B", ">H", ">I"), (2**8, 2**16, 2**32), strict=True):
        if tag is not None and length < limit:
            return bytes([tag]) + struct.pack(fmt, length)
    raise ValueError(length)


def encode(value) -> bytes:
    if value is None:
        return b"\xc0"
    if value is False:
        return b"\xc2"
    if value is True:
        return b"\xc3"
    if isinstance(value, int):
        return _int(value)
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return _sized(len(raw), (0xA0, 32), (0xD9, 0xDA, 0xDB)) + raw
    if isinstance(value, bytes):
        return _sized(len(value), None, (0xC4, 0xC5, 0xC6)) + value
    if isinstance(value, list):
        head = _sized(len(value), (0x90, 16), (None, 0xDC, 0xDD))
        return head + b"".join(encode(v) for v in value)
    if isinstance(value, dict):
        head = _sized(len(value), (0x80, 16), (None, 0xDE, 0xDF))
        items = sorted(value.items(), key=lambda kv: kv[0].encode("utf-8"))
        return head + b"".join(encode(k) + encode(v) for k, v in items)
    raise TypeError(type(value))


def oid(kind: str, body: bytes) -> str:
    return hashlib.sha256(kind.encode() + b" " + str(len(body)).encode() + b"\0" + body).hexdigest()


@given(records)
def test_canonical_encoding_matches_the_document(value):
    body = encode(value)
    assert codec.encode(value) == body
    assert hash_object("record", body) == oid("record", body)


def test_documented_example_oid():
    assert oid("blob", b"hello\n") == (
        "2cf8d83d9ee29543b34a87727421fdecb7e3f3a183d337639025de576db9ebb4"
    )
    assert hash_object("blob", b"hello\n") == oid("blob", b"hello\n")


def test_boundaries():
    for n in (
        0,
        127,
        128,
        255,
        256,
        65535,
        65536,
        2**32 - 1,
        2**32,
        2**64 - 1,
        -1,
        -32,
        -33,
        -128,
        -129,
        -32768,
        -32769,
        -(2**31),
        -(2**31) - 1,
        -(2**63),
    ):
        assert codec.encode({"n": n}) == encode({"n": n}), n
    for size in (0, 31, 32, 255, 256, 65535, 65536):
        assert codec.encode({"s": "x" * size}) == encode({"s": "x" * size}), size
        assert codec.encode({"b": b"x" * size}) == encode({"b": b"x" * size}), size
    for size in (15, 16, 65535, 65536):
        assert codec.encode({"a": [0] * size}) == encode({"a": [0] * size}), size
        many = {f"k{i:06d}": 0 for i in range(size)}
        assert codec.encode(many) == encode(many), size
