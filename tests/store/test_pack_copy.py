"""A pack copied in pieces from objects that lie one after another (``pack.write_copy``, what a
fetch of a pack-form bundle lands): the same pack ``pack.write`` makes, each object proved on
the copy written, and nothing left behind by a span that lies."""

from __future__ import annotations

import hashlib
import os
import random

import pytest

from tests.bundle.test_pack_form import _packs, _store_with
from yyb.errors import CorruptBundle, CorruptObject
from yyb.store.bundle import exchange as bundle
from yyb.store.fsck import fsck
from yyb.store.objects import pack
from yyb.store.repo import Store


def _laid_out(count: int, seed: int = 7) -> tuple[bytes, list[tuple[str, bytes]], list]:
    """``count`` stored blobs in oid order after a 5-byte prefix; (bytes, items, spans)."""
    rng = random.Random(seed)
    found = {}
    for i in range(count):
        body = rng.randbytes(rng.choice([1, 40, 700, 3000])) + b"%d" % i
        stored = b"blob %d\x00" % len(body) + body
        found[hashlib.sha256(stored).hexdigest()] = stored
    items = sorted(found.items())
    data, spans, at = bytearray(b"xxxxx"), [], 5
    for oid, stored in items:
        data += stored
        spans.append((bytes.fromhex(oid), at, at + len(stored)))
        at += len(stored)
    return bytes(data), items, spans


def _files(folder) -> list[str]:
    return sorted(os.listdir(folder))


@pytest.mark.parametrize("piece", [1, 64, 5000, pack.COPY_PIECE])
def test_the_copy_is_the_pack_write_makes_whatever_the_piece(tmp_path, monkeypatch, piece):
    """Pieces smaller than an object, a few objects, or all of them: the same bytes."""
    data, items, spans = _laid_out(300)
    written, copied = tmp_path / "written", tmp_path / "copied"
    written.mkdir()
    copied.mkdir()
    expected = pack.write(str(written), items)
    monkeypatch.setattr(pack, "COPY_PIECE", piece)
    got = pack.write_copy(str(copied), memoryview(data), spans)
    assert os.path.basename(got) == os.path.basename(expected)
    for name in _files(written):
        assert (copied / name).read_bytes() == (written / name).read_bytes()
    assert _files(copied) == _files(written)  # a pack and its index, no temporary file
    opened = pack.Pack.open(got)
    assert [opened.read(oid) for oid, _ in items] == [stored for _, stored in items]


def test_a_span_whose_bytes_do_not_hash_to_its_oid_lands_nothing(tmp_path):
    data, _, spans = _laid_out(50)
    damaged = bytearray(data)
    damaged[spans[30][2] - 1] ^= 0x01  # the last byte of one object
    with pytest.raises(CorruptObject) as raised:
        pack.write_copy(str(tmp_path), memoryview(bytes(damaged)), spans)
    assert raised.value.oid == spans[30][0].hex()
    assert _files(tmp_path) == []


@pytest.mark.parametrize(
    "lie",
    [
        lambda s: s[:10] + s[11:],  # a gap: one object skipped
        lambda s: s[:10] + [s[11], s[10]] + s[12:],  # two swapped
        lambda s: s[:10] + [s[10], s[10]] + s[11:],  # one twice
        lambda s: [],
    ],
    ids=["gap", "swapped", "twice", "empty"],
)
def test_spans_out_of_order_or_not_one_after_another_are_refused(tmp_path, lie):
    data, _, spans = _laid_out(20)
    with pytest.raises(ValueError):
        pack.write_copy(str(tmp_path), memoryview(data), lie(spans))
    assert _files(tmp_path) == []


def test_a_fetched_bundle_lands_as_the_copied_pack_and_verifies(tmp_path):
    """An import into a store lacking every object takes the copying path; the store it
    leaves is clean and reads every object."""
    source = _store_with(tmp_path, bundle.UNPACK_LIMIT * 3)
    path = str(tmp_path / "b.bundle")
    bundle.create(source, path, bundle.ref_tips(source, ["refs/x"]))
    target = Store.init(str(tmp_path / "target"))[0]
    bundle.unbundle(target, path)
    assert len(_packs(target)) == 1
    assert [f for f in fsck(Store.open(target.path)) if f.level == "error"] == []
    for oid in bundle.verify(path).oids:
        assert target.objects.read_raw(oid) == source.objects.read_raw(oid)


def test_a_bundle_changed_between_the_check_and_the_copy_is_refused(tmp_path, monkeypatch):
    """The attacker rewrites the file after it verified, keeping its length: the copy's
    proof names the file, and the store gets no pack and no ref."""
    source = _store_with(tmp_path, bundle.UNPACK_LIMIT * 2)
    path = str(tmp_path / "b.bundle")
    bundle.create(source, path, bundle.ref_tips(source, ["refs/x"]))
    real = pack.write_copy

    def rewrite_first(folder, view, spans):
        with open(path, "r+b") as handle:  # the mapping sees the change
            handle.seek(spans[0][2] - 1)
            byte = handle.read(1)
            handle.seek(spans[0][2] - 1)
            handle.write(bytes([byte[0] ^ 0xFF]))
        return real(folder, view, spans)

    monkeypatch.setattr(pack, "write_copy", rewrite_first)
    target = Store.init(str(tmp_path / "target"))[0]
    with pytest.raises(CorruptBundle, match="changed while it was being imported"):
        bundle.unbundle(target, path)
    assert _packs(target) == [] and target.refs.names() == []
    assert os.listdir(os.path.join(target.path, "objects", "pack")) == []
