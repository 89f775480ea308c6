"""A store kept in an S3 bucket (yyb/store/bucket/, docs/remotes.md "A store in a bucket"),
against a real S3 server on loopback (SeaweedFS): push, fetch back and verify; only the new
objects cross; a roll-back is refused; a push killed halfway and rerun completes with nothing
lost or duplicated; two pushes at once leave a consistent journal; doctor against the bucket
finds a flipped byte in a pack and a missing object, and every other tampering of the journal."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import note
from tests.remote.checks import fetched_back_verifies
from tests.remote.s3 import s3_server_fixture
from yyb.errors import NotFastForward, ObjectMissing, RefMismatch, UsageError
from yyb.store import remotes
from yyb.store.bucket import client, journal, sync
from yyb.store.fsck import fsck
from yyb.store.repo import Store

pytest.importorskip("obstore")
s3_server = s3_server_fixture()
ROOT = Path(__file__).resolve().parents[2]


def _child_env() -> dict[str, str]:
    """The environment of a yyb child process: this checkout first on its path."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    return s3_server


_count = iter(range(10**6))


@pytest.fixture
def url(s3_env) -> str:
    """A fresh store in the bucket, under a prefix of its own."""
    made = f"s3://{s3_env.bucket}/t{os.getpid()}-{next(_count)}/evidence"
    assert sync.init(client.parse(made)) is True
    return made


def _raw(s3_env):
    """The bucket itself, bypassing yyb (to look at keys and to tamper)."""
    from obstore.store import S3Store

    return S3Store(s3_env.bucket)


def _key(url: str, rel: str) -> str:
    return url.removeprefix("s3://").split("/", 1)[1] + "/" + rel


def _notes(store: Store, ref: str, *messages: str, size: int = 50) -> list[str]:
    oids = []
    for message in messages:
        blob = store.objects.put("blob", message.encode() * size)
        oid = store.objects.put_record(note(message, body=blob))
        store.refs.update(ref, oid, reason=message)
        oids.append(oid)
    return oids


def _errors(store: Store) -> list:
    return [f for f in fsck(store) if f.level == "error"]


def _doctor(url: str, env=None) -> tuple[int, list[dict]]:
    run = subprocess.run(
        [sys.executable, "-m", "yyb", "doctor", "--remote", url, "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert run.returncode in (0, 1), run.stderr
    return run.returncode, json.loads(run.stdout)


def _codes(findings: list[dict], level: str = "error") -> set[str]:
    return {f["code"] for f in findings if f["level"] == level}


@pytest.fixture
def here(tmp_path) -> Store:
    return Store.init(str(tmp_path / "here"))[0]


def test_push_fetch_back_and_verify(here, url, tmp_path):
    _notes(here, "refs/notes/a", "one", "two")
    _notes(here, "refs/notes/b", "three")
    first = remotes.push(here, remotes.parse(url), ["refs/notes/a", "refs/notes/b"])
    assert [m.how for m in first.imported.moves] == ["adopt", "adopt"]
    assert first.objects == 9  # three notes, three blobs, three ref updates
    code, findings = _doctor(url)
    assert code == 0 and _codes(findings) == set(), findings
    back = Store.init(str(tmp_path / "back"))[0]
    got = remotes.fetch(back, remotes.parse(url), ["refs/notes/a", "refs/notes/b"])
    assert got.objects == 9
    for ref in ("refs/notes/a", "refs/notes/b"):
        assert back.refs.read(ref) == here.refs.read(ref)
        assert back.refs.log_head(ref) == here.refs.log_head(ref)
    assert _errors(back) == []
    assert remotes.fetch(back, remotes.parse(url), ["refs/notes/a"]).objects == 0


def test_a_second_push_sends_only_the_new_objects(here, url):
    _notes(here, "refs/notes/a", "one", "two", size=2000)
    first = remotes.push(here, remotes.parse(url), ["refs/notes/a"])
    again = remotes.push(here, remotes.parse(url), ["refs/notes/a"])
    assert again.objects == 0 and [m.how for m in again.imported.moves] == ["none"]
    assert again.sent == 0  # nothing written: no pack, no commit
    _notes(here, "refs/notes/a", "six", size=2000)
    more = remotes.push(here, remotes.parse(url), ["refs/notes/a"])
    assert more.objects == 3
    assert 0 < more.sent < first.sent * 0.7
    state = journal.read_state(client.Bucket(client.parse(url)))
    assert state.number == 2 and len(state.packs) == 2
    assert state.refs["refs/notes/a"] == (
        here.refs.read("refs/notes/a"),
        here.refs.log_head("refs/notes/a"),
    )
    assert len(state.leaves) == 3  # each update once, oldest first
    assert [ref for _, ref in state.leaves] == ["refs/notes/a"] * 3


def test_a_push_that_would_roll_back_a_ref_in_the_bucket_is_refused(here, url, tmp_path):
    _notes(here, "refs/notes/a", "one")
    stale = tmp_path / "stale"
    shutil.copytree(here.path, stale)
    _notes(here, "refs/notes/a", "two")
    remotes.push(here, remotes.parse(url), ["refs/notes/a"])
    with pytest.raises(NotFastForward):
        remotes.push(Store.open(str(stale)), remotes.parse(url), ["refs/notes/a"])
    other = Store.init(str(tmp_path / "other"))[0]
    _notes(other, "refs/notes/a", "a history of its own")
    with pytest.raises(NotFastForward):
        remotes.push(other, remotes.parse(url), ["refs/notes/a"])
    with pytest.raises(UsageError):
        remotes.push(other, remotes.parse(url), ["refs/notes/a"], force=True)
    state = journal.read_state(client.Bucket(client.parse(url)))
    assert state.number == 1 and state.refs["refs/notes/a"][0] == here.refs.read("refs/notes/a")


def test_two_pushes_at_once_leave_a_consistent_journal(url, tmp_path):
    stores = []
    for n in range(4):
        store = Store.init(str(tmp_path / f"s{n}"))[0]
        _notes(store, "refs/notes/shared", f"from {n}")
        _notes(store, f"refs/notes/own{n}", f"own {n}")
        stores.append(store)
    outcomes: dict[tuple[str, int], object] = {}

    def push(n: int, name: str) -> None:
        try:
            outcomes[name, n] = remotes.push(stores[n], remotes.parse(url), [f"refs/notes/{name}"])
        except Exception as exc:  # each kept, so a failure of any kind is seen below
            outcomes[name, n] = exc

    threads = [threading.Thread(target=push, args=(n, f"own{n}")) for n in range(4)]
    threads += [threading.Thread(target=push, args=(n, "shared")) for n in range(2, 4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    state = journal.read_state(client.Bucket(client.parse(url)))
    for n in range(4):  # every push of a ref of its own landed, whoever won each race
        assert state.refs[f"refs/notes/own{n}"][0] == stores[n].refs.read(f"refs/notes/own{n}")
    assert all(not isinstance(outcomes[f"own{n}", n], Exception) for n in range(4)), outcomes
    shared = [n for n in (2, 3) if not isinstance(outcomes["shared", n], Exception)]
    refused = [outcomes["shared", n] for n in (2, 3) if n not in shared]
    assert all(isinstance(e, (NotFastForward, RefMismatch)) for e in refused), refused
    assert len(shared) == 1, (
        outcomes
    )  # of two pushes of one ref, one moved it, the other was refused
    assert state.refs["refs/notes/shared"][0] == stores[shared[0]].refs.read("refs/notes/shared")
    assert state.number == 5
    code, findings = _doctor(url)
    assert code == 0, findings


def test_a_push_killed_halfway_and_rerun_completes(here, url, s3_env):
    """The push is killed once its pack is in the bucket (it is large, so the kill lands
    while it is being sent or before the commit): the store still verifies, and the rerun
    completes with each object held once."""
    blob = here.objects.put("blob", os.urandom(24 << 20))
    here.refs.update("refs/notes/big", here.objects.put_record(note("big", body=blob)))
    env = _child_env()
    argv = [sys.executable, "-m", "yyb", "--store", here.path, "push", url, "refs/notes/big"]
    child = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE)
    raw, prefix = _raw(s3_env), _key(url, "objects/pack/")
    import obstore

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and child.poll() is None:
        keys = [m["path"] for batch in obstore.list(raw, prefix) for m in batch]
        if keys:
            break
        time.sleep(0.002)
    child.kill()
    child.wait()
    code, findings = _doctor(url)
    assert code == 0, findings  # a pack no commit names is a note, not a problem
    if not journal.read_state(client.Bucket(client.parse(url))).number:
        assert "unreferenced-pack" in _codes(findings, "info")  # sent, never committed
    state = journal.read_state(client.Bucket(client.parse(url)))
    assert state.number in (0, 1)
    rerun = remotes.push(here, remotes.parse(url), ["refs/notes/big"])
    assert [m.how for m in rerun.imported.moves] == ["none" if state.number else "adopt"]
    state = journal.read_state(client.Bucket(client.parse(url)))
    assert state.number == 1 and len(state.packs) == 1  # one pack: nothing duplicated
    code, findings = _doctor(url)
    assert code == 0 and _codes(findings, "info") <= {"unreferenced-pack"}, findings


def _pushed(here: Store, url: str) -> journal.State:
    _notes(here, "refs/notes/a", "one", "two")
    remotes.push(here, remotes.parse(url), ["refs/notes/a"])
    return journal.read_state(client.Bucket(client.parse(url)))


def test_doctor_finds_a_flipped_byte_in_a_pack(here, url, s3_env):
    import obstore

    state = _pushed(here, url)
    key = _key(url, f"objects/pack/pack-{state.packs[0]}.pack")
    raw = _raw(s3_env)
    data = bytearray(obstore.get(raw, key).bytes())
    data[len(data) // 2] ^= 0x01
    obstore.put(raw, key, bytes(data))
    code, findings = _doctor(url)
    assert code == 1
    assert "bad-pack" in _codes(findings)
    assert "ref-missing-object" in _codes(findings)  # what it held counts as missing


def test_doctor_finds_a_missing_object(here, url, s3_env):
    import obstore

    state = _pushed(here, url)
    _notes(here, "refs/notes/a", "three")
    remotes.push(here, remotes.parse(url), ["refs/notes/a"])
    # The first push's pack, gone: what the second links is missing.
    obstore.delete(_raw(s3_env), _key(url, f"objects/pack/pack-{state.packs[0]}.pack"))
    code, findings = _doctor(url)
    assert code == 1
    assert {"missing-pack", "broken-link"} <= _codes(findings), findings


@pytest.mark.parametrize(
    "tamper, code",
    [
        ("delete-commit", "bucket-journal"),
        ("rewrite-commit", "bucket-journal"),
        ("stray-key", "stray-file"),
        ("bad-index", "bad-pack"),
    ],
)
def test_doctor_names_each_tampering_of_the_journal(here, url, s3_env, tamper, code):
    import obstore

    state = _pushed(here, url)
    _notes(here, "refs/notes/a", "three")
    remotes.push(here, remotes.parse(url), ["refs/notes/a"])
    raw = _raw(s3_env)
    first = _key(url, journal.commit_key(1))
    if tamper == "delete-commit":
        obstore.delete(raw, first)
    elif tamper == "rewrite-commit":
        value = json.loads(bytes(obstore.get(raw, first).bytes()))
        value["time_ms"] += 1  # still well formed: only the digest chain tells
        obstore.put(raw, first, journal.encode(value))
    elif tamper == "stray-key":
        obstore.put(raw, _key(url, "objects/loose"), b"x")
    else:
        key = _key(url, f"objects/pack/pack-{state.packs[0]}.idx")
        data = bytearray(obstore.get(raw, key).bytes())
        data[30] ^= 0x01
        obstore.put(raw, key, bytes(data))
    status, findings = _doctor(url)
    assert status == 1 and code in _codes(findings), findings


def test_a_journal_that_does_not_replay_stops_a_push(here, url, s3_env):
    import obstore

    _pushed(here, url)
    obstore.put(_raw(s3_env), _key(url, journal.commit_key(3)), b"{}")  # a gap before it
    _notes(here, "refs/notes/a", "three")
    with pytest.raises(journal.BucketCorrupt):
        remotes.push(here, remotes.parse(url), ["refs/notes/a"])


def test_cli_push_fetch_doctor_and_bad_input(tmp_path, s3_env, url):
    env = _child_env()

    def yyb(*args, store="here"):
        argv = [sys.executable, "-m", "yyb", "--store", str(tmp_path / store), *args]
        return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path)

    assert yyb("store", "init").returncode == 0
    here = Store.open(str(tmp_path / "here"))
    _notes(here, "refs/notes/a", "one")
    assert yyb("remote", "add", "archive", url).returncode == 0
    pushed = yyb("push", "archive", "refs/notes/a", "--json")
    assert pushed.returncode == 0, pushed.stderr
    assert json.loads(pushed.stdout)["refs"][0]["how"] == "new"
    assert yyb("doctor", "--remote", "archive").returncode == 0
    assert yyb("store", "init", store="back").returncode == 0
    fetched = yyb("fetch", url, "refs/notes/a", store="back")
    assert fetched.returncode == 0, fetched.stderr
    empty = url.rsplit("/", 1)[0] + "/nothing-here"
    for argv in (("push", empty, "refs/notes/a"), ("doctor", "--remote", empty)):
        run = yyb(*argv)
        assert run.returncode == 2 and "no store in the bucket" in run.stderr, run.stderr
        assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    bad = yyb("push", "s3://No_Such/x", "refs/notes/a")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert yyb("doctor", "--remote", str(tmp_path)).returncode == 2
    down = {**env, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    here_path = str(tmp_path / "here")
    cut = subprocess.run(
        [sys.executable, "-m", "yyb", "--store", here_path, "push", url, "refs/notes/a"],
        capture_output=True,
        text=True,
        env=down,
    )
    assert cut.returncode == 1 and cut.stderr.count("\n") == 1, cut.stderr


def test_a_signed_experiment_in_the_bucket_verifies_there_and_fetched_back(
    url, tmp_path, monkeypatch
):
    """The example's signed run and a checkpoint, pushed with --plan: doctor and verify-log
    pass against the bucket itself; fetched back into a new store, doctor --plan and the
    report pass there; a second push sends nothing."""
    from tests.conftest import Yyb
    from yyb import signing

    key = str(tmp_path / "signing.key")
    public = signing.generate_key(key)
    monkeypatch.setenv(signing.KEY_ENV, key)
    root = tmp_path / "ex"
    yyb = Yyb(str(tmp_path / "store"))
    made = yyb("example", "--dir", str(root), "--attempts", "1", "--progress", "none")
    assert made.exit_code == 0, made.stderr
    held = tmp_path / "checkpoint.txt"
    assert yyb("checkpoint", "--output", str(held)).exit_code == 0
    plan = str(root / "plan.json")
    pushed = yyb("push", url, "--plan", plan, "--json")
    assert pushed.exit_code == 0, pushed.stderr
    assert json.loads(pushed.stdout)["transfer"]["objects"] > 50
    assert yyb("doctor", "--remote", url).exit_code == 0
    audit = yyb("verify-log", "--remote", url, "--checkpoint", str(held), "--trusted-key", public)
    assert audit.exit_code == 0, audit.stdout + audit.stderr
    assert "carried checkpoint" in audit.stderr
    other = tmp_path / "other.key"
    stranger = yyb(
        "verify-log",
        "--remote",
        url,
        "--checkpoint",
        str(held),
        "--trusted-key",
        signing.generate_key(str(other)),
    )
    assert stranger.exit_code == 1
    names = sorted(journal.read_state(client.Bucket(client.parse(url))).refs)
    back, again = fetched_back_verifies(yyb, url, names, tmp_path / "back", plan)
    report = back("report", "--plan", plan, "--no-layer")
    assert report.exit_code == 0 and "status: complete" in report.stdout
    assert again["objects"] == 0 and again["bytes_sent"] == 0


def test_snapshots_spare_a_writer_the_whole_journal_and_doctor_checks_them(
    here, url, s3_env, monkeypatch
):
    import obstore

    monkeypatch.setattr(journal, "SNAPSHOT_EVERY", 3)
    for n in range(7):
        _notes(here, f"refs/notes/n{n % 2}", f"note {n}")
        remotes.push(here, remotes.parse(url), [f"refs/notes/n{n % 2}"])
    bucket = client.Bucket(client.parse(url))
    whole, quick = journal.read_state(bucket), journal.read_state(bucket, whole=False)
    assert whole.number == quick.number == 7
    assert (whole.refs, whole.packs, whole.digest) == (quick.refs, quick.packs, quick.digest)
    assert whole.leaf_count == quick.leaf_count == 7 and len(quick.leaves) == 1
    read: list[str] = []
    real = client.Bucket.get

    def counted(self, key):
        read.append(key)
        return real(self, key)

    monkeypatch.setattr(client.Bucket, "get", counted)
    journal.read_state(bucket, whole=False)
    commits = [k for k in read if k.startswith("journal/")]
    assert commits == [journal.commit_key(7)]  # only the one after the snapshot
    monkeypatch.setattr(client.Bucket, "get", real)
    assert _doctor(url)[0] == 0
    raw, key = _raw(s3_env), _key(url, journal.snapshot_key(6))
    value = json.loads(bytes(obstore.get(raw, key).bytes()))
    value["refs"]["refs/notes/n0"] = value["refs"]["refs/notes/n1"]  # well formed, and false
    obstore.put(raw, key, journal.encode(value))
    status, findings = _doctor(url)
    assert status == 1 and "bucket-snapshot" in _codes(findings), findings
    value["digest"] = "0" * 64
    obstore.put(raw, key, journal.encode(value))
    _notes(here, "refs/notes/n0", "one more")
    with pytest.raises(journal.BucketCorrupt, match="digest"):  # commit 7 names another
        remotes.push(here, remotes.parse(url), ["refs/notes/n0"])


def test_a_push_of_many_refs_leaves_a_snapshot_the_next_push_reads_instead(here, url, monkeypatch):
    monkeypatch.setattr(journal, "SNAPSHOT_REFS", 3)
    names = [f"refs/notes/many{n}" for n in range(3)]
    for name in names:
        _notes(here, name, name)
    remotes.push(here, remotes.parse(url), names)
    bucket = client.Bucket(client.parse(url))
    assert [k for k, _ in bucket.list(journal.SNAPSHOTS)] == [journal.snapshot_key(1)]
    read: list[str] = []
    real = client.Bucket.get
    monkeypatch.setattr(client.Bucket, "get", lambda self, key: read.append(key) or real(self, key))
    _notes(here, names[0], "one more")
    remotes.push(here, remotes.parse(url), names[:1])
    assert not [k for k in read if k.startswith("journal/")]  # commit 1 itself is never read
    monkeypatch.setattr(client.Bucket, "get", real)
    assert _doctor(url)[0] == 0


def test_a_fetch_from_a_bucket_with_a_damaged_pack_writes_nothing(here, url, s3_env, tmp_path):
    """A bucket that lies (a pack byte flipped after the push, its index left as it was)
    serves nothing that does not hash: the fetch fails in one line and the store it would
    have written to holds no object and no ref."""
    import obstore

    state = _pushed(here, url)
    key = _key(url, f"objects/pack/pack-{state.packs[0]}.pack")
    raw = _raw(s3_env)
    data = bytearray(obstore.get(raw, key).bytes())
    data[-40] ^= 0x01  # inside the last object's bytes
    obstore.put(raw, key, bytes(data))
    back = Store.init(str(tmp_path / "back"))[0]
    run = subprocess.run(
        [sys.executable, "-m", "yyb", "--store", back.path, "fetch", url, "refs/notes/a"],
        capture_output=True,
        text=True,
        env=_child_env(),
    )
    assert run.returncode == 1 and run.stderr.count("\n") == 1, run.stderr
    assert "Traceback" not in run.stderr
    assert back.refs.names() == [] and list(back.objects.iter_oids()) == []


def test_a_forged_commit_naming_an_object_no_pack_holds_is_refused_by_fetch_and_doctor(
    here, url, s3_env, tmp_path
):
    """A commit written by hand that moves a ref to an oid the bucket does not hold."""
    import obstore

    state = _pushed(here, url)
    forged = {
        "format": journal.COMMIT_FORMAT,
        "number": 2,
        "previous": state.digest,
        "time_ms": 0,
        "packs": [],
        "refs": {"refs/notes/forged": {"old": None, "new": ["ab" * 32, "cd" * 32]}},
        "leaves": [["cd" * 32, "refs/notes/forged"]],
    }
    obstore.put(_raw(s3_env), _key(url, journal.commit_key(2)), journal.encode(forged))
    back = Store.init(str(tmp_path / "back"))[0]
    with pytest.raises(ObjectMissing):
        remotes.fetch(back, remotes.parse(url), ["refs/notes/forged"])
    assert back.refs.names() == []
    status, findings = _doctor(url)
    assert status == 1 and "ref-missing-object" in _codes(findings), findings
