#!/usr/bin/env python3
"""`yyb bundle create` and `yyb bundle verify` against Git and plain SHA-256, run by hand.

Builds a store of --objects small blobs (50-2000 random bytes) linked from one record under
one ref, and a Git repository of the same blobs (one tree, one commit), then measures in the
same run:
  create:  `yyb bundle create F refs/notes/all`  vs  `git bundle create F --all`
  verify:  `yyb bundle verify F` (hashes every object)  vs  plain SHA-256 of the bundle's bytes
Usage: python tools/bench_bundle.py [--objects 100000]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def blobs(count: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(rng.randint(50, 2000)) for _ in range(count)]


def timed(argv: list[str], **kw) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    return time.perf_counter() - start


def build_git(path: Path, bodies: list[bytes], scratch: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=env)
    scratch.mkdir()
    names = []
    for i, body in enumerate(bodies):
        name = scratch / f"{i:07d}"
        name.write_bytes(body)
        names.append(str(name))
    oids = subprocess.run(["git", "-C", str(path), "hash-object", "-w", "--stdin-paths"],
                          input="\n".join(names).encode(), capture_output=True, check=True,
                          env=env).stdout.decode().split()
    shutil.rmtree(scratch)
    listing = "".join(f"100644 blob {oid}\tf{i:07d}\n" for i, oid in enumerate(oids))
    tree = subprocess.run(["git", "-C", str(path), "mktree"], input=listing.encode(),
                          capture_output=True, check=True, env=env).stdout.decode().strip()
    commit = subprocess.run(["git", "-C", str(path), "commit-tree", tree, "-m", "all"],
                            capture_output=True, check=True, env=env).stdout.decode().strip()
    subprocess.run(["git", "-C", str(path), "update-ref", "refs/heads/main", commit],
                   check=True, env=env)


def build_yyb(path: Path, bodies: list[bytes]) -> None:
    from yyb.store.repo import Store

    store, _ = Store.init(str(path))
    oids = store.objects.put_many([("blob", body) for body in bodies])
    note = store.objects.put_record({"schema_version": "yyb_note.v1", "message": "all",
                                     "links": {"blobs": sorted(set(oids))}})
    store.refs.update("refs/notes/all", note, reason="bench")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=100_000)
    args = parser.parse_args()
    yyb = [sys.executable, "-m", "yyb"]
    bodies = blobs(args.objects)
    with tempfile.TemporaryDirectory(prefix="yyb-bench-bundle-") as tmp:
        root = Path(tmp)
        build_yyb(root / "store", bodies)
        build_git(root / "git", bodies, root / "scratch")
        git_create = timed(["git", "-C", str(root / "git"), "bundle", "create",
                            str(root / "git.bundle"), "--all"])
        yyb_create = timed([*yyb, "--store", str(root / "store"), "bundle", "create",
                            str(root / "yyb.bundle"), "refs/notes/all"])
        data_path = root / "yyb.bundle"
        start = time.perf_counter()
        with open(data_path, "rb") as handle:
            hashlib.file_digest(handle, "sha256")
        plain = time.perf_counter() - start
        yyb_verify = timed([*yyb, "bundle", "verify", str(data_path)])
        size = data_path.stat().st_size
        git_size = (root / "git.bundle").stat().st_size
    mib = size / (1 << 20)
    print(f"| measure ({args.objects} objects) | yyb | baseline | ratio |")
    print("|---|---|---|---|")
    print(f"| bundle create | {yyb_create:.2f} s ({mib:.0f} MiB) | git bundle create --all: "
          f"{git_create:.2f} s ({git_size / (1 << 20):.0f} MiB) | {yyb_create / git_create:.2f}x |")
    print(f"| bundle verify (every object hashed) | {yyb_verify:.2f} s "
          f"({mib / yyb_verify:.0f} MiB/s) | sha256 of the bundle's bytes: {plain:.3f} s "
          f"({mib / plain:.0f} MiB/s) | {plain / yyb_verify:.2f} of its speed |")


if __name__ == "__main__":
    main()
