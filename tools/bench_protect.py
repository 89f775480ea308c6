#!/usr/bin/env python3
"""What the `tests` kind's own protected paths cost, run by hand.

Times ``testpatch.graded`` (protected paths put back, the test patch applied, on listings in
memory) on a listing of --files paths in 50 folders with a conftest.py, a setup.cfg and a
test file in each, against a candidate's listing that changed every tenth file: once with
the patterns a `tests` evaluation used before pytest's configuration files and the listed
tests' files were protected whatever the profile says (the profile's five patterns and the
test patch's paths), once with those of today (``testpatch.patterns``: the eight
configuration patterns, the profile's five, each listed test's file and the test patch's
paths). Each measure is the best of --rounds, the two taken in turns.
Usage: python tools/bench_protect.py [--files 5000] [--rounds 30]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from yyb.evidence import protect, testpatch  # noqa: E402
from yyb.harness import apply  # noqa: E402

PROFILE = ["**/conftest.py", "**/pytest.ini", "**/tox.ini", "**/setup.cfg", "**/pyproject.toml"]
PATCH = b"""diff --git a/tests/test_ops.py b/tests/test_ops.py
--- a/tests/test_ops.py
+++ b/tests/test_ops.py
@@ -1,2 +1,3 @@
 def test_add():
     assert True
+    assert 1 + 1 == 2
"""
LISTED = [f"pkg{n}/test_mod.py::test_{n}" for n in range(0, 50, 5)] + [
    "tests/test_ops.py::test_add"
]


class Blobs(dict):
    def put(self, data: bytes) -> str:
        oid = hashlib.sha256(data).hexdigest()
        self[oid] = data
        return oid


def listings(files: int) -> tuple[Blobs, dict, dict]:
    blobs = Blobs()
    base = {"tests/test_ops.py": (0o100644, blobs.put(b"def test_add():\n    assert True\n"))}
    for i in range(files):
        folder = f"pkg{i % 50}"
        name = {0: "conftest.py", 1: "setup.cfg", 2: "test_mod.py"}.get(i // 50, f"f{i}.py")
        base[f"{folder}/{name}"] = (0o100644, blobs.put(f"{i}\n".encode()))
    final = dict(base)
    for n, path in enumerate(sorted(base)):
        if n % 10 == 0:
            final[path] = (0o100644, blobs.put(f"changed {n}\n".encode()))
    return blobs, base, final


def timed(blobs: Blobs, base: dict, final: dict, patterns: list[str]) -> float:
    protect.matcher.cache_clear()  # each evaluation compiles its patterns once
    start = time.perf_counter()
    entries, _ = protect.restore(base, final, patterns)
    apply.apply(entries, PATCH, blobs.__getitem__, blobs.put)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    blobs, base, final = listings(args.files)
    before = [*PROFILE, *(testpatch.literal(p) for p in apply.paths(PATCH))]
    now = testpatch.patterns(PROFILE, PATCH, LISTED)
    best = {"before": float("inf"), "now": float("inf")}
    for _ in range(args.rounds):
        best["before"] = min(best["before"], timed(blobs, base, final, before))
        best["now"] = min(best["now"], timed(blobs, base, final, now))
    print(f"{len(base)} paths; {len(before)} patterns before, {len(now)} now")
    for name, seconds in best.items():
        print(f"{name}: {seconds * 1000:.1f} ms")
    print(f"ratio now/before: {best['now'] / best['before']:.2f}x")


if __name__ == "__main__":
    main()
