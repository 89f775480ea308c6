"""Object stores: the memory twin and the disk store behave the same; the disk is durable."""

from __future__ import annotations

import hashlib
import io
import os

import pytest

from tests.conftest import note
from yyb.errors import (
    AmbiguousOid,
    CorruptObject,
    InvalidOid,
    ObjectMissing,
    SchemaViolation,
    StoreNotFound,
)
from yyb.store.objects import loose
from yyb.store.objects import store as object_store
from yyb.store.objects.format import hash_object
from yyb.store.repo import Store


def test_put_get_round_trip(store):
    oid = store.objects.put("blob", b"evidence")
    assert oid == hash_object("blob", b"evidence")
    obj = store.objects.get(oid)
    assert (obj.kind, obj.body) == ("blob", b"evidence")
    rec = store.objects.put_record(note("hello", about=oid))
    assert store.objects.get_record(rec)["links"] == {"about": oid}


def test_put_is_idempotent(store):
    first = store.objects.put("blob", b"same")
    second = store.objects.put("blob", b"same")
    assert first == second
    assert list(store.objects.iter_oids()).count(first) == 1


def test_records_are_schema_validated_before_writing(store):
    with pytest.raises(SchemaViolation) as caught:
        store.objects.put_record({"schema_version": "yyb_note.v1", "message": 3})
    assert caught.value.path == "$.message"
    with pytest.raises(SchemaViolation, match="no schema is known"):
        store.objects.put_record({"schema_version": "nothing_here.v9"})
    assert list(store.objects.iter_oids()) == []


def test_missing_object(store):
    with pytest.raises(ObjectMissing):
        store.objects.get("0" * 64)


def test_get_small_reads_an_object_whole_only_up_to_its_limit(store):
    oid = store.objects.put("blob", b"x" * 100)
    small = store.objects.get_small(oid, 200)
    assert (small.kind, small.body) == ("blob", b"x" * 100)
    assert store.objects.get_small(oid, 50) is None  # larger: the caller streams it
    with pytest.raises(ObjectMissing):
        store.objects.get_small("0" * 64)


def test_get_small_proves_the_bytes(store):
    oid = store.objects.put("blob", b"evidence")
    damaged = b"blob 8\0evidencX"
    if isinstance(store.objects, object_store.MemoryObjects):
        store.objects.raw[oid] = damaged
    else:
        path = store.objects.path(oid)
        os.chmod(path, 0o644)
        with open(path, "wb") as handle:
            handle.write(damaged)
    with pytest.raises(CorruptObject):
        store.objects.get_small(oid)


def _colliding_bodies() -> tuple[bytes, bytes]:
    """Two blob bodies whose oids share their first 4 hex digits (found by counting up)."""
    seen: dict[str, bytes] = {}
    for i in range(100_000):
        body = str(i).encode()
        prefix = hash_object("blob", body)[:4]
        if prefix in seen:
            return seen[prefix], body
        seen[prefix] = body
    raise AssertionError("no collision found")


def test_resolve_abbreviations(store):
    a, b = _colliding_bodies()
    oid_a, oid_b = store.objects.put("blob", a), store.objects.put("blob", b)
    assert store.objects.resolve(oid_a[:12]) == oid_a
    assert store.objects.resolve(oid_b) == oid_b
    with pytest.raises(AmbiguousOid) as caught:
        store.objects.resolve(oid_a[:4])
    assert caught.value.candidates == sorted([oid_a, oid_b])
    absent = next(p for p in ("0000", "ffff", "1234") if not oid_a.startswith(p))
    with pytest.raises(ObjectMissing):
        store.objects.resolve(absent)
    with pytest.raises(InvalidOid):
        store.objects.resolve(oid_a[:3])


def test_disk_layout_is_sha256sum_of_the_file(disk_store):
    oid = disk_store.objects.put("blob", b"x" * 1000)
    path = os.path.join(disk_store.path, "objects", oid[:2], oid[2:])
    with open(path, "rb") as handle:
        assert hashlib.sha256(handle.read()).hexdigest() == oid
    assert os.stat(path).st_mode & 0o777 == 0o444


def test_disk_streams_large_blobs(disk_store, monkeypatch):
    monkeypatch.setattr(loose, "STREAM_THRESHOLD", 1000)
    monkeypatch.setattr(object_store, "CHUNK", 256)
    data = os.urandom(5000)
    oid = disk_store.objects.put_blob_file(io.BytesIO(data), len(data))
    assert oid == hash_object("blob", data)
    assert disk_store.objects.get(oid).body == data
    leftovers = [
        n for n in os.listdir(os.path.join(disk_store.path, "objects")) if n.startswith(".tmp")
    ]
    assert leftovers == []


def test_disk_stream_that_ends_early_leaves_nothing(disk_store, monkeypatch):
    monkeypatch.setattr(loose, "STREAM_THRESHOLD", 10)
    with pytest.raises(CorruptObject, match="ended"):
        disk_store.objects.put_blob_file(io.BytesIO(b"short"), 100)
    assert list(disk_store.objects.iter_oids()) == []
    assert not any(n.startswith(".tmp") for n in os.listdir(disk_store.objects.folder))


def test_spool_spills_to_disk_past_the_threshold(tmp_path, monkeypatch):
    monkeypatch.setattr(object_store, "STREAM_THRESHOLD", 100)
    stream, size = object_store.spool(io.BytesIO(b"a" * 1000), str(tmp_path))
    assert size == 1000 and stream.read() == b"a" * 1000
    assert not isinstance(stream, io.BytesIO)
    small, size = object_store.spool(io.BytesIO(b"abc"))
    assert (small.read(), size) == (b"abc", 3)


def test_open_refuses_a_folder_that_is_not_a_store(tmp_path):
    with pytest.raises(StoreNotFound, match="not a yyb store"):
        Store.open(str(tmp_path))
    (tmp_path / "format").write_text("yyb-store 99\n")
    with pytest.raises(StoreNotFound, match="unknown store format"):
        Store.open(str(tmp_path))


def test_init_is_idempotent_and_refuses_non_empty_folders(tmp_path):
    first, new = Store.init(str(tmp_path / "s"))
    again, new_again = Store.init(str(tmp_path / "s"))
    assert new and not new_again and first.path == again.path
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "file").write_text("x")
    with pytest.raises(Exception, match="non-empty"):
        Store.init(str(tmp_path / "full"))


def test_put_many_writes_every_object_durably(store):
    items = [("blob", os.urandom(50)) for _ in range(40)] + [("blob", b"same")] * 3
    oids = store.objects.put_many(items)
    assert oids == [hash_object(k, b) for k, b in items]
    for oid, (_, body) in zip(oids, items, strict=True):
        assert store.objects.get(oid).body == body
    if store.path:
        leftovers = [
            f
            for _, _, files in os.walk(store.objects.folder)
            for f in files
            if f.startswith(".tmp")
        ]
        assert leftovers == []


def test_put_many_failure_leaves_no_temp_files(disk_store, monkeypatch):
    from yyb.errors import StoreIOError

    calls = {"n": 0}
    real_rename = os.rename

    def flaky_rename(src, dst):
        calls["n"] += 1
        if calls["n"] == 5:
            raise OSError(28, "No space left on device")
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", flaky_rename)
    with pytest.raises(StoreIOError, match="no space left"):
        disk_store.objects.put_many([("blob", str(i).encode()) for i in range(30)])
    monkeypatch.undo()
    leftovers = [
        f
        for _, _, files in os.walk(disk_store.objects.folder)
        for f in files
        if f.startswith(".tmp")
    ]
    assert leftovers == []
    written = list(disk_store.objects.iter_oids())
    assert len(written) == 4  # the four renamed before the failure are whole objects
    for oid in written:
        disk_store.objects.get(oid)


def test_large_files_hash_through_slices_of_a_mapping(tmp_path, monkeypatch):
    monkeypatch.setattr(object_store, "MAP_THRESHOLD", 1)
    monkeypatch.setattr(object_store, "MAP_SLICE", 1 << 16)
    data = os.urandom(300_001)
    path = tmp_path / "big"
    path.write_bytes(b"xyz" + data)
    with open(path, "rb") as handle:
        handle.seek(3)  # an offset that is not page-aligned
        assert object_store.hash_stream("blob", handle, len(data)) == hash_object("blob", data)
        assert handle.tell() == 3 + len(data)
    stream = io.BytesIO(data)  # no file descriptor: the read loop
    assert object_store.hash_stream("blob", stream, len(data)) == hash_object("blob", data)
