#!/usr/bin/env python3
"""Benchmark the yyb object store against plain hashlib, cp and Git, side by side.

Run by hand (this is not a test), with the Python of the environment yyb is installed in:

    python tools/bench_store.py            # full sizes: 1 GiB file, 20,000 / 100,000 objects
    python tools/bench_store.py --quick    # smoke run: 64 MiB, 2,000 / 10,000 objects

Every measurement runs on the same data for yyb and for its baseline, in one run, and the
script ends with a Markdown table (figures, ratios, targets, met or not) ready to paste into
docs/performance.md. Only the standard library and the installed yyb are used.

Caveats printed with the table: the OS page cache cannot be dropped without root, so every
input is read once before it is timed (all figures are warm-cache figures); child processes
are timed wall-clock from spawn to exit, start-up included; peak RSS comes from GNU time
(``/usr/bin/time -f %M``) when present, else from wait4() (then an upper bound: see run_child).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TypeVar

T = TypeVar("T")
MIB = 1 << 20
CHUNK = MIB
HEAVY_MODULES = ("pygit2", "jsonschema", "cryptography", "click", "msgpack")

# Targets (see docs/performance.md).
TARGET_HASH_SPEED = 0.85  # yyb hash-object at >= 0.85 of in-process hashlib speed
TARGET_HASH_RSS_MIB = 64.0  # peak RSS of yyb hash-object on a large file
TARGET_WRITE_RATIO = 1.5  # hash-object -w vs cp + hash of the copy
TARGET_BATCH_RATIO = 1.5  # cat-object --batch vs git cat-file --batch
TARGET_DOCTOR_RATIO = 1.5  # doctor vs git fsck
TARGET_STARTUP_MS = 50.0  # median wall time of `yyb cat-object -t OID`
TARGET_STARTUP_OVER_MS = 15.0  # ... beyond `python -c pass` run the same way (issue 37)


# --- results -----------------------------------------------------------------------------


@dataclass
class Row:
    """One line of the result table."""

    benchmark: str
    yyb: str
    baseline: str
    ratio: str
    target: str
    met: bool | None  # None: informational, no target

    @property
    def verdict(self) -> str:
        return "—" if self.met is None else ("yes" if self.met else "**NO**")


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, row: Row) -> None:
        self.rows.append(row)
        print(f"  -> {row.benchmark}: yyb {row.yyb} | baseline {row.baseline} | "
              f"ratio {row.ratio} | target {row.target} | met {row.verdict}", file=sys.stderr)

    def markdown(self) -> str:
        lines = [
            "| Benchmark | yyb | Baseline | Ratio | Target | Met |",
            "|---|---|---|---|---|---|",
        ]
        for r in self.rows:
            lines.append(f"| {r.benchmark} | {r.yyb} | {r.baseline} | {r.ratio} | {r.target} "
                         f"| {r.verdict} |")
        return "\n".join(lines)

    def missed(self) -> list[str]:
        """The benchmarks whose target was missed."""
        return [r.benchmark for r in self.rows if r.met is False]

    def verdict(self) -> str:
        """The closing line: every target met, or which were missed."""
        missed = self.missed()
        return "All targets met." if not missed else "Targets missed: " + "; ".join(missed)


# --- child processes ---------------------------------------------------------------------


@dataclass
class ChildRun:
    seconds: float
    max_rss_mib: float
    returncode: int
    cpu_seconds: float = 0.0  # user + system, the child's and every process it reaped


def _find_gnu_time() -> str | None:
    """/usr/bin/time if it is GNU time (it takes -f and -o), else None."""
    binary = shutil.which("time", path="/usr/bin:/bin")
    if binary is None:
        return None
    with tempfile.NamedTemporaryFile() as out:
        probe = subprocess.run([binary, "-o", out.name, "-f", "%M", "true"],
                               capture_output=True)
        return binary if probe.returncode == 0 and out.read().strip().isdigit() else None


# Peak RSS: a child forked from this (large) Python process starts life with this process's
# RSS high-water mark, which Linux carries across exec into the child's ru_maxrss, so wait4()
# on a direct child over-reports. Through GNU time the measured command is forked from a
# ~1 MiB process instead. Without GNU time, wait4() figures are upper bounds.
GNU_TIME = _find_gnu_time()
RSS_METHOD = ("GNU time (`/usr/bin/time -f %M`), so the figure is the command's own"
              if GNU_TIME else
              "wait4() on the direct child: an upper bound, as it includes this script's RSS "
              "at spawn (install GNU time for exact figures)")


def run_child(argv: Sequence[str], stdin: IO[bytes] | None = None,
              stdout: IO[bytes] | int = subprocess.DEVNULL,
              env: dict[str, str] | None = None, check: bool = True,
              rss: bool = True) -> ChildRun:
    """Run ``argv`` to completion: wall time from spawn to exit, and the child's peak RSS.

    With ``rss`` and GNU time available, the command runs under ``/usr/bin/time -f %M``
    (about 1 ms of extra spawn time, the same for yyb and its baseline).
    """
    rss_file = None
    command = list(argv)
    if rss and GNU_TIME:
        handle, rss_file = tempfile.mkstemp(prefix="yyb-bench-rss-")
        os.close(handle)
        command = [GNU_TIME, "-o", rss_file, "-f", "%M", *command]
    try:
        start = time.perf_counter()
        proc = subprocess.Popen(command,
                                stdin=stdin if stdin is not None else subprocess.DEVNULL,
                                stdout=stdout, stderr=subprocess.PIPE, env=env)
        # Read stderr fully before reaping (it is small: error lines, a doctor summary).
        err = proc.stderr.read() if proc.stderr else b""
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        proc.returncode = code  # reaped here; keep Popen from waiting again
        if proc.stderr:
            proc.stderr.close()
        max_rss_kib = usage.ru_maxrss  # KiB on Linux
        if rss_file is not None:
            # GNU time writes "Command exited with non-zero status N" first when N != 0.
            max_rss_kib = int(Path(rss_file).read_text().split()[-1])
    finally:
        if rss_file is not None:
            os.unlink(rss_file)
    if check and code != 0:
        raise SystemExit(f"bench: {' '.join(map(str, argv))} exited {code}:\n"
                         f"{err.decode(errors='replace')}")
    cpu = usage.ru_utime + usage.ru_stime
    return ChildRun(seconds, max_rss_kib / 1024.0, code, cpu)


def interleave(repeat: int, *measures: Callable[[], T]) -> list[list[T]]:
    """Run the measures in turn (a, b, a, b, ...) ``repeat`` times; return each one's results.

    Interleaving makes drift in the machine's load hit yyb and its baseline alike.
    """
    results: list[list[T]] = [[] for _ in measures]
    for _ in range(repeat):
        for slot, measure in zip(results, measures, strict=True):
            slot.append(measure())
    return results


def best(runs: list[ChildRun]) -> ChildRun:
    """The fastest run (its CPU time too), with the largest peak RSS seen over all runs."""
    fastest = min(runs, key=lambda r: r.seconds)
    return ChildRun(
        fastest.seconds, max(r.max_rss_mib for r in runs), fastest.returncode, fastest.cpu_seconds
    )


def bench_env(work: Path, bytecode_cache: bool = True) -> dict[str, str]:
    """The environment of every child: no user or system Git configuration, and Python
    bytecode caching as an installed package has it.

    With ``bytecode_cache``, PYTHONDONTWRITEBYTECODE is dropped and the caches go to
    ``work/pycache`` (PYTHONPYCACHEPREFIX), so nothing is written into the source tree and yyb
    is not recompiled on every run (a pip-installed yyb ships compiled bytecode).
    """
    env = dict(os.environ)
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, HOME=str(work),
               LC_ALL="C")
    if bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    else:  # no cache is found (an empty prefix: the source tree's __pycache__ is not read)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        empty = work / "no-pycache"
        empty.mkdir(exist_ok=True)
        env["PYTHONPYCACHEPREFIX"] = str(empty)
    return env


# Everything the measured commands import, compiled once before anything is timed.
PLUMBING_MODULES = ("yyb.cli", "yyb.cli.plumbing", "yyb.cli.check", "yyb.cli.store",
                    "yyb.store.fsck")


def fill_bytecode_cache(env: dict[str, str]) -> None:
    """Import the plumbing once so that no timed run pays for compiling it."""
    subprocess.run([sys.executable, "-c", "import " + ", ".join(PLUMBING_MODULES)], env=env,
                   check=True)


# --- data --------------------------------------------------------------------------------


def make_big_file(path: Path, size_mib: int) -> None:
    """``size_mib`` MiB of os.urandom, written in 1 MiB chunks."""
    with open(path, "wb") as out:
        for _ in range(size_mib):
            out.write(os.urandom(CHUNK))
        out.flush()
        os.fsync(out.fileno())  # no write-back competing with the first measurements


def warm_file(path: Path) -> None:
    """Read a file once so that the timed runs find it in the page cache."""
    with open(path, "rb", buffering=0) as handle:
        buffer = bytearray(CHUNK)
        while handle.readinto(buffer):
            pass


def warm_tree(folder: Path) -> int:
    """Read every file under ``folder`` once (page cache and dentry cache); return the count."""
    count = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with open(os.path.join(root, name), "rb") as handle:
                handle.read()
            count += 1
    return count


def small_blobs(count: int, seed: int) -> Iterator[bytes]:
    """``count`` random bodies of 50-2000 bytes; the same sequence for the same seed."""
    rng = random.Random(seed)
    for _ in range(count):
        yield rng.randbytes(rng.randint(50, 2000))


def build_yyb_store(path: Path, count: int, seed: int) -> list[tuple[str, int]]:
    """A store holding ``count`` small blobs, written through the store API.

    Returns (oid, size) in write order.
    """
    from yyb.store import Store

    store, _ = Store.init(str(path))
    written = []
    for body in small_blobs(count, seed):
        written.append((store.objects.put("blob", body), len(body)))
    return written


def build_git_repo(path: Path, count: int, seed: int, env: dict[str, str],
                   scratch: Path) -> tuple[list[tuple[str, int]], str]:
    """A fresh repository holding the same ``count`` blobs as loose objects.

    The bodies are written to files under ``scratch`` and stored by
    ``git hash-object -w --stdin-paths``. The repository uses SHA-256 object names when this
    Git supports them (then its oids equal yyb's: both hash ``blob <size>\\0<body>``).
    Returns ((oid, size) in write order, the object format).
    """
    fmt = "sha256"
    init = subprocess.run(["git", "init", "-q", f"--object-format={fmt}", str(path)], env=env,
                          capture_output=True)
    if init.returncode != 0:
        fmt = "sha1"
        subprocess.run(["git", "init", "-q", str(path)], env=env, check=True)
    scratch.mkdir(parents=True, exist_ok=True)
    names, sizes = [], []
    for i, body in enumerate(small_blobs(count, seed)):
        name = scratch / f"{i:07d}"
        name.write_bytes(body)
        names.append(str(name))
        sizes.append(len(body))
    out = subprocess.run(["git", "-C", str(path), "hash-object", "-w", "--stdin-paths"],
                         input=("\n".join(names) + "\n").encode(), env=env,
                         capture_output=True, check=True)
    shutil.rmtree(scratch)
    oids = out.stdout.decode().split()
    if len(oids) != count:
        raise SystemExit(f"bench: git hash-object wrote {len(oids)} objects, expected {count}")
    return list(zip(oids, sizes, strict=True)), fmt


# --- formatting --------------------------------------------------------------------------


def fmt_s(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def fmt_rate(size_bytes: int, seconds: float) -> str:
    return f"{size_bytes / MIB / seconds:.0f} MiB/s"


def fmt_size(size_mib: int) -> str:
    return f"{size_mib // 1024} GiB" if size_mib % 1024 == 0 else f"{size_mib} MiB"


# --- measurements ------------------------------------------------------------------------


def hashlib_sha256(path: Path) -> tuple[str, float]:
    """SHA-256 of a file in this process, 1 MiB reads; (hex digest, seconds)."""
    start = time.perf_counter()
    digest = hashlib.sha256()
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle:
        while n := handle.readinto(buffer):
            digest.update(view[:n])
    return digest.hexdigest(), time.perf_counter() - start


# The same loop as hashlib_sha256, as a fresh Python child: what any Python CLI pays on top.
CHILD_HASH = """
import hashlib, sys
digest, buffer = hashlib.sha256(), bytearray(1 << 20)
view = memoryview(buffer)
with open(sys.argv[1], "rb", buffering=0) as handle:
    while n := handle.readinto(buffer):
        digest.update(view[:n])
print(digest.hexdigest())
"""


def bench_hash_object(report: Report, yyb: str, big: Path, size_mib: int, repeat: int,
                      work: Path, env: dict[str, str]) -> None:
    """yyb hash-object FILE (a child process, start-up included) vs hashlib in-process."""
    print(f"[hash-object] {fmt_size(size_mib)} file, best of {repeat}", file=sys.stderr)
    warm_file(big)
    size = big.stat().st_size
    out_path = work / "hash-object.out"

    def once() -> ChildRun:
        with open(out_path, "wb") as out:
            return run_child([yyb, "hash-object", str(big)], stdout=out, env=env)

    runs, bases, children = interleave(
        repeat, once, lambda: hashlib_sha256(big)[1],
        lambda: run_child([sys.executable, "-c", CHILD_HASH, str(big)], env=env))
    run, base, child = best(runs), min(bases), best(children)
    oid = out_path.read_text().strip()
    # Sanity: the oid is the SHA-256 of "blob <size>\0" + the bytes.
    expected = hashlib.sha256(b"blob %d\x00" % size)
    with open(big, "rb") as handle:
        while chunk := handle.read(CHUNK):
            expected.update(chunk)
    if oid != expected.hexdigest():
        raise SystemExit(f"bench: yyb hash-object printed {oid}, expected {expected.hexdigest()}")
    speed = base / run.seconds
    report.add(Row(
        f"`hash-object` {fmt_size(size_mib)} (speed vs hashlib)",
        f"{fmt_s(run.seconds)} ({fmt_rate(size, run.seconds)})",
        f"hashlib in-process: {fmt_s(base)} ({fmt_rate(size, base)})",
        f"{speed:.2f}x speed", f">= {TARGET_HASH_SPEED}x", speed >= TARGET_HASH_SPEED))
    report.add(Row(
        f"`hash-object` {fmt_size(size_mib)} (vs the hashlib loop as a `python -c` child, info)",
        f"{fmt_s(run.seconds)}",
        f"`python -c` hashlib loop: {fmt_s(child.seconds)} ({fmt_rate(size, child.seconds)})",
        f"{child.seconds / run.seconds:.2f}x speed", "—", None))
    report.add(Row(
        f"`hash-object` {fmt_size(size_mib)} peak RSS", f"{run.max_rss_mib:.1f} MiB", "—", "—",
        f"< {TARGET_HASH_RSS_MIB:.0f} MiB", run.max_rss_mib < TARGET_HASH_RSS_MIB))


def bench_hash_object_write(report: Report, yyb: str, big: Path, size_mib: int, repeat: int,
                            work: Path, env: dict[str, str]) -> None:
    """yyb hash-object -w FILE into a fresh store vs cp FILE + SHA-256 of the copy."""
    print(f"[hash-object -w] {fmt_size(size_mib)} file, best of {repeat}", file=sys.stderr)
    from yyb.store import Store

    warm_file(big)
    size = big.stat().st_size
    store_dir = work / "write-store"
    Store.init(str(store_dir))
    out_path = work / "hash-object-w.out"

    # Every write starts from a quiet disk: no dirty pages or freed blocks of an earlier
    # run still being written back or discarded (os.sync, untimed).
    def once() -> ChildRun:
        os.sync()
        with open(out_path, "wb") as out:
            run = run_child([yyb, "--store", str(store_dir), "hash-object", "-w", str(big)],
                            stdout=out, env=env)
        oid = out_path.read_text().strip()
        obj = store_dir / "objects" / oid[:2] / oid[2:]
        if obj.stat().st_size <= size:
            raise SystemExit(f"bench: {obj} was not written in full")
        obj.unlink()  # so that every repeat is a fresh write, not the exists-already path
        return run

    copy = work / "copy.bin"

    def cp_then_hash(fsync: bool) -> float:
        os.sync()
        start = time.perf_counter()
        subprocess.run(["cp", str(big), str(copy)], check=True)
        if fsync:
            fd = os.open(copy, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        hashlib_sha256(copy)
        seconds = time.perf_counter() - start
        copy.unlink()
        return seconds

    runs, bases, bases_sync = interleave(repeat, once, lambda: cp_then_hash(False),
                                         lambda: cp_then_hash(True))
    run, base, base_sync = best(runs), min(bases), min(bases_sync)
    ratio = run.seconds / base
    report.add(Row(
        f"`hash-object -w` {fmt_size(size_mib)} (time vs cp + hash)",
        f"{fmt_s(run.seconds)} ({fmt_rate(size, run.seconds)}), peak RSS "
        f"{run.max_rss_mib:.1f} MiB",
        f"`cp` + hashlib of the copy: {fmt_s(base)}",
        f"{ratio:.2f}x time", f"<= {TARGET_WRITE_RATIO}x", ratio <= TARGET_WRITE_RATIO))
    report.add(Row(
        f"`hash-object -w` {fmt_size(size_mib)} (vs cp + fsync + hash, info)",
        f"{fmt_s(run.seconds)}",
        f"`cp` + fsync + hashlib: {fmt_s(base_sync)}",
        f"{run.seconds / base_sync:.2f}x time", "—", None))
    shutil.rmtree(store_dir, ignore_errors=True)


def _expected_batch_bytes(objects: list[tuple[str, int]]) -> int:
    """Bytes of '<oid> blob <size>\\n<body>\\n' over all objects (yyb and git print the same)."""
    return sum(len(f"{oid} blob {size}\n") + size + 1 for oid, size in objects)


def checked_batch(runs: list[tuple[list[str], Path, list[tuple[str, int]]]], work: Path,
                  env: dict[str, str]) -> Callable[[list[str], Path], ChildRun]:
    """One untimed run of each (command, ids file, objects), to a file: check that the
    output is complete (and warm up); return the timer of a run, (command, ids) -> ChildRun."""
    check_out = work / "batch-check.out"
    for cmd, ids, objects in runs:
        with open(ids, "rb") as stdin, open(check_out, "wb") as out:
            run_child(cmd, stdin=stdin, stdout=out, env=env)
        got, want = check_out.stat().st_size, _expected_batch_bytes(objects)
        if got != want:
            raise SystemExit(f"bench: {cmd[0]} --batch printed {got} bytes, expected {want}")
    check_out.unlink()

    def timed(cmd: list[str], ids: Path) -> ChildRun:
        with open(ids, "rb") as stdin:
            return run_child(cmd, stdin=stdin, env=env)

    return timed


def bench_batch(report: Report, yyb: str, count: int, seed: int, repeat: int, work: Path,
                env: dict[str, str]) -> None:
    """yyb cat-object --batch vs git cat-file --batch, every id of ``count`` blobs on stdin."""
    print(f"[batch] building a store and a Git repository of {count:,} blobs", file=sys.stderr)
    store_dir, repo = work / "batch-store", work / "batch-repo"
    ours = build_yyb_store(store_dir, count, seed)
    theirs, fmt = build_git_repo(repo, count, seed, env, work / "batch-scratch")
    ids_yyb, ids_git = work / "batch-ids-yyb", work / "batch-ids-git"
    ids_yyb.write_text("".join(oid + "\n" for oid, _ in ours))
    ids_git.write_text("".join(oid + "\n" for oid, _ in theirs))
    warm_tree(store_dir / "objects")
    warm_tree(repo / ".git" / "objects")
    yyb_cmd = [yyb, "--store", str(store_dir), "cat-object", "--batch"]
    git_cmd = ["git", "-C", str(repo), "cat-file", "--batch"]

    timed = checked_batch([(yyb_cmd, ids_yyb, ours), (git_cmd, ids_git, theirs)], work, env)
    print(f"[batch] timing, best of {repeat}", file=sys.stderr)
    for extra, label, target in (([], "", True), (["--buffer"], " `--buffer`", False)):
        ours_runs, git_runs = interleave(repeat, lambda e=extra: timed(yyb_cmd + e, ids_yyb),
                                         lambda e=extra: timed(git_cmd + e, ids_git))
        ours_run, git_run = best(ours_runs), best(git_runs)
        ratio = ours_run.seconds / git_run.seconds
        report.add(Row(
            f"`cat-object --batch`{label}, {count:,} blobs (vs `git cat-file --batch`{label})",
            f"{fmt_s(ours_run.seconds)} ({count / ours_run.seconds:,.0f} obj/s), "
            f"RSS {ours_run.max_rss_mib:.0f} MiB",
            f"git ({fmt}): {fmt_s(git_run.seconds)} ({count / git_run.seconds:,.0f} obj/s)",
            f"{ratio:.2f}x time",
            f"<= {TARGET_BATCH_RATIO}x" if target else "—",
            (ratio <= TARGET_BATCH_RATIO) if target else None))
    shutil.rmtree(store_dir, ignore_errors=True)
    shutil.rmtree(repo, ignore_errors=True)


def bench_doctor(report: Report, yyb: str, count: int, seed: int, repeat: int, work: Path,
                 env: dict[str, str]) -> None:
    """yyb doctor over ``count`` loose blobs vs git fsck over the same blobs, loose."""
    print(f"[doctor] building a store and a Git repository of {count:,} blobs "
          f"(the store fsyncs every object: this takes a while)", file=sys.stderr)
    store_dir, repo = work / "doctor-store", work / "doctor-repo"
    build_yyb_store(store_dir, count, seed)
    _, fmt = build_git_repo(repo, count, seed, env, work / "doctor-scratch")
    warm_tree(store_dir / "objects")
    warm_tree(repo / ".git" / "objects")
    ours_runs, git_runs = doctor_runs(yyb, store_dir, repo, count, repeat, work, env)
    ours, theirs = best(ours_runs), best(git_runs)
    ratio = ours.seconds / theirs.seconds
    report.add(Row(
        f"`doctor`, {count:,} loose blobs (vs `git fsck`)",
        f"{fmt_s(ours.seconds)} ({count / ours.seconds:,.0f} obj/s), "
        f"RSS {ours.max_rss_mib:.0f} MiB",
        f"git fsck ({fmt}): {fmt_s(theirs.seconds)} ({count / theirs.seconds:,.0f} obj/s), "
        f"RSS {theirs.max_rss_mib:.0f} MiB",
        f"{ratio:.2f}x time", f"<= {TARGET_DOCTOR_RATIO}x", ratio <= TARGET_DOCTOR_RATIO))
    shutil.rmtree(store_dir, ignore_errors=True)
    shutil.rmtree(repo, ignore_errors=True)


def doctor_runs(yyb: str, store_dir: Path, repo: Path, count: int, repeat: int, work: Path,
                env: dict[str, str]) -> tuple[list[ChildRun], list[ChildRun]]:
    """``yyb doctor`` and ``git fsck`` over the same ``count`` blobs, in turn, ``repeat``
    times each; both print one line per dangling blob (every blob here), which is counted."""
    out_path = work / "doctor.out"

    def timed(cmd: list[str], marker: str) -> ChildRun:
        with open(out_path, "wb") as out:
            run = run_child(cmd, stdout=out, env=env)
        with open(out_path, "rb") as handle:
            lines = sum(1 for line in handle if line.startswith(marker.encode()))
        if lines != count:
            raise SystemExit(f"bench: {cmd[0]} reported {lines} dangling blobs, expected {count}")
        return run

    print(f"[doctor] timing, best of {repeat}", file=sys.stderr)
    try:
        return interleave(
            repeat, lambda: timed([yyb, "--store", str(store_dir), "doctor"], "info dangling "),
            lambda: timed(["git", "-C", str(repo), "fsck"], "dangling blob "))
    finally:
        out_path.unlink(missing_ok=True)


def runs_note(what: str, ours: list[ChildRun], baseline: str, theirs: list[ChildRun]) -> str:
    """Every timed run of both sides, for the notes under the table."""
    return (f"{what} runs (s): yyb " + ", ".join(f"{r.seconds:.2f}" for r in ours)
            + f"; {baseline} " + ", ".join(f"{r.seconds:.2f}" for r in theirs))


def interpreter_of(script: str) -> str:
    """The Python a console script runs on (its ``#!`` line), else this one."""
    try:
        with open(script, "rb") as handle:
            first = handle.readline().decode(errors="replace").strip()
    except OSError:
        return sys.executable
    if first.startswith("#!") and "python" in first and " " not in first[2:].strip():
        return first[2:].strip()
    return sys.executable


def _median_ms(argv: list[str], runs: int, env: dict[str, str]) -> float:
    run_child(argv, env=env, rss=False)  # warm-up, untimed (and fills the bytecode cache)
    times = [run_child(argv, env=env, rss=False).seconds for _ in range(runs)]
    return statistics.median(times) * 1000


# Modules whose cumulative import time is worth showing next to the start-up figure.
IMPORT_WATCH = ("site", "click", "yyb.store", "yyb.store.objects.store", "yyb.store.refs.store",
                "yyb.store.schema", "yyb.store.objects.codec", "msgpack", "tempfile", "pathlib")


def python_of(script: str) -> str:
    """The interpreter a console script names on its ``#!`` line."""
    with open(script, "rb") as handle:
        first = handle.readline()
    return first[2:].strip().decode() if first.startswith(b"#!") else sys.executable


def _import_profile(argv: list[str], env: dict[str, str]) -> tuple[set[str], dict[str, int]]:
    """Run ``python -X importtime`` on a command.

    Returns the top-level packages it imported and {module: cumulative microseconds} for
    every module imported (the first time it was imported).
    """
    proc = subprocess.run([python_of(argv[0]), "-X", "importtime", *argv],
                          capture_output=True, env=env, check=True)
    packages: set[str] = set()
    cumulative: dict[str, int] = {}
    for line in proc.stderr.decode().splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        _, micros, name = line.split("|")
        if not micros.strip().isdigit():
            continue  # the header line
        module = name.strip()
        packages.add(module.split(".")[0])
        cumulative.setdefault(module, int(micros))
    return packages, cumulative


def bench_startup(report: Report, yyb: str, runs: int, work: Path,
                  env: dict[str, str]) -> None:
    """Median wall time of `yyb cat-object -t OID`; which heavy modules plumbing imports."""
    print(f"[startup] median of {runs} runs", file=sys.stderr)
    from yyb.store import Store

    store_dir = work / "startup-store"
    store, _ = Store.init(str(store_dir))
    oid = store.objects.put("blob", b"hello\n")
    cat = [yyb, "--store", str(store_dir), "cat-object", "-t", oid]
    python = interpreter_of(yyb)  # the baseline is the interpreter yyb runs on, site and all
    python_ms = _median_ms([python, "-c", "pass"], runs, env)
    cat_ms = _median_ms(cat, runs, env)
    report.add(Row(
        f"start-up: `cat-object -t OID`, median of {runs}",
        f"{cat_ms:.1f} ms", f"`python -c pass`: {python_ms:.1f} ms",
        f"+{cat_ms - python_ms:.1f} ms",
        f"< {TARGET_STARTUP_MS:.0f} ms, +{TARGET_STARTUP_OVER_MS:.0f} ms",
        cat_ms < TARGET_STARTUP_MS and cat_ms - python_ms <= TARGET_STARTUP_OVER_MS))
    # The same with no bytecode cache at all (a checkout run with PYTHONDONTWRITEBYTECODE=1,
    # or an unwritable tree, compiles every module on every command): both sides compile.
    cold = bench_env(work, bytecode_cache=False)
    cold_python_ms = _median_ms([python, "-c", "pass"], runs, cold)
    cold_ms = _median_ms(cat, runs, cold)
    report.add(Row(
        "start-up: `cat-object -t OID`, no bytecode cache for anything",
        f"{cold_ms:.1f} ms", f"`python -c pass`, no cache either: {cold_python_ms:.1f} ms",
        f"+{cold_ms - cold_python_ms:.1f} ms", f"+{TARGET_STARTUP_OVER_MS:.0f} ms",
        cold_ms - cold_python_ms <= TARGET_STARTUP_OVER_MS))

    sample = work / "startup-sample"
    sample.write_bytes(b"x" * 1000)
    commands = {"cat-object -t": cat, "hash-object": [yyb, "hash-object", str(sample)]}
    loaded: set[str] = set()
    times: dict[str, int] = {}
    for name, argv in commands.items():
        packages, cumulative = _import_profile(argv, env)
        loaded |= packages
        if name == "cat-object -t":
            times = cumulative
    heavy = sorted(m for m in HEAVY_MODULES if m in loaded)
    report.add(Row(
        "plumbing imports none of " + ", ".join(HEAVY_MODULES),
        "imports: " + (", ".join(heavy) if heavy else "none of them"),
        "`-X importtime` of `cat-object -t` and `hash-object`", "—", "none imported",
        not heavy))
    report.notes.append(
        "import time of `yyb cat-object -t` (`-X importtime`, cumulative, one run): "
        + ", ".join(f"{m} {times[m] / 1000:.1f} ms" for m in IMPORT_WATCH if m in times))
    shutil.rmtree(store_dir, ignore_errors=True)


# --- main --------------------------------------------------------------------------------


def describe_machine(load_before: tuple[float, float, float]) -> list[str]:
    def first_line(argv: list[str]) -> str:
        try:
            return subprocess.run(argv, capture_output=True, text=True).stdout.strip()
        except OSError:
            return "(not found)"

    return [
        f"- date: {datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs "
        f"(`nproc`: {first_line(['nproc'])}), {platform.system()} {platform.release()}",
        f"- python: {platform.python_version()} ({sys.executable})",
        f"- git: {first_line(['git', '--version'])}",
        f"- yyb: {describe_yyb()}",
        "- load average (1/5/15 min) before: " + "/".join(f"{x:.2f}" for x in load_before)
        + ", after: " + "/".join(f"{x:.2f}" for x in os.getloadavg())
        + " (other work on the machine skews the figures; the bench itself keeps about 1 "
        "CPU busy)",
    ]


def describe_yyb() -> str:
    """Where the measured yyb comes from: its folder, commit, and uncommitted changes."""
    import yyb

    tree = Path(yyb.__file__).resolve().parents[1]
    git = ["git", "-C", str(tree)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True)
    if head.returncode != 0:
        return f"{tree} (not a Git checkout)"
    dirty = subprocess.run([*git, "status", "--porcelain", "--", "yyb"], capture_output=True,
                           text=True).stdout.strip()
    state = "with uncommitted changes in yyb/" if dirty else "clean yyb/"
    return f"{tree} at commit {head.stdout.strip()} ({state})"


def fresh_install(work: Path) -> str:
    """Install this checkout as a user would (a wheel, not editable) into a new virtual
    environment, and return its yyb. No network: the dependencies come from this Python's
    environment, named by a path entry (a ``.pth`` line) in the new one's site-packages."""
    import sysconfig

    root = Path(__file__).resolve().parents[1]
    venv, wheels = work / "fresh-venv", work / "fresh-wheel"
    print(f"bench: installing {root} into {venv} (a wheel)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "-w", str(wheels), str(root)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; "
                              "print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "yyb-bench-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel = next(wheels.glob("yyb-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-index", "--target", purelib, str(wheel)], check=True)
    script = venv / "bin" / "yyb"  # what pip writes for the console script, less its argv[0] fix
    script.write_text(f"#!{python}\nimport sys\nfrom yyb.cli import main\nsys.exit(main())\n")
    script.chmod(0o755)
    return str(script)


def find_yyb(explicit: str | None) -> str:
    """The yyb executable next to this Python (so the venv's python runs the venv's yyb)."""
    candidate = Path(explicit) if explicit else Path(sys.executable).parent / "yyb"
    if not os.access(candidate, os.X_OK):
        raise SystemExit(f"bench: no yyb executable at {candidate} (install yyb into this "
                         "Python's environment, or pass --yyb PATH)")
    return str(candidate)


BENCHMARKS = ("hash", "write", "batch", "doctor", "startup")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="small sizes for a smoke run: 64 MiB, 2,000 batch objects, "
                        "10,000 doctor objects (explicit size options still win)")
    parser.add_argument("--size-mib", type=int, help="size of the large file (default 1024)")
    parser.add_argument("--batch-objects", type=int,
                        help="objects for the cat-object --batch run (default 20000)")
    parser.add_argument("--objects", type=int,
                        help="objects for the doctor / git fsck run (default 100000)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run each heavy measurement N times, yyb and baseline in turn, "
                        "and keep the best of each (default 1)")
    parser.add_argument("--startup-runs", type=int, default=20,
                        help="runs for the start-up median (default 20)")
    parser.add_argument("--only", action="append", choices=BENCHMARKS,
                        help="run only this measurement (repeatable)")
    parser.add_argument("--seed", type=int, default=20240601, help="seed of the small objects")
    parser.add_argument("--workdir", help="scratch folder (default: a new temp folder, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--yyb", help="the yyb executable (default: next to sys.executable)")
    parser.add_argument("--fresh-install", action="store_true",
                        help="measure a wheel of this checkout installed into a new virtual "
                        "environment (not the editable install next to sys.executable)")
    args = parser.parse_args(argv)
    quick = args.quick
    args.size_mib = args.size_mib or (64 if quick else 1024)
    args.batch_objects = args.batch_objects or (2_000 if quick else 20_000)
    args.objects = args.objects or (10_000 if quick else 100_000)
    args.only = args.only or list(BENCHMARKS)
    if min(args.size_mib, args.batch_objects, args.objects, args.repeat,
           args.startup_runs) < 1:
        parser.error("sizes, counts and --repeat must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    yyb = find_yyb(args.yyb)
    if shutil.which("git") is None and {"batch", "doctor"} & set(args.only):
        raise SystemExit("bench: git is needed for the batch and doctor comparisons")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="yyb-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    env = bench_env(work)
    report = Report()
    load_before = os.getloadavg()
    fill_bytecode_cache(env)
    if args.fresh_install:
        yyb = fresh_install(work)
    print(f"bench: yyb {yyb}, scratch {work}", file=sys.stderr)
    try:
        if {"hash", "write"} & set(args.only):
            big = work / "big.bin"
            print(f"bench: writing {fmt_size(args.size_mib)} of random bytes", file=sys.stderr)
            make_big_file(big, args.size_mib)
            if "hash" in args.only:
                bench_hash_object(report, yyb, big, args.size_mib, args.repeat, work, env)
            if "write" in args.only:
                bench_hash_object_write(report, yyb, big, args.size_mib, args.repeat, work,
                                        env)
            big.unlink()
        if "batch" in args.only:
            bench_batch(report, yyb, args.batch_objects, args.seed, args.repeat, work, env)
        if "doctor" in args.only:
            bench_doctor(report, yyb, args.objects, args.seed, args.repeat, work, env)
        if "startup" in args.only:
            bench_startup(report, yyb, args.startup_runs, work, env)
    finally:
        if not (args.keep or args.workdir):
            shutil.rmtree(work, ignore_errors=True)

    print()
    print("\n".join(describe_machine(load_before)))
    print(f"- sizes: file {fmt_size(args.size_mib)}, batch {args.batch_objects:,} objects, "
          f"doctor {args.objects:,} objects (50-2000 random bytes each), best of {args.repeat}")
    print("- warm cache: the page cache cannot be dropped without root, so every input was "
          "read once before it was timed; child processes are timed from spawn to exit "
          f"(start-up included); peak RSS: {RSS_METHOD}")
    for note in report.notes:
        print(f"- {note}")
    print()
    print(report.markdown())
    print()
    print(report.verdict())
    return 1 if report.missed() else 0


if __name__ == "__main__":
    sys.exit(main())
