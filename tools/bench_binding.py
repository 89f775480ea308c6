#!/usr/bin/env python3
"""Cost of binding the build in `yyb release-readiness`: ``identity.build()`` (git's checks
or the RECORD's, the start-up files) and ``Build.identity()`` (every imported yyb module
read, hashed, and its cached bytecode compared with its source compiled), with every module
of the package imported (the most a run can import).

Each round runs in a fresh process, with bytecode caches written beforehand (as an installed
copy has them) or none (``--no-cache``: caches looked for in an empty folder). Run from a
clean checkout or an installed copy.
Usage: python tools/bench_binding.py [--rounds 5] [--no-cache]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROUND = r"""
import importlib, json, pkgutil, time
import yyb
for info in pkgutil.walk_packages(yyb.__path__, "yyb."):
    if info.name.endswith("__main__"):  # runs the command line
        continue
    try:
        importlib.import_module(info.name)
    except ImportError:  # an optional extra (dask, playwright) not installed
        pass
from yyb.readiness import identity
start = time.monotonic()
bound = identity.build()
built = time.monotonic()
modules = bound.identity()["modules"]
done = time.monotonic()
print(json.dumps({"build": built - start, "identity": done - built, "count": modules["count"]}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-cache", action="store_true")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.no_cache:  # caches looked for (and none written) in an empty folder
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="yyb-no-pycache-")
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run([sys.executable, "-c", ROUND], env=env, capture_output=True)
    rows = []
    for _ in range(args.rounds):
        done = subprocess.run(
            [sys.executable, "-c", ROUND], env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            sys.exit(done.stderr.strip().splitlines()[-1])
        rows.append(json.loads(done.stdout))
    for field in ("build", "identity"):
        values = [r[field] for r in rows]
        print(
            f"{field}: median {statistics.median(values) * 1000:.0f} ms "
            f"(min {min(values) * 1000:.0f}, max {max(values) * 1000:.0f})"
        )
    print(f"modules bound: {rows[0]['count']}")


if __name__ == "__main__":
    main()
