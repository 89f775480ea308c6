"""Redaction finds every form of a secret wherever it sits, and the streaming path agrees with
the whole-data one."""

from __future__ import annotations

import base64
import os
import urllib.parse

from hypothesis import example, given
from hypothesis import strategies as st

from yyb.harness import redaction
from yyb.harness.redaction import Redactor

SECRET = "tok-3f9a~~~??? @+é"
MARK = b"[REDACTED:T]"


def encoded(secret: str) -> list[tuple[bytes, int]]:
    """Encoded texts a program could print, each with the secret somewhere inside, and how
    many of their characters may survive redaction (those of the text around the secret, and
    at most two at either end of the secret's own)."""
    raw = secret.encode()
    out = []
    for prefix in (b"", b"a", b"ab", b"abc"):
        for suffix in (b"", b"z", b"zz"):
            around = -(-4 * (len(prefix) + len(suffix)) // 3) + 4 + 2  # + "=" padding
            out.append((base64.b64encode(prefix + raw + suffix), around))
            out.append((base64.urlsafe_b64encode(prefix + raw + suffix).rstrip(b"="), around))
    out += [(raw.hex().encode(), 0), (raw.hex().upper().encode(), 0)]
    for text in (
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote_plus(secret),
        urllib.parse.quote(secret, safe="").lower(),
    ):
        out.append((text.encode(), 0))
    return out


def test_every_common_encoding_is_redacted_at_every_alignment():
    redactor = Redactor({"T": SECRET})
    for text, around in encoded(SECRET):
        data = b"before " + text + b" after"
        redacted = redactor.redact(data)
        assert MARK in redacted, text
        kept = len(redacted) - len(b"before ") - len(b" after") - len(MARK)
        assert kept <= around, (text, redacted)
        assert redactor.found(data) == {"T"}


def test_short_encoded_forms_are_not_searched_but_the_raw_value_is():
    redactor = Redactor({"S": "ab"})
    assert redactor.redact(b"xx ab yy YWI= 6162") == b"xx [REDACTED:S] yy YWI= 6162"


def test_keys_and_values_are_redacted_and_colliding_keys_both_kept():
    redactor = Redactor({"T": SECRET})
    value = {"usage": {SECRET: 1, "[REDACTED:T]": 2, "n": 3}, "list": [SECRET, 4]}
    assert redactor.holds(value)
    clean = redactor.value(value)
    assert not redactor.holds(clean)
    assert clean["list"] == ["[REDACTED:T]", 4]
    assert sorted(clean["usage"].items()) == [
        ("[REDACTED:T]", 2),
        ("[REDACTED:T] #2", 1),
        ("n", 3),
    ]


def test_a_secret_holding_another_is_replaced_whole():
    redactor = Redactor({"LONG": "abcdefgh-12345", "SHORT": "abcdefgh"})
    assert redactor.redact(b"<abcdefgh-12345|abcdefgh>") == (b"<[REDACTED:LONG]|[REDACTED:SHORT]>")


@given(
    chunks=st.lists(st.binary(max_size=40), max_size=8),
    places=st.lists(st.integers(min_value=0, max_value=7), max_size=4),
    chunk=st.integers(min_value=1, max_value=64),
)
@example(chunks=[b"x" * 30, b"y" * 30], places=[1], chunk=5)
def test_streamed_redaction_equals_whole_redaction(tmp_path_factory, chunks, places, chunk):
    redactor = Redactor({"T": SECRET, "U": "0123456789"})
    forms = [SECRET.encode(), base64.b64encode(SECRET.encode()), b"0123456789"]
    parts = list(chunks)
    for n, place in enumerate(places):
        parts.insert(min(place, len(parts)), forms[n % len(forms)])
    data = b"".join(parts)
    path = tmp_path_factory.mktemp("stream") / "data"
    path.write_bytes(data)
    original = redaction.CHUNK
    redaction.CHUNK = chunk
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            out: list[bytes] = []
            written = redactor.copy_redacted(fd, len(data), out.append)
            found = redactor.found_in_file(fd, len(data))
        finally:
            os.close(fd)
    finally:
        redaction.CHUNK = original
    assert b"".join(out) == redactor.redact(data)
    assert written == len(redactor.redact(data))
    assert found == redactor.found(data)


def test_holes_of_a_sparse_file_are_skipped_and_data_after_them_searched(tmp_path):
    path = tmp_path / "sparse"
    with open(path, "wb") as handle:
        handle.truncate(64 << 20)
        handle.seek(40 << 20)
        handle.write(b"..." + SECRET.encode() + b"...")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert Redactor({"T": SECRET}).found_in_file(fd, 64 << 20) == {"T"}
        assert Redactor({"T": "absent-secret"}).found_in_file(fd, 64 << 20) == set()
    finally:
        os.close(fd)


def _b64_variants(raw: bytes):
    """Every way a program could print ``raw`` in base64: inside 0 to 4 bytes before and
    after it, in both alphabets, padded and unpadded; with how much of the text is the
    others' alone (the characters wholly inside the bytes before and after)."""
    for prefix in (b"", b"a", b"ab", b"abc", b"abcd"):
        for suffix in (b"", b"z", b"zy", b"zyx", b"zyxw"):
            for encode in (base64.b64encode, base64.urlsafe_b64encode):
                text = encode(prefix + raw + suffix)
                head = 8 * len(prefix) // 6
                tail = -(-8 * (len(prefix) + len(raw)) // 6)
                kept = text[:head], text[tail:].lstrip(b"=")
                yield text, kept
                yield text.rstrip(b"="), (kept[0], kept[1].rstrip(b"="))


@example(secret="OPS-TOKEN-8d1c7f4")
@given(secret=st.text(min_size=8, max_size=24))
def test_base64_redaction_covers_the_whole_secret(secret):
    """No character that holds a bit of the secret survives, at any alignment or padding:
    what stays is the text around it, and nothing of the secret's own."""
    redactor = Redactor({"T": secret})
    for text, (head, tail) in _b64_variants(secret.encode()):
        redacted = redactor.redact(b"<" + text + b">")
        assert redacted == b"<" + head + MARK + tail + b">", (text, redacted)
