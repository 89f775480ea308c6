"""Bulk reads of a pack (Pack.begin_bodies / finish_bodies, and the helper process of
yyb.store.objects.pack_hashing): whatever the split between the reader and its helper,
whatever the order of begun reads, and whatever happens to the helper, a body comes back only for a
well-formed blob whose bytes hash to its oid."""

from __future__ import annotations

import hashlib
import os
import signal
import struct

import pytest

from tests.store.test_pack_reads import hostile_items, stored
from yyb.store import gc
from yyb.store.objects import pack
from yyb.store.objects import pack_hashing as prover
from yyb.store.repo import Store


@pytest.fixture
def big(tmp_path):
    """A pack of the hostile entries and 700 more good blobs, and what each name must give;
    names in a shuffled order, absent oids among them."""
    items, expected = hostile_items()
    for i in range(5):  # entries whose bytes are not what their oid names
        oid, _ = stored("blob", b"genuine %d" % i)
        items[oid], expected[oid] = b"blob 9\0forged %d" % i, None
    for i in range(700):
        body = os.urandom(i % 300) + b"big %d" % i
        oid, data = stored("blob", body)
        items[oid], expected[oid] = data, body
    path = pack.write(str(tmp_path), sorted(items.items()))
    names = [*expected, *(hashlib.sha256(b"absent %d" % i).hexdigest() for i in range(30))]
    names.sort(key=lambda name: hashlib.sha256(name.encode()).digest())
    return path, expected, names


def read_all(held: pack.Pack, names: list[str], size: int, helper: bool) -> list:
    """``names`` read ``size`` at a time, each list begun before the one before it is
    finished (as ``cat-object --batch`` does when more input is waiting)."""
    got: list = []
    pending = None
    for start in range(0, len(names), size):
        part = [name.encode() for name in names[start : start + size]]
        found = [None] * len(part)
        begun = held.begin_bodies(part, found, helper)
        if pending is not None:
            held.finish_bodies(pending[0], pending[1])
            got += pending[1]
        pending = (begun, found)
    held.finish_bodies(pending[0], pending[1])
    return got + pending[1]


def check(names, got, expected) -> None:
    for name, body in zip(names, got, strict=True):
        assert (None if body is None else bytes(body)) == expected.get(name), name


@pytest.mark.parametrize("size", [256, 300, 1000])
def test_bulk_reads_with_a_helper_give_what_reads_without_one_give(big, size, monkeypatch):
    path, expected, names = big
    asked = []
    real_ask = prover.Prover.ask

    def ask(self, keys):
        asked.append(len(keys))
        return real_ask(self, keys)

    monkeypatch.setattr(prover.Prover, "ask", ask)
    for helper in (False, True):
        held = pack.Pack.open(path)
        got = read_all(held, names, size, helper)
        check(names, got, expected)
        if helper:
            assert held._prover is not None and held._prover.open  # the helper did work
            pid = held._prover.pid
        held.close()
    assert asked and all(n % 32 == 0 and n > 0 for n in asked)
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # closing the pack reaped its helper


def test_the_helper_share_follows_which_side_waits(big):
    path, expected, names = big
    held = pack.Pack.open(path)
    shares = set()
    for _ in range(6):
        check(names, read_all(held, names, 300, True), expected)
        shares.add(held._share)
    held.close()
    assert all(pack.SHARE_STEP <= share <= 1 - pack.SHARE_STEP for share in shares)


DEAD_HELPER = """
import os, signal, time
from yyb.store.objects import pack_hashing
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as the CLI leaves it
helper = pack_hashing.Prover.start(lambda *args: None)
os.kill(helper.pid, signal.SIGKILL)
time.sleep(0.1)
print("sent", helper.ask(bytes(32 * 4)), "open", helper.open)
"""


def test_a_request_to_a_dead_helper_is_not_sent_and_the_reader_lives_on():
    """With SIGPIPE at its default (the CLI's), writing to a helper that died would end the
    reader; the request is refused instead, and the helper counted gone."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", DEAD_HELPER], capture_output=True, timeout=30)
    assert done.returncode == 0, (done.returncode, done.stderr.decode())
    assert done.stdout.decode().split() == ["sent", "False", "open", "False"]


@pytest.mark.parametrize("when", ["between", "while-begun"])
def test_a_helper_that_dies_leaves_the_reader_to_prove_alone(big, when):
    """SIGKILL of the helper, between reads or while it holds a share: the share comes back
    proved by the reader, no body goes unproved, and no second helper is forked."""
    path, expected, names = big
    held = pack.Pack.open(path)
    check(names, read_all(held, names, 400, True), expected)
    helper = held._prover
    assert helper is not None and helper.open
    part = [name.encode() for name in names[:600]]
    found = [None] * len(part)
    if when == "between":
        os.kill(helper.pid, signal.SIGKILL)
        begun = held.begin_bodies(part, found, True)
    else:
        os.kill(helper.pid, signal.SIGSTOP)  # so that it holds its share when it dies
        begun = held.begin_bodies(part, found, True)
        assert begun.split
        os.kill(helper.pid, signal.SIGKILL)
    held.finish_bodies(begun, found)
    check(names[:600], found, expected)
    assert not helper.open
    check(names, read_all(held, names, 400, True), expected)
    assert held._prover is helper and not helper.open  # not forked again
    held.close()


def test_a_helper_refused_by_the_system_is_done_without(big, monkeypatch):
    path, expected, names = big
    monkeypatch.setattr(os, "fork", lambda: (_ for _ in ()).throw(BlockingIOError(11, "no")))
    held = pack.Pack.open(path)
    check(names, read_all(held, names, 500, True), expected)
    assert held._prover is None
    held.close()


def test_requests_wait_when_the_pipes_would_not_hold_them(big):
    """A second request goes ahead only if both pipes hold it beside the first unread:
    otherwise the helper, blocked writing an answer nobody reads yet, and the reader,
    blocked writing a request, would wait for each other for ever."""
    path, expected, names = big
    held = pack.Pack.open(path)
    read_all(held, names, 300, True)
    helper = held._prover
    helper._room = (300 * 32, 1 << 20)  # as if the pipes were small
    keys = b"".join(bytes.fromhex(name) for name in names[:200])
    assert helper.ask(keys)
    assert not helper.ask(keys)  # would not fit beside the first
    assert helper.answer() is not None
    assert helper.ask(keys) and helper.answer() is not None
    held.close()


def corrupt_offset(path: str, entry: int, value: int) -> None:
    index = path[:-5] + ".idx"
    os.chmod(index, 0o644)
    with open(index, "r+b") as handle:
        data = handle.read()
        count = struct.unpack_from(">Q", data, 12)[0]
        at = pack.HEAD.size + pack.FANOUT.size + count * pack.HASH + 8 * entry
        handle.seek(at)
        handle.write(struct.pack(">Q", value))


@pytest.mark.parametrize("value", [(1 << 63) + 5, (1 << 64) - 1, 19])
def test_an_index_with_an_offset_out_of_the_pack_hands_out_nothing(big, value):
    """A damaged index (an offset past the pack, or inside the pack's header) makes no
    crash: what it names is left to ``read``, which says what is wrong."""
    path, expected, names = big
    corrupt_offset(path, 7, value)
    held = pack.Pack.open(path)
    bad = held._oid(7).hex()
    for helper in (False, True):
        got = read_all(held, names, 300, helper)
        assert got[names.index(bad)] is None
        for name, body in zip(names, got, strict=True):
            if body is not None:
                assert bytes(body) == expected[name]
    with pytest.raises(pack.PackError):
        held.read(bad)
    held.close()


def test_two_oids_with_one_prefix_are_each_found(tmp_path):
    """The dict is keyed by the first eight bytes of an oid: two oids sharing them (a
    collision someone made on purpose) are both found, each as itself."""
    items = []
    for i in range(400):
        body = b"body %d" % i
        items.append(stored("blob", body))
    twin_a = "ab" * 8 + "00" * 24
    twin_b = "ab" * 8 + "ff" * 24
    items += [(twin_a, b"blob 1\0a"), (twin_b, b"blob 1\0b")]  # index oids, not content
    path = pack.write(str(tmp_path), sorted(items))
    held = pack.Pack.open(path)
    names = [oid.encode() for oid, _ in sorted(items)]
    found = [None] * len(names)
    held.blob_bodies(names, found, False)  # builds the dict
    assert held._table is not None
    assert held.read(twin_a) == b"blob 1\0a" and held.read(twin_b) == b"blob 1\0b"
    bodies = dict(zip((n.decode() for n in names), found, strict=True))
    assert bodies[twin_a] is None and bodies[twin_b] is None  # they do not hash to their oids
    assert sum(body is not None for body in bodies.values()) == 400
    held.close()


def test_closing_one_of_two_helpers_waits_for_neither(big, tmp_path):
    """Two packs read in bulk, each with its helper (the second forked while the first's
    pipes were open): each closes at once, whatever the order, and leaves no process."""
    path, expected, names = big
    other_items = dict(stored("blob", b"other %d" % i) for i in range(600))
    (tmp_path / "other").mkdir()
    other = pack.write(str(tmp_path / "other"), sorted(other_items.items()))
    first, second = pack.Pack.open(path), pack.Pack.open(other)
    read_all(first, names, 300, True)
    read_all(second, sorted(other_items), 300, True)
    pids = [first._prover.pid, second._prover.pid]
    assert all(pids)
    previous = signal.signal(signal.SIGALRM, lambda *_: pytest.fail("close waited"))
    signal.alarm(20)
    try:
        first.close()
        second.close()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_stopped_helpers_are_reaped_and_not_forked_again(tmp_path):
    """``stop_helpers`` (a batch reader at its end) leaves no helper process behind; bulk
    reads after it still give the same bodies, proved in the reader alone."""
    store, _ = Store.init(str(tmp_path / "s"))
    blobs = {store.objects.put("blob", b"kept %d" % i): b"kept %d" % i for i in range(800)}
    gc.gc(store)
    names = [oid.encode() for oid in blobs]
    assert [bytes(b) for b in store.objects.blob_bodies(names, True)] == list(blobs.values())
    (held,) = store.objects.packs()
    pid = held._prover.pid
    assert pid
    store.objects.stop_helpers()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    assert [bytes(b) for b in store.objects.blob_bodies(names, True)] == list(blobs.values())
    assert not held._prover.open
