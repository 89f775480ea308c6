"""A real S3 server (SeaweedFS) on loopback: the fixture, and the S3 behaviour a store kept in
a bucket relies on, seen both through obstore and as raw signed requests (status codes)."""

from __future__ import annotations

import os
import threading
import urllib.request
from pathlib import Path

import pytest

from tests.remote.s3 import require_weed, s3_server_fixture, seaweedfs_s3

s3_server = s3_server_fixture()


@pytest.fixture
def store(s3_server, monkeypatch):
    """An obstore S3Store configured from the server's ``env`` alone."""
    obstore_store = pytest.importorskip("obstore.store")
    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    return obstore_store.S3Store(s3_server.bucket)


def _listening(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2)
    except urllib.error.HTTPError:
        return True  # it answered (403 to an unsigned request)
    except OSError:
        return False
    return True


def test_server_starts_and_stops_and_leaves_no_socket(tmp_path):
    with seaweedfs_s3(tmp_path, weed=require_weed()) as server:
        assert server.endpoint_url.startswith("http://127.0.0.1:")
        assert _listening(server.endpoint_url)
        assert server.request("HEAD").status == 200  # the bucket exists
        pid = server.pid
    assert not _listening(server.endpoint_url)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    left = [
        p
        for p in Path("/tmp").glob("seaweedfs-*.sock")
        if p.stem.rsplit("-", 1)[-1] in {str(port) for port in server.ports.values()}
    ]
    assert left == []


def test_the_credentials_are_required(s3_server):
    assert s3_server.request("PUT", "auth/k", body=b"x").status == 200
    assert s3_server.request("GET", "auth/k", secret_access_key="not-the-secret").status == 403
    with pytest.raises(urllib.error.HTTPError) as unsigned:
        urllib.request.urlopen(f"{s3_server.endpoint_url}/{s3_server.bucket}/auth/k", timeout=5)
    assert unsigned.value.code == 403


def test_put_get_list_and_range_get_with_obstore(store):
    import obstore

    pack = os.urandom(3 << 20)
    obstore.put(store, "rt/objects/pack/pack-1.pack", pack)
    obstore.put(store, "rt/objects/pack/pack-1.idx", b"index")
    obstore.put(store, "rt/refs/heads/main", b"0" * 64 + b"\n")
    assert bytes(obstore.get(store, "rt/objects/pack/pack-1.idx").bytes()) == b"index"
    assert (
        bytes(obstore.get_range(store, "rt/objects/pack/pack-1.pack", start=5, end=70005))
        == (pack[5:70005])
    )
    streamed = b"".join(
        bytes(c) for c in obstore.get(store, "rt/objects/pack/pack-1.pack").stream(1 << 20)
    )
    assert streamed == pack
    listed = sorted(m["path"] for batch in obstore.list(store, "rt/objects/") for m in batch)
    assert listed == ["rt/objects/pack/pack-1.idx", "rt/objects/pack/pack-1.pack"]
    assert obstore.head(store, "rt/objects/pack/pack-1.pack")["size"] == len(pack)


def test_create_only_put_fails_on_an_existing_key(store, s3_server):
    import obstore
    from obstore.exceptions import AlreadyExistsError

    obstore.put(store, "cond/lock", b"first writer", mode="create")
    with pytest.raises(AlreadyExistsError):
        obstore.put(store, "cond/lock", b"second writer", mode="create")
    assert bytes(obstore.get(store, "cond/lock").bytes()) == b"first writer"
    raw = s3_server.request("PUT", "cond/lock", body=b"raw", headers={"If-None-Match": "*"})
    assert raw.status == 412
    assert b"PreconditionFailed" in raw.body


def test_compare_and_swap_with_a_stale_etag_fails(store, s3_server):
    import obstore
    from obstore.exceptions import PreconditionError

    first = obstore.put(store, "cond/ref", b"a" * 64 + b"\n", mode="create")
    second = obstore.put(store, "cond/ref", b"b" * 64 + b"\n", mode={"e_tag": first["e_tag"]})
    assert second["e_tag"] != first["e_tag"]
    with pytest.raises(PreconditionError):
        obstore.put(store, "cond/ref", b"c" * 64 + b"\n", mode={"e_tag": first["e_tag"]})
    assert bytes(obstore.get(store, "cond/ref").bytes()) == b"b" * 64 + b"\n"
    stale = s3_server.request("PUT", "cond/ref", body=b"raw", headers={"If-Match": first["e_tag"]})
    assert stale.status == 412
    missing = s3_server.request(
        "PUT", "cond/never-written", body=b"raw", headers={"If-Match": first["e_tag"]}
    )
    assert missing.status == 412
    assert s3_server.request("HEAD", "cond/never-written").status == 404


def test_concurrent_create_only_puts_have_exactly_one_winner(store):
    """SeaweedFS serializes conditional writes to one key: a loser waits in 1 s steps before
    its 412, so few writers keep this quick."""
    import obstore
    from obstore.exceptions import AlreadyExistsError

    writers = 3
    for round_ in range(2):
        key, wins, lost, barrier = f"race/{round_}", [], [], threading.Barrier(writers)

        def writer(i: int, key=key, wins=wins, lost=lost, barrier=barrier) -> None:
            barrier.wait()
            try:
                obstore.put(store, key, f"writer {i}".encode(), mode="create")
                wins.append(i)
            except AlreadyExistsError:
                lost.append(i)

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(wins) == 1 and len(lost) == writers - 1
        assert bytes(obstore.get(store, key).bytes()) == f"writer {wins[0]}".encode()
