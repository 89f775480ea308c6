"""Bundles of version 2 (a pack): round trips, imports as a pack or loose, and hostile files.

Every hostile file is built byte by byte (tests/bundle/forge.py) and sealed with a correct
trailer unless the trailer is what is tested, so each case reaches the check it names.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path

import pytest

from tests.bundle.forge import Forge, accepted, refused, stored, write
from tests.conftest import Yyb, note
from yyb.errors import CorruptBundle, InvalidBundle, LockHeld
from yyb.store.bundle import exchange as bundle
from yyb.store.fsck import fsck
from yyb.store.objects import codec
from yyb.store.repo import Store

X = "refs/x"
PACK_HEAD = 20


def _hello() -> tuple[Forge, str]:
    forge = Forge(version=2)
    oid = forge.blob(b"hello\n")
    forge.ref(X, oid)
    return forge, oid


def _objects_start(data: bytes) -> int:
    """Where the pack head begins: after the header's empty line."""
    return data.index(b"\n\n") + 2


def _store_with(tmp_path: Path, blobs: int) -> Store:
    store = Store.init(str(tmp_path / "source"))[0]
    oids = store.objects.put_many([("blob", b"blob %d\n" % i) for i in range(blobs)])
    store.refs.update(X, store.objects.put_record(note("all", blobs=sorted(oids))), reason="t")
    return store


def _clean(store: Store) -> None:
    assert [f for f in fsck(Store.open(store.path)) if f.level == "error"] == []


def _packs(store: Store) -> list[str]:
    folder = os.path.join(store.path, "objects", "pack")
    return (
        sorted(n for n in os.listdir(folder) if n.endswith(".pack"))
        if os.path.isdir(folder)
        else []
    )


# --- both forms are read; the writer writes version 2 -----------------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_both_versions_round_trip(store, tmp_path, version):
    blob = store.objects.put("blob", b"log\n")
    first = store.objects.put_record(note("first", log=blob))
    store.refs.update("refs/notes/x", first, reason="one")
    path = str(tmp_path / "b.bundle")
    bundle.create(store, path, bundle.ref_tips(store, ["notes/x"], version))
    assert Path(path).read_bytes().startswith(b"yyb-bundle %d\n" % version)
    summary = bundle.verify(path)
    assert summary.header.version == version and summary.objects == 3
    target = Store.init(str(tmp_path / "target"))[0]
    bundle.unbundle(target, path)
    assert target.refs.read("refs/notes/x") == first
    assert target.refs.log_head("refs/notes/x") == store.refs.log_head("refs/notes/x")
    _clean(target)


def test_the_cli_writes_version_2_and_lists_its_heads(disk_store, tmp_path):
    oid = disk_store.objects.put("blob", b"x\n")
    disk_store.refs.update(X, oid, reason="t")
    path = str(tmp_path / "b.bundle")
    assert Yyb(disk_store.path)("bundle", "create", path, X).exit_code == 0
    assert Path(path).read_bytes().startswith(b"yyb-bundle 2\nhash sha256\ncapabilities pack")
    listed = Yyb(disk_store.path)("bundle", "list-heads", path)
    assert listed.stdout == f"{oid} {X}\n"
    assert Yyb(disk_store.path)("bundle", "verify", path).stdout == "ok 2 objects 1 refs\n"


def test_many_objects_land_as_one_pack_few_loose(tmp_path):
    source = _store_with(tmp_path, bundle.UNPACK_LIMIT + 20)
    path = str(tmp_path / "b.bundle")
    bundle.create(source, path, bundle.ref_tips(source, [X]))
    many = Store.init(str(tmp_path / "many"))[0]
    bundle.unbundle(many, path)
    assert len(_packs(many)) == 1 and list(many.objects.loose_oids()) == []
    assert many.refs.read(X) == source.refs.read(X)
    assert sorted(many.objects.iter_oids()) == sorted(source.objects.iter_oids())
    _clean(many)
    assert bundle.unbundle(many, path).moves[0].how == "none"  # again: nothing new, no pack
    assert len(_packs(many)) == 1
    few = _store_with(tmp_path / "few", 3)
    path = str(tmp_path / "few.bundle")
    bundle.create(few, path, bundle.ref_tips(few, [X]))
    bundle.unbundle(many, path, force=True)  # 5 objects, 2 of them new: loose
    # ... with the update record the forced move appends: 3 loose objects beside the pack
    assert len(_packs(many)) == 1 and len(list(many.objects.loose_oids())) == 3
    _clean(many)


def test_a_running_gc_makes_the_import_write_loose(tmp_path):
    source = _store_with(tmp_path, bundle.UNPACK_LIMIT)
    path = str(tmp_path / "b.bundle")
    bundle.create(source, path, bundle.ref_tips(source, [X]))
    target = Store.init(str(tmp_path / "target"))[0]
    with target.exclusive("gc"):
        with pytest.raises(LockHeld):
            with target.exclusive("gc"):
                pass
        bundle.unbundle(target, path)
    assert _packs(target) == [] and target.refs.read(X) == source.refs.read(X)
    _clean(target)


def test_a_file_changed_after_verification_lands_no_pack(tmp_path, monkeypatch):
    """The import pass checks every hash and the trailer again: a file swapped between the
    two passes leaves no pack, no ref and no object it did not prove."""
    source = _store_with(tmp_path, bundle.UNPACK_LIMIT + 5)
    path = str(tmp_path / "b.bundle")
    bundle.create(source, path, bundle.ref_tips(source, [X]))
    summary = bundle.verify(path)
    data = bytearray(Path(path).read_bytes())
    data[-40] ^= 0xFF  # inside the last object's bytes
    Path(path).write_bytes(bytes(data))
    monkeypatch.setattr(bundle, "verify", lambda *_: summary)
    target = Store.init(str(tmp_path / "target"))[0]
    with pytest.raises(CorruptBundle):
        bundle.unbundle(target, path)
    assert _packs(target) == [] and target.refs.names() == []
    assert os.listdir(os.path.join(target.path, "objects", "pack")) == []
    _clean(target)


def test_push_and_fetch_carry_version_2(tmp_path):
    source = _store_with(tmp_path, bundle.UNPACK_LIMIT + 1)
    target = Store.init(str(tmp_path / "target"))[0]
    assert Yyb(source.path)("push", target.path, X).exit_code == 0
    assert target.refs.read(X) == source.refs.read(X) and len(_packs(target)) == 1
    third = Store.init(str(tmp_path / "third"))[0]
    assert Yyb(third.path)("fetch", target.path, X).exit_code == 0
    assert third.refs.read(X) == source.refs.read(X)
    _clean(third)


# --- hostile files of version 2 ----------------------------------------------------------


def _victim(tmp_path: Path) -> Store:
    return Store.init(str(tmp_path / "flips"))[0]


def test_every_flipped_byte_is_refused(tmp_path):
    forge, _ = _hello()
    data = forge.build_pack()
    accepted(tmp_path, data)
    objects = _objects_start(data)
    victim = _victim(tmp_path)
    path = str(tmp_path / "flipped.bundle")
    for at in range(len(data)):
        flipped = bytearray(data)
        flipped[at] ^= 0xFF
        Path(path).write_bytes(bytes(flipped))
        expected = CorruptBundle if at >= objects else (CorruptBundle, InvalidBundle)
        with pytest.raises(expected):
            bundle.verify(path)
        with pytest.raises(expected):
            bundle.unbundle(victim, path)
    assert list(victim.objects.iter_oids()) == [] and victim.refs.names() == []
    assert victim.refs.log_names() == []


def test_an_object_that_is_not_the_one_named(tmp_path):
    """Oids are computed, never declared: bytes that do not hash to the oid a ref or a link
    names are another object, and the one named is missing."""
    forge, oid = _hello()
    _, other = stored("blob", b"HELLO\n")
    swapped = [other if o == oid else forge.objects[o] for o in sorted(forge.objects)]
    swapped.sort(key=lambda d: hashlib.sha256(d).digest())
    refused(tmp_path, write(tmp_path, forge.build_pack(swapped)), 1, oid, "not in the bundle")
    linked = Forge(version=2)
    blob = linked.blob(b"log\n")
    linked.ref(X, linked.record(note("n", log=blob)))
    tampered = [
        stored("blob", b"LOG\n")[1] if o == blob else linked.objects[o]
        for o in sorted(linked.objects)
    ]
    tampered.sort(key=lambda d: hashlib.sha256(d).digest())
    path = write(tmp_path, linked.build_pack(tampered))
    refused(tmp_path, path, 1, blob, "linked by")


@pytest.mark.parametrize("lie", [1, -1, 2**64 - 1, 10**6])
def test_a_pack_count_that_lies(tmp_path, lie):
    forge, _ = _hello()
    real = len(forge.objects)
    count = lie if lie > real else real + lie
    refused(tmp_path, write(tmp_path, forge.build_pack(count=count)), 1)


def test_an_object_length_pointing_outside_the_pack(tmp_path):
    forge, oid = _hello()
    objects = [forge.objects[o] for o in sorted(forge.objects)]
    last = objects[-1]
    body = last[last.index(b"\0") + 1 :]
    kind = last.split(b" ")[0]
    for size in (len(body) + 1, len(body) + 33, 10**19):
        objects[-1] = b"%s %d\0" % (kind, size) + body
        refused(tmp_path, write(tmp_path, forge.build_pack(objects)), 1, "remain")


def test_pack_magic_and_version(tmp_path):
    forge, _ = _hello()
    refused(tmp_path, write(tmp_path, forge.build_pack(magic=b"PACK\0\0\0\0")), 1, "YYBPACK")
    refused(tmp_path, write(tmp_path, forge.build_pack(pack_version=2)), 1, "version 2")


def test_duplicate_and_out_of_order_objects(tmp_path):
    forge, _ = _hello()
    forge.ref("refs/y", forge.blob(b"other\n"))
    ordered = [forge.objects[o] for o in sorted(forge.objects)]
    accepted(tmp_path, forge.build_pack(ordered))
    twice = ordered[:1] + ordered
    refused(tmp_path, write(tmp_path, forge.build_pack(twice)), 1, "twice")
    refused(tmp_path, write(tmp_path, forge.build_pack(ordered[::-1])), 1, "order")


def test_truncated_and_trailing_garbage(tmp_path):
    forge, _ = _hello()
    data = forge.build_pack()
    objects = _objects_start(data)
    for cut in (
        len(data) - 1,
        len(data) - 32,
        len(data) - 33,
        objects + PACK_HEAD + 3,
        objects + PACK_HEAD,
        objects + 5,
        objects,
    ):
        refused(tmp_path, write(tmp_path, data[:cut]), 1)
    refused(tmp_path, write(tmp_path, data + b"x"), 1, "after the trailer")
    refused(tmp_path, write(tmp_path, data + data[-32:]), 1, "after the trailer")


def test_the_trailer_binds_header_and_objects(tmp_path):
    forge, _ = _hello()
    data = bytearray(forge.build_pack())
    data[-1] ^= 0xFF
    refused(tmp_path, write(tmp_path, bytes(data)), 1, "trailer")
    other = Forge(version=2)
    other.ref(X, other.blob(b"hello\n"))
    other.ref("refs/y", other.blob(b"y\n"))
    spliced = other.build_pack()[:-32] + forge.build_pack()[-32:]  # another header's trailer
    refused(tmp_path, write(tmp_path, spliced), 1, "trailer")


def test_a_non_canonical_record_is_refused(tmp_path):
    import msgpack

    body = msgpack.packb({"schema_version": "yyb_note.v1", "message": "m"}, use_bin_type=True)
    body = body.replace(b"\xa1m", b"\xd9\x01m")  # str8 where fixstr is shortest
    forge = Forge(version=2)
    oid, data = stored("record", body)
    forge.objects[oid] = data
    forge.ref(X, oid)
    refused(tmp_path, write(tmp_path, forge.build_pack()), 1, oid)


def test_a_record_its_schema_refuses(tmp_path):
    forge = Forge(version=2)
    oid = forge.record({"schema_version": "yyb_note.v1", "message": 7})
    forge.ref(X, oid)
    refused(tmp_path, write(tmp_path, forge.build_pack()), 1, oid, "schema")


def test_a_missing_link(tmp_path):
    forge = Forge(version=2)
    absent, _ = stored("blob", b"absent\n")
    forge.ref(X, forge.record(note("n", log=absent)))
    refused(tmp_path, write(tmp_path, forge.build_pack()), 1, absent, "not in the bundle")


def test_a_broken_update_chain(tmp_path):
    forge, oid = _hello()
    other = forge.blob(b"other\n")
    forge.ref(X, oid, forge.update(X, None, other, target=other))  # the chain ends elsewhere
    refused(tmp_path, write(tmp_path, forge.build_pack()), 1, X)


@pytest.mark.parametrize("header", [b"yyb-bundle 3\n", b"yyb-bundle 1\n"])
def test_versions_are_not_confused(tmp_path, header):
    """An unknown version is refused in one line; a pack under a version 1 header is not
    read as frames (its capabilities are version 2's)."""
    forge, _ = _hello()
    data = forge.build_pack()
    refused(tmp_path, write(tmp_path, header + data[len(header) :]), 2, "version")


@pytest.mark.parametrize("caps", ["zlib ref-logs", "pack", "ref-logs", "pack pack ref-logs"])
def test_version_2_capabilities(tmp_path, caps):
    forge, _ = _hello()
    forge.caps = caps
    refused(tmp_path, write(tmp_path, forge.build_pack()), 2, "capabilit")


def test_a_giant_record_is_refused_before_it_is_hashed(tmp_path):
    forge, _ = _hello()
    objects = [forge.objects[o] for o in sorted(forge.objects)]
    objects.append(b"record %d\0" % (65 << 20))
    refused(tmp_path, write(tmp_path, forge.build_pack(objects)), 1)


def test_a_record_body_is_checked_in_place_and_copied_for_import(tmp_path):
    """The entry a verification reads is the mapped file; an import's is its own copy."""
    forge = Forge(version=2)
    value = note("n")
    oid = forge.record(value)
    forge.ref(X, oid)
    path = write(tmp_path, forge.build_pack())
    from yyb.store.bundle.reader import Reader

    with Reader(path) as reader:
        reader.header()
        bodies = {e.oid: (e.body(), e.stored()) for e in reader.objects(private=True)}
    assert codec.decode(bodies[oid][0]) == value
    assert bodies[oid][1].startswith(b"record ")
    data = Path(path).read_bytes()
    assert struct.unpack(">8sIQ", data[_objects_start(data) :][:PACK_HEAD])[2] == 2


@pytest.mark.parametrize(
    "head",
    [
        b"blob 0\0",
        b"record 12\0",
        b"blob 99999999999999999999\0",
        b"blob 01\0",
        b"blob -1\0",
        b"blob 1",
        b"tree 1\0",
        b"blob  1\0",
        b"blob 999999999999999999999\0",
        b"Blob 1\0",
        b"blob 1\0\0",
        b"blob 0x1\0",
        b"record\0",
    ],
)
def test_the_pack_reader_reads_headers_as_the_store_does(head):
    from yyb.errors import CorruptObject
    from yyb.store.bundle import pack_form as bundle_pack
    from yyb.store.objects.format import MAX_HEADER, parse_header

    data = head + b"\0" * 40
    fast = bundle_pack.HEADER.match(data, 0, MAX_HEADER)
    try:
        kind, size, start = parse_header(data)
    except CorruptObject:
        assert fast is None
    else:
        assert (fast.group(1).decode(), int(fast.group(2)), fast.end()) == (kind, size, start)
