"""Importing over a local copy that does not verify: the bundle's bytes replace it (atomically),
the import says so, and no incoming object is skipped only because a file of its name exists.
A bundle holding an object that nothing in it reaches is refused."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tests.bundle.forge import Forge, accepted, refused, write
from tests.conftest import Yyb, damage_packed, flip_byte, note
from yyb.store import gc
from yyb.store.bundle import exchange as bundle
from yyb.store.fsck import fsck
from yyb.store.repo import Store


def source(tmp_path: Path) -> tuple[str, str, str]:
    """A bundle of one ref naming a record that links a blob: (its path, blob, record)."""
    store, _ = Store.init(str(tmp_path / "source"))
    blob = store.objects.put("blob", b"the evidence itself\n")
    record = store.objects.put_record(note("kept", blob=blob))
    store.refs.update("refs/notes/kept", record)
    path = str(tmp_path / "kept.bundle")
    bundle.create(store, path, bundle.ref_tips(store, ["notes/kept"]))
    return path, blob, record


def damage(store: Store, oid: str, how: str) -> None:
    """Leave the loose file of ``oid`` empty, or with one byte flipped (XOR 0xFF)."""
    path = store.objects.path(oid)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if how == "empty":
        if os.path.exists(path):
            os.chmod(path, 0o644)
        open(path, "wb").close()
    else:
        flip_byte(path)


def whole(store: Store, oid: str) -> bool:
    """The loose file of ``oid`` holds exactly its stored bytes (sha256sum equals its name)."""
    with open(store.objects.path(oid), "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest() == oid


def errors(store: Store) -> list[str]:
    return [f.line() for f in fsck(store) if f.level == "error"]


@pytest.mark.parametrize("packed", [False, True], ids=["loose", "shadowing-a-pack"])
@pytest.mark.parametrize("how", ["empty", "flipped"])
def test_unbundle_replaces_a_local_copy_that_does_not_verify(tmp_path, how, packed):
    path, blob, record = source(tmp_path)
    target, _ = Store.init(str(tmp_path / "target"))
    bundle.unbundle(target, path)
    if packed:
        gc.gc(target)
        os.makedirs(os.path.dirname(target.objects.path(blob)), exist_ok=True)
        with open(target.objects.path(blob), "wb") as handle:  # a loose copy over the pack
            handle.write(target.objects.read_raw(blob))
    damage(target, blob, how)
    if not packed:
        damage(target, record, how)
    result = Yyb(target.path)("bundle", "unbundle", path)
    assert result.exit_code == 0, result.stderr
    wanted = [blob] if packed else sorted([blob, record])
    lines = [line for line in result.lines if line.startswith("replaced ")]
    assert lines == [f"replaced {oid} objects/{oid[:2]}/{oid[2:]}" for oid in wanted]
    assert result.lines[-1].endswith(" refs/notes/kept up-to-date")
    again = Store.open(target.path)
    assert all(whole(again, oid) for oid in wanted)
    assert errors(again) == []
    assert Yyb(target.path)("bundle", "unbundle", path).lines == [result.lines[-1]]  # now whole


def test_a_damaged_packed_copy_gets_a_good_loose_copy_beside_it(tmp_path):
    path, blob, record = source(tmp_path)
    target, _ = Store.init(str(tmp_path / "target"))
    bundle.unbundle(target, path)
    pack = damage_packed(target, b"the evidence")
    imported = bundle.unbundle(Store.open(target.path), path)
    rel = os.path.relpath(pack, target.path)
    assert [(r.oid, r.copy) for r in imported.replaced] == [(blob, rel)]
    again = Store.open(target.path)
    assert whole(again, blob) and again.objects.get(blob).body == b"the evidence itself\n"
    assert any(line.startswith(f"error bad-pack {rel}: ") for line in errors(again))


def test_a_bundle_holding_an_object_nothing_reaches_is_refused(tmp_path):
    forge = Forge()
    kept = forge.record({"schema_version": "yyb_note.v1", "message": "kept"})
    forge.ref("refs/notes/kept", kept)
    accepted(tmp_path, forge.build_pack())
    forge.blob(b"smuggled: no ref or link reaches it\n")
    for data in (forge.build_pack(), Forge(**{**forge.__dict__, "version": 1}).build()):
        refused(tmp_path, write(tmp_path, data), 1, "nothing in the bundle reaches it")


def test_a_large_blob_is_compared_and_replaced_as_a_stream(tmp_path):
    store, _ = Store.init(str(tmp_path / "source"))
    big = store.objects.put("blob", os.urandom((16 << 20) + 1))  # past the spill threshold
    store.refs.update("refs/notes/big", store.objects.put_record(note("big", blob=big)))
    path = str(tmp_path / "big.bundle")
    bundle.create(store, path, bundle.ref_tips(store, ["notes/big"]))
    target, _ = Store.init(str(tmp_path / "target"))
    bundle.unbundle(target, path)
    assert bundle.unbundle(target, path).replaced == []  # whole: compared, nothing written
    flip_byte(target.objects.path(big), 1 << 20)
    imported = bundle.unbundle(target, path)
    assert [(r.oid, r.copy) for r in imported.replaced] == [(big, f"objects/{big[:2]}/{big[2:]}")]
    assert whole(target, big) and errors(Store.open(target.path)) == []
