#!/usr/bin/env python3
"""The log's replay, run by hand: linear in the log, and what it adds to a report's gate.

1. Replay: a disk store whose log holds N updates (refs of 5 updates each, chained as
   ``RefStore.update`` chains them), for N in --sizes; the whole-store audit
   (``logaudit.audit``: leaves and levels read, every leaf's record read once, the per-ref
   replay, every chain's head) timed, best of --repeat. Linear: the time per leaf stays flat.
2. A report's gate: an experiment of --attempts fabricated attempts (tests/reports/fabricate.py)
   in a store whose log also holds --noise updates of other refs; ``build.build`` timed with
   its log check, and the check alone (``experiment.check_log``: the log searched for the
   experiment's refs, their leaves replayed), best of --repeat.
fsync is skipped while the stores are made (they are read, never written, when timed).
--keep leaves the stores in place and prints their folder, so that another checkout's audit
can be timed on the same stores (``--audit-only DIR``, run with that checkout first on
``PYTHONPATH``: part 1 only, on the stores ``DIR`` holds).
Usage: python tools/bench_logaudit.py [--sizes 10000,40000,160000] [--attempts 2000]
       [--noise 100000] [--repeat 3] [--keep] [--audit-only DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from yyb.store.log import audit as logaudit  # noqa: E402
from yyb.store.refs.store import REF_UPDATE  # noqa: E402
from yyb.store.repo import Store  # noqa: E402

PER_REF = 5


def logged_store(path: str, updates: int, prefix: str = "refs/bench") -> Store:
    """A store whose log holds ``updates`` chained updates, written as ``update`` writes them
    but appended in batches (the records, the leaves, the log heads and values)."""
    store = Store.open(path) if os.path.exists(path) else Store.init(path)[0]
    leaves: list[tuple[str, str]] = []
    for r in range(updates // PER_REF):
        name, previous, value = f"{prefix}/{r:07d}", None, None
        for k in range(PER_REF):
            target = store.objects.put("blob", f"{name} {k}".encode())
            record = {
                "schema_version": REF_UPDATE,
                "ref": name,
                "old": value,
                "new": target,
                "time_ms": k,
                "reason": "",
                "links": {"target": target, **({"previous": previous} if previous else {})},
            }
            previous, value = store.objects.put_record(record), target
            leaves.append((previous, name))
        store.refs._write_log_head(name, previous)
        os.makedirs(os.path.dirname(store.refs.path(name)), exist_ok=True)
        with open(store.refs.path(name), "w") as handle:
            handle.write(value + "\n")
        if len(leaves) >= 10_000:
            _append(store, leaves)
    _append(store, leaves)
    return store


def _append(store: Store, leaves: list) -> None:
    with store.refs.transparency.locked() as log:
        log.append(leaves)
    leaves.clear()


def best(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,40000,160000")
    parser.add_argument("--attempts", type=int, default=2000)
    parser.add_argument("--noise", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--audit-only", metavar="DIR")
    args = parser.parse_args()
    real_fsync = os.fsync
    root = args.audit_only or tempfile.mkdtemp(prefix="bench-logaudit-")
    print("| leaves | audit (s) | per leaf (us) |\n|---|---|---|")
    for size in (int(s) for s in args.sizes.split(",")):
        path = os.path.join(root, f"s{size}")
        if args.audit_only:
            store = Store.open(path)
        else:
            os.fsync = lambda fd: None
            store = logged_store(path, size)
            os.fsync = real_fsync
        assert [f for f in logaudit.audit(store) if f.level == "error"] == []
        took = best(args.repeat, lambda store=store: logaudit.audit(store))
        print(f"| {size:,} | {took:.3f} | {took / size * 1e6:.1f} |")
    if args.audit_only:
        return
    gate(args, root)
    if args.keep:
        print(f"stores kept in {root}")
    else:
        shutil.rmtree(root)


def gate(args, root: str) -> None:
    """Part 2: a report's build timed, and its log check alone."""
    from tests.reports.fabricate import Spec, fabricate
    from yyb.evidence import experiment
    from yyb.reports import build

    real_fsync, os.fsync = os.fsync, lambda fd: None
    store = Store.init(os.path.join(root, "report"))[0]
    models = ["m/a", "m/b"]
    cases = [f"c{i}" for i in range(args.attempts // len(models))]
    plan = fabricate(store, Spec(models, cases))
    logged_store(store.path, args.noise, "refs/other")
    os.fsync = real_fsync
    with store.refs.transparency.reading() as log:
        leaves = log.size()
    document, _ = build.build(store, plan)
    assert document["status"] == "complete", document["doctor"]
    whole = best(args.repeat, lambda: build.build(store, plan))
    check = best(args.repeat, lambda: experiment.check_log(store, plan))
    print(
        f"\nreport of {len(cases) * len(models):,} attempts, log of {leaves:,} leaves: "
        f"build {whole:.3f} s, of which the log check {check:.3f} s ({check / whole:.0%})"
    )


if __name__ == "__main__":
    main()
