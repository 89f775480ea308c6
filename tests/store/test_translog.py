"""The transparency log: every ref update is a leaf, in order, durable with the update; the
derived files are rebuilt from the leaves; a crash between a leaf and its log head is
completed; a store made before its log is backfilled; an audit finds what was set back,
forged or removed."""

from __future__ import annotations

import os

import pytest

from tests.conftest import forged_update, note
from yyb.store.log import audit as logaudit
from yyb.store.log import merkle
from yyb.store.log import transparency as translog
from yyb.store.repo import Store


def lines(store) -> list[tuple[str, str]]:
    with store.refs.transparency.locked() as log:
        return list(log.entries())


def codes(store) -> list[tuple[str, str]]:
    return sorted((f.code, f.subject) for f in logaudit.audit(store) if f.level == "error")


def fill(store, count: int, ref: str = "refs/notes/a") -> list[str]:
    updates = []
    for i in range(count):
        target = store.objects.put_record(note(f"n{i}"))
        updates.append(store.refs.update(ref if i % 3 else f"{ref}-{i % 2}", target))
    return updates


def test_every_update_is_a_leaf_in_order_and_proofs_verify(store):
    updates = fill(store, 21)
    entries = lines(store)
    assert [oid for oid, _ in entries] == updates
    data = [f"{oid} {ref}".encode() for oid, ref in entries]
    with store.refs.transparency.locked() as log:
        assert log.size() == 21
        for size in range(1, 22):
            top = log.root(size)
            assert top == merkle.root_of(data[:size])
            for index in range(size):
                leaf = merkle.leaf_hash(data[index])
                merkle.verify_inclusion(leaf, index, size, log.inclusion(index, size), top)
            for first in range(size + 1):
                proof = log.consistency(first, size)
                merkle.verify_consistency(first, size, log.root(first), top, proof)
    assert codes(store) == []


def test_derived_files_are_rebuilt_from_the_leaves(disk_store):
    fill(disk_store, 37)
    with disk_store.refs.transparency.locked() as log:
        before = log.root()
    folder = os.path.join(disk_store.path, translog.FOLDER)
    os.remove(os.path.join(folder, "level-02"))
    with open(os.path.join(folder, "level-00"), "r+b") as handle:
        handle.truncate(5 * 32)  # short: recomputed
    with open(os.path.join(folder, "state"), "wb") as handle:
        handle.write(b"garbage")
    with disk_store.refs.transparency.locked() as log:
        assert log.size() == 37 and log.root() == before


def test_a_torn_last_line_is_dropped(disk_store):
    fill(disk_store, 5)
    path = os.path.join(disk_store.path, translog.FOLDER, "leaves")
    with open(path, "ab") as handle:
        handle.write(b"0123abc")  # a write cut short: no newline
    with disk_store.refs.transparency.locked() as log:
        assert log.size() == 5
    assert os.path.getsize(path) % 1 == 0 and open(path, "rb").read().endswith(b"\n")
    fill(disk_store, 1, "refs/notes/b")
    assert len(lines(disk_store)) == 6 and codes(disk_store) == []


def test_a_writer_that_died_between_its_leaf_and_its_log_head_is_completed(store):
    first = store.objects.put_record(note("first"))
    store.refs.update("refs/notes/x", first)
    head = store.refs.log_head("refs/notes/x")
    # What update() does up to its death: the record, and its leaf, but no log head.
    second = store.objects.put_record(note("second"))
    record = {
        "schema_version": "yyb_ref_update.v1",
        "ref": "refs/notes/x",
        "old": first,
        "new": second,
        "time_ms": 1,
        "reason": "",
        "links": {"target": second, "previous": head},
    }
    orphan = store.objects.put_record(record)
    with store.refs.transparency.locked() as log:
        log.append([(orphan, "refs/notes/x")])
    infos = [f.code for f in logaudit.audit(store)]
    assert infos == ["log-cut-short"]  # noted, not failed (the log's last leaf only: the same
    # state after a later update would be a rolled-back ref, tested below)
    fill(store, 1, "refs/notes/other")  # the next writer of any ref completes the head
    assert store.refs.log_head("refs/notes/x") == orphan
    assert store.refs.read("refs/notes/x") == first and store.refs.pending("refs/notes/x") == second
    third = store.objects.put_record(note("third"))
    update = store.refs.update("refs/notes/x", third)
    assert store.objects.get_record(update)["links"]["discarded"] == orphan
    assert codes(store) == []


def test_a_store_made_before_its_log_is_backfilled_once(disk_store):
    updates = fill(disk_store, 8)
    folder = os.path.join(disk_store.path, translog.FOLDER)
    for name in os.listdir(folder):
        os.remove(os.path.join(folder, name))
    os.rmdir(folder)
    store = Store.open(disk_store.path)
    newer = fill(store, 1, "refs/notes/new")
    logged = [oid for oid, _ in lines(store)]
    assert sorted(logged[:-1]) == sorted(updates) and logged[-1] == newer[0]
    assert codes(store) == []


def test_a_bundle_import_logs_the_imported_chain(disk_store, tmp_path):
    from yyb.store.bundle import exchange as bundle

    updates = fill(disk_store, 6)
    path = str(tmp_path / "b.bundle")
    names = [name for name, _ in disk_store.refs.iter_refs()]
    bundle.create(disk_store, path, bundle.ref_tips(disk_store, names))
    other, _ = Store.init(str(tmp_path / "other"))
    bundle.unbundle(other, path)
    assert sorted(oid for oid, _ in lines(other)) == sorted(updates)
    assert codes(other) == []


# --- what an audit finds ------------------------------------------------------------------


def rewrite_head(store, ref: str, head: str) -> None:
    """Set a ref and its log head back by hand, as an attacker with the files would."""
    record = store.objects.get_record(head)
    refs = store.refs
    refs._write_log_head(ref, head)
    if hasattr(refs, "values"):
        refs.values[ref] = record["new"]
    else:
        with open(refs.path(ref), "w") as handle:
            handle.write(record["new"] + "\n")


def test_a_rolled_back_ref_is_found(store):
    ref = "refs/grants/x"
    first = store.refs.update(ref, store.objects.put_record(note("grant 1")))
    store.refs.update(ref, store.objects.put_record(note("grant 2")))
    fill(store, 1, "refs/notes/later")  # the set-back update is not the log's last leaf
    assert codes(store) == []
    rewrite_head(store, ref, first)
    assert ("log-rolled-back", ref) in codes(store)


def test_a_forged_update_and_a_rewritten_chain_are_found(store):
    ref = "refs/grants/x"
    store.refs.update(ref, store.objects.put_record(note("grant 1")))
    forged = forged_update(store, ref, store.objects.put_record(note("a grant nobody made")))
    rewrite_head(store, ref, forged)
    found = codes(store)
    assert ("log-unlogged", ref) in found and ("log-rolled-back", ref) in found


def test_a_removed_signature_ref_is_found(disk_store):
    ref = "refs/signatures/" + "a" * 64
    disk_store.refs.update(ref, disk_store.objects.put_record(note("signature")))
    fill(disk_store, 1, "refs/notes/later")
    os.remove(disk_store.refs.path(ref))
    os.remove(disk_store.refs.log_path(ref))
    assert ("log-ref-missing", ref) in codes(disk_store)


def test_altered_subtree_hashes_are_found(disk_store):
    fill(disk_store, 9)
    path = os.path.join(disk_store.path, translog.FOLDER, "level-01")
    with open(path, "r+b") as handle:
        handle.seek(32)
        handle.write(b"\xff" * 32)
    assert ("log-levels", "transparency") in codes(disk_store)


@pytest.mark.parametrize("count", [1, 2, 3, 64, 65])
def test_memory_and_disk_logs_agree(tmp_path, count):
    disk, _ = Store.init(str(tmp_path / "d"))
    memory = Store.memory()
    for store in (disk, memory):
        for i in range(count):
            store.refs.update(f"refs/n/{i % 4}", store.objects.put_record(note(str(i))), time_ms=i)
    with disk.refs.transparency.locked() as a, memory.refs.transparency.locked() as b:
        assert a.size() == b.size() == count
        assert a.root() == b.root()


# --- SIGKILL at every durable write of a few updates ----------------------------------------

WRITER = """
import sys
from yyb.store.repo import Store
store = Store.open(sys.argv[1])
for i in range(6):
    target = store.objects.put("blob", f"value {i}".encode())
    store.refs.update(f"refs/notes/{'ab'[i % 2]}", target, reason=f"step {i}")
"""


def test_a_kill_at_any_durable_write_leaves_the_log_and_the_refs_agreeing(tmp_path):
    """Killed at each durable write point in turn, then one more update: the audit finds no
    error after the kill (a cut-short last update is only noted) and none after the update,
    which completes it."""
    import subprocess
    import sys

    from yyb.store import file

    points, cut_short = 0, 0
    while True:
        points += 1
        path = str(tmp_path / f"s{points}")
        Store.init(path)
        env = {**os.environ, file.FAULT_ENV: str(points)}
        done = subprocess.run([sys.executable, "-c", WRITER, path], env=env, timeout=60)
        store = Store.open(path)
        found = logaudit.audit(store)
        assert [f for f in found if f.level == "error"] == [], (points, found)
        cut_short += any(f.code == "log-cut-short" for f in found)
        store.refs.update("refs/notes/after", store.objects.put("blob", b"after"))
        found = logaudit.audit(store)
        assert found == [], (points, found)
        if done.returncode == 0:  # the writer ran past the last point: every one was tried
            break
        assert done.returncode == -9, done.returncode
    assert points > 20
    assert cut_short >= 6  # the window between a leaf and its log head, once per update


# --- the replay ---------------------------------------------------------------------------


def logged_by_hand(store, ref: str, update: str) -> None:
    """Point ``ref`` and its log head at ``update`` and append its leaf, below the plumbing."""
    rewrite_head(store, ref, update)
    with store.refs.transparency.locked() as log:
        log.append([(update, ref)])


def test_a_second_creation_of_a_logged_ref_is_found(store):
    ref = "refs/grants/x"
    store.refs.update(ref, store.objects.put_record(note("grant 1")))
    forged = forged_update(store, ref, store.objects.put_record(note("a grant nobody made")))
    logged_by_hand(store, ref, forged)
    assert codes(store) == [("log-recreated", ref)]


def test_an_update_that_skips_a_logged_one_is_unchained(store):
    ref = "refs/grants/x"
    first = store.refs.update(ref, store.objects.put_record(note("grant 1")))
    store.refs.update(ref, store.objects.put_record(note("grant 2")))
    skip = forged_update(store, ref, store.objects.put_record(note("grant 3")), first)
    logged_by_hand(store, ref, skip)
    assert codes(store) == [("log-unchained", ref)]


def test_a_ref_deleted_and_made_again_replays_clean(store):
    ref = "refs/notes/again"
    store.refs.update(ref, store.objects.put_record(note("one")))
    store.refs.update(ref, None)
    store.refs.update(ref, store.objects.put_record(note("two")), old=None)
    assert codes(store) == []


def test_a_repeated_leaf_does_not_make_a_rollback_look_current(store):
    ref = "refs/grants/x"
    first = store.refs.update(ref, store.objects.put_record(note("grant 1")))
    store.refs.update(ref, store.objects.put_record(note("grant 2")))
    logged_by_hand(store, ref, first)  # set back, and the old update's leaf repeated
    assert codes(store) == [("log-rolled-back", ref)]


def test_a_backfilled_log_replays_clean_whatever_the_times(disk_store):
    for i in range(6):  # one millisecond for all: the chains, not the times, give the order
        target = disk_store.objects.put_record(note(f"n{i}"))
        disk_store.refs.update(f"refs/notes/{'ab'[i % 2]}", target, time_ms=7)
    folder = os.path.join(disk_store.path, translog.FOLDER)
    for name in os.listdir(folder):
        os.remove(os.path.join(folder, name))
    store = Store.open(disk_store.path)
    fill(store, 1, "refs/notes/new")
    assert len(lines(store)) == 7 and codes(store) == []


def test_a_check_reads_the_levels_as_they_are(disk_store):
    """Hashes missing from a level are noted (the next writer adds them); hashes beyond the
    leaves are an error; the audit changes neither."""
    fill(disk_store, 9)
    path = os.path.join(disk_store.path, translog.FOLDER, "level-00")
    with open(path, "ab") as handle:
        handle.write(b"\x01" * 32)
    assert ("log-levels", "transparency") in codes(disk_store)
    assert os.path.getsize(path) == 10 * 32
    with open(path, "r+b") as handle:
        handle.truncate(5 * 32)
    found = [(f.level, f.code) for f in logaudit.audit(disk_store)]
    assert found == [("info", "log-levels-behind")] and os.path.getsize(path) == 5 * 32


def test_a_stray_file_in_the_log_folder_is_found(disk_store):
    fill(disk_store, 2)
    folder = os.path.join(disk_store.path, translog.FOLDER)
    for name in ("leaves.old", "level-0"):
        with open(os.path.join(folder, name), "wb") as handle:
            handle.write(b"x")
    os.mkdir(os.path.join(folder, "level-05"))
    found = {(f.code, f.subject) for f in logaudit.audit(disk_store) if f.level == "error"}
    assert found == {
        ("log-stray-file", "transparency/leaves.old"),
        ("log-stray-file", "transparency/level-0"),
        ("log-stray-file", "transparency/level-05"),
    }
