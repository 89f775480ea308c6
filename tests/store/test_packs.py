"""Packs: packing changes storage, never identity; every reader reads them; a damaged pack is
refused; gc is durable under SIGKILL and safe beside readers and writers."""

from __future__ import annotations

import hashlib
import os
import re
import struct
import threading
import time

import pytest

from tests.conftest import Yyb, flip_byte, killed_runs, note
from yyb.errors import CorruptObject
from yyb.store import gc
from yyb.store.fsck import fsck
from yyb.store.objects import pack
from yyb.store.repo import Store


def errors(store) -> list[str]:
    return [f.line() for f in fsck(store) if f.level == "error"]


def filled(path: str, count: int = 120) -> tuple[Store, dict[str, bytes]]:
    store, _ = Store.init(path)
    bodies = {}
    for i in range(count):
        body = os.urandom(i * 7 % 3000) + f"{i}".encode()
        bodies[store.objects.put("blob", body)] = body
    big = os.urandom(3 << 20)  # past the streaming threshold
    bodies[store.objects.put("blob", big)] = big
    record = store.objects.put_record(note("kept", **{"blob": next(iter(bodies))}))
    store.refs.update("refs/notes/kept", record)
    return store, bodies


def test_every_reader_reads_packed_objects_as_loose_ones(disk_store, tmp_path):
    store, bodies = filled(str(tmp_path / "s"))
    before = {oid: store.objects.read_raw(oid) for oid in store.objects.iter_oids()}
    done = gc.gc(store)
    assert done.packed == len(before) and done.removed == len(before) and done.skipped == []
    assert gc.count(store)["loose"] == 0
    again = Store.open(store.path)  # a new process's view
    assert list(again.objects.iter_oids()) == sorted(before)
    for oid, raw in before.items():
        assert again.objects.contains(oid)
        assert again.objects.read_raw(oid) == raw
        assert again.objects.get(oid).check() is None
        kind, size, handle = again.objects.open_body(oid)
        with handle:
            assert (
                handle.read() == raw[raw.index(b"\0") + 1 :]
                and size == len(raw) - raw.index(b"\0") - 1
            )
    for oid, body in bodies.items():
        assert again.objects.get(oid).body == body
        assert again.rev_parse(oid[:10]) == oid
    assert not again.objects.contains("0" * 64)
    assert errors(again) == []
    assert gc.gc(again).packed == 0  # nothing loose: no new pack


def test_an_object_written_after_gc_stays_loose_and_a_second_pack_joins(tmp_path):
    store, _ = filled(str(tmp_path / "s"), 10)
    gc.gc(store)
    later = store.objects.put("blob", b"written after")
    assert os.path.exists(store.objects.path(later))
    assert store.objects.put("blob", b"10") is not None  # a packed object: written nowhere
    gc.gc(store)
    assert len(store.objects.packs(rescan=True)) == 2
    assert Store.open(store.path).objects.get(later).body == b"written after"
    assert errors(store) == []


def test_a_loose_object_that_does_not_hash_to_its_name_is_left_for_doctor(tmp_path):
    store, _ = filled(str(tmp_path / "s"), 5)
    oid = store.objects.put("blob", b"to be damaged")
    path = store.objects.path(oid)
    os.chmod(path, 0o644)
    with open(path, "r+b") as handle:
        handle.seek(-1, 2)
        handle.write(b"X")
    done = gc.gc(store)
    assert done.skipped == [oid] and os.path.exists(path)
    assert any(oid in line for line in errors(store))


def read_pack_as_documented(pack_path: str) -> dict[str, bytes]:
    """An independent reader of docs/format.md's pack and index: oid -> stored bytes."""
    index = open(pack_path[:-5] + ".idx", "rb").read()
    data = open(pack_path, "rb").read()
    assert index[:8] == b"YYBIDX\0\0" and data[:8] == b"YYBPACK\0"
    version, count = struct.unpack(">IQ", index[8:20])
    assert version == 1 and struct.unpack(">IQ", data[8:20]) == (1, count)
    assert hashlib.sha256(index[:-32]).digest() == index[-32:]
    assert hashlib.sha256(data[:-32]).digest() == data[-32:] == index[-64:-32]
    fanout = struct.unpack(">256I", index[20 : 20 + 1024])
    oids = [index[1044 + 32 * i : 1076 + 32 * i] for i in range(count)]
    offsets = struct.unpack(f">{count}Q", index[1044 + 32 * count : 1044 + 40 * count])
    assert oids == sorted(oids) and fanout[255] == count
    for b in range(256):
        assert fanout[b] == sum(1 for oid in oids if oid[0] <= b)
    found = {}
    for oid, start in zip(oids, offsets, strict=True):
        nul = data.index(b"\0", start)
        length = int(data[start:nul].split(b" ")[1])
        stored = data[start : nul + 1 + length]
        assert hashlib.sha256(stored).digest() == oid
        found[oid.hex()] = stored
    return found


def test_the_pack_format_is_what_the_docs_say(tmp_path):
    store, _ = filled(str(tmp_path / "s"), 40)
    before = {oid: store.objects.read_raw(oid) for oid in store.objects.iter_oids()}
    done = gc.gc(store)
    assert read_pack_as_documented(done.pack) == before
    assert os.path.basename(done.pack) == f"pack-{open(done.pack, 'rb').read()[-32:].hex()}.pack"


@pytest.mark.parametrize("threaded", [False, True], ids=["hashed-inline", "hashed-in-a-thread"])
def test_every_damaged_byte_of_a_pack_or_its_index_is_refused(tmp_path, monkeypatch, threaded):
    """Also with the whole pack's hash in a thread of its own beside the object checks (as
    verify does for a pack of a mebibyte or more), the message naming the same first fault."""
    if threaded:
        monkeypatch.setattr(pack._Digest, "WHOLE_IN_THREAD", 0)
    store, _ = Store.init(str(tmp_path / "s"))
    for i in range(3):
        store.objects.put("blob", f"object {i}".encode())
    path = gc.gc(store).pack
    said: dict = {}
    for name in (path, path[:-5] + ".idx"):
        original = open(name, "rb").read()
        os.chmod(name, 0o644)
        try:
            for at in range(len(original)):
                damaged = bytearray(original)
                damaged[at] ^= 0x01
                with open(name, "wb") as handle:
                    handle.write(damaged)
                with pytest.raises(CorruptObject) as refused:
                    held = pack.Pack.open(path)
                    try:
                        held.verify()
                    finally:
                        held.close()
                said.setdefault((name, at), str(refused.value))
        finally:
            with open(name, "wb") as handle:
                handle.write(original)
    assert errors(Store.open(store.path)) == []
    if threaded:  # the same words for every damaged byte as when hashed inline
        monkeypatch.setattr(pack._Digest, "WHOLE_IN_THREAD", 1 << 20)
        for (name, at), message in said.items():
            original = open(name, "rb").read()
            damaged = bytearray(original)
            damaged[at] ^= 0x01
            with open(name, "wb") as handle:
                handle.write(damaged)
            try:
                with pytest.raises(CorruptObject, match="^" + re.escape(message) + "$"):
                    held = pack.Pack.open(path)
                    try:
                        held.verify()
                    finally:
                        held.close()
            finally:
                with open(name, "wb") as handle:
                    handle.write(original)


def test_doctor_reports_a_damaged_pack(tmp_path):
    store, _ = filled(str(tmp_path / "s"), 8)
    path = gc.gc(store).pack
    flip_byte(path, 40)  # XOR: writing a fixed 0xff was a no-op when the byte was 0xff
    found = errors(Store.open(store.path))
    assert any(line.startswith("error bad-pack objects/pack/") for line in found), found


def test_readers_and_writers_beside_gc_and_repack_lose_nothing(tmp_path):
    store, bodies = filled(str(tmp_path / "s"), 300)
    stop = threading.Event()
    problems: list[str] = []
    reads: list[int] = []
    written: dict[str, bytes] = {}

    def read() -> None:
        reader = Store.open(store.path)
        while not stop.is_set():
            time.sleep(0.001)  # a reader that never yields the GIL starves gc (a test artefact)
            for oid, body in list(bodies.items())[::7]:
                try:
                    reads.append(1)
                    if reader.objects.get(oid).body != body:
                        problems.append(f"{oid} read wrong")
                except Exception as exc:  # noqa: BLE001 (any failure is the finding)
                    problems.append(f"{oid}: {exc}")

    def write() -> None:
        writer = Store.open(store.path)
        i = 0
        while not stop.is_set():
            time.sleep(0.001)
            body = f"beside gc {i}".encode()
            written[writer.objects.put("blob", body)] = body
            i += 1

    threads = [threading.Thread(target=read) for _ in range(2)] + [threading.Thread(target=write)]
    for thread in threads:
        thread.start()
    try:
        for round_ in range(4):  # gc, then a consolidation, which removes the packs before
            if round_ % 2:
                gc.repack(Store.open(store.path), everything=True, delete=True)
            else:
                gc.gc(Store.open(store.path))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert problems == [] and len(reads) > 200 and len(written) > 20  # they did run beside it
    final = Store.open(store.path)
    for oid, body in {**bodies, **written}.items():
        assert final.objects.get(oid).body == body
    assert errors(final) == []


GC = """
import sys
from yyb.store import gc
from yyb.store.repo import Store
gc.gc(Store.open(sys.argv[1]))
"""

REPACK = """
import sys
from yyb.store import gc
from yyb.store.repo import Store
gc.repack(Store.open(sys.argv[1]), everything=True, delete=True)
"""

# The wrong order, for the sweep to catch: the packs and loose files removed before the new
# pack is written (a consolidation that trusted its copy before it was durable).
REMOVE_FIRST = """
import os, sys
from yyb.store import file, gc
from yyb.store.objects import pack
from yyb.store.repo import Store
store = Store.open(sys.argv[1])
objects = store.objects
held = [pack.Pack.open(p) for p in pack.pack_paths(objects.pack_folder)]
loose = list(objects.loose_oids())
items = {}
for h in held:
    items.update({oid: h.read(oid) for oid in h.oids()})
items.update({oid: open(objects.path(oid), "rb").read() for oid in loose})
gc._remove(objects, loose)
gc._remove_packs([h.path for h in held])
pack.write(objects.pack_folder, sorted(items.items()))
"""


def several_packs(path: str) -> tuple[Store, dict[str, bytes]]:
    """A store with four packs (one holding an object another holds too), loose objects, and
    a loose copy of a packed object."""
    store, bodies = filled(path, 30)
    gc.gc(store)
    for round_ in range(2):
        for i in range(12):
            body = f"pack {round_} object {i}".encode()
            bodies[store.objects.put("blob", body)] = body
        gc.gc(store, pack_limit=0)
    first = next(iter(bodies))
    pack.write(store.objects.pack_folder, [(first, store.objects.read_raw(first))])
    store.objects._write(first, store.objects.read_raw(first))
    for i in range(5):
        body = f"loose {i}".encode()
        bodies[store.objects.put("blob", body)] = body
    assert len(pack.pack_paths(store.objects.pack_folder)) == 4
    assert len(list(store.objects.loose_oids())) == 6
    return store, bodies


def kill_sweep(tmp_path, template: Store, bodies: dict, script: str, finish) -> int | None:
    """Run ``script`` on copies of ``template``, SIGKILLed after its 1st, 2nd, ... durable
    write, until it runs to its end; after each, every object must read back, doctor must be
    clean, and ``finish`` (the next gc) must leave it clean. The first point at which an object
    was lost, or None; the number of points when none was."""
    for point, path, ended in killed_runs(tmp_path, template.path, script):
        store = Store.open(path)
        for oid, body in bodies.items():
            try:
                assert store.objects.get(oid).body == body
            except Exception:  # noqa: BLE001 (a lost or damaged object is the finding)
                return point
        assert errors(store) == [], point
        finish(store)
        assert gc.count(store)["loose"] == 0 and errors(store) == []
        if ended:
            return None if point >= 3 else point


def test_a_gc_killed_at_any_durable_write_leaves_a_clean_store(tmp_path):
    template, bodies = filled(str(tmp_path / "template"), 30)
    assert kill_sweep(tmp_path, template, bodies, GC, gc.gc) is None


def test_a_repack_killed_at_any_durable_write_leaves_a_clean_store(tmp_path):
    template, bodies = several_packs(str(tmp_path / "template"))

    def finish(store):
        gc.repack(store, everything=True, delete=True)
        assert len(pack.pack_paths(store.objects.pack_folder)) == 1

    assert kill_sweep(tmp_path, template, bodies, REPACK, finish) is None
    # The sweep catches a consolidation that removes before its new pack is durable.
    assert kill_sweep(tmp_path / "wrong", template, bodies, REMOVE_FIRST, finish) is not None


def test_repack_all_consolidates_every_pack_into_one(tmp_path):
    store, bodies = several_packs(str(tmp_path / "s"))
    old = pack.pack_paths(store.objects.pack_folder)
    before = {oid: store.objects.read_raw(oid) for oid in store.objects.iter_oids()}
    reader = Store.open(store.path)  # a reader with every old pack mapped
    assert all(reader.objects.get(oid).body == body for oid, body in bodies.items())
    late = Store.open(store.path)  # and one that has read nothing yet
    done = gc.repack(store, everything=True, delete=True)
    assert done.packed == len(before) and done.packs_removed == 4 and done.skipped == []
    assert pack.pack_paths(store.objects.pack_folder) == [done.pack]
    assert not any(os.path.exists(p) or os.path.exists(p[:-5] + ".idx") for p in old)
    assert read_pack_as_documented(done.pack) == before
    assert gc.count(store) | {"loose_bytes": 0, "pack_bytes": 0} == {
        "loose": 0,
        "loose_bytes": 0,
        "packs": 1,
        "packed": len(before),
        "pack_bytes": 0,
    }
    for handle in (reader, late, Store.open(store.path)):
        for oid, body in bodies.items():
            assert handle.objects.get(oid).body == body
    assert errors(store) == []
    again = gc.repack(store, everything=True, delete=True)  # one pack holds everything
    assert (again.packed, again.pack, again.packs_removed) == (0, None, 0)


def test_repack_without_d_removes_nothing_and_without_a_packs_only_the_loose(tmp_path):
    store, _ = several_packs(str(tmp_path / "s"))
    old = pack.pack_paths(store.objects.pack_folder)
    loose = list(store.objects.loose_oids())
    total = len(list(store.objects.iter_oids()))
    kept = gc.repack(store, everything=True)
    assert kept.packed == total and kept.removed == 0 and kept.packs_removed == 0
    assert list(store.objects.loose_oids()) == loose
    assert sorted([*old, kept.pack]) == pack.pack_paths(store.objects.pack_folder)
    assert errors(Store.open(store.path)) == []

    store, _ = several_packs(str(tmp_path / "t"))
    made = gc.repack(store)  # the loose objects no pack holds: 5 (one is packed already)
    assert made.packed == 5 and made.removed == 0 and len(list(store.objects.loose_oids())) == 6
    assert gc.repack(store).pack is None  # nothing new to pack
    deleted = gc.repack(store, delete=True)
    assert deleted.pack is None and deleted.removed == 6 and gc.count(store)["packs"] == 5
    assert errors(Store.open(store.path)) == []


def test_gc_consolidates_past_its_pack_limit(tmp_path, monkeypatch):
    from yyb.errors import UsageError

    store, bodies = filled(str(tmp_path / "s"), 5)
    for i in range(3):
        body = f"round {i}".encode()
        bodies[store.objects.put("blob", body)] = body
        done = gc.gc(store, pack_limit=3)
        assert done.packs_removed == 0 and (done.packed == 1 or i == 0)
    assert gc.count(store)["packs"] == 3  # at the limit, not past it
    total = gc.count(store)["packed"]
    bodies[store.objects.put("blob", b"the last straw")] = b"the last straw"
    done = gc.gc(store, pack_limit=3)  # a 4th pack would pass 3: one pack instead
    assert (done.packed, done.packs_removed, done.removed) == (total + 1, 3, 1)
    assert gc.count(store)["packs"] == 1 and gc.count(store)["loose"] == 0
    assert all(Store.open(store.path).objects.get(o).body == b for o, b in bodies.items())
    assert errors(store) == []
    assert gc.pack_limit({}) == 50 and gc.pack_limit({"YYB_GC_PACK_LIMIT": "0"}) == 0
    for bad in ("many", "-1"):
        with pytest.raises(UsageError):
            gc.pack_limit({"YYB_GC_PACK_LIMIT": bad})
        with pytest.raises(UsageError):  # refused before a run, with the loose threshold
            gc.auto_threshold({"YYB_GC_PACK_LIMIT": bad})
    yyb = Yyb(store.path)
    store.objects.put("blob", b"one more")
    monkeypatch.setenv("YYB_GC_PACK_LIMIT", "1")
    made = yyb("gc")  # 2 packs would pass 1: everything into one
    assert made.exit_code == 0, made.stderr
    assert made.lines[0] == f"{total + 2} objects packed, 1 loose files removed, 1 packs replaced"
    monkeypatch.setenv("YYB_GC_PACK_LIMIT", "lots")
    refused = yyb("gc")
    assert refused.exit_code == 2 and "YYB_GC_PACK_LIMIT" in refused.stderr


def test_a_consolidation_refuses_a_damaged_pack_and_changes_nothing(tmp_path):
    from tests.conftest import flip_byte

    store, _ = several_packs(str(tmp_path / "s"))
    old = pack.pack_paths(store.objects.pack_folder)
    loose = list(store.objects.loose_oids())
    biggest = max(old, key=os.path.getsize)
    # Its middle lies inside the 3 MiB blob's body (the other objects are about 3 KB in all);
    # a small fixed offset would now and then hit a header, as the oids order the entries.
    flip_byte(biggest, os.path.getsize(biggest) // 2)
    with pytest.raises(CorruptObject):
        gc.repack(Store.open(store.path), everything=True, delete=True)
    refused = Yyb(store.path)("repack", "-a", "-d")
    assert refused.exit_code == 1 and refused.stdout == ""
    assert refused.stderr.startswith("yyb: error: ") and len(refused.stderr.splitlines()) == 1
    assert "do not hash to it; nothing was repacked" in refused.stderr
    assert pack.pack_paths(store.objects.pack_folder) == old
    assert sorted(os.listdir(store.objects.pack_folder)) == sorted(
        name for p in old for name in (os.path.basename(p), os.path.basename(p)[:-5] + ".idx")
    )
    assert list(store.objects.loose_oids()) == loose


def test_the_commands(tmp_path):
    store, _ = filled(str(tmp_path / "s"), 6)
    n = len(list(store.objects.iter_oids()))
    yyb = Yyb(store.path)
    counted = yyb("count-objects")
    assert counted.exit_code == 0 and counted.lines[0].startswith(f"{n} objects, ")
    made = yyb("gc")
    assert made.exit_code == 0 and made.lines[0] == f"{n} objects packed, {n} loose files removed"
    path = made.lines[1]
    verbose = yyb("count-objects", "-v").lines[:4]
    assert verbose == ["count: 0", "size: 0", f"in-pack: {n}", "packs: 1"]
    checked = yyb("verify-pack", "-v", path[:-5] + ".idx")
    assert checked.exit_code == 0 and checked.lines[-1].endswith(f"{n} objects")
    assert len(checked.lines) == n + 1
    more = yyb("hash-object", "-w", "--stdin", input=b"after gc")
    assert more.exit_code == 0
    kept = yyb("repack")
    assert kept.lines[0] == "1 objects packed, 0 loose files removed, 0 packs replaced"
    assert yyb("count-objects", "-v").lines[2:4] == [f"in-pack: {n + 1}", "packs: 2"]
    merged = yyb("repack", "-a", "-d")
    assert merged.lines[0] == f"{n + 1} objects packed, 1 loose files removed, 2 packs replaced"
    assert yyb("count-objects", "-v").lines[:4] == [
        "count: 0",
        "size: 0",
        f"in-pack: {n + 1}",
        "packs: 1",
    ]
    assert yyb("repack", "-a", "-d").lines == [
        "0 objects packed, 0 loose files removed, 0 packs replaced"
    ]
    missing = yyb("verify-pack", str(tmp_path / "nothing.pack"))
    assert missing.exit_code == 2
    bundle = tmp_path / "packed.bundle"
    assert yyb("bundle", "create", str(bundle), "--all").exit_code == 0
    other = Yyb(str(tmp_path / "other"))
    Store.init(other.store_path)
    assert other("bundle", "unbundle", str(bundle)).exit_code == 0
    assert other("doctor").exit_code == 0


def test_automatic_gc_packs_past_its_threshold_only(tmp_path):
    from yyb.errors import UsageError

    store, _ = Store.init(str(tmp_path / "s"))
    i = 0
    while True:  # an object in fan-out folder 17, which the estimate counts
        oid = store.objects.put("blob", f"object {i}".encode())
        i += 1
        if oid.startswith("17"):
            break
    assert gc.estimate_loose(store) == 256
    assert gc.auto(store, {"YYB_GC_AUTO": "0"}) is None  # never
    assert gc.auto(store, {"YYB_GC_AUTO": "256"}) is None  # not past it
    assert gc.auto(store, {}) is None  # the default, 6700
    done = gc.auto(store, {"YYB_GC_AUTO": "255"})
    assert done is not None and done.packed == i and gc.count(store)["loose"] == 0
    with pytest.raises(UsageError):
        gc.auto_threshold({"YYB_GC_AUTO": "lots"})
    for i in range(3):  # packs past the limit (as a fetch writes them) start it too
        gc.gc(store, pack_limit=0)
        store.objects.put("blob", f"later {i}".encode())
    assert gc.auto(store, {"YYB_GC_PACK_LIMIT": "3"}) is None  # 3 packs: not past it
    assert gc.auto(store, {"YYB_GC_PACK_LIMIT": "3", "YYB_GC_AUTO": "0"}) is None
    pack.write(
        store.objects.pack_folder, [(later := store.objects.put("blob", b"x"), b"blob 1\0x")]
    )
    done = gc.auto(store, {"YYB_GC_PACK_LIMIT": "3"})
    assert done is not None and done.packs_removed == 4 and gc.count(store)["packs"] == 1
    assert store.objects.get(later).body == b"x"


def test_gc_drops_emptied_folders_and_a_writer_racing_it_makes_them_again(tmp_path, monkeypatch):
    import io

    from yyb.store.objects.loose import DiskObjects

    store, _ = filled(str(tmp_path / "s"), 20)
    gc.gc(store)
    assert [n for n in os.listdir(store.objects.folder) if n != "pack"] == []  # all dropped
    # A writer whose folder a gc removes right after the writer made it: it makes it again.
    refuse = DiskObjects._refuse_link
    removed = []

    def gc_strikes(self, prefix):
        refuse(self, prefix)
        folder = os.path.join(self.folder, prefix)
        if prefix not in removed and not os.listdir(folder):  # once per folder
            os.rmdir(folder)
            removed.append(prefix)

    monkeypatch.setattr(DiskObjects, "_refuse_link", gc_strikes)
    one = store.objects.put("blob", b"one object")
    many = store.objects.put_many([("blob", f"many {i}".encode()) for i in range(12)])
    big = os.urandom(3 << 20)
    streamed = store.objects.put_blob_file(io.BytesIO(big), len(big))
    assert removed  # the folders did go away under the writers
    monkeypatch.undo()
    fresh = Store.open(store.path)
    assert fresh.objects.get(one).body == b"one object"
    assert [fresh.objects.get(o).body for o in many] == [f"many {i}".encode() for i in range(12)]
    assert fresh.objects.get(streamed).body == big
    assert errors(fresh) == []


def test_a_reader_whose_listed_pack_is_removed_before_it_opens_it_lists_again(
    tmp_path, monkeypatch
):
    """A reader lists the packs, a consolidation removes them all, then the reader opens
    what it listed: it lists again and finds the new pack (yyb/store/objects/loose.py,
    ``packs``)."""
    store, bodies = several_packs(str(tmp_path / "s"))
    reader = Store.open(store.path)  # has opened no pack yet
    listing = pack.pack_paths

    def listed_then_consolidated(folder):
        paths = listing(folder)
        monkeypatch.setattr(pack, "pack_paths", listing)  # once
        gc.repack(store, everything=True, delete=True)  # removes every pack just listed
        return paths

    monkeypatch.setattr(pack, "pack_paths", listed_then_consolidated)
    for oid, body in bodies.items():
        assert reader.objects.get(oid).body == body
