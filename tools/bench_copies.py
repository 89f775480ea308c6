#!/usr/bin/env python3
"""What checking every copy of an object costs: this tree against another (a base commit's
files), on the same store, run by hand.

    git archive BASE | tar -x -C /tmp/base     # the tree to compare with
    python tools/bench_copies.py --base /tmp/base
    python tools/bench_copies.py --base /tmp/base --objects 2000 --repeat 1   # a smoke run

One store of --objects small blobs (tools/bench_store.py's ``small_blobs``), linked by records
of 1,000 links each, themselves linked from one record under one ref, packed by ``yyb gc``.
Measured in child processes, this tree and the base alternating, the best of --repeat kept:
  doctor:        the store's fsck (``yyb.store.fsck.fsck``), packed
  doctor loose:  the same, on a copy that was never packed
  verify-chain:  everything the ref reaches, packed
  read:          ``get`` of every object, then ``open_body`` of every object, packed
  re-unbundle:   a bundle of the ref imported into a store that holds every object already
                 (every local copy is compared with the bundle's bytes)
It prints a Markdown table: seconds for each tree, and this tree's over the base's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
SEED = 11
FAN = 1000

BUILD = """
import sys
from yyb.store import gc
from yyb.store.repo import Store
path, packed, count = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
sys.path.insert(0, sys.argv[4])
from bench_store import small_blobs
store, _ = Store.init(path)
blobs = store.objects.put_many([("blob", body) for body in small_blobs(count, %d)])
parts = [store.objects.put_record({"schema_version": "yyb_note.v1", "message": "part",
         "links": {"blobs": blobs[i:i + %d]}}) for i in range(0, len(blobs), %d)]
root = store.objects.put_record({"schema_version": "yyb_note.v1", "message": "all",
                                 "links": {"parts": parts}})
store.refs.update("refs/notes/all", root)
if packed:
    gc.gc(store)
""" % (SEED, FAN, FAN)  # noqa: UP031 (the script holds braces of its own)

MEASURES = {
    "doctor": """
from yyb.store.fsck import fsck
errors = [f for f in fsck(store) if f.level == "error"]
assert not errors, errors[:3]
""",
    "verify-chain": """
from yyb.store.fsck.verify_chain import verify_chain
assert list(verify_chain(store, "refs/notes/all")) == []
""",
    "read": """
oids = list(store.objects.iter_oids())
for oid in oids:
    store.objects.get(oid)
for oid in oids:
    kind, size, stream = store.objects.open_body(oid)
    stream.close()
""",
    "re-unbundle": """
from yyb.store.bundle import exchange as bundle
bundle.unbundle(store, sys.argv[2])
""",
}

TIMED = """
import sys, time
from yyb.store.repo import Store
store = Store.open(sys.argv[1])
began = time.perf_counter()
%s
print(time.perf_counter() - began)
"""


def child(tree: Path, code: str, *args: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {done.stderr.strip()}")
    return float(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else 0.0


def build(path: Path, packed: bool, count: int) -> None:
    child(HERE, BUILD, str(path), "1" if packed else "0", str(count), str(HERE / "tools"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, type=Path, help="the tree to compare with")
    parser.add_argument("--objects", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-copies-"))
    try:
        packed, loose = work / "packed", work / "loose"
        build(packed, True, options.objects)
        build(loose, False, options.objects)
        made = work / "all.bundle"
        child(HERE, "import sys\nfrom yyb.store import bundle\nfrom yyb.store.repo import Store\n"
              "s = Store.open(sys.argv[1])\n"
              "bundle.create(s, sys.argv[2], bundle.ref_tips(s, ['notes/all']))",
              str(packed), str(made))
        rows = [
            ("doctor", packed, MEASURES["doctor"], ()),
            ("doctor loose", loose, MEASURES["doctor"], ()),
            ("verify-chain", packed, MEASURES["verify-chain"], ()),
            ("read", packed, MEASURES["read"], ()),
            ("re-unbundle", packed, MEASURES["re-unbundle"], (str(made),)),
        ]
        print(f"{options.objects} objects, best of {options.repeat}, load "
              f"{os.getloadavg()[0]:.1f}\n")
        print("| measure | this tree | base | ratio |\n|---|---|---|---|")
        for name, store, code, args in rows:
            ours, theirs = [], []
            for _ in range(options.repeat):
                ours.append(child(HERE, TIMED % code, str(store), *args))
                theirs.append(child(options.base, TIMED % code, str(store), *args))
            a, b = min(ours), min(theirs)
            print(f"| {name} | {a:.2f} s | {b:.2f} s | {a / b:.2f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
