"""The batch readers' path through a pack (Pack.blob_bodies, ObjectStore.blob_bodies): it
hands out only blobs whose bytes hash to their oid, and leaves everything else to ``get``,
whichever way the pack is searched (mapped index, bisect, dict)."""

from __future__ import annotations

import hashlib
import os
import time

import pytest

from tests.conftest import damage_packed, note
from yyb.errors import CorruptObject
from yyb.store.objects import pack
from yyb.store.objects.format import header
from yyb.store.repo import Store


def stored(kind: str, body: bytes) -> tuple[str, bytes]:
    data = header(kind, len(body)) + body
    return hashlib.sha256(data).hexdigest(), data


def hostile_pack(folder: str) -> tuple[pack.Pack, dict[str, bytes | None]]:
    """A pack of good blobs, a record, and entries that hash to their oid but are not
    well-formed blobs; with what blob_bodies must give for each (None: left to ``get``)."""
    items, expected = hostile_items()
    path = pack.write(folder, sorted(items.items()))
    return pack.Pack.open(path), expected


def hostile_items() -> tuple[dict[str, bytes], dict[str, bytes | None]]:
    """The entries of ``hostile_pack`` (oid: stored bytes), and what each must give."""
    items = {}
    expected: dict[str, bytes | None] = {}
    for i in range(200):
        body = os.urandom(i % 50) + b"%d" % i
        oid, data = stored("blob", body)
        items[oid], expected[oid] = data, body
    empty_oid, empty = stored("blob", b"")
    items[empty_oid], expected[empty_oid] = empty, b""
    from yyb.store.objects import codec

    record_oid, record = stored("record", codec.encode(note("r")))
    items[record_oid], expected[record_oid] = record, None
    for bad in (b"blob 03\0abc", b"blob 3 \0abc", b"BLOB 3\0abc", b"blob -3\0abc", b"blob\0"):
        oid = hashlib.sha256(bad).hexdigest()  # hashes right, but is no well-formed object
        items[oid], expected[oid] = bad, None
    return items, expected


@pytest.mark.parametrize("batch", [1, 10, 1000])
def test_only_well_formed_blobs_that_hash_to_their_oid_come_back(tmp_path, batch):
    held, expected = hostile_pack(str(tmp_path))
    absent = [hashlib.sha256(b"%d" % i).hexdigest() for i in range(5)]
    names = [*expected, *absent]
    got: list = []
    tables = []
    for start in range(0, len(names), batch):  # a few lookups search, many build a dict
        part = [n.encode() for n in names[start : start + batch]]
        found = [None] * len(part)
        held.blob_bodies(part, found)
        got += found
        tables.append(held._table is not None)
    for name, body in zip(names, got, strict=True):
        want = expected.get(name)
        assert (None if body is None else bytes(body)) == want, name
    assert tables[-1] and tables[0] == (batch == 1000)
    held.close()  # views are still held in ``got``: the map stays until they go
    assert bytes(next(body for body in got if body)) in expected.values()


def test_a_damaged_blob_in_a_pack_is_left_to_get_which_refuses_it(tmp_path):
    store, _ = Store.init(str(tmp_path / "s"))
    blob = store.objects.put("blob", b"kept body")
    damage_packed(store, b"kept body")
    again = Store.open(store.path)
    again.objects.packs()
    assert again.objects.blob_bodies([blob.encode(), None]) == [None, None]
    with pytest.raises(CorruptObject):
        again.objects.get(blob)


def test_the_memory_store_leaves_every_name_to_get():
    store = Store.memory()
    blob = store.objects.put("blob", b"x")
    assert store.objects.blob_bodies([blob.encode()]) == [None]


def test_a_pack_removed_between_listing_and_opening_is_passed_over(tmp_path, monkeypatch):
    """A repack writes its pack before it removes the ones it replaces: a reader that listed
    a pack now gone lists again, and finds the objects in the new one; a damaged pack is
    still an error."""
    from yyb.store import gc

    store, _ = Store.init(str(tmp_path / "s"))
    first = store.objects.put("blob", b"first")
    gc.gc(store)
    second = store.objects.put("blob", b"second")
    gc.gc(store)
    folder = store.objects.pack_folder
    real = pack.pack_paths(folder)
    assert len(real) == 2
    gone = os.path.join(folder, "pack-" + "0" * 64 + ".pack")
    listings = iter([[gone, real[0]], real])
    monkeypatch.setattr(pack, "pack_paths", lambda _folder: next(listings, real))
    reader = Store.open(store.path)
    assert sorted(p.path for p in reader.objects.packs(rescan=True)) == real
    assert reader.objects.get(first).body == b"first"
    assert reader.objects.get(second).body == b"second"
    with open(gone, "wb") as handle:
        handle.write(b"not a pack")
    with open(gone[:-5] + ".idx", "wb") as handle:
        handle.write(b"not an index")
    monkeypatch.setattr(pack, "pack_paths", lambda _folder: [gone, *real])
    with pytest.raises(CorruptObject):
        Store.open(store.path).objects.packs(rescan=True)


def test_doctor_beside_a_repack_that_removed_packs_it_had_listed(tmp_path, monkeypatch):
    """doctor lists the packs, a repack replaces them (its own pack in place first): the
    vanished packs are no finding, and the new one is listed and checked."""
    from yyb.store import fsck, gc
    from yyb.store.fsck import layout

    store, _ = Store.init(str(tmp_path / "s"))
    kept = store.objects.put_record(note("kept", blob=store.objects.put("blob", b"one")))
    store.refs.update("refs/notes/kept", kept)
    gc.gc(store)
    store.objects.put("blob", b"two")
    gc.gc(store)
    listed = list(layout.layout(store))
    old = [what for kind, what in listed if kind == "pack"]
    assert len(old) == 2
    merged = {}
    for path in old:  # what a consolidation leaves: one new pack of everything, the old gone
        held = pack.Pack.open(path)
        merged.update((oid, held.read(oid)) for oid in held.oids())
        held.close()
    new = pack.write(store.objects.pack_folder, sorted(merged.items()))
    for path in old:
        os.unlink(path[:-5] + ".idx")
        os.unlink(path)
    monkeypatch.setattr(layout, "layout", lambda _store: iter(listed))
    findings = [f.line() for f in fsck.fsck(Store.open(store.path)) if f.level == "error"]
    assert findings == []
    assert os.path.exists(new)


def test_a_rescan_lists_the_pack_folder_only_when_it_may_have_changed(tmp_path, monkeypatch):
    """An unchanged, settled pack folder is not listed again on every miss; a folder changed
    since (or too recently to tell) is."""
    from yyb.store import gc
    from yyb.store.objects import loose

    store, _ = Store.init(str(tmp_path / "s"))
    first = store.objects.put("blob", b"first")
    gc.gc(store)
    listings = []
    real = pack.pack_paths
    monkeypatch.setattr(pack, "pack_paths", lambda folder: listings.append(1) or real(folder))
    reader = Store.open(store.path)
    assert reader.objects.get(first).body == b"first"
    settled = len(listings)
    for _ in range(20):
        assert not reader.objects.contains("0" * 64)
    # The folder was written within SETTLED_NS of the first listing: every miss lists it.
    assert len(listings) > settled + 10
    monkeypatch.setattr(loose, "SETTLED_NS", 0)
    reader = Store.open(store.path)
    reader.objects.packs(rescan=True)
    before = len(listings)
    for _ in range(20):
        assert not reader.objects.contains("0" * 64)
    assert len(listings) == before  # settled and unchanged: not listed again
    time.sleep(0.05)  # past the file system's clock tick: the change shows in the folder's time
    writer = Store.open(store.path)
    second = writer.objects.put("blob", b"second")
    gc.gc(writer)  # a new pack: the folder's time changes
    assert reader.objects.get(second).body == b"second"
    assert len(listings) > before
