"""Packed refs: packing moves refs and log heads into one file and changes nothing else;
readers never miss a ref; deletions stay deleted; a crash at any durable write, concurrent
writers and a malformed file are all survived or refused."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from tests.conftest import Yyb, killed_runs, note
from yyb.errors import CorruptRef, RefConflict, RefNotFound
from yyb.store import file, gc
from yyb.store.fsck import fsck
from yyb.store.objects.format import ZERO_OID
from yyb.store.refs import packed as packrefs
from yyb.store.refs.loose import DiskRefs
from yyb.store.repo import Store


def errors(store) -> list[str]:
    return [f.line() for f in fsck(store) if f.level == "error"]


def state(store) -> dict:
    """Everything packing must not change: every ref's value and log head, the listings."""
    refs = store.refs
    names = sorted(set(refs.names()) | set(refs.log_names()))
    return {
        "names": refs.names(),
        "log_names": refs.log_names(),
        "refs": list(refs.iter_refs()),
        "each": {n: (refs.read(n), refs.log_head(n)) for n in names},
        "under": refs.names(under="refs/runs/p"),
    }


def loose_files(store) -> list[str]:
    found = []
    for top in ("refs", "logs"):
        for folder, _, names in os.walk(os.path.join(store.path, top)):
            found += [os.path.relpath(os.path.join(folder, n), store.path) for n in names]
    return sorted(found)


def populated(path: str) -> tuple[Store, list[str]]:
    """A store with nested refs, a ref moved twice and a deleted one (log head, no value)."""
    store, _ = Store.init(path)
    oids = [store.objects.put_record(note(f"n{i}")) for i in range(6)]
    for i in range(3):
        store.refs.update(f"runs/p/a{i}/terminal", oids[i])
        store.refs.update(f"runs/p/a{i}/intent", oids[i + 1])
    store.refs.update("plans/p", oids[0])
    store.refs.update("plans/p", oids[4])
    store.refs.update("notes/gone", oids[5])
    store.refs.update("notes/gone", None)
    return store, oids


def read_packed_as_documented(path: str) -> dict:
    """docs/format.md, "Packed refs", read by hand: name -> (value, log head)."""
    with open(path, "rb") as handle:
        data = handle.read()
    assert data.startswith(b"yyb-packed-refs 1\n") and data.endswith(b"\n")
    entries = {}
    previous = b""
    for line in data.split(b"\n")[1:-1]:
        value, head, name = line.split(b" ")
        assert len(value) == len(head) == 64 and name > previous
        previous = name
        absent = ZERO_OID.encode()
        entries[name.decode()] = (
            None if value == absent else value.decode(),
            None if head == absent else head.decode(),
        )
    return entries


def test_packing_moves_refs_and_log_heads_and_changes_nothing_else(tmp_path):
    store, oids = populated(str(tmp_path / "s"))
    before = state(store)
    assert errors(store) == []
    done = packrefs.pack_refs(store)
    assert (done.refs, done.log_heads) == (7, 8)
    assert done.removed == 15 and loose_files(store) == []
    assert os.listdir(os.path.join(store.path, "refs")) == []  # emptied folders dropped
    assert os.listdir(os.path.join(store.path, "logs", "refs")) == []
    assert read_packed_as_documented(os.path.join(store.path, "packed-refs")) == {
        name: value for name, value in before["each"].items()
    }
    for reader in (store, Store.open(store.path)):
        assert state(reader) == before
    assert errors(store) == [] and errors(Store.open(store.path)) == []
    with pytest.raises(RefConflict):
        store.refs.update("plans/p/x", oids[0])  # beside the packed refs/plans/p
    with pytest.raises(RefConflict):
        store.refs.update("runs/p", oids[0])  # the folder of packed refs
    with pytest.raises(RefConflict):
        store.refs.update("notes/gone/x", oids[0])  # a deleted ref keeps its log head
    # Packed refs move, are deleted and are made again as loose ones do.
    store.refs.update("plans/p", oids[1], old=oids[4])
    store.refs.update("runs/p/a0/terminal", None)
    assert store.refs.read("runs/p/a0/terminal") is None
    assert "refs/runs/p/a0/terminal" not in store.refs.names()
    assert "refs/runs/p/a0/terminal" in store.refs.log_names()
    with pytest.raises(RefNotFound):
        store.refs.update("runs/p/a0/terminal", None)
    store.refs.update("notes/gone", oids[2], old=None)
    after = state(store)
    assert errors(store) == []
    packrefs.pack_refs(store)
    assert state(Store.open(store.path)) == after and errors(store) == []
    assert loose_files(store) == []


def test_a_reader_sees_what_pack_refs_moved_since_it_last_looked(tmp_path):
    store, oids = populated(str(tmp_path / "s"))
    packrefs.pack_refs(store)
    reader = Store.open(store.path)
    assert reader.refs.read("plans/p") == oids[4]  # the reader has parsed the packed file
    store.refs.update("plans/p", oids[3])  # loose again, newer than what it parsed
    store.refs.update("notes/new", oids[0])
    packrefs.pack_refs(store)  # now packed, the loose files removed
    assert loose_files(store) == []
    assert reader.refs.read("plans/p") == oids[3]
    assert reader.refs.read("notes/new") == oids[0]
    assert "refs/notes/new" in reader.refs.names(under="refs/notes")


def test_a_loose_file_wins_over_the_packed_entry(tmp_path):
    store, oids = populated(str(tmp_path / "s"))
    packrefs.pack_refs(store)
    store.refs.update("plans/p", oids[2])
    assert packrefs.PackedRefs(store.path).table().value("refs/plans/p") == oids[4]
    assert Store.open(store.path).refs.read("plans/p") == oids[2]
    assert errors(store) == []


def test_pack_refs_never_resurrects_a_ref_deleted_while_it_runs(tmp_path, monkeypatch):
    store, oids = populated(str(tmp_path / "s"))
    write = packrefs.PackedRefs.write
    deleted: list[object] = []

    def delete():
        try:
            Store.open(store.path).refs.update("plans/p", None)
            deleted.append(True)
        except Exception as exc:  # noqa: BLE001 (reported by the assertion below)
            deleted.append(exc)

    def write_while_deleting(self, data):
        if not deleted and not hasattr(write_while_deleting, "thread"):
            write_while_deleting.thread = threading.Thread(target=delete)
            write_while_deleting.thread.start()
            time.sleep(0.3)  # long enough for a deletion that does not wait for the lock
        write(self, data)

    monkeypatch.setattr(packrefs.PackedRefs, "write", write_while_deleting)
    packrefs.pack_refs(store)
    write_while_deleting.thread.join()
    assert deleted == [True]
    for reader in (store, Store.open(store.path)):
        assert reader.refs.read("plans/p") is None
        assert "refs/plans/p" not in reader.refs.names()
    assert errors(store) == []


def test_a_writer_makes_again_a_folder_pack_refs_dropped(tmp_path, monkeypatch):
    store, oids = populated(str(tmp_path / "s"))
    make = DiskRefs._make_parents
    dropped = []

    def make_then_lose(self, path, name, top):
        make(self, path, name, top)
        folder = os.path.dirname(path)
        if folder not in dropped and folder != top:  # as pack-refs would, emptied
            dropped.append(folder)
            os.rmdir(folder)

    monkeypatch.setattr(DiskRefs, "_make_parents", make_then_lose)
    store.refs.update("fresh/one", oids[0])  # its ref folder and its log folder vanish once
    assert len(dropped) == 2
    monkeypatch.undo()
    assert store.refs.read("fresh/one") == oids[0] and errors(store) == []


KILLED = """
import sys
from yyb.store.refs import packed as packrefs
from yyb.store.repo import Store
packrefs.pack_refs(Store.open(sys.argv[1]))
"""

# What a wrong order would do: remove the loose files before the packed file is durable.
REMOVE_FIRST = """
import os, sys
from yyb.store import file
from yyb.store.refs import packed as packrefs
from yyb.store.repo import Store
store = Store.open(sys.argv[1])
original = packrefs.PackedRefs.write
def write(self, data):
    for name in store.refs.loose_names():
        os.unlink(store.refs.path(name))
    file.durable_point()
    original(self, data)
packrefs.PackedRefs.write = write
packrefs.pack_refs(store)
"""


def kill_sweep(tmp_path, template: Store, script: str) -> int | None:
    """Run ``script`` on copies of ``template``, SIGKILLed after its 1st, 2nd, ... durable
    write, until it runs to its end; after each, every ref and log head must read as before
    and doctor must be clean, and again after the next pack-refs. The first point at which
    that failed, or None."""
    expected = state(template)
    for point, path, ended in killed_runs(tmp_path, template.path, script):
        store = Store.open(path)
        if state(store) != expected or errors(store) != []:
            return point
        packrefs.pack_refs(store)
        assert state(Store.open(path)) == expected and errors(store) == []
        assert loose_files(store) == []
        if ended:
            assert point >= 3
            return None


def test_pack_refs_killed_at_any_durable_write_leaves_every_ref_as_it_was(tmp_path):
    template, oids = populated(str(tmp_path / "template"))
    packrefs.pack_refs(template)  # some packed already, some loose again, one deleted
    template.refs.update("plans/p", oids[0])
    template.refs.update("runs/p/a1/terminal", None)
    template.refs.update("runs/p/a9/terminal", oids[3])
    assert kill_sweep(tmp_path, template, KILLED) is None
    # The sweep catches an order that removes loose files before the packed file is durable.
    assert kill_sweep(tmp_path / "wrong", template, REMOVE_FIRST) is not None


def test_readers_and_writers_beside_pack_refs_in_a_loop(tmp_path):
    """Each writer owns its refs, moves and deletes them; readers read them all the time;
    pack-refs runs in a loop. Nothing is lost, nothing deleted comes back, no reader fails."""
    store, oids = populated(str(tmp_path / "s"))
    stop = threading.Event()
    failures: list[str] = []
    final: dict[str, str | None] = {}
    stable = {f"refs/stable/{i}": oids[i] for i in range(4)}
    for name, oid in stable.items():
        store.refs.update(name, oid)

    def writer(w: int) -> None:
        refs = Store.open(store.path).refs
        mine = {f"refs/w{w}/{i}": None for i in range(4)}
        try:
            for step in range(40):
                name = f"refs/w{w}/{step % 4}"
                if mine[name] is not None and step % 3 == 0:
                    refs.update(name, None, old=mine[name])
                    mine[name] = None
                else:
                    new = oids[step % len(oids)]
                    refs.update(name, new, old=mine[name])
                    mine[name] = new
                if refs.read(name) != mine[name]:
                    failures.append(f"{name}: read {refs.read(name)}, wrote {mine[name]}")
        except Exception as exc:  # noqa: BLE001 (the finding)
            failures.append(f"writer {w}: {exc!r}")
        final.update(mine)

    def reader() -> None:
        refs = Store.open(store.path).refs
        try:
            while not stop.is_set():
                for name, oid in stable.items():
                    if refs.read(name) != oid:
                        failures.append(f"{name} read as {refs.read(name)}")
                listed = set(refs.names())
                if not set(stable) <= listed:
                    failures.append(f"names() missed {set(stable) - listed}")
        except Exception as exc:  # noqa: BLE001
            failures.append(f"reader: {exc!r}")

    def packer() -> None:
        packer_store = Store.open(store.path)
        try:
            while not stop.is_set():
                packrefs.pack_refs(packer_store)
        except Exception as exc:  # noqa: BLE001
            failures.append(f"pack-refs: {exc!r}")

    others = [threading.Thread(target=f) for f in (reader, reader, packer)]
    writers = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for thread in others + writers:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    for thread in others:
        thread.join()
    assert failures == []
    packrefs.pack_refs(store)
    for reader_store in (store, Store.open(store.path)):
        refs = reader_store.refs
        for name, value in {**final, **stable}.items():
            assert refs.read(name) == value, name
            assert (name in refs.names()) == (value is not None)
    assert errors(store) == []


HOSTILE = {
    "out of order": lambda lines: [lines[0], lines[2], lines[1], *lines[3:]],
    "a repeated name": lambda lines: [lines[0], lines[1], lines[1], *lines[2:]],
    "a bad oid": lambda lines: [lines[0], lines[1].replace(lines[1][:2], "zz", 1), *lines[2:]],
    "an upper-case oid": lambda lines: (
        [lines[0], lines[1][:65] + lines[1][65:129].upper() + lines[1][129:]] + lines[2:]
    ),
    "a '..' component": lambda lines: [*lines[:-1], lines[-1].replace("refs/", "refs/../", 1)],
    "a .lock component": lambda lines: [*lines[:-1], lines[-1] + ".lock"],
    "a truncated last line": lambda lines: [*lines[:-1], lines[-1][:-3]],
    "no value and no log head": lambda lines: [
        *lines[:-1],
        f"{ZERO_OID} {ZERO_OID} {lines[-1].split()[2]}",
    ],
    "another header": lambda lines: ["yyb-packed-refs 2", *lines[1:]],
}


@pytest.mark.parametrize("damage", sorted(HOSTILE))
def test_a_malformed_packed_file_is_reported_and_refused(tmp_path, damage):
    store, oids = populated(str(tmp_path / "s"))
    packrefs.pack_refs(store)
    path = os.path.join(store.path, "packed-refs")
    with open(path) as handle:
        lines = handle.read().split("\n")[:-1]
    text = "\n".join(HOSTILE[damage](lines))
    with open(path, "w") as handle:
        handle.write(text if damage == "a truncated last line" else text + "\n")
    found = [f for f in fsck(Store.open(store.path)) if f.code == "bad-packed-refs"]
    assert [f.level for f in found] == ["error"], damage
    reader = Store.open(store.path)
    for call in (
        lambda: reader.refs.read("plans/p"),
        lambda: reader.refs.log_head("notes/gone"),
        reader.refs.names,
        reader.refs.log_names,
    ):
        with pytest.raises(CorruptRef):
            call()
    result = Yyb(store.path)("show-ref")
    assert result.exit_code == CorruptRef.exit_code
    assert len(result.stderr.splitlines()) == 1 and "packed-refs" in result.stderr
    with pytest.raises(CorruptRef):
        packrefs.pack_refs(store)  # nothing is packed over a damaged file
    assert errors(store) != []


def test_doctor_knows_the_packed_file_its_lock_and_its_temp_files(tmp_path):
    store, _ = populated(str(tmp_path / "s"))
    packrefs.pack_refs(store)
    open(os.path.join(store.path, file.TEMP_PREFIX + "x"), "w").close()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], text=True, capture_output=True
    ).stdout.strip()
    with open(os.path.join(store.path, "locks", "packed-refs.lock"), "w") as handle:
        handle.write(f"yyb-lock pid={dead} host={os.uname().nodename} boot={file._boot_id()}\n")
    found = {(f.level, f.code, f.subject) for f in fsck(store)}
    assert ("info", "temp-file", file.TEMP_PREFIX + "x") in found
    assert ("info", "stale-lock", "locks/packed-refs.lock") in found
    assert errors(store) == []
    packrefs.pack_refs(store)  # replaces the abandoned lock, sweeps the temp file
    assert not os.path.exists(os.path.join(store.path, file.TEMP_PREFIX + "x"))
    assert errors(store) == []


def test_the_pack_refs_and_gc_commands(tmp_path):
    store, oids = populated(str(tmp_path / "s"))
    yyb = Yyb(store.path)
    shown = yyb("show-ref").stdout
    result = yyb("pack-refs")
    assert result.exit_code == 0
    assert result.lines == ["7 refs and 8 log heads packed, 15 loose files removed"]
    assert yyb("show-ref").stdout == shown
    assert yyb("rev-parse", "plans/p").lines == [oids[4]]
    assert yyb("doctor").exit_code == 0
    store.refs.update("notes/later", oids[0])
    assert yyb("gc").exit_code == 0
    assert loose_files(store) == [] and "refs/notes/later" in yyb("show-ref").stdout
    assert gc.count(store)["loose"] == 0
