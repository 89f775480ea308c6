"""Bundles: round trips and fast-forward rules (hostile files: test_hostile.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.bundle.forge import refused
from tests.conftest import Yyb, flip_byte, note
from yyb.errors import NotFastForward, UsageError
from yyb.store.bundle import exchange as bundle
from yyb.store.repo import Store


def _chain(store: Store) -> tuple[str, str]:
    blob = store.objects.put("blob", b"log line\n")
    first = store.objects.put_record(note("first", log=blob))
    store.refs.update("refs/notes/x", first, reason="one")
    second = store.objects.put_record(note("second", previous=first))
    store.refs.update("refs/notes/x", second, reason="two")
    return first, second


def _made(tmp_path: Path, store: Store, *refs: str, version: int = 2) -> str:
    path = str(tmp_path / "x.bundle")
    bundle.create(store, path, bundle.ref_tips(store, list(refs), version))
    return path


def _empty(tmp_path: Path, name: str = "target") -> Store:
    return Store.init(str(tmp_path / name))[0]


def _objects_in(store: Store) -> list[str]:
    return list(store.objects.iter_oids())


# --- round trips ----------------------------------------------------------------------------


def test_round_trip_keeps_values_and_chains(store, tmp_path):
    first, second = _chain(store)
    path = _made(tmp_path, store, "notes/x")
    summary = bundle.verify(path)
    assert summary.header.refs == {"refs/notes/x": second}
    assert summary.objects == 5  # blob, two notes, two updates
    target = _empty(tmp_path)
    moves = bundle.unbundle(target, path).moves
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
    assert [m.how for m in bundle.unbundle(target, path).moves] == ["none"]
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
    assert [m.how for m in bundle.unbundle(target, new_path).moves] == ["adopt"]
    assert target.refs.read("refs/notes/x") == third
    # The target now moves on its own; the source's history no longer contains it.
    local = target.objects.put_record(note("local"))
    target.refs.update("refs/notes/x", local)
    with pytest.raises(NotFastForward):
        bundle.unbundle(target, new_path)
    assert target.refs.read("refs/notes/x") == local
    assert [m.how for m in bundle.unbundle(target, new_path, force=True).moves] == ["update"]
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


# --- damaged copies of real bundles ---------------------------------------------------------


def test_a_flipped_byte_names_the_object(disk_store, tmp_path):
    _chain(disk_store)
    path = _made(tmp_path, disk_store, "notes/x", version=1)  # the frame form names oids
    data = Path(path).read_bytes()
    start = data.index(b"\n\n") + 2
    frame_end = data.index(b"\n", start)
    oid = data[start : start + 64].decode()
    flip_byte(path, frame_end + 8)  # inside the first object's compressed bytes
    refused(tmp_path, path, 1, oid)


def test_truncation_and_trailing_garbage(disk_store, tmp_path):
    _chain(disk_store)
    path = _made(tmp_path, disk_store, "notes/x")
    data = Path(path).read_bytes()
    for cut in (len(data) - 1, len(data) - 40, len(data) // 2):
        Path(path).write_bytes(data[:cut])
        refused(tmp_path, path, 1)
    Path(path).write_bytes(data + b"x")
    refused(tmp_path, path, 1, "after the trailer")


def test_wrong_trailer(disk_store, tmp_path):
    _chain(disk_store)
    path = _made(tmp_path, disk_store, "notes/x")
    flip_byte(path, -1)
    refused(tmp_path, path, 1, "trailer")


def test_an_unlogged_ref_is_not_bundled(disk_store, tmp_path):
    """A ref written outside yyb has no chain to carry: refused, and no file is left."""
    oid = disk_store.objects.put("blob", b"x")
    Path(disk_store.path, "refs", "hand").write_text(oid + "\n")
    result = Yyb(disk_store.path)("bundle", "create", str(tmp_path / "b.bundle"), "hand")
    assert result.exit_code == 1 and "refs/hand" in result.stderr and "update log" in result.stderr
    assert not (tmp_path / "b.bundle").exists()
