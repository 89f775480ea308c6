"""Push and fetch between stores (yyb/store/transfer.py, docs/remotes.md): only what the other
side lacks crosses; refs move by compare-and-swap as fast-forwards; a cut transfer leaves
nothing half-done and its rerun completes; two pushes at once leave a consistent store; a
lying peer is caught."""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import Yyb, note
from yyb.store import remotes, transfer
from yyb.store.fsck import fsck
from yyb.store.repo import Store


def _errors(store: Store) -> list:
    return [f for f in fsck(store) if f.level == "error"]


def _notes(store: Store, ref: str, *messages: str) -> list[str]:
    """Move ``ref`` through a record per message (each linking a blob of its own)."""
    oids = []
    for message in messages:
        blob = store.objects.put("blob", message.encode() * 50)
        oid = store.objects.put_record(note(message, body=blob))
        store.refs.update(ref, oid, reason=message)
        oids.append(oid)
    return oids


@pytest.fixture
def pair(tmp_path: Path):
    here, _ = Store.init(str(tmp_path / "here"))
    there, _ = Store.init(str(tmp_path / "there"))
    return here, there


def push(here: Store, there: Store, *refs: str, force: bool = False):
    return remotes.push(here, remotes.parse(f"file://{there.path}"), list(refs), force)


def test_a_push_sends_what_is_lacking_and_a_second_sends_nothing(pair):
    here, there = pair
    _notes(here, "refs/notes/a", "one", "two")
    first = push(here, there, "refs/notes/a")
    assert [m.how for m in first.imported.moves] == ["adopt"]
    assert first.objects == 6  # two notes, two blobs, two ref updates
    assert there.refs.read("refs/notes/a") == here.refs.read("refs/notes/a")
    assert there.refs.log_head("refs/notes/a") == here.refs.log_head("refs/notes/a")
    assert _errors(there) == []
    again = push(here, there, "refs/notes/a")
    assert again.objects == 0 and [m.how for m in again.imported.moves] == ["none"]
    _notes(here, "refs/notes/a", "three")
    more = push(here, there, "refs/notes/a")
    assert more.objects == 3  # the new note, its blob, its update: nothing already there
    assert more.sent < first.sent


def test_fetch_brings_back_what_was_pushed(pair, tmp_path):
    here, there = pair
    _notes(here, "refs/notes/a", "one")
    push(here, there, "refs/notes/a")
    back, _ = Store.init(str(tmp_path / "back"))
    got = remotes.fetch(back, remotes.parse(there.path), ["refs/notes/a"])
    assert got.objects == 3 and back.refs.read("refs/notes/a") == here.refs.read("refs/notes/a")
    assert _errors(back) == []
    assert remotes.fetch(back, remotes.parse(there.path), ["refs/notes/a"]).objects == 0


def test_a_push_that_would_roll_back_or_rewrite_a_remote_ref_is_refused(pair, tmp_path):
    here, there = pair
    _notes(here, "refs/notes/a", "one")
    stale = Path(tmp_path / "stale")
    shutil.copytree(here.path, stale)  # this store as it was after "one"
    _notes(here, "refs/notes/a", "two")
    push(here, there, "refs/notes/a")
    ahead = there.refs.read("refs/notes/a")
    old = Store.open(str(stale))
    with pytest.raises(transfer.RemoteRefused, match="fast-forward"):
        push(old, there, "refs/notes/a")  # would set it back to "one"
    _notes(old, "refs/notes/a", "other")
    with pytest.raises(transfer.RemoteRefused, match="fast-forward"):
        push(old, there, "refs/notes/a")  # another history from "one"
    assert there.refs.read("refs/notes/a") == ahead and _errors(there) == []


def test_the_cli_pushes_to_a_named_remote_and_says_what_crossed(pair):
    here, there = pair
    _notes(here, "refs/notes/a", "one")
    yyb = Yyb(here.path)
    assert yyb("remote", "add", "origin", f"file://{there.path}").exit_code == 0
    listed = yyb("remote", "list", "--json")
    assert json.loads(listed.stdout) == {
        "remotes": [{"name": "origin", "url": f"file://{there.path}"}]
    }
    done = yyb("push", "origin", "refs/notes/a")
    assert done.exit_code == 0, done.stderr
    assert done.stdout.endswith(" refs/notes/a new\n")
    assert "transfer: 3 object(s);" in done.stderr
    shown = json.loads(yyb("push", "origin", "refs/notes/a", "--json").stdout)
    assert shown["transfer"]["objects"] == 0 and shown["refs"][0]["how"] == "up-to-date"
    assert _errors(here) == []  # the remotes file is part of the layout
    for args, code in (
        (("remote", "add", "origin", "file:///x"), 2),
        (("remote", "add", "bad name", "file:///x"), 2),
        (("remote", "add", "s3", "s3://Not_A_Bucket/prefix"), 2),
        (("push", "nowhere", "refs/notes/a"), 2),
        (("push", "origin", "refs/notes/none"), 1),
    ):
        refused = yyb(*args)
        assert refused.exit_code == code, (args, refused.stderr)
        assert refused.stderr.count("\n") == 1, refused.stderr


CUTTER = r"""
import os, subprocess, sys
# A stand-in for ssh (argv: [-p PORT] -- HOST COMMAND) that runs COMMAND here and passes on
# only the first LIMIT bytes of what is sent to it, then cuts the connection.
limit = int(os.environ["CUT_AFTER"])
command = sys.argv[-1]
child = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE)
sent = 0
while sent < limit:
    data = os.read(0, min(65536, limit - sent))
    if not data:
        break
    child.stdin.write(data)
    child.stdin.flush()
    sent += len(data)
child.stdin.close()
sys.exit(child.wait())
"""


def test_a_transfer_cut_halfway_lands_nothing_and_its_rerun_completes(pair, tmp_path, monkeypatch):
    here, there = pair
    _notes(here, "refs/notes/a", *(f"note {i}" for i in range(40)))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "yyb").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m yyb "$@"\n')
    (bindir / "yyb").chmod(0o755)
    cutter = tmp_path / "cutter.py"
    cutter.write_text(CUTTER)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv(remotes.SSH_ENV, f"{sys.executable} {cutter}")
    url = remotes.parse(f"ssh://localhost{there.path}")
    before = sorted(os.listdir(there.path))
    monkeypatch.setenv("CUT_AFTER", "9000")  # past the negotiation, inside the pack
    with pytest.raises(transfer.ProtocolError):
        remotes.push(here, url, ["refs/notes/a"])
    assert there.refs.read("refs/notes/a") is None and _errors(there) == []
    assert os.listdir(os.path.join(there.path, "tmp")) == []  # the cut pack was discarded
    monkeypatch.setenv("CUT_AFTER", str(1 << 30))
    done = remotes.push(here, url, ["refs/notes/a"])
    assert done.objects == 120 and there.refs.read("refs/notes/a") == here.refs.read("refs/notes/a")
    assert _errors(there) == [] and sorted(os.listdir(there.path)) == before


def test_two_pushes_of_one_ref_at_once_leave_one_winner_and_a_consistent_store(tmp_path):
    base, _ = Store.init(str(tmp_path / "base"))
    there, _ = Store.init(str(tmp_path / "there"))
    _notes(base, "refs/notes/a", "start")
    push(base, there, "refs/notes/a")
    sides = []
    for name in ("left", "right"):
        shutil.copytree(base.path, tmp_path / name)
        side = Store.open(str(tmp_path / name))
        _notes(side, "refs/notes/a", *(f"{name} {i}" for i in range(30)))
        sides.append(side)
    results: dict[str, object] = {}

    def run(side: Store) -> None:
        try:
            results[side.path] = push(side, there, "refs/notes/a")
        except transfer.RemoteRefused as exc:
            results[side.path] = exc

    threads = [threading.Thread(target=run, args=(side,)) for side in sides]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    won = [s for s in sides if isinstance(results[s.path], transfer.Sent)]
    assert len(won) == 1, results
    assert there.refs.read("refs/notes/a") == won[0].refs.read("refs/notes/a")
    assert _errors(there) == []


class Lying:
    """A sender that says the receiver lacks only the ref's own record: the thin bundle then
    leaves out what the record links, which the receiver does not hold."""

    @staticmethod
    def ask(oids: list[str]) -> list[str]:
        return oids[:1] if len(oids) > 1 else oids


def test_a_thin_pack_missing_what_it_links_is_refused_and_moves_nothing(pair):
    here, there = pair
    _notes(here, "refs/notes/a", "one")
    header = transfer.header_of(here, ["refs/notes/a"])
    reads, writes = os.pipe()
    reads_back, writes_back = os.pipe()
    server_channel = transfer.Channel(os.fdopen(reads, "rb"), os.fdopen(writes_back, "wb"))
    served = threading.Thread(target=remotes.serve, args=(there, "receive-pack", server_channel))
    served.start()
    channel = transfer.Channel(os.fdopen(reads_back, "rb"), os.fdopen(writes, "wb"))
    transfer.check_service(channel.receive(), "receive-pack")
    frontier = []

    def ask(oids):
        frontier.append(oids)
        return Lying.ask(oids) if len(frontier) == 1 else []

    transfer.send_pack(here, channel, header, ask)
    with pytest.raises(transfer.RemoteRefused, match="not in the bundle"):
        channel.receive()
    channel.send({"done": True})
    served.join(10)
    assert there.refs.read("refs/notes/a") is None and _errors(there) == []


def test_a_peer_that_claims_to_lack_what_it_was_not_asked_about_is_caught(pair):
    here, _ = pair
    _notes(here, "refs/notes/a", "one")
    with pytest.raises(transfer.ProtocolError, match="not asked about"):
        transfer.lacking(here, [here.refs.read("refs/notes/a")], lambda oids: ["0" * 64])


def test_loose_objects_land_each_after_what_it_links(pair):
    """A cut import of a few objects never leaves a record without what it links: the order
    they are written in puts every object after the ones it links."""
    from yyb.store.bundle import exchange

    here, _ = pair
    oids = _notes(here, "refs/notes/a", "one", "two", "three")
    chain = [here.refs.log_head("refs/notes/a")]
    while previous := here.objects.get_record(chain[-1]).get("links", {}).get("previous"):
        chain.append(previous)
    bodies = {here.objects.get_record(o)["links"]["body"] for o in oids}
    wanted = sorted(set(oids) | set(chain) | bodies)
    fresh = []
    for oid in wanted:
        kind, size, stream = here.objects.open_body(oid)
        with stream:
            body = stream.read()
        head = b"%s %d\x00" % (kind.encode(), size)
        fresh.append(exchange._Fresh(oid, kind, head + body, len(head)))
    order = [f.oid for f in exchange._dependencies_first(fresh)]
    assert sorted(order) == wanted and len(chain) == 3
    for at, oid in enumerate(order):
        if here.objects.get(oid).kind == "record":
            linked = {
                t
                for ts in here.objects.get_record(oid).get("links", {}).values()
                for t in (ts if isinstance(ts, list) else [ts])
            }
            assert linked & set(wanted) <= set(order[:at]), oid


def test_a_sender_that_cannot_finish_its_pack_ends_the_session_and_nothing_lands(pair, monkeypatch):
    """The pack streams as it is written; an object that stops verifying halfway (here a
    stand-in writer that fails after half the bytes) ends the session: the receiver, waiting
    for bytes that never come, sees the connection cut and keeps nothing."""
    from yyb.errors import CorruptObject
    from yyb.store.bundle import pack_form

    here, there = pair
    _notes(here, "refs/notes/a", "one", "two", "three")
    real = pack_form.write

    def half(store, handle, head, oids):
        class Stop:
            def __init__(self):
                self.written = 0

            def write(self, data):
                if self.written > 200:
                    raise CorruptObject(oids[-1], "changed while it was being bundled")
                handle.write(data)
                self.written += len(data)

        real(store, Stop(), head, oids)

    monkeypatch.setattr(transfer.pack_form, "write", half)
    with pytest.raises(transfer.ProtocolError, match="stopped sending the pack"):
        push(here, there, "refs/notes/a")
    assert there.refs.read("refs/notes/a") is None
    assert list(there.objects.iter_oids()) == []
    monkeypatch.setattr(transfer.pack_form, "write", real)
    assert [m.how for m in push(here, there, "refs/notes/a").imported.moves] == ["adopt"]
