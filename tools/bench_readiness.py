#!/usr/bin/env python3
"""Wall time of `yyb release-readiness`, against `yyb example --attempts 1` in the same run.

Each command runs --rounds times as a fresh process against a new store (the readiness
receipt's second run reuses nothing but the store), alternating, and the medians are compared:
the example (one case, two stand-ins, one attempt each, graded) is the baseline of what a
minimal run of the isolated lane costs on this machine. The readiness run must pass each time
and give the same receipt oid each round. Run from a clean checkout (release-readiness refuses
a dirty one) or an installed copy.
Usage: python tools/bench_readiness.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def timed(argv: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    return time.monotonic() - start, done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    yyb = [sys.executable, "-m", "yyb"]
    readiness, example, oids = [], [], set()
    with tempfile.TemporaryDirectory(prefix="yyb-bench-readiness-") as top:
        env = {**os.environ, "HOME": top}
        store = os.path.join(top, "store")
        for n in range(args.rounds):
            seconds, done = timed([*yyb, "--store", store, "release-readiness", "--json"], env)
            if done.returncode != 0:
                sys.stderr.write(done.stdout + done.stderr)
                return 1
            oids.add(json.loads(done.stdout)["oid"])
            readiness.append(seconds)
            folder = os.path.join(top, f"example-{n}")
            seconds, done = timed(
                [
                    *yyb,
                    "--store",
                    os.path.join(folder, "store"),
                    "example",
                    "--dir",
                    folder,
                    "--attempts",
                    "1",
                ],
                env,
            )
            if done.returncode != 0:
                sys.stderr.write(done.stdout + done.stderr)
                return 1
            example.append(seconds)
    r, e = statistics.median(readiness), statistics.median(example)
    print(f"rounds                     {args.rounds}")
    print(
        f"release-readiness median   {r:.2f} s (min {min(readiness):.2f}, max {max(readiness):.2f})"
    )
    print(f"example --attempts 1       {e:.2f} s (min {min(example):.2f}, max {max(example):.2f})")
    print(f"ratio                      {r / e:.2f}")
    print(f"receipt oids               {len(oids)} distinct (1 expected)")
    return 0 if len(oids) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
