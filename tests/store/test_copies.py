"""Every copy of an object is checked: a loose file that shadows a packed object and does not
verify (empty, or one byte flipped) is read past by every reader, never returned, and reported
by doctor and verify-chain as a bad copy; with no good copy a reader fails."""

from __future__ import annotations

import os

import pytest

from tests.conftest import Yyb, damage_packed, flip_byte, note
from yyb.errors import CorruptObject
from yyb.store import gc
from yyb.store.bundle import exchange as bundle
from yyb.store.fsck import fsck, inspect
from yyb.store.repo import Store


def packed_store(path: str) -> tuple[Store, str, str]:
    """A store whose blob and record (the record links the blob, a ref names the record) all
    lie in one pack, nothing loose: (store, blob oid, record oid)."""
    store, _ = Store.init(path)
    blob = store.objects.put("blob", b"the evidence itself\n")
    record = store.objects.put_record(note("kept", blob=blob))
    store.refs.update("refs/notes/kept", record)
    gc.gc(store)
    assert gc.count(store)["loose"] == 0
    return store, blob, record


def shadow(store: Store, oid: str, how: str) -> str:
    """Plant a loose copy of packed ``oid`` that does not verify: an empty file, or the
    object's bytes with one byte flipped (XOR 0xFF); its path."""
    path = store.objects.path(oid)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(b"" if how == "empty" else store.objects.read_raw(oid))
    if how == "flipped":
        flip_byte(path)
    return path


CASES = [(how, which) for how in ("empty", "flipped") for which in ("blob", "record")]


@pytest.mark.parametrize(("how", "which"), CASES)
def test_readers_read_past_a_bad_loose_copy_to_the_packed_one(tmp_path, how, which):
    store, blob, record = packed_store(str(tmp_path / "s"))
    oid = blob if which == "blob" else record
    good = store.objects.read_raw(oid)
    shadow(store, oid, how)
    for fresh in (Store.open(store.path), store):  # packs not yet opened, and opened
        assert fresh.objects.get(oid).check() is None
        assert fresh.objects.get_small(oid) is not None
        kind, size, stream = fresh.objects.open_body(oid)
        with stream:
            assert good.endswith(stream.read()) and size == len(good) - good.index(b"\0") - 1
        if which == "record":
            assert fresh.objects.read_record(oid)["message"] == "kept"
    yyb = Yyb(store.path)
    assert yyb("cat-object", "-e", oid).exit_code == 0
    shown = yyb("cat-object", "--raw", oid)
    assert shown.exit_code == 0 and good.endswith(shown.stdout_bytes)


@pytest.mark.parametrize(("how", "which"), CASES)
def test_doctor_and_verify_chain_report_the_bad_copy(tmp_path, how, which):
    store, blob, record = packed_store(str(tmp_path / "s"))
    oid = blob if which == "blob" else record
    shadow(store, oid, how)
    rel = f"objects/{oid[:2]}/{oid[2:]}"
    yyb = Yyb(store.path)
    for args in (("doctor",), ("verify-chain", "refs/notes/kept"), ("verify-chain", record)):
        result = yyb(*args)
        assert result.exit_code == 1, (args, result.stdout, result.stderr)
        bad = [line for line in result.lines if line.startswith(f"error bad-copy {oid}: ")]
        assert len(bad) == 1 and rel in bad[0], (args, result.stdout)
    found = inspect(Store.open(store.path), oid)
    assert [f.code for f in found.findings] == ["bad-copy"] and found.proved


def test_each_bad_copy_is_one_finding_and_no_good_copy_fails_every_reader(tmp_path):
    store, blob, record = packed_store(str(tmp_path / "s"))
    damage_packed(store, b"the evidence")  # the pack's copy of the blob: one byte flipped
    shadow(Store.open(store.path), blob, "empty")
    again = Store.open(store.path)
    with pytest.raises(CorruptObject):
        again.objects.get(blob)
    assert Yyb(store.path)("cat-object", "-e", blob).exit_code == 1
    found = inspect(again, blob)
    assert not found.proved and len(found.findings) == 2  # the loose copy, the packed copy
    lines = [f.line() for f in fsck(again) if f.level == "error"]
    assert any(line.startswith("error bad-pack objects/pack/") for line in lines), lines


def test_a_good_loose_copy_stands_in_for_a_damaged_packed_one(tmp_path):
    store, blob, record = packed_store(str(tmp_path / "s"))
    good = store.objects.read_raw(blob)
    damage_packed(store, b"the evidence")
    again = Store.open(store.path)
    path = again.objects.path(blob)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(good)
    again.objects.packs()  # opened: a reader now tries the pack first
    assert again.objects.get(blob).body == b"the evidence itself\n"
    found = inspect(again, blob)
    assert found.proved and [f.code for f in found.findings] == ["bad-copy"]
    assert "objects/pack/pack-" in found.findings[0].detail


@pytest.mark.parametrize("how", ["empty", "flipped"])
def test_bundle_create_reads_the_good_copy(tmp_path, how):
    store, blob, record = packed_store(str(tmp_path / "s"))
    shadow(store, blob, how)
    path = str(tmp_path / "out.bundle")
    assert bundle.create(Store.open(store.path), path, bundle.ref_tips(store, ["notes/kept"])) == 3
    assert bundle.verify(path).objects == 3
