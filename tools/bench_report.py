#!/usr/bin/env python3
"""Time `yyb report --plan` over many retained attempts (issue target: 50,000 in under 10 s).

Fabricates one experiment (cases x models x attempts) straight through the store API, with the
record shapes the runner writes (tests/reports/fabricate.py: no sandbox, no agent; fsync is
skipped while fabricating only), then times the per-experiment report in this process (build
with its gate, storing the layer, rendering text) and as the `yyb report --plan` command a user
runs, warm (the default) or with the store evicted from the page cache before each run (--cold);
then times the floor on the same store the same number of times (tools/floor_read_hash.py, a
child process that reads and hashes every object, ref and log) and prints the report against
it (target: the report at most 1.5x the floor).

Eviction (--evict): "drop" writes /proc/sys/vm/drop_caches (root only; also empties the dentry
and inode caches and evicts everything else, Python's own files included); "fadvise" (the
default; no privileges) syncs, then asks the kernel to drop the cached pages of every file under
the store (posix_fadvise DONTNEED: objects, packs, refs, logs; folders and inodes stay cached),
and checks with mincore that they are gone. --gc times, in one run, the report over the loose
store warm and cold, packs a copy of it with `yyb gc` (objects hard-linked, the rest copied),
then the report over the packed copy warm and cold.
Usage: python tools/bench_report.py [--cases 1000] [--models 5] [--attempts 10] [--store DIR]
       [--repeat 2] [--cold] [--evict fadvise|drop] [--gc] [--verify-objects] [--longitudinal]
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import random
import resource
import shutil
import statistics
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
        "--cold",
        action="store_true",
        help="evict the store from the page cache before each CLI run",
    )
    parser.add_argument(
        "--evict",
        choices=("fadvise", "drop"),
        default="fadvise",
        help="how: fadvise every store file (default, unprivileged) or drop_caches (root)",
    )
    parser.add_argument(
        "--gc",
        action="store_true",
        help="loose warm and cold, then a `yyb gc` copy of the store warm and cold, side by side",
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
    if args.gc:
        side_by_side(root, store_path, plan_oid, args.repeat, args.evict)
        return
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
    new_layer: list[float] = []
    for round_ in range(args.repeat):
        cold = args.cold and evict(store_path, args.evict)
        pin = ["--grader-version", "1"] if round_ % 2 else []
        seconds = time_cli(store_path, ["report", "--plan", plan_oid, *pin])[0]
        new_layer.append(seconds)
        print(
            f"yyb report --plan{' --grader-version 1' if pin else ''} "
            f"({'cold' if cold else 'warm'} cache, a new layer): {seconds:.2f} s"
        )
    cold = args.cold and evict(store_path, args.evict)
    seconds = time_cli(store_path, ["report", "--plan", plan_oid, *pin])[0]
    print(f"the same again ({'cold' if cold else 'warm'} cache, layer reused): {seconds:.2f} s")
    floor_vs_report(store_path, new_layer, seconds, args.repeat, args.cold, args.evict)
    if args.verify_objects:
        seconds = time_cli(store_path, ["report", "--plan", plan_oid, "--verify-objects"])[0]
        print(f"yyb report --plan --verify-objects (warm cache): {seconds:.2f} s")
    if args.longitudinal:
        started = time.perf_counter()
        doc, read = longitudinal.build_longitudinal(store)
        longitudinal.store_layer(store, doc, read)
        print(
            f"in-process report --longitudinal over {len(read)} attempts: "
            f"{time.perf_counter() - started:.2f} s ({len(doc['cohorts'])} cohorts)"
        )
        seconds = time_cli(store_path, ["report", "--longitudinal"])[0]
        print(f"yyb report --longitudinal (warm cache): {seconds:.2f} s")


FLOOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "floor_read_hash.py")
FLOOR_TARGET = 1.5  # the report at most this many times the floor


def floor_vs_report(
    store_path: str, new_layer: list[float], reused: float, repeat: int, cold: bool, how: str
) -> None:
    """Time the floor (tools/floor_read_hash.py: one process reading and hashing every object,
    ref and log of the store) as a child process, spawn to exit as the report is, ``repeat``
    times on the same store and cache state, and set the report's times against its median."""
    walls, summary = [], ""
    for _ in range(repeat):
        evicted = cold and evict(store_path, how)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, FLOOR, store_path], capture_output=True)
        walls.append(time.perf_counter() - started)
        if done.returncode != 0:
            sys.exit(f"floor failed: {done.stderr.decode(errors='replace').strip()}")
        summary = done.stdout.decode().strip()
        print(f"floor_read_hash ({'cold' if evicted else 'warm'} cache): {walls[-1]:.2f} s")
    print(summary)
    base = statistics.median(walls)
    each = ", ".join(f"{w:.2f}" for w in walls)
    print(f"floor runs: {each} s")
    print(
        f"\n| `yyb report --plan P` ({'cold' if cold else 'warm'}) | report | "
        f"floor, median of {len(walls)} | report / floor | target | met |"
    )
    print("|---|---|---|---|---|---|")
    rows = [(f"a new layer, median of {len(new_layer)}", statistics.median(new_layer))]
    rows.append(("layer reused, 1 run", reused))
    for label, seconds in rows:
        ratio = seconds / base
        met = "yes" if ratio <= FLOOR_TARGET else "no"
        print(
            f"| {label} | {seconds:.2f} s | {base:.2f} s | {ratio:.2f}x | <= {FLOOR_TARGET}x "
            f"| {met} |"
        )


def side_by_side(root: str, store_path: str, plan_oid: str, repeat: int, how: str) -> None:
    """`yyb report --plan` over the loose store and over a packed copy, warm and cold."""
    packed_path = os.path.join(root, "store-packed")
    if not os.path.isdir(packed_path):
        started = time.perf_counter()
        copy_store(store_path, packed_path)
        print(f"copied the store (objects hard-linked): {time.perf_counter() - started:.1f} s")
        seconds, user, system = time_cli(packed_path, ["gc"])
        print(f"yyb gc of the copy: {seconds:.1f} s wall, {user + system:.1f} s CPU")
    for path in (store_path, packed_path):
        print(f"{os.path.basename(path)}: {count_objects(path)}")
    argv = ["report", "--plan", plan_oid]
    print(f"load average before: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    results: dict[str, list[tuple[float, float, float]]] = {}
    for label, path in (("loose", store_path), ("packed", packed_path)):
        time_cli(path, argv)  # untimed: stores the layer later runs reuse, and warms
        for mode in ("warm", "cold"):
            runs = results.setdefault(f"{label} {mode}", [])
            for _ in range(repeat):
                if mode == "cold":
                    evict(path, how)
                runs.append(time_cli(path, argv))
                wall, user, system = runs[-1]
                print(
                    f"  {label} {mode}: {wall:.2f} s wall, CPU {user:.2f} s user {system:.2f} s sys"
                )
    print(f"load average after: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    base = statistics.median(w for w, _, _ in results["loose warm"])
    print(
        f"\n| `yyb report --plan P` (layer reused) | wall, {repeat} runs | median | vs loose warm |"
    )
    print("|---|---|---|---|")
    for label, runs in results.items():
        walls = [w for w, _, _ in runs]
        median = statistics.median(walls)
        each = ", ".join(f"{w:.2f}" for w in walls)
        print(f"| {label} | {each} s | {median:.2f} s | {median / base:.2f}x |")
    ratio = statistics.median(w for w, _, _ in results["packed cold"]) / statistics.median(
        w for w, _, _ in results["packed warm"]
    )
    print(f"packed cold / packed warm: {ratio:.2f}x (target at most 2x)")


def copy_store(source: str, target: str) -> None:
    """Copy a store: its objects as hard links (immutable files; gc only unlinks them), the
    rest (refs, logs, the transparency log, which later runs append to) as copies."""
    os.makedirs(target)
    for name in os.listdir(source):
        src, dst = os.path.join(source, name), os.path.join(target, name)
        if name == "objects":
            shutil.copytree(src, dst, copy_function=os.link)
        elif os.path.isdir(src):
            shutil.copytree(src, dst, symlinks=True)
        else:
            shutil.copy2(src, dst)


def count_objects(store_path: str) -> str:
    command = [sys.executable, "-m", "yyb", "--store", store_path, "count-objects", "-v"]
    lines = subprocess.run(command, capture_output=True, text=True).stdout.split()
    return " ".join(lines)


def evict(store_path: str, how: str) -> bool:
    """Evict the store from the page cache (see the module's text); False when not permitted."""
    if how == "drop":
        return drop_caches()
    before = resident(store_path)
    started = time.perf_counter()
    os.sync()
    files = 0
    for folder, _, names in os.walk(store_path):
        for name in names:
            try:
                fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                files += 1
            finally:
                os.close(fd)
    after = resident(store_path)
    print(
        f"  (evicted {files} files in {time.perf_counter() - started:.1f} s; resident pages "
        f"of a sample: {before[0]}/{before[1]} before, {after[0]}/{after[1]} after)"
    )
    return True


def resident(store_path: str, sample: int = 3000) -> tuple[int, int]:
    """(resident, total) pages of every pack and index and of ``sample`` other files under
    the store, by mincore(2) over a shared read-only mapping of each."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t] + [ctypes.c_int] * 3 + [ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    packs, others = [], []
    for folder, _, names in os.walk(store_path):
        for name in names:
            (packs if name.startswith("pack-") else others).append(os.path.join(folder, name))
    chosen = packs + random.Random(0).sample(others, min(sample, len(others)))
    page = mmap.PAGESIZE
    resident_pages = total = 0
    for path in chosen:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            size = os.fstat(fd).st_size
            if not size:
                continue
            address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            if address in (None, ctypes.c_void_p(-1).value):
                continue
            pages = (size + page - 1) // page
            vector = (ctypes.c_ubyte * pages)()
            if libc.mincore(address, size, vector) == 0:
                resident_pages += sum(b & 1 for b in vector)
                total += pages
            libc.munmap(address, size)
        finally:
            os.close(fd)
    return resident_pages, total


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


def time_cli(store_path: str, argv: list[str]) -> tuple[float, float, float]:
    """Wall, user and system CPU time (its children included) of one `yyb` command with its
    output discarded (exit 0 or 1 expected)."""
    command = [sys.executable, "-m", "yyb", "--store", store_path, *argv]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(argv)} failed: {done.stderr.decode(errors='replace').strip()}")
    return seconds, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


if __name__ == "__main__":
    main()
