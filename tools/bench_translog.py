#!/usr/bin/env python3
"""The transparency log's costs, run by hand: appends, proofs, verification, storage.

1. The cost of the log in a ref update: --updates ref updates in a disk store as yyb makes
   them, against the same updates in the same run with the log's lock and append replaced by
   nothing (the baseline); the difference per update is what the log costs. Rounds alternate.
2. A log of --leaves leaves (appended in batches of 10,000, one fsync each), then, over
   --samples random leaves and sizes: producing an inclusion proof (the leaf found by its hash
   among the leaf hashes, then the proof read from the subtree levels) and a consistency proof,
   and verifying each with merkle.py; medians and maxima.
3. Storage: the bytes of the log's files per leaf, and of the leaf line alone.
Usage: python tools/bench_translog.py [--updates 2000] [--leaves 1000000] [--samples 200]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from yyb.store.log import merkle  # noqa: E402
from yyb.store.log import transparency as translog
from yyb.store.repo import Store  # noqa: E402


class NoLog(translog.MemoryLog):
    """The baseline: a log that takes no lock and appends nothing."""

    @contextlib.contextmanager
    def locked(self):
        yield self

    def last(self):
        return ("0" * 64, "refs/none")

    def append(self, entries):
        pass


def updates(path: str, count: int, with_log: bool) -> float:
    store, _ = Store.init(path)
    if not with_log:
        store.refs.transparency = NoLog()
    targets = [store.objects.put("blob", f"{i}".encode()) for i in range(count)]
    start = time.perf_counter()
    for i, target in enumerate(targets):
        store.refs.update(f"refs/bench/r{i % 50}", target, reason="bench")
    return (time.perf_counter() - start) / count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=2000)
    parser.add_argument("--leaves", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="yyb-bench-log-") as top:
        with_log, without = [], []
        for n in range(args.rounds):
            without.append(updates(os.path.join(top, f"base-{n}"), args.updates, False))
            with_log.append(updates(os.path.join(top, f"log-{n}"), args.updates, True))
        base, logged = statistics.median(without), statistics.median(with_log)
        print(f"ref update, no log (baseline)   {base * 1000:.3f} ms (median of {args.rounds})")
        print(f"ref update, with the log        {logged * 1000:.3f} ms")
        print(f"the log's cost per update       {(logged - base) * 1000:.3f} ms")
        print(f"ratio                           {logged / base:.2f}")

        store, _ = Store.init(os.path.join(top, "big"))
        start = time.perf_counter()
        with store.refs.transparency.locked() as log:
            batch = []
            for _ in range(args.leaves):
                oid = f"{rng.getrandbits(256):064x}"
                batch.append((oid, f"refs/runs/{oid[:8]}/attempt/terminal"))
                if len(batch) == 10_000:
                    log.append(batch)
                    batch = []
            log.append(batch)
        print(f"\nbuilt a log of {args.leaves:,} leaves in {time.perf_counter() - start:.1f} s")
        with store.refs.transparency.locked() as log:
            size = log.size()
            picks = [rng.randrange(size) for _ in range(args.samples)]
            entries = {i: None for i in picks}
            for i, entry in enumerate(log.entries()):
                if i in entries:
                    entries[i] = entry
        made, checked, cmade, cchecked = [], [], [], []
        for index in picks:
            oid, ref = entries[index]
            start = time.perf_counter()
            with store.refs.transparency.locked() as log:
                found = log.index_of(oid, ref)
                proof = log.inclusion(found, size)
                top_hash = log.root(size)
            made.append(time.perf_counter() - start)
            start = time.perf_counter()
            merkle.verify_inclusion(translog.leaf_hash(oid, ref), found, size, proof, top_hash)
            checked.append(time.perf_counter() - start)
            first = rng.randrange(1, size)
            start = time.perf_counter()
            with store.refs.transparency.locked() as log:
                proof = log.consistency(first, size)
                old = log.root(first)
            cmade.append(time.perf_counter() - start)
            start = time.perf_counter()
            merkle.verify_consistency(first, size, old, top_hash, proof)
            cchecked.append(time.perf_counter() - start)
        for label, values in (
            ("inclusion proof, produced", made),
            ("inclusion proof, verified", checked),
            ("consistency proof, produced", cmade),
            ("consistency proof, verified", cchecked),
        ):
            print(
                f"{label:<29} median {statistics.median(values) * 1000:.2f} ms, "
                f"max {max(values) * 1000:.2f} ms ({args.samples} samples)"
            )
        folder = os.path.join(store.path, translog.FOLDER)
        sizes = {name: os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder)}
        total = sum(sizes.values())
        leaves = sizes["leaves"]
        print(
            f"\nstorage: {total / size:.1f} bytes per leaf in the log's files "
            f"({leaves / size:.1f} the leaf lines, {(total - leaves) / size:.1f} the levels)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
