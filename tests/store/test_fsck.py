"""fsck: every kind of damage is named precisely; a clean store is clean."""

from __future__ import annotations

import os
import time

import msgpack
import pytest

from tests.conftest import flip_byte, note
from yyb.store.fsck import fsck
from yyb.store.objects.format import hash_object, header


def errors(store) -> set[tuple[str, str]]:
    return {(f.code, f.subject) for f in fsck(store) if f.level == "error"}


def infos(store) -> set[tuple[str, str]]:
    return {(f.code, f.subject) for f in fsck(store) if f.level == "info"}


@pytest.fixture
def populated(disk_store):
    """A blob, a record linking it, a ref at the record moved twice."""
    s = disk_store
    blob = s.objects.put("blob", b"the log\n")
    rec = s.objects.put_record(note("about the log", log=blob))
    rec2 = s.objects.put_record(note("second", log=blob, previous=rec))
    s.refs.update("notes/x", rec, old=None, reason="one")
    s.refs.update("notes/x", rec2, old=rec, reason="two")
    s.ids = {"blob": blob, "rec": rec, "rec2": rec2}
    return s


def write_raw(store, oid: str, data: bytes) -> str:
    path = store.objects.path(oid)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        os.chmod(path, 0o644)
    with open(path, "wb") as handle:
        handle.write(data)
    return path


def test_clean_store_is_clean(populated):
    assert errors(populated) == set()
    assert infos(populated) == set()


def test_flipped_byte(populated):
    blob = populated.ids["blob"]
    flip_byte(populated.objects.path(blob))
    assert errors(populated) == {("hash-mismatch", blob)}


def test_truncated_object(populated):
    blob = populated.ids["blob"]
    path = populated.objects.path(blob)
    os.chmod(path, 0o644)
    os.truncate(path, os.path.getsize(path) - 2)
    assert errors(populated) == {("truncated", blob)}


def test_deleted_object_is_a_broken_link(populated):
    blob = populated.ids["blob"]
    os.unlink(populated.objects.path(blob))
    found = errors(populated)
    assert found == {("broken-link", populated.ids["rec"]), ("broken-link", populated.ids["rec2"])}


def test_ref_to_a_missing_object(populated):
    rec2 = populated.ids["rec2"]
    os.unlink(populated.objects.path(rec2))
    found = errors(populated)
    assert ("ref-missing-object", "refs/notes/x") in found
    # the newest update record links it as its target too
    head = populated.refs.log_head("notes/x")
    assert ("broken-link", head) in found


def test_non_canonical_record(populated):
    body = msgpack.packb({"schema_version": "yyb_note.v1", "message": "x"})  # unsorted keys
    assert body != b""
    oid = hash_object("record", body)
    write_raw(populated, oid, header("record", len(body)) + body)
    assert errors(populated) == {("non-canonical", oid)}


def test_schema_violation(populated):
    from yyb.store.objects import codec

    body = codec.encode({"schema_version": "yyb_note.v1", "message": 7})
    oid = hash_object("record", body)
    write_raw(populated, oid, header("record", len(body)) + body)
    found = [f for f in fsck(populated) if f.level == "error"]
    assert [(f.code, f.subject) for f in found] == [("schema", oid)]
    assert "$.message" in found[0].detail


def test_forged_chain_entry(populated):
    """Replace the oldest update with a record that claims another starting point."""
    oldest_oid, oldest = list(populated.refs.log("notes/x"))[-1]
    forged = dict(oldest, old=populated.ids["rec2"])
    forged_oid = populated.objects.put_record(forged)
    # Point the newest update's "previous" at the forgery by rewriting the log head.
    newest_oid, newest = next(populated.refs.log("notes/x"))
    rewired = dict(newest, links=dict(newest["links"], previous=forged_oid))
    rewired_oid = populated.objects.put_record(rewired)
    with open(populated.refs.log_path("refs/notes/x"), "w") as handle:
        handle.write(rewired_oid + "\n")
    codes = {code for code, subject in errors(populated) if subject == "refs/notes/x"}
    assert codes == {"broken-chain"}


def test_ref_edited_by_hand(populated):
    with open(populated.refs.path("refs/notes/x"), "w") as handle:
        handle.write(populated.ids["blob"] + "\n")
    assert errors(populated) == {("ref-log-mismatch", "refs/notes/x")}


def test_ref_set_back_by_hand_is_kept_on_record(populated):
    """Setting a ref back looks like an interrupted update; the next update keeps the trace."""
    ahead = populated.refs.log_head("notes/x")
    with open(populated.refs.path("refs/notes/x"), "w") as handle:
        handle.write(populated.ids["rec"] + "\n")
    assert errors(populated) == {("interrupted-update", "refs/notes/x")}
    populated.refs.update("notes/x", populated.ids["rec2"], old=populated.ids["rec"])
    assert errors(populated) == set()
    newest = next(populated.refs.log("notes/x"))[1]
    assert newest["links"]["discarded"] == ahead


def test_stale_lock(populated):
    lock = populated.refs.path("refs/notes/x") + ".lock"
    open(lock, "w").close()
    assert infos(populated) == {("locked", "refs/notes/x.lock")}
    old = time.time() - 3600
    os.utime(lock, (old, old))
    assert errors(populated) == {("stale-lock", "refs/notes/x.lock")}


def test_stray_and_temp_files(populated):
    root = populated.path
    open(os.path.join(root, "objects", "zz"), "w").close()
    open(os.path.join(root, "objects", populated.ids["blob"][:2], "nothex"), "w").close()
    open(os.path.join(root, "objects", ".tmp-abc"), "w").close()
    open(os.path.join(root, "README"), "w").close()
    assert errors(populated) == {
        ("stray-file", "objects/zz"),
        ("stray-file", f"objects/{populated.ids['blob'][:2]}/nothex"),
        ("stray-file", "README"),
    }
    assert ("temp-file", "objects/.tmp-abc") in infos(populated)


def test_dangling_is_information(populated):
    lone = populated.objects.put("blob", b"nobody links me")
    assert errors(populated) == set()
    assert infos(populated) == {("dangling", lone)}


def test_unlogged_ref(populated):
    os.makedirs(os.path.join(populated.path, "refs", "hand"))
    with open(os.path.join(populated.path, "refs", "hand", "made"), "w") as handle:
        handle.write(populated.ids["blob"] + "\n")
    assert errors(populated) == {("unlogged-ref", "refs/hand/made")}


def test_bad_ref_content(populated):
    with open(populated.refs.path("refs/notes/x"), "w") as handle:
        handle.write("not an oid\n")
    assert ("bad-ref", "refs/notes/x") in errors(populated)


def test_interrupted_update(populated):
    class Died(Exception):
        pass

    def die(name, new, handle):
        raise Died

    populated.refs._commit = die
    with pytest.raises(Died):
        populated.refs.update("notes/x", populated.ids["blob"])
    assert errors(populated) == {("interrupted-update", "refs/notes/x")}


def test_memory_store_fsck_sees_damage():
    from yyb.store.repo import Store

    store = Store.memory()
    oid = store.objects.put("blob", b"abc")
    store.objects.raw[oid] = store.objects.raw[oid][:-1] + b"x"
    assert errors(store) == {("hash-mismatch", oid)}
