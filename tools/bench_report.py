#!/usr/bin/env python3
"""Time `yyb report --plan` over many retained attempts (issue target: 50,000 in under 10 s).

Fabricates one experiment (cases x models x attempts) straight through the store API, with the
record shapes the runner writes (tests/reports/fabricate.py: no sandbox, no agent; fsync is
skipped while fabricating only), then times the per-experiment report (build, with the doctor
gate, plus storing the layer and rendering text) and the longitudinal report in this process.
Usage: python tools/bench_report.py [--cases 1000] [--models 5] [--attempts 10] [--store DIR]
"""

from __future__ import annotations

import argparse
import os
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
    stored = layer.store_layer(store, plan_oid, report, facts)
    data = render.text(report, stored)
    done = time.perf_counter()
    print(
        f"report --plan over {len(facts)} attempts: {done - started:.2f} s "
        f"(build incl. doctor gate {built - started:.2f} s, layer + text {done - built:.2f} s; "
        f"{len(data)} bytes of text, status {report['status']})"
    )
    if args.longitudinal:
        started = time.perf_counter()
        doc, read = longitudinal.build_longitudinal(store)
        longitudinal.store_layer(store, doc, read)
        print(
            f"report --longitudinal over {len(read)} attempts: "
            f"{time.perf_counter() - started:.2f} s ({len(doc['cohorts'])} cohorts)"
        )


if __name__ == "__main__":
    main()
