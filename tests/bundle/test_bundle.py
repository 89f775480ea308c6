"""Bundles: round trips, fast-forward rules, and hostile files that must import nothing."""

from __future__ import annotations

import hashlib
import os
import resource
import zlib
from pathlib import Path

import pytest

from tests.conftest import Yyb, flip_byte, note
from yyb.errors import CorruptBundle, InvalidBundle, NotFastForward, UsageError
from yyb.store import bundle
from yyb.store.objects import header as object_header
from yyb.store.repo import Store


def _chain(store: Store) -> tuple[str, str]:
    blob = store.objects.put("blob", b"log line\n")
    first = store.objects.put_record(note("first", log=blob))
    store.refs.update("refs/notes/x", first, reason="one")
    second = store.objects.put_record(note("second", previous=first))
    store.refs.update("refs/notes/x", second, reason="two")
    return first, second


def _made(tmp_path: Path, store: Store, *refs: str) -> str:
    path = str(tmp_path / "x.bundle")
    bundle.create(store, path, bundle.ref_tips(store, list(refs)))
    return path


def _empty(tmp_path: Path, name: str = "target") -> Store:
    return Store.init(str(tmp_path / name))[0]


def _objects_in(store: Store) -> list[str]:
    return list(store.objects.iter_oids())


# --- hand-built bundles for hostile cases -------------------------------------------------


def _frame(oid: str, stored: bytes, packed: bytes | None = None) -> bytes:
    packed = zlib.compress(stored) if packed is None else packed
    return b"%s %d %d\n" % (oid.encode(), len(stored), len(packed)) + packed


def _forge(refs: dict[str, str], frames: list[bytes], count: int | None = None, caps="zlib"):
    head = b"yyb-bundle 1\nhash sha256\ncapabilities " + caps.encode() + b"\n"
    head += b"".join(f"{oid} {name}\n".encode() for name, oid in refs.items()) + b"\n"
    body = head + b"".join(frames) + b"end %d\n" % (len(frames) if count is None else count)
    return body + hashlib.sha256(body).digest()


def _stored(kind: str, body: bytes) -> tuple[str, bytes]:
    data = object_header(kind, len(body)) + body
    return hashlib.sha256(data).hexdigest(), data


def _write(tmp_path: Path, data: bytes) -> str:
    path = tmp_path / "hostile.bundle"
    path.write_bytes(data)
    return str(path)


# --- round trips ----------------------------------------------------------------------------


def test_round_trip_keeps_values_and_chains(store, tmp_path):
    first, second = _chain(store)
    path = _made(tmp_path, store, "notes/x")
    summary = bundle.verify(path)
    assert summary.header.refs == {"refs/notes/x": second}
    assert summary.objects == 5  # blob, two notes, two updates
    target = _empty(tmp_path)
    moves = bundle.unbundle(target, path)
    assert [m.how for m in moves] == ["adopt"]
    assert target.refs.read("refs/notes/x") == second
    assert target.refs.log_head("refs/notes/x") == store.refs.log_head("refs/notes/x")
    assert [o for o, _ in target.refs.log("notes/x")] == [o for o, _ in store.refs.log("notes/x")]
    from yyb.store.fsck import fsck

    assert [f for f in fsck(target) if f.level == "error"] == []


def test_importing_twice_is_a_no_op(disk_store, tmp_path):
    _chain(disk_store)
    path = _made(tmp_path, disk_store, "notes/x")
    target = _empty(tmp_path)
    bundle.unbundle(target, path)
    before = _objects_in(target), target.refs.log_head("refs/notes/x")
    assert [m.how for m in bundle.unbundle(target, path)] == ["none"]
    assert (_objects_in(target), target.refs.log_head("refs/notes/x")) == before


def test_fast_forward_moves_and_divergence_is_refused(disk_store, tmp_path):
    _chain(disk_store)
    old_path = _made(tmp_path, disk_store, "notes/x")
    target = _empty(tmp_path)
    bundle.unbundle(target, old_path)
    third = disk_store.objects.put_record(note("third"))
    disk_store.refs.update("refs/notes/x", third)
    new_path = str(tmp_path / "new.bundle")
    bundle.create(disk_store, new_path, bundle.ref_tips(disk_store, ["notes/x"]))
    assert [m.how for m in bundle.unbundle(target, new_path)] == ["adopt"]
    assert target.refs.read("refs/notes/x") == third
    # The target now moves on its own; the source's history no longer contains it.
    local = target.objects.put_record(note("local"))
    target.refs.update("refs/notes/x", local)
    with pytest.raises(NotFastForward):
        bundle.unbundle(target, new_path)
    assert target.refs.read("refs/notes/x") == local
    assert [m.how for m in bundle.unbundle(target, new_path, force=True)] == ["update"]
    assert target.refs.read("refs/notes/x") == third
    from yyb.store.fsck import fsck

    assert [f for f in fsck(target) if f.level == "error"] == []


def test_create_refuses_an_existing_file_and_leaves_nothing_on_failure(disk_store, tmp_path):
    _chain(disk_store)
    path = tmp_path / "x.bundle"
    path.write_bytes(b"keep")
    with pytest.raises(UsageError):
        bundle.create(disk_store, str(path), bundle.ref_tips(disk_store, ["notes/x"]))
    assert path.read_bytes() == b"keep"
    # A store with a damaged object cannot be bundled, and no file or temp file remains.
    victim = disk_store.refs.read("refs/notes/x")
    flip_byte(disk_store.objects.path(victim))
    other = tmp_path / "y.bundle"
    with pytest.raises(Exception) as caught:
        bundle.create(disk_store, str(other), bundle.ref_tips(disk_store, ["notes/x"]))
    assert victim in str(caught.value)
    assert sorted(os.listdir(tmp_path)) == ["store", "x.bundle"]


def test_example_experiment_round_trip_passes_doctor(tmp_path):
    source = str(tmp_path / "source")
    example = tmp_path / "example"
    assert Yyb(source)("example", "--dir", str(example), "--attempts", "1").exit_code == 0
    path = str(tmp_path / "all.bundle")
    created = Yyb(source)("bundle", "create", path, "--all")
    assert created.exit_code == 0, created.stderr
    checked = Yyb(source)("bundle", "verify", path)
    assert checked.exit_code == 0 and checked.stdout.startswith("ok ")
    target = str(tmp_path / "target")
    Store.init(target)
    run = Yyb(target)
    first = run("bundle", "unbundle", path)
    assert first.exit_code == 0, first.stderr
    assert all(line.endswith(" new") for line in first.lines)
    assert run("doctor").exit_code == 0
    plan = run("doctor", "--plan", str(example / "plan.json"))
    assert plan.exit_code == 0, plan.stdout + plan.stderr
    again = run("bundle", "unbundle", path)
    assert all(line.endswith(" up-to-date") for line in again.lines)
    heads = run("bundle", "list-heads", path)
    assert heads.stdout == Yyb(source)("show-ref").stdout
    # --plan picks the experiment's refs: the same set here, as the store holds one plan.
    by_plan = str(tmp_path / "plan.bundle")
    assert (
        Yyb(source)("bundle", "create", by_plan, "--plan", str(example / "plan.json")).exit_code
        == 0
    )
    assert run("bundle", "list-heads", by_plan).stdout == heads.stdout


def test_push_and_fetch_between_stores(disk_store, tmp_path):
    _, second = _chain(disk_store)
    target = _empty(tmp_path)
    pushed = Yyb(disk_store.path)("push", target.path, "notes/x")
    assert pushed.exit_code == 0, pushed.stderr
    assert target.refs.read("refs/notes/x") == second
    third = _empty(tmp_path, "third")
    fetched = Yyb(third.path)("fetch", disk_store.path, "refs/notes/x")
    assert fetched.exit_code == 0, fetched.stderr
    assert third.refs.read("refs/notes/x") == second
    assert os.listdir(os.path.join(third.path, "tmp")) == []


# --- hostile bundles ------------------------------------------------------------------------


def _refused(tmp_path: Path, path: str, code: int, *words: str) -> None:
    """verify and unbundle both fail with one error line and import nothing."""
    target = _empty(tmp_path, "victim")
    for args in (("bundle", "verify", path), ("bundle", "unbundle", path)):
        result = Yyb(target.path)(*args)
        assert result.exit_code == code, (args, result.stderr)
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("yyb: error: ")
        for word in words:
            assert word in result.stderr
    assert _objects_in(target) == [] and target.refs.names() == []


def test_a_flipped_byte_names_the_object(disk_store, tmp_path):
    _chain(disk_store)
    path = _made(tmp_path, disk_store, "notes/x")
    data = Path(path).read_bytes()
    start = data.index(b"\n\n") + 2
    frame_end = data.index(b"\n", start)
    oid = data[start : start + 64].decode()
    flip_byte(path, frame_end + 8)  # inside the first object's compressed bytes
    _refused(tmp_path, path, 1, oid)


def test_truncation_and_trailing_garbage(disk_store, tmp_path):
    _chain(disk_store)
    path = _made(tmp_path, disk_store, "notes/x")
    data = Path(path).read_bytes()
    for cut in (len(data) - 1, len(data) - 40, len(data) // 2):
        Path(path).write_bytes(data[:cut])
        _refused(tmp_path, path, 1)
    Path(path).write_bytes(data + b"x")
    _refused(tmp_path, path, 1, "after the trailer")


def test_wrong_trailer(disk_store, tmp_path):
    _chain(disk_store)
    path = _made(tmp_path, disk_store, "notes/x")
    flip_byte(path, -1)
    _refused(tmp_path, path, 1, "trailer")


def test_wrong_hash(tmp_path):
    oid, stored = _stored("blob", b"hello\n")
    _, other = _stored("blob", b"HELLO\n")
    path = _write(tmp_path, _forge({"refs/x": oid}, [_frame(oid, other)]))
    _refused(tmp_path, path, 1, oid, "hash")


def test_giant_declared_size(tmp_path):
    oid, stored = _stored("blob", b"hello\n")
    packed = zlib.compress(stored)
    giant = b"%s %d %d\n" % (oid.encode(), 10**18, len(packed)) + packed
    _refused(tmp_path, _write(tmp_path, _forge({"refs/x": oid}, [giant])), 1, oid)
    huge = b"%s %d %d\n" % (oid.encode(), len(stored), 10**18) + packed
    _refused(tmp_path, _write(tmp_path, _forge({"refs/x": oid}, [huge])), 1, oid)


def test_decompression_bomb_is_capped_at_the_declared_length(tmp_path):
    oid, stored = _stored("blob", b"hello\n")
    bomb = zlib.compress(stored + b"\0" * (256 << 20), 9)  # 256 MiB from ~256 KiB
    path = _write(tmp_path, _forge({"refs/x": oid}, [_frame(oid, stored, bomb)]))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    _refused(tmp_path, path, 1, oid, "declared")
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 64 << 10


@pytest.mark.parametrize("name", ["refs/../etc/passwd", "/etc/passwd", "refs/a/../../b", "x"])
def test_bad_ref_names_are_bad_input(tmp_path, name):
    oid, stored = _stored("blob", b"hello\n")
    path = _write(tmp_path, _forge({name: oid}, [_frame(oid, stored)]))
    _refused(tmp_path, path, 2, "ref name")


def test_duplicate_objects(tmp_path):
    oid, stored = _stored("blob", b"hello\n")
    frames = [_frame(oid, stored), _frame(oid, stored)]
    _refused(tmp_path, _write(tmp_path, _forge({"refs/x": oid}, frames)), 1, oid, "twice")


def test_missing_linked_object(tmp_path):
    blob, _ = _stored("blob", b"absent\n")
    from yyb.store.object_store import record_body

    oid, stored = _stored("record", record_body(note("n", log=blob)))
    path = _write(tmp_path, _forge({"refs/x": oid}, [_frame(oid, stored)]))
    _refused(tmp_path, path, 1, blob, "not in the bundle")


def test_unknown_capability_and_version(tmp_path):
    oid, stored = _stored("blob", b"hello\n")
    path = _write(tmp_path, _forge({"refs/x": oid}, [_frame(oid, stored)], caps="zlib shallow"))
    _refused(tmp_path, path, 2, "unknown capability 'shallow'")
    Path(path).write_bytes(b"yyb-bundle 2\n" + Path(path).read_bytes()[13:])
    _refused(tmp_path, path, 2, "version")
    Path(path).write_bytes(b"PK\x03\x04 not a bundle")
    _refused(tmp_path, path, 2)


def test_a_non_canonical_record_is_refused(tmp_path):
    import msgpack

    body = msgpack.packb({"schema_version": "yyb_note.v1", "message": "m"}, use_bin_type=True)
    body = body.replace(b"\xa1m", b"\xd9\x01m")  # str8 where fixstr is shortest
    oid, stored = _stored("record", body)
    path = _write(tmp_path, _forge({"refs/x": oid}, [_frame(oid, stored)]))
    _refused(tmp_path, path, 1, oid)


def test_reader_errors_are_typed(tmp_path):
    oid, stored = _stored("blob", b"hello\n")
    path = _write(tmp_path, _forge({"refs/x": oid}, [_frame(oid, stored)], count=5))
    with pytest.raises(CorruptBundle):
        bundle.verify(path)
    Path(path).write_bytes(b"")
    with pytest.raises(InvalidBundle):
        bundle.verify(path)
