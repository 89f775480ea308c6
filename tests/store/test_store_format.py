"""The store format's version: 2 may hold packs and packed refs; a version 1 store is read as
it is and becomes version 2 before its first pack or packed-refs file is written, so that a
reader knowing only version 1 refuses it instead of missing what those files hold."""

from __future__ import annotations

import os

import pytest

from tests.conftest import note
from yyb.errors import StoreNotFound
from yyb.store import gc, repo
from yyb.store.objects import pack
from yyb.store.refs import packed as packrefs
from yyb.store.repo import FORMAT_FILE, FORMAT_TEXTS, Store


def format_of(store: Store) -> str:
    with open(os.path.join(store.path, FORMAT_FILE)) as handle:
        return handle.read()


def version_1_store(path: str) -> Store:
    store, _ = Store.init(path)
    with open(os.path.join(path, FORMAT_FILE), "w") as handle:
        handle.write(FORMAT_TEXTS[1])
    store = Store.open(path)
    blob = store.objects.put("blob", b"kept")
    store.refs.update("refs/notes/kept", store.objects.put_record(note("kept", blob=blob)))
    return store


def test_a_new_store_is_version_2(tmp_path):
    store, _ = Store.init(str(tmp_path / "s"))
    assert format_of(store) == "yyb-store 2\nhash sha256\n"
    assert Store.open(store.path).format_version == 2


@pytest.mark.parametrize("how", ["gc", "repack", "pack-refs"])
def test_a_version_1_store_becomes_version_2_before_its_first_pack(tmp_path, monkeypatch, how):
    store = version_1_store(str(tmp_path / "s"))
    assert Store.open(store.path).format_version == 1
    assert format_of(store) == FORMAT_TEXTS[1]  # ordinary writes leave it as it is
    seen = []
    write, serialize_write = pack.write, packrefs.PackedRefs.write

    def pack_write(*args, **kwargs):
        seen.append(format_of(store))
        return write(*args, **kwargs)

    def refs_write(self, data):
        seen.append(format_of(store))
        return serialize_write(self, data)

    monkeypatch.setattr(pack, "write", pack_write)
    monkeypatch.setattr(packrefs.PackedRefs, "write", refs_write)
    {"gc": gc.gc, "repack": gc.repack, "pack-refs": packrefs.pack_refs}[how](store)
    assert seen and set(seen) == {FORMAT_TEXTS[2]}  # marked before the first file is written
    assert Store.open(store.path).format_version == 2


def test_a_reader_that_knows_only_version_1_refuses_a_packed_store(tmp_path, monkeypatch):
    store = version_1_store(str(tmp_path / "s"))
    gc.gc(store)
    monkeypatch.setattr(repo, "FORMAT_TEXTS", {1: FORMAT_TEXTS[1]})
    with pytest.raises(StoreNotFound, match="unknown store format 'yyb-store 2'"):
        Store.open(store.path)


def test_doctor_notes_a_version_1_store_that_holds_packs(tmp_path):
    """A store packed by a build that did not mark it: a note (an older reader would miss
    what the pack holds), gone after the next gc."""
    from yyb.store.fsck import fsck

    store = version_1_store(str(tmp_path / "s"))
    assert [f.code for f in fsck(Store.open(store.path)) if f.code == "old-format"] == []
    os.makedirs(store.objects.pack_folder)
    items = sorted((oid, store.objects.read_raw(oid)) for oid in store.objects.iter_oids())
    pack.write(store.objects.pack_folder, items)  # as an unmarking build's gc would
    found = [f for f in fsck(Store.open(store.path)) if f.code == "old-format"]
    assert [(f.level, f.subject) for f in found] == [("info", "format")]
    gc.gc(Store.open(store.path))
    assert [f for f in fsck(Store.open(store.path)) if f.code == "old-format"] == []
