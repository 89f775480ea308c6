"""Real processes against one disk store: identical writes, compare-and-swap races, locks.

Workers are forked processes (each opens the store itself, as separate yyb commands would);
a Barrier lines them up so they really race. Some tests pin one interleaving of two real
processes with Events, so that a race the scheduler rarely produces fails every time.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import queue
import stat
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest

from tests.conftest import note
from yyb.errors import ObjectMissing, RefLocked, RefMismatch
from yyb.store import file
from yyb.store.fsck import fsck
from yyb.store.objects.format import hash_object, header
from yyb.store.repo import Store

WORKERS = 4
STEPS = 25
COUNTER = "refs/counter"
# How long the test waits for any one child before it gives up on it (a hang, not a result).
PATIENCE = 60.0

ctx = multiprocessing.get_context("fork")


# --- running workers ---------------------------------------------------------------------------


def _report(target, args, results) -> None:
    """Child side: run ``target`` and send back its result or its traceback."""
    try:
        results.put(("ok", target(*args)))
    except BaseException:
        results.put(("error", traceback.format_exc()))


def run_processes(jobs: list[tuple]) -> list:
    """Run each (target, args) in its own process; return their results (in arrival order).

    Fails the test with the first child's traceback if any child raised.
    """
    results = ctx.Queue()
    procs = [ctx.Process(target=_report, args=(target, args, results)) for target, args in jobs]
    for proc in procs:
        proc.start()
    try:
        got = [results.get(timeout=PATIENCE) for _ in procs]
    finally:
        for proc in procs:
            proc.join(timeout=PATIENCE)
            if proc.is_alive():
                proc.kill()
                proc.join()
    failures = [detail for status, detail in got if status == "error"]
    assert not failures, failures[0]
    assert [proc.exitcode for proc in procs] == [0] * len(procs)
    return [value for _, value in got]


def errors(store: Store) -> list[str]:
    return [f.line() for f in fsck(store) if f.level == "error"]


def leftovers(store: Store) -> list[str]:
    """Temp files and lock files anywhere in the store (none may survive finished writers)."""
    found = []
    for folder, _, names in os.walk(store.path):
        for name in names:
            if name.startswith(file.TEMP_PREFIX) or name.endswith(".lock"):
                found.append(os.path.relpath(os.path.join(folder, name), store.path))
    found += [f"tmp/{n}" for n in os.listdir(os.path.join(store.path, "tmp"))]
    return found


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.init(str(tmp_path / "s"))[0]


# --- many writers of the same objects ----------------------------------------------------------


def payloads() -> list[tuple[str, object]]:
    """The objects every writer stores: blobs of several sizes and notes (one linking blobs)."""
    blobs = [b"", b"\n", b"\x00\xff" * 3, b"x" * 100_000, bytes(range(256)) * 64]
    blobs += [f"line {i}\n".encode() * (i + 1) for i in range(25)]
    notes = [note(f"note {i}") for i in range(25)]
    notes.append(note("index", parts=[hash_object("blob", b) for b in blobs]))
    return [("blob", b) for b in blobs] + [("record", n) for n in notes]


def _write_all(path: str, worker: int, barrier) -> tuple[int, list[str]]:
    store = Store.open(path)
    items = list(enumerate(payloads()))
    if worker % 2:  # half the writers go backwards, so each object is raced from both ends
        items.reverse()
    barrier.wait(timeout=PATIENCE)
    oids = {}
    for index, (kind, value) in items:
        if kind == "blob":
            oids[index] = store.objects.put("blob", value)
        else:
            oids[index] = store.objects.put_record(value)
    return worker, [oids[i] for i in sorted(oids)]


def _read_while_written(path: str, expected: list[str], barrier) -> list[str]:
    """A reader racing the writers: every read is missing or whole, never torn."""
    store = Store.open(path)
    barrier.wait(timeout=PATIENCE)
    torn, pending = [], set(expected)
    deadline = time.monotonic() + PATIENCE
    while pending and time.monotonic() < deadline:
        for oid in list(pending):
            try:
                store.objects.get(oid)
            except ObjectMissing:
                continue
            except Exception as exc:  # anything else is what this reader looks for
                torn.append(f"{oid}: {exc!r}")
            pending.discard(oid)
    return torn + [f"{oid}: never seen whole" for oid in sorted(pending)]


def test_writers_of_the_same_objects_agree_and_leave_only_whole_files(store):
    from yyb.store.objects.store import record_body

    expected, expected_bytes = [], {}
    for kind, value in payloads():
        body = value if kind == "blob" else record_body(value)
        expected.append(hash_object(kind, body))
        expected_bytes[expected[-1]] = header(kind, len(body)) + body
    barrier = ctx.Barrier(WORKERS + 1)
    jobs = [(_write_all, (store.path, w, barrier)) for w in range(WORKERS)]
    jobs.append((_read_while_written, (store.path, expected, barrier)))
    results = run_processes(jobs)

    torn = [r for r in results if isinstance(r, list)]
    assert torn == [[]], "a reader saw a partial object, or never saw one whole"
    written = sorted(r for r in results if isinstance(r, tuple))
    assert [w for w, _ in written] == list(range(WORKERS))
    assert all(oids == expected for _, oids in written), "writers disagree on an oid"

    on_disk = sorted(store.objects.iter_oids())
    assert on_disk == sorted(expected_bytes)
    for oid in on_disk:
        path = store.objects.path(oid)
        data = Path(path).read_bytes()
        assert hashlib.sha256(data).hexdigest() == oid  # what sha256sum would print
        assert path.endswith(os.path.join(oid[:2], oid[2:]))
        assert data == expected_bytes[oid]
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o444
    assert leftovers(store) == []
    assert errors(store) == []


def test_cli_writers_of_the_same_files_agree(store, tmp_path):
    """The same race through the real command line: 4 `hash-object -w --stdin-paths` at once."""
    folder = tmp_path / "in"
    folder.mkdir()
    paths = []
    for i in range(20):
        path = folder / f"f{i}"
        path.write_bytes(f"content {i}\n".encode() * (i * 50 + 1))
        paths.append(str(path))
    expected = [hash_object("blob", Path(p).read_bytes()) for p in paths]
    procs = []
    for w in range(WORKERS):
        order = paths if w % 2 == 0 else paths[::-1]
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "yyb",
                    "--store",
                    store.path,
                    "hash-object",
                    "-w",
                    "--stdin-paths",
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        )
        procs[-1].stdin.write(("\n".join(order) + "\n").encode())
        procs[-1].stdin.close()
    for w, proc in enumerate(procs):
        out = proc.stdout.read().decode()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=PATIENCE) == 0, err
        assert err == ""
        lines = out.splitlines()
        assert lines == (expected if w % 2 == 0 else expected[::-1])
    for oid in expected:
        assert hashlib.sha256(Path(store.objects.path(oid)).read_bytes()).hexdigest() == oid
    assert leftovers(store) == []
    doctor = subprocess.run(
        [sys.executable, "-m", "yyb", "--store", store.path, "doctor"],
        capture_output=True,
        timeout=PATIENCE,
    )
    assert doctor.returncode == 0, doctor.stdout.decode() + doctor.stderr.decode()
    assert b"error" not in doctor.stdout


# --- compare-and-swap of one ref ---------------------------------------------------------------


def _increment(path: str, worker: int, steps: int, barrier, linger: float) -> tuple:
    """Move the counter ``steps`` times by compare-and-swap, retrying whenever another wins.

    With ``linger``, each commit waits that long after publishing the ref and before
    returning (as a slow disk's folder fsync would), which widens any window a race needs.
    """
    if linger:
        refs_folder, fsync_dir = os.path.join(path, "refs"), file.fsync_dir

        def slow_fsync_dir(folder: str) -> None:
            fsync_dir(folder)
            if folder == refs_folder:
                time.sleep(linger)

        file.fsync_dir = slow_fsync_dir  # this forked worker's copy of the module only
    store = Store.open(path)
    store.refs.lock_timeout = 10.0
    barrier.wait(timeout=PATIENCE)
    wins, retries = [], 0
    deadline = time.monotonic() + PATIENCE / 3
    while len(wins) < steps:
        if time.monotonic() > deadline:
            raise TimeoutError(f"worker {worker}: {len(wins)} wins after {retries} retries")
        step = len(wins)
        current = store.refs.read(COUNTER)
        target = store.objects.put_record(note(f"worker {worker} step {step}", parent=current))
        try:
            update = store.refs.update(
                COUNTER, target, old=current, reason=f"worker {worker} step {step}"
            )
        except (RefMismatch, RefLocked):
            retries += 1
            continue
        wins.append((step, target, update))
    return worker, wins, retries


def check_counter_history(store: Store, seed_update: str, results: list) -> None:
    """Every win is in the ref's chain exactly once, and the chain is one line of moves."""
    chain = list(store.refs.log(COUNTER))  # newest first
    assert len(chain) == WORKERS * STEPS + 1
    records = [record for _, record in chain]
    assert store.refs.read(COUNTER) == records[0]["new"]
    for (newer_oid, newer), (older_oid, older) in zip(chain, chain[1:], strict=False):
        assert newer["old"] == older["new"], f"{newer_oid} does not start where {older_oid} ended"
        assert newer["links"]["previous"] == older_oid
        assert "discarded" not in newer["links"] and "broke_lock" not in newer
    assert chain[-1][0] == seed_update and records[-1]["old"] is None

    wins = {
        update: (worker, step, target) for worker, won, _ in results for step, target, update in won
    }
    assert len(wins) == WORKERS * STEPS
    assert set(wins) | {seed_update} == {oid for oid, _ in chain}, "a successful update was lost"
    seen_steps: dict[int, list[int]] = {w: [] for w in range(WORKERS)}
    for oid, record in reversed(chain[:-1]):
        worker, step, target = wins[oid]
        assert record["new"] == target
        assert record["reason"] == f"worker {worker} step {step}"
        moved = store.objects.get_record(target)
        assert moved["message"] == f"worker {worker} step {step}"
        assert moved["links"]["parent"] == record["old"], "CAS replaced a value nobody read"
        seen_steps[worker].append(step)
    assert seen_steps == {w: list(range(STEPS)) for w in range(WORKERS)}


@pytest.mark.parametrize(
    "linger",
    [
        # "slow-fsync" lingers after each commit's fsync, widening the window in which a writer
        # could wrongly remove the next writer's lock.
        pytest.param(0.0, id="as-is"),
        pytest.param(0.005, id="slow-fsync"),
    ],
)
def test_concurrent_compare_and_swap_loses_no_update(store, linger):
    seed = store.objects.put_record(note("seed"))
    seed_update = store.refs.update(COUNTER, seed, old=None, reason="seed")
    barrier = ctx.Barrier(WORKERS)
    results = run_processes(
        [(_increment, (store.path, w, STEPS, barrier, linger)) for w in range(WORKERS)]
    )
    check_counter_history(store, seed_update, results)
    assert leftovers(store) == []
    assert errors(store) == []


def _writer_inside_the_lock(path: str, target: str, go, inside, release) -> str:
    """Wait for ``go``, then update the counter and pause inside the lock until ``release``."""
    store = Store.open(path)
    store.refs.lock_timeout = PATIENCE
    assert go.wait(PATIENCE)
    put_record = store.objects.put_record

    def pause_then_put(value: dict) -> str:  # called for the update record, lock held
        inside.set()
        assert release.wait(PATIENCE)
        return put_record(value)

    store.objects.put_record = pause_then_put
    current = store.refs.read(COUNTER)
    return store.refs.update(COUNTER, target, old=current, reason="writer B")


def test_a_commit_never_removes_the_next_writers_lock(store, monkeypatch):
    """Writer A commits; right after its rename, writer B (a real process) takes the lock.

    A finishing its update must leave B's lock alone, so a third writer still waits for B.
    """
    seed = store.objects.put_record(note("seed"))
    store.refs.update(COUNTER, seed, old=None)
    a, b, c = (store.objects.put_record(note(m)) for m in "abc")
    go, inside, release = ctx.Event(), ctx.Event(), ctx.Event()
    results = ctx.Queue()
    writer_b = ctx.Process(
        target=_report,
        args=(_writer_inside_the_lock, (store.path, b, go, inside, release), results),
    )
    writer_b.start()
    refs_folder = os.path.dirname(store.refs.path(COUNTER))
    lock = store.refs.path(COUNTER) + ".lock"
    real_fsync_dir = file.fsync_dir

    def after_the_rename(folder: str) -> None:
        real_fsync_dir(folder)
        if folder == refs_folder and not go.is_set():  # A's lock is now the ref file
            go.set()
            assert inside.wait(PATIENCE), "writer B never got the free lock"

    outcome = None
    try:
        monkeypatch.setattr(file, "fsync_dir", after_the_rename)
        store.refs.update(COUNTER, a, old=seed, reason="writer A")
        monkeypatch.undo()
        assert go.is_set() and inside.is_set()
        assert os.path.exists(lock), "writer A deleted the lock that writer B holds"
        store.refs.lock_timeout = 0.1
        with pytest.raises(RefLocked):
            store.refs.update(COUNTER, c, old=a, reason="writer C")
    finally:
        go.set()
        release.set()
        try:
            outcome = results.get(timeout=PATIENCE)
        except queue.Empty:
            pass
        writer_b.join(timeout=PATIENCE)
        if writer_b.is_alive():
            writer_b.kill()
            writer_b.join()
    assert outcome is not None and outcome[0] == "ok", outcome
    chain = [(r["old"], r["new"], r["reason"]) for _, r in store.refs.log(COUNTER)]
    assert chain == [(a, b, "writer B"), (seed, a, "writer A"), (None, seed, "")]
    assert leftovers(store) == []
    assert errors(store) == []


def _create_ref(path: str, name: str, target: str) -> str:
    return Store.open(path).refs.update(name, target, old=None)


def test_two_writers_creating_the_same_ref_folder_both_succeed(store, monkeypatch):
    """Writer A checks that refs/shared is missing; writer B (a real process) then creates it.

    Unpinned, this race made about 1 in 130 updates fail when 4 processes created refs in
    shared new folders.
    """
    a = store.objects.put_record(note("a"))
    b = store.objects.put_record(note("b"))
    shared = os.path.join(store.path, "refs", "shared")
    parent = os.getpid()
    real_isdir = os.path.isdir

    def isdir_then_b_creates_it(path) -> bool:
        answer = real_isdir(path)
        if os.getpid() == parent and path == shared and not answer:
            run_processes([(_create_ref, (store.path, "shared/b", b))])
        return answer

    monkeypatch.setattr(os.path, "isdir", isdir_then_b_creates_it)
    store.refs.update("shared/a", a, old=None)
    monkeypatch.undo()
    assert store.refs.read("shared/a") == a
    assert store.refs.read("shared/b") == b
    assert errors(store) == []


# --- locks --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [b"", b"garbage\n", b"yyb-lock pid=1 host=some-other-host boot=x\n", "self"],
    ids=["empty", "garbage", "other-host", "live-local-process"],
)
def test_a_lock_left_behind_blocks_updates_until_removed(store, content):
    a = store.objects.put_record(note("a"))
    b = store.objects.put_record(note("b"))
    store.refs.update("x", a, old=None)
    lock = os.path.join(store.path, "refs", "x.lock")
    if content == "self":  # names this live process, host and boot (docs/format.md), unflocked
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        content = f"yyb-lock pid={os.getpid()} host={os.uname().nodename} boot={boot}\n".encode()
    Path(lock).write_bytes(content)
    store.refs.lock_timeout = 0.1

    started = time.monotonic()
    with pytest.raises(RefLocked) as caught:
        store.refs.update("x", b, old=a)
    waited = time.monotonic() - started
    assert 0.1 <= waited < 3.0
    assert caught.value.ref == "refs/x"
    assert caught.value.path == lock
    assert Path(lock).read_bytes() == content, "a lock yyb did not take was touched"
    assert store.refs.read("x") == a
    assert len(list(store.refs.log("x"))) == 1

    young = [
        (f.level, f.code, f.subject) for f in fsck(store) if f.code in ("locked", "stale-lock")
    ]
    assert young == [("info", "locked", "refs/x.lock")]
    assert errors(store) == []
    os.utime(lock, (time.time() - 60, time.time() - 60))
    if content.startswith(b"yyb-lock") and b"some-other-host" not in content:
        assert errors(store) == []  # its holder is alive: still just "locked"
    else:
        assert [f.split(":")[0] for f in errors(store)] == ["error stale-lock refs/x.lock"]

    os.unlink(lock)
    update = store.refs.update("x", b, old=a)
    assert store.refs.read("x") == b
    newest = next(store.refs.log("x"))
    assert newest[0] == update and "broke_lock" not in newest[1]
    assert leftovers(store) == []
    assert errors(store) == []


def test_cli_reports_a_lock_left_behind_in_one_line(store):
    a = store.objects.put_record(note("a"))
    b = store.objects.put_record(note("b"))
    store.refs.update("x", a, old=None)
    lock = Path(store.path, "refs", "x.lock")
    lock.write_bytes(b"")
    done = subprocess.run(
        [sys.executable, "-m", "yyb", "--store", store.path, "update-ref", "--old", a, "x", b],
        capture_output=True,
        timeout=PATIENCE,
    )
    assert done.returncode == 1
    assert done.stdout == b""
    err = done.stderr.decode()
    assert err.startswith("yyb: error: ref refs/x is locked: ") and err.count("\n") == 1
    assert str(lock) in err
    assert lock.exists() and store.refs.read("x") == a


def _hold_lock(lock: str, taken, seconds: float) -> None:
    """Take a ref lock the way yyb does, keep it ``seconds``, then release it cleanly."""
    fd, _ = file.acquire_lock(lock, PATIENCE)
    taken.set()
    time.sleep(seconds)
    os.unlink(lock)
    os.close(fd)


def test_an_update_waits_for_a_live_holder_then_succeeds(store):
    a = store.objects.put_record(note("a"))
    b = store.objects.put_record(note("b"))
    store.refs.update("x", a, old=None)
    lock = store.refs.path("refs/x") + ".lock"
    taken = ctx.Event()
    holder = ctx.Process(target=_hold_lock, args=(lock, taken, 0.3))
    holder.start()
    try:
        assert taken.wait(PATIENCE)
        assert file.lock_state(lock)[0] == "held"
        store.refs.lock_timeout = PATIENCE
        started = time.monotonic()
        store.refs.update("x", b, old=a)
        assert time.monotonic() - started >= 0.1
    finally:
        holder.join(timeout=PATIENCE)
    assert holder.exitcode == 0
    assert store.refs.read("x") == b
    assert [r["new"] for _, r in store.refs.log("x")] == [b, a]
    assert leftovers(store) == []
    assert errors(store) == []
