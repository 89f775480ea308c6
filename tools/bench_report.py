#!/usr/bin/env python3
"""Time `yyb report --plan` over many retained attempts (issue target: 50,000 in under 10 s).

Fabricates one experiment (cases x models x attempts) straight through the store API, with the
record shapes the runner writes (tests/reports/fabricate.py: no sandbox, no agent; fsync is
skipped while fabricating only), then times the per-experiment report in this process (build
with its gate, storing the layer, rendering text) and as the `yyb report --plan` command a user
runs, warm (the default) or with the page cache dropped before each run (--cold, root only).
Usage: python tools/bench_report.py [--cases 1000] [--models 5] [--attempts 10] [--store DIR]
       [--repeat 2] [--cold] [--verify-objects] [--longitudinal]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.reports.fabricate import Spec, fabricate  # noqa: E402
from yyb.reports import build, layer, longitudinal, render  # noqa: E402
from yyb.store.repo import Store  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--attempts", type=int, default=10)
    parser.add_argument("--store", help="reuse (or create) the fabricated store here")
    parser.add_argument("--longitudinal", action="store_true", help="time it too")
    parser.add_argument("--verify-objects", action="store_true", help="time that gate too")
    parser.add_argument("--repeat", type=int, default=2, help="timed CLI runs (default 2)")
    parser.add_argument(
        "--cold", action="store_true", help="drop the page cache before each CLI run (root)"
    )
    args = parser.parse_args()
    root = args.store or tempfile.mkdtemp(prefix="yyb-bench-report-")
    store_path = os.path.join(root, "store")
    store, created = Store.init(store_path)
    plans = [oid for _, oid in store.refs.iter_refs("refs/plans")]
    if not plans:
        spec = Spec(
            [f"bench/m{i}" for i in range(args.models)],
            [f"case-{i:05d}" for i in range(args.cases)],
            attempts=args.attempts,
        )
        real_fsync = os.fsync
        os.fsync = lambda fd: None  # fabrication only: the timed report reads, never fsyncs
        started = time.perf_counter()
        try:
            plans = [fabricate(store, spec)]
        finally:
            os.fsync = real_fsync
        count = args.cases * args.models * args.attempts
        print(f"fabricated {count} attempts in {time.perf_counter() - started:.1f} s: {root}")
    plan_oid = plans[0]
    store = Store.open(store_path)  # a fresh handle: nothing cached from fabrication
    started = time.perf_counter()
    report, facts = build.build(store, plan_oid)
    built = time.perf_counter()
    stored = layer.store_layer(store, plan_oid, report)
    data = render.text(report, stored)
    done = time.perf_counter()
    print(
        f"in-process report --plan over {len(facts)} attempts: {done - started:.2f} s "
        f"(build incl. its gate {built - started:.2f} s, layer + text {done - built:.2f} s; "
        f"{len(data)} bytes of text, status {report['status']})"
    )
    # The worst case for the layer: no rows record shared with an earlier layer (as after a
    # regrade that changed a verdict in every thousand attempts). A chunk size never used
    # before makes every rows record new.
    layer.PART_SIZE = 1000 - (int(time.time()) % 97) - 1
    started = time.perf_counter()
    report, facts = build.build(store, plan_oid)
    built = time.perf_counter()
    layer.store_layer(store, plan_oid, report)
    print(
        f"in-process report --plan with every rows record new: {time.perf_counter() - started:.2f}"
        f" s (layer {time.perf_counter() - built:.2f} s)"
    )
    layer.PART_SIZE = 1000
    # Alternate the grader pin so that each run stores a new layer (the report after new
    # evidence), then repeat the last one, which reuses the layer it stored.
    pin: list[str] = []
    for round_ in range(args.repeat):
        cold = args.cold and drop_caches()
        pin = ["--grader-version", "1"] if round_ % 2 else []
        seconds = time_cli(store_path, ["report", "--plan", plan_oid, *pin])
        print(
            f"yyb report --plan{' --grader-version 1' if pin else ''} "
            f"({'cold' if cold else 'warm'} cache, a new layer): {seconds:.2f} s"
        )
    cold = args.cold and drop_caches()
    seconds = time_cli(store_path, ["report", "--plan", plan_oid, *pin])
    print(f"the same again ({'cold' if cold else 'warm'} cache, layer reused): {seconds:.2f} s")
    if args.verify_objects:
        seconds = time_cli(store_path, ["report", "--plan", plan_oid, "--verify-objects"])
        print(f"yyb report --plan --verify-objects (warm cache): {seconds:.2f} s")
    if args.longitudinal:
        started = time.perf_counter()
        doc, read = longitudinal.build_longitudinal(store)
        longitudinal.store_layer(store, doc, read)
        print(
            f"in-process report --longitudinal over {len(read)} attempts: "
            f"{time.perf_counter() - started:.2f} s ({len(doc['cohorts'])} cohorts)"
        )
        seconds = time_cli(store_path, ["report", "--longitudinal"])
        print(f"yyb report --longitudinal (warm cache): {seconds:.2f} s")


def drop_caches() -> bool:
    """Empty the page, dentry and inode caches (root only); False when not permitted."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as handle:
            handle.write("3\n")
        return True
    except OSError:
        print("(cannot drop the page cache here: not root; the run is warm)")
        return False


def time_cli(store_path: str, argv: list[str]) -> float:
    """Wall time of one `yyb` command with its output discarded (exit 0 or 1 expected)."""
    command = [sys.executable, "-m", "yyb", "--store", store_path, *argv]
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(argv)} failed: {done.stderr.decode(errors='replace').strip()}")
    return seconds


if __name__ == "__main__":
    main()
