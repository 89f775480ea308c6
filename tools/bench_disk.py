#!/usr/bin/env python3
"""What the attempt's disk (yyb/harness/disk.py) costs a sandboxed start, run by hand.

Measures, --runs times each, in one process: a holder started, its tmpfs mounted and the
holder closed; a sandboxed ``/bin/true`` without a disk; the same on a disk; and writing
--mib MiB in 1 MiB files from inside the sandbox onto the host's temp folder against onto the
disk. Prints the median of each, in milliseconds.
Usage: python tools/bench_disk.py [--runs 20] [--mib 64]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from yyb.harness import disk, sandbox, worktree

ENV = {"PATH": "/usr/bin:/bin"}


def timed(action, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def sandboxed(root: str, command: list[str], on_disk: bool, mib: int) -> None:
    work = os.path.join(root, "workspace")
    if not on_disk:
        os.makedirs(work, exist_ok=True)
        sandbox.hand_over(work)
        box = sandbox.Sandbox(writable=[work], cwd=work)
        box.run(command, ENV, 60_000)
        worktree.remove(work)
        return
    with disk.Disk.mount(root, mib + 16) as held:
        os.mkdir(held.reach(work))
        sandbox.hand_over(held.reach(root))
        box = sandbox.Sandbox(writable=[work], cwd=work, disk=held)
        box.run(command, ENV, 60_000)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--mib", type=int, default=64)
    args = parser.parse_args()
    top = tempfile.mkdtemp(prefix="yyb-bench-disk-")
    root = os.path.join(top, "attempt")
    os.mkdir(root)
    fill = f"for i in $(seq {args.mib}); do head -c 1048576 /dev/zero > f$i; done"
    write = ["/bin/sh", "-c", fill]
    try:
        rows = {
            "holder: start, mount, close": lambda: disk.Disk.mount(root, 64).close(),
            "sandboxed true, no disk": lambda: sandboxed(root, ["/bin/true"], False, args.mib),
            "sandboxed true, on a disk": lambda: sandboxed(root, ["/bin/true"], True, args.mib),
            f"write {args.mib} MiB, host temp folder": lambda: sandboxed(
                root, write, False, args.mib
            ),
            f"write {args.mib} MiB, on a disk": lambda: sandboxed(root, write, True, args.mib),
        }
        for name, action in rows.items():
            print(f"{name:40} {timed(action, args.runs):8.1f} ms")
    finally:
        worktree.remove(top)


if __name__ == "__main__":
    main()
