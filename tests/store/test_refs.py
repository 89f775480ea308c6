"""Refs: names, compare-and-swap, the update chain, locks, interrupted updates."""

from __future__ import annotations

import os

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.conftest import note
from yyb.errors import (
    CorruptRef,
    InvalidRefName,
    ObjectMissing,
    RefConflict,
    RefLocked,
    RefMismatch,
    RefNotFound,
    UsageError,
)
from yyb.store.refs import names as refs
from yyb.store.refs.names import check_ref_name
from yyb.store.refs.store import ANY, REF_UPDATE


@pytest.mark.parametrize(
    "name, full",
    [
        ("plans/abc", "refs/plans/abc"),
        ("refs/cases/x-1", "refs/cases/x-1"),
        ("a/b.c/d_e+f=g@h", "refs/a/b.c/d_e+f=g@h"),
    ],
)
def test_valid_names(name, full):
    assert check_ref_name(name) == full


@pytest.mark.parametrize(
    "name",
    [
        "",
        "/etc/passwd",
        "refs/../x",
        "refs/a/../b",
        "a/./b",
        "a//b",
        "refs/",
        "a/b.lock",
        "a/.hidden",
        "a b",
        "a\nb",
        "a\x7fb",
        "a/b:c",
        "a~1",
        "refs/a*",
        "x" * 1100,
        "é",
    ],
)
def test_invalid_names(name):
    with pytest.raises(InvalidRefName):
        check_ref_name(name)


def test_update_read_and_log(store):
    a = store.objects.put_record(note("a"))
    b = store.objects.put_record(note("b"))
    first = store.refs.update("notes/x", a, old=None, reason="create")
    second = store.refs.update("notes/x", b, old=a, reason="move")
    assert store.refs.read("notes/x") == b
    entries = list(store.refs.log("refs/notes/x"))
    assert [oid for oid, _ in entries] == [second, first]
    newest, oldest = entries[0][1], entries[1][1]
    assert newest["schema_version"] == REF_UPDATE
    assert (newest["old"], newest["new"], newest["reason"]) == (a, b, "move")
    assert newest["links"] == {"target": b, "previous": first}
    assert (oldest["old"], oldest["new"]) == (None, a)
    assert oldest["links"] == {"target": a}


def test_compare_and_swap(store):
    a = store.objects.put("blob", b"a")
    b = store.objects.put("blob", b"b")
    store.refs.update("x", a, old=None)
    with pytest.raises(RefMismatch) as caught:
        store.refs.update("x", b, old=b)
    assert (caught.value.expected, caught.value.actual) == (b, a)
    with pytest.raises(RefMismatch):
        store.refs.update("x", b, old=None)  # must not exist, but does
    assert store.refs.read("x") == a
    assert len(list(store.refs.log("x"))) == 1


def test_target_must_exist(store):
    with pytest.raises(ObjectMissing):
        store.refs.update("x", "1" * 64)
    assert store.refs.names() == []


def test_delete_keeps_the_log(store):
    a = store.objects.put("blob", b"a")
    store.refs.update("x", a)
    store.refs.update("x", None, old=a, reason="gone")
    assert store.refs.read("x") is None
    assert [r["new"] for _, r in store.refs.log("x")] == [None, a]
    with pytest.raises(RefNotFound):
        store.refs.update("x", None)
    store.refs.update("x", a, old=None)
    assert [r["old"] for _, r in store.refs.log("x")] == [None, a, None]


def test_name_conflicts(store):
    a = store.objects.put("blob", b"a")
    store.refs.update("a/b", a)
    with pytest.raises(RefConflict):
        store.refs.update("a", a)
    with pytest.raises(RefConflict):
        store.refs.update("a/b/c", a)


def test_reason_must_be_one_line(store):
    a = store.objects.put("blob", b"a")
    with pytest.raises(UsageError):
        store.refs.update("x", a, reason="two\nlines")


def test_iter_refs_patterns(store):
    a = store.objects.put("blob", b"a")
    for name in ("plans/p1", "plans/p2", "cases/c1", "cases/sub/p1"):
        store.refs.update(name, a)
    names = lambda pattern: [n for n, _ in store.refs.iter_refs(pattern)]  # noqa: E731
    assert names(None) == ["refs/cases/c1", "refs/cases/sub/p1", "refs/plans/p1", "refs/plans/p2"]
    assert names("refs/plans") == ["refs/plans/p1", "refs/plans/p2"]
    assert names("p1") == ["refs/cases/sub/p1", "refs/plans/p1"]
    assert names("refs/*/p?") == ["refs/plans/p1", "refs/plans/p2"]
    assert names("cases/*") == ["refs/cases/c1"]
    assert names("cases/*/*") == ["refs/cases/sub/p1"]
    assert names("refs/plans/p[!1]") == ["refs/plans/p2"]


def test_disk_ref_file_format(disk_store):
    a = disk_store.objects.put("blob", b"a")
    disk_store.refs.update("notes/x", a)
    with open(os.path.join(disk_store.path, "refs", "notes", "x")) as handle:
        assert handle.read() == a + "\n"
    head = disk_store.refs.log_head("notes/x")
    with open(os.path.join(disk_store.path, "logs", "refs", "notes", "x")) as handle:
        assert handle.read() == head + "\n"
    assert not os.path.exists(os.path.join(disk_store.path, "refs", "notes", "x.lock"))


def test_disk_lock_blocks_until_timeout(disk_store):
    a = disk_store.objects.put("blob", b"a")
    disk_store.refs.lock_timeout = 0.05
    os.makedirs(os.path.join(disk_store.path, "refs", "notes"))
    lock = os.path.join(disk_store.path, "refs", "notes", "x.lock")
    open(lock, "w").close()
    with pytest.raises(RefLocked) as caught:
        disk_store.refs.update("notes/x", a)
    assert caught.value.path == lock
    assert os.path.exists(lock), "a lock we did not take is never broken"
    os.unlink(lock)
    disk_store.refs.update("notes/x", a)


def test_interrupted_update_is_rolled_back_by_the_next_update(disk_store):
    """A writer that died after writing its log head but before renaming its lock."""
    a = disk_store.objects.put("blob", b"a")
    b = disk_store.objects.put("blob", b"b")
    c = disk_store.objects.put("blob", b"c")
    first = disk_store.refs.update("x", a)

    class Died(Exception):
        pass

    def die(name, new, handle):
        raise Died

    original = disk_store.refs._commit
    disk_store.refs._commit = die
    with pytest.raises(Died):
        disk_store.refs.update("x", b)
    disk_store.refs._commit = original
    assert disk_store.refs.read("x") == a
    assert disk_store.refs.log_head("x") != first  # the log head ran ahead
    ahead = disk_store.refs.log_head("x")
    third = disk_store.refs.update("x", c, old=a)
    chain = [r for _, r in disk_store.refs.log("x")]
    assert [(r["old"], r["new"]) for r in chain] == [(a, c), (None, a)]
    assert chain[0]["links"] == {"target": c, "previous": first, "discarded": ahead}
    assert disk_store.refs.log_head("x") == third
    assert disk_store.objects.get_record(ahead)["new"] == b


def test_before_move_runs_on_record_and_before_the_move(store):
    """The work an update carries sees the move on record (pending) and the ref unmoved; if
    it fails, the update stays pending for the next writer to find and finish."""
    a = store.objects.put("blob", b"a")
    b = store.objects.put("blob", b"b")
    store.refs.update("x", a)
    seen = []

    def look():
        seen.append((store.refs.read("x"), store.refs.pending("x")))

    head = store.refs.update("x", b, old=a, before_move=look)
    assert seen == [(a, b)]
    assert store.refs.read("x") == b and store.refs.log_head("x") == head

    class Died(Exception):
        pass

    def die():
        raise Died

    c = store.objects.put("blob", b"c")
    with pytest.raises(Died):
        store.refs.update("x", c, old=b, before_move=die)
    assert store.refs.read("x") == b and store.refs.pending("x") == c
    store.refs.update("x", store.refs.pending("x"), old=b)
    assert store.refs.read("x") == c and store.refs.pending("x") is None


def test_a_ref_without_a_log_refuses_updates(disk_store):
    a = disk_store.objects.put("blob", b"a")
    os.makedirs(os.path.join(disk_store.path, "refs", "hand"))
    with open(os.path.join(disk_store.path, "refs", "hand", "made"), "w") as handle:
        handle.write(a + "\n")
    with pytest.raises(CorruptRef, match="no update log"):
        disk_store.refs.update("hand/made", a)


@pytest.mark.parametrize("content", ["", "abc\n", "a" * 64, "A" * 64 + "\n", "0" * 64 + "\n"])
def test_malformed_ref_file(disk_store, content):
    os.makedirs(os.path.join(disk_store.path, "refs", "bad"))
    with open(os.path.join(disk_store.path, "refs", "bad", "x"), "w") as handle:
        handle.write(content)
    with pytest.raises(CorruptRef):
        disk_store.refs.read("bad/x")


def test_any_means_no_expectation(store):
    a = store.objects.put("blob", b"a")
    store.refs.update("x", a, old=ANY)
    store.refs.update("x", a, old=ANY)
    assert len(list(store.refs.log("x"))) == 2


def _crash_holding_lock(lock: str) -> None:
    """A real process takes the lock the way yyb does, then dies by SIGKILL."""
    import signal
    import subprocess
    import sys

    code = (
        "import os, signal, sys; from yyb.store import file; "
        "file.acquire_lock(sys.argv[1], 1.0); os.kill(os.getpid(), signal.SIGKILL)"
    )
    done = subprocess.run([sys.executable, "-c", code, lock], timeout=60)
    assert done.returncode == -signal.SIGKILL


def test_abandoned_lock_is_replaced_and_recorded(disk_store):
    from yyb.store import file
    from yyb.store.fsck import fsck

    a = disk_store.objects.put("blob", b"a")
    b = disk_store.objects.put("blob", b"b")
    disk_store.refs.update("x", a)
    lock = disk_store.refs.path("refs/x") + ".lock"
    _crash_holding_lock(lock)
    state, holder = file.lock_state(lock)
    assert state == "abandoned"
    assert [(f.code, f.subject) for f in fsck(disk_store) if f.level == "error"] == [
        ("stale-lock", "refs/x.lock")
    ]
    disk_store.refs.update("x", b, old=a)
    newest = next(disk_store.refs.log("x"))[1]
    assert newest["broke_lock"]["pid"] == holder["pid"]
    assert not os.path.exists(lock)
    assert [f for f in fsck(disk_store) if f.level == "error"] == []


def test_a_live_holder_is_never_broken(disk_store):
    from yyb.store import file

    a = disk_store.objects.put("blob", b"a")
    lock = disk_store.refs.path("refs/x") + ".lock"
    fd, _ = file.acquire_lock(lock, 1.0)
    try:
        assert file.lock_state(lock)[0] == "held"
        disk_store.refs.lock_timeout = 0.05
        with pytest.raises(RefLocked):
            disk_store.refs.update("x", a)
        assert os.path.exists(lock)
    finally:
        os.close(fd)
        os.unlink(lock)


def test_store_wide_exclusive_lock(disk_store):
    from yyb.errors import LockHeld, UsageError
    from yyb.store.fsck import fsck

    with disk_store.exclusive("run-abc") as broken:
        assert broken is None
        with pytest.raises(LockHeld) as caught:
            with disk_store.exclusive("run-abc"):
                pass
        assert caught.value.holder["pid"] == os.getpid()
        assert [(f.level, f.code) for f in fsck(disk_store)] == [("info", "locked")]
    with disk_store.exclusive("run-abc"):
        pass
    assert [f for f in fsck(disk_store)] == []
    with pytest.raises(UsageError):
        with disk_store.exclusive("a/b"):
            pass


def test_exclusive_lock_of_a_crashed_process_is_taken_over(disk_store):
    lock = os.path.join(disk_store.path, "locks", "run-x.lock")
    os.makedirs(os.path.dirname(lock), exist_ok=True)
    _crash_holding_lock(lock)
    with disk_store.exclusive("run-x") as broken:
        assert broken is not None and broken["pid"] != os.getpid()


@given(st.text(alphabet="refs/lock.a-_Z9@\n", max_size=40))
@example("refs/a.lock/b")
@example("refs/.a")
@example("refs/a/..")
@example("refs//a")
def test_the_quick_ref_name_check_agrees_with_the_careful_one(name):
    def outcome(check):
        try:
            return check(name)
        except InvalidRefName:
            return None

    assert outcome(refs.check_ref_name) == outcome(refs.check_ref_name_carefully)


def test_a_ref_file_that_is_a_symlink_is_refused_not_followed(disk_store):
    """A ref file never names another file: a link in its place (to another ref, or to any
    file holding an oid) is a corrupt ref, not a way to read elsewhere."""
    import pytest

    from yyb.errors import CorruptRef

    oid = disk_store.objects.put("blob", b"x")
    disk_store.refs.update("notes/real", oid)
    alias = disk_store.refs.path("refs/notes/alias")
    os.symlink(disk_store.refs.path("refs/notes/real"), alias)
    with pytest.raises(CorruptRef, match="symbolic link"):
        disk_store.refs.read("notes/alias")
    assert disk_store.refs.read("notes/real") == oid


def test_memoized_reads_each_ref_once_and_an_update_forgets(disk_store):
    """Within ``memoized`` a ref's value and log head are read from disk once (a file changed
    behind the store's back is not seen again); an update through the store forgets them,
    and outside the context every read goes to disk."""
    refs_ = disk_store.refs
    a = disk_store.objects.put("blob", b"a")
    b = disk_store.objects.put("blob", b"b")
    refs_.update("notes/x", a, old=None)
    path = os.path.join(disk_store.path, "refs", "notes", "x")
    with refs_.memoized():
        head = refs_.log_head("notes/x")
        assert refs_.read("notes/x") == a and refs_.read("notes/y") is None
        with open(path, "w") as handle:
            handle.write(b + "\n")  # behind the store's back
        assert refs_.read("notes/x") == a  # remembered
        refs_.update("notes/y", b, old=None)
        assert refs_.read("notes/x") == b and refs_.read("notes/y") == b  # forgotten
        assert refs_.log_head("notes/x") == head
    with open(path, "w") as handle:
        handle.write(a + "\n")
    assert refs_.read("notes/x") == a


def test_memoized_records_are_those_of_the_named_schemas(disk_store):
    objects = disk_store.objects
    a = objects.put("blob", b"a")
    disk_store.refs.update("notes/x", a, old=None)
    update = disk_store.refs.log_head("notes/x")
    other = objects.put_record(note("n"))
    with objects.memoized([REF_UPDATE]):
        assert objects.read_record(update) is objects.read_record(update)
        assert objects.read_record(other) is not objects.read_record(other)
        assert objects.read_record(other) == objects.read_record(other)
    assert objects.read_record(update) is not objects.read_record(update)


def test_a_reading_pass_finds_objects_in_a_fan_out_folder_made_again(disk_store):
    """While memoized, fan-out folders are held open as first looked in; one that gc drops
    and another writer makes again is looked in afresh, and a folder that is a symbolic link
    is refused as it is outside a pass."""
    import shutil

    from yyb.errors import CorruptObject

    objects = disk_store.objects
    first = objects.put_record(note("first"))
    other = next(
        oid
        for oid in (objects.put_record(note(f"n{i}")) for i in range(50))
        if oid[:2] != first[:2]
    )
    root = os.path.join(disk_store.path, "objects")
    with objects.memoized([REF_UPDATE]):
        assert objects.read_record(first)["message"] == "first"
        saved = os.path.join(disk_store.path, "saved")
        shutil.move(os.path.join(root, first[:2]), saved)  # gone, as gc drops an emptied one
        os.makedirs(os.path.join(root, first[:2]))  # made again by the next writer
        os.rename(os.path.join(saved, first[2:]), os.path.join(root, first[:2], first[2:]))
        assert objects.read_record(first)["message"] == "first"
        shutil.move(os.path.join(root, other[:2]), saved + "2")
        os.symlink(saved + "2", os.path.join(root, other[:2]))
        with pytest.raises(CorruptObject, match="symbolic link"):
            objects.read_record(other)
