"""fsck's phases on their own: each finds what it is for, and hands the next what it listed."""

from __future__ import annotations

import os

from tests.conftest import note
from yyb.store import gc
from yyb.store.fsck import layout, objects, packs, reachability, refs
from yyb.store.fsck.run import fsck


def listed(store) -> tuple[packs.Listing, list]:
    listing = packs.Listing()
    found = list(layout.check_layout(store, 0.0, listing))
    return listing, found


def test_the_layout_phase_lists_loose_objects_and_names_a_stray_file(disk_store):
    blob = disk_store.objects.put("blob", b"one\n")
    with open(os.path.join(disk_store.path, "objects", "stray"), "w") as handle:
        handle.write("x")
    listing, found = listed(disk_store)
    assert listing.present == [blob] and listing.loose == {blob}
    assert [(f.code, f.subject) for f in found] == [("stray-file", "objects/stray")]


def test_the_layout_phase_verifies_each_pack_and_the_objects_phase_skips_its_blobs(disk_store):
    blob = disk_store.objects.put("blob", b"packed\n")
    disk_store.refs.update("refs/notes/p", disk_store.objects.put_record(note("p", log=blob)))
    gc.gc(disk_store)
    listing, found = listed(disk_store)
    assert found == [] and len(listing.verified) == 1
    assert blob in listing.checked_blobs and blob in listing.present
    assert list(packs.relist_packs(disk_store.path, listing)) == []  # nothing vanished
    assert list(objects.check_objects(disk_store, listing)) == []
    assert (blob,) in listing.edges.values()  # the record's link (its ref's updates link too)


def test_the_objects_phase_names_a_link_to_a_missing_object(store):
    missing = "ab" * 32
    record = store.objects.put_record(note("dangling link", log=missing))
    listing = packs.Listing(present=[record])
    found = [(f.code, f.subject) for f in objects.check_objects(store, listing)]
    assert found == [("broken-link", record)]


def test_the_refs_phase_gathers_roots_and_names_a_ref_at_a_missing_object(store):
    record = store.objects.put_record(note("kept"))
    store.refs.update("refs/notes/k", record)
    roots: list[str] = []
    assert list(refs.check_refs(store, {record}, roots)) == []
    assert record in roots and store.refs.log_head("refs/notes/k") in roots
    found = [(f.code, f.subject) for f in refs.check_refs(store, set(), [])]
    assert ("ref-missing-object", "refs/notes/k") in found


def test_the_reachability_phase_reports_what_no_root_reaches():
    edges = {"a": ("b",), "b": (), "c": ("b",)}
    found = reachability.check_reachable(["a", "b", "c"], ["a"], edges)
    assert [(f.level, f.code, f.subject) for f in found] == [("info", "dangling", "c")]


def test_the_phases_in_order_are_fsck(store):
    blob = store.objects.put("blob", b"log\n")
    store.refs.update("refs/notes/n", store.objects.put_record(note("n", log=blob)))
    store.objects.put("blob", b"unreachable\n")
    assert [(f.level, f.code) for f in fsck(store)] == [("info", "dangling")]
