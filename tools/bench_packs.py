#!/usr/bin/env python3
"""Benchmark a packed yyb store against a packed Git repository, side by side.

Run by hand (this is not a test), with the Python of the environment yyb is installed in:

    python tools/bench_packs.py                  # 100,000 blobs, best of 3
    python tools/bench_packs.py --count 10000    # a smaller smoke run

Both sides get the same N random blobs of 50-2000 bytes (``bench_store.small_blobs``): a yyb
store written through the store API and packed by ``yyb gc``, and a fresh SHA-256 Git
repository written by ``git hash-object -w`` and packed by ``git pack-objects`` (every oid on
stdin, Git's defaults: deltas searched, zlib) and ``git prune-packed``: the blobs are all
unreachable, and ``git gc`` or ``git repack -a -d [-k]`` leave unreachable loose objects
loose. Then it measures:

1. the time of ``yyb gc`` and of Git's packing (information, no target);
2. the size of ``S/objects`` after packing, apparent bytes (as ``du -sb``) and allocated
   blocks (as ``du -s --block-size=1``), against the sum of the objects' stored bytes
   (``blob <len>\\0<body>``, what a pack must hold at least): target at most 1.1x;
3. ``yyb cat-object --batch`` with every id on stdin against ``git cat-file --batch``:
   target at most Git's time from 100,000 objects on, at most 2x below that (where start-up
   and the first pack open dominate), in one process (``YYB_WORKERS=1``) as with helpers;
4. ``yyb doctor`` against ``git fsck``: target at most 1.2x the time.

Timed runs are warm-cache (every object file is read once first), yyb and Git alternate, and
the best of ``--repeat`` runs of each is kept, as in tools/bench_store.py, whose helpers this
script imports. It prints a Markdown table and exits 0, or 1 when something fails to run; a
missed target is reported in the table, not in the exit status.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import (  # noqa: E402  (tools/ is put on sys.path just above)
    RSS_METHOD,
    Report,
    Row,
    bench_env,
    best,
    build_git_repo,
    build_yyb_store,
    checked_batch,
    describe_machine,
    describe_yyb,
    doctor_runs,
    fill_bytecode_cache,
    find_yyb,
    fmt_s,
    fresh_install,
    interleave,
    run_child,
    runs_note,
    warm_tree,
)

MIB = 1 << 20

# Targets (see docs/performance.md, "Packs").
TARGET_SIZE_RATIO = 1.1  # S/objects after gc vs the objects' stored bytes
TARGET_DOCTOR_RATIO = 1.2  # doctor vs git fsck, both packed


def batch_target(count: int) -> float:
    """cat-object --batch vs git cat-file --batch, both packed: at most Git's time from
    100,000 objects on, at most twice it below (start-up and the first pack open dominate)."""
    return 1.0 if count >= 100_000 else 2.0


# The modules `yyb gc` imports on top of bench_store's plumbing, compiled before any timing.
PACK_MODULES = ("yyb.cli.packs", "yyb.store.gc", "yyb.store.objects.pack")


# --- sizes -------------------------------------------------------------------------------


def disk_usage(folder: Path) -> tuple[int, int]:
    """(apparent bytes, allocated bytes) of ``folder`` and everything under it, as
    ``du -sb`` and ``du -s --block-size=1`` count them (folders included)."""

    def du(*flags: str) -> int:
        out = subprocess.run(
            ["du", "-s", *flags, str(folder)], capture_output=True, text=True, check=True
        )
        return int(out.stdout.split()[0])

    return du("-b"), du("--block-size=1")


def usage_by_kind(folder: Path) -> dict[str, tuple[int, int]]:
    """{kind: (apparent, allocated bytes)} under ``folder``: ``.pack`` files, ``.idx``
    files, other files, and the folders themselves (an ext4 folder keeps the blocks its
    entries once took after the entries are removed)."""
    totals: dict[str, list[int]] = {}

    def add(kind: str, path: str) -> None:
        st = os.lstat(path)
        slot = totals.setdefault(kind, [0, 0])
        slot[0] += st.st_size
        slot[1] += st.st_blocks * 512

    add("folders", str(folder))
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            add("folders", os.path.join(root, name))
        for name in files:
            suffix = os.path.splitext(name)[1]
            add(suffix if suffix in (".pack", ".idx") else "other files", os.path.join(root, name))
    return {kind: (a, b) for kind, (a, b) in totals.items()}


def stored_bytes(objects: list[tuple[str, int]]) -> int:
    """The bytes of every object as stored: ``blob <len>\\0`` and the body."""
    return sum(len(b"blob %d\x00" % size) + size for _, size in objects)


def fmt_mib(size: int) -> str:
    return f"{size / MIB:,.1f} MiB"


# --- building and packing ----------------------------------------------------------------


def pack_yyb(yyb: str, store_dir: Path, env: dict[str, str]) -> float:
    """``yyb --store S gc``; its seconds. Checks that no loose object is left."""
    run = run_child([yyb, "--store", str(store_dir), "gc"], env=env, rss=False)
    left = [
        name
        for prefix in os.listdir(store_dir / "objects")
        if len(prefix) == 2
        for name in os.listdir(store_dir / "objects" / prefix)
    ]
    if left:
        raise SystemExit(f"bench: yyb gc left {len(left)} loose objects")
    return run.seconds


def pack_git(repo: Path, objects: list[tuple[str, int]], work: Path, env: dict[str, str]) -> float:
    """Pack every object of ``repo`` and remove the loose copies; the seconds taken.

    The blobs are all unreachable, which ``git gc`` and ``git repack -a -d [-k]`` leave loose
    ("Nothing new to pack"), so this does what they do for reachable objects by hand:
    ``git pack-objects .git/objects/pack/pack`` with every oid on stdin (deltas searched,
    zlib, Git's defaults), then ``git prune-packed``. Checks that nothing is left loose.
    """
    ids = work / "pack-ids"
    ids.write_text("".join(oid + "\n" for oid, _ in objects))
    git = ["git", "-C", str(repo)]
    start = time.perf_counter()
    with open(ids, "rb") as stdin:
        run_child(
            [*git, "pack-objects", "-q", str(repo / ".git" / "objects" / "pack" / "pack")],
            stdin=stdin,
            env=env,
            rss=False,
        )
    run_child([*git, "prune-packed", "-q"], env=env, rss=False)
    seconds = time.perf_counter() - start
    ids.unlink()
    out = subprocess.run(
        [*git, "count-objects", "-v"], env=env, capture_output=True, text=True, check=True
    ).stdout
    counts = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    if counts.get("count") != "0" or counts.get("in-pack") != str(len(objects)):
        raise SystemExit(f"bench: git left {out!r} after packing")
    return seconds


# --- measurements ------------------------------------------------------------------------


def bench_size(report: Report, store_dir: Path, repo: Path, ours: list[tuple[str, int]]) -> None:
    """S/objects after gc against the sum of the objects' stored bytes."""
    want = stored_bytes(ours)
    apparent, allocated = disk_usage(store_dir / "objects")
    git_apparent, git_allocated = disk_usage(repo / ".git" / "objects")
    for label, size, git_size in (
        ("apparent bytes, `du -sb`", apparent, git_apparent),
        ("allocated, `du -s --block-size=1`", allocated, git_allocated),
    ):
        ratio = size / want
        report.add(
            Row(
                f"`S/objects` after `gc`, {label} (vs stored bytes)",
                f"{fmt_mib(size)} ({size:,} B)",
                f"stored bytes: {fmt_mib(want)} ({want:,} B); git `.git/objects`: "
                f"{fmt_mib(git_size)}",
                f"{ratio:.3f}x",
                f"<= {TARGET_SIZE_RATIO}x",
                ratio <= TARGET_SIZE_RATIO,
            )
        )
    # Which part of S/objects is what: the pack and its index, against the folders.
    parts = usage_by_kind(store_dir / "objects")
    files = sum(parts.get(kind, (0, 0))[0] for kind in (".pack", ".idx"))
    git_parts = usage_by_kind(repo / ".git" / "objects")
    git_files = sum(git_parts.get(kind, (0, 0))[0] for kind in (".pack", ".idx"))
    report.add(
        Row(
            "the `.pack` and `.idx` files alone, apparent bytes (vs stored bytes, info)",
            f"{fmt_mib(files)} ({files:,} B)",
            f"git's `.pack` + `.idx`: {fmt_mib(git_files)} ({git_files / want:.3f}x)",
            f"{files / want:.3f}x",
            "—",
            None,
        )
    )
    report.notes.append(
        "`S/objects` after `gc`, apparent / allocated bytes: "
        + "; ".join(f"{kind} {a:,} / {b:,}" for kind, (a, b) in sorted(parts.items()))
    )


def bench_batch(
    report: Report,
    yyb: str,
    store_dir: Path,
    repo: Path,
    ours: list[tuple[str, int]],
    theirs: list[tuple[str, int]],
    fmt: str,
    repeat: int,
    work: Path,
    env: dict[str, str],
) -> None:
    """yyb cat-object --batch vs git cat-file --batch, every id on stdin, both packed."""
    count = len(ours)
    ids_yyb, ids_git = work / "ids-yyb", work / "ids-git"
    ids_yyb.write_text("".join(oid + "\n" for oid, _ in ours))
    ids_git.write_text("".join(oid + "\n" for oid, _ in theirs))
    yyb_cmd = [yyb, "--store", str(store_dir), "cat-object", "--batch"]
    git_cmd = ["git", "-C", str(repo), "cat-file", "--batch"]

    timed = checked_batch([(yyb_cmd, ids_yyb, ours), (git_cmd, ids_git, theirs)], work, env)

    print(f"[batch] timing, best of {repeat}", file=sys.stderr)
    ours_runs, git_runs = interleave(
        repeat, lambda: timed(yyb_cmd, ids_yyb), lambda: timed(git_cmd, ids_git)
    )
    ours_run, git_run = best(ours_runs), best(git_runs)
    ratio = ours_run.seconds / git_run.seconds
    report.add(
        Row(
            f"`cat-object --batch`, {count:,} packed blobs (vs `git cat-file --batch`)",
            f"{fmt_s(ours_run.seconds)} ({count / ours_run.seconds:,.0f} obj/s), "
            f"RSS {ours_run.max_rss_mib:.0f} MiB",
            f"git ({fmt}): {fmt_s(git_run.seconds)} ({count / git_run.seconds:,.0f} obj/s), "
            f"RSS {git_run.max_rss_mib:.0f} MiB",
            f"{ratio:.2f}x time",
            f"<= {batch_target(count)}x",
            ratio <= batch_target(count),
        )
    )
    report.notes.append(runs_note("`cat-object --batch`", ours_runs, "git", git_runs))
    report.notes.append(
        "`cat-object --batch` CPU (user + system, with its helper), best run: yyb "
        f"{ours_run.cpu_seconds:.2f} s; git {git_run.cpu_seconds:.2f} s"
    )

    alone_env = dict(env, YYB_WORKERS="1")  # no helper process: the reader proves every object
    alone_timed = checked_batch([(yyb_cmd, ids_yyb, ours)], work, alone_env)
    print(f"[batch] one process (YYB_WORKERS=1), best of {repeat}", file=sys.stderr)
    alone_runs, git_runs = interleave(
        repeat, lambda: alone_timed(yyb_cmd, ids_yyb), lambda: timed(git_cmd, ids_git)
    )
    alone, git_run = best(alone_runs), best(git_runs)
    report.add(
        Row(
            "the same in one process, `YYB_WORKERS=1`",
            f"{fmt_s(alone.seconds)} ({count / alone.seconds:,.0f} obj/s), "
            f"CPU {alone.cpu_seconds:.2f} s",
            f"git ({fmt}): {fmt_s(git_run.seconds)}",
            f"{alone.seconds / git_run.seconds:.2f}x time",
            f"<= {batch_target(count)}x",
            alone.seconds / git_run.seconds <= batch_target(count),
        )
    )


def bench_doctor(
    report: Report,
    yyb: str,
    store_dir: Path,
    repo: Path,
    count: int,
    fmt: str,
    repeat: int,
    work: Path,
    env: dict[str, str],
) -> None:
    """yyb doctor vs git fsck, both packed; both print one line per (dangling) blob."""
    ours_runs, git_runs = doctor_runs(yyb, store_dir, repo, count, repeat, work, env)
    ours, theirs = best(ours_runs), best(git_runs)
    ratio = ours.seconds / theirs.seconds
    report.add(
        Row(
            f"`doctor`, {count:,} packed blobs (vs `git fsck`)",
            f"{fmt_s(ours.seconds)} ({count / ours.seconds:,.0f} obj/s), "
            f"RSS {ours.max_rss_mib:.0f} MiB",
            f"git fsck ({fmt}): {fmt_s(theirs.seconds)} ({count / theirs.seconds:,.0f} obj/s), "
            f"RSS {theirs.max_rss_mib:.0f} MiB",
            f"{ratio:.2f}x time",
            f"<= {TARGET_DOCTOR_RATIO}x",
            ratio <= TARGET_DOCTOR_RATIO,
        )
    )
    report.notes.append(runs_note("`doctor`", ours_runs, "git fsck", git_runs))


# --- main --------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--count", type=int, default=100_000, help="blobs on each side (default 100000)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="timed runs of each command, yyb and Git in turn; the best is kept (default 3)",
    )
    parser.add_argument("--seed", type=int, default=20240601, help="seed of the blobs")
    parser.add_argument("--workdir", help="scratch folder (default: a new temp folder, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--yyb", help="the yyb executable (default: next to sys.executable)")
    parser.add_argument(
        "--fresh-install",
        action="store_true",
        help="measure this checkout installed as a wheel into a new virtual environment (as a "
        "user installs it) rather than the yyb next to sys.executable, whose editable "
        "install's console script and path finder cost every start-up a few milliseconds",
    )
    args = parser.parse_args(argv)
    if min(args.count, args.repeat) < 1:
        parser.error("--count and --repeat must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if shutil.which("git") is None:
        raise SystemExit("bench: git is needed for the comparison")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="yyb-bench-packs-"))
    work.mkdir(parents=True, exist_ok=True)
    yyb = fresh_install(work) if args.fresh_install else find_yyb(args.yyb)
    env = bench_env(work)
    report = Report()
    load_before = os.getloadavg()
    yyb_before = describe_yyb()  # others may commit while this runs: compared at the end
    fill_bytecode_cache(env)
    subprocess.run([sys.executable, "-c", "import " + ", ".join(PACK_MODULES)], env=env, check=True)
    print(f"bench: yyb {yyb}, scratch {work}", file=sys.stderr)
    store_dir, repo = work / "store", work / "repo"
    try:
        print(
            f"[build] a store and a Git repository of {args.count:,} blobs (the store "
            "fsyncs every object: this takes a while)",
            file=sys.stderr,
        )
        start = time.perf_counter()
        ours = build_yyb_store(store_dir, args.count, args.seed)
        print(f"[build] store: {time.perf_counter() - start:.1f} s", file=sys.stderr)
        theirs, fmt = build_git_repo(repo, args.count, args.seed, env, work / "scratch")
        if fmt == "sha256" and ours != theirs:
            raise SystemExit("bench: the store and the repository hold different objects")

        print("[pack] yyb gc, git pack-objects + prune-packed", file=sys.stderr)
        gc_seconds = pack_yyb(yyb, store_dir, env)
        repack_seconds = pack_git(repo, theirs, work, env)
        report.add(
            Row(
                f"packing {args.count:,} loose blobs: `yyb gc` "
                "(vs `git pack-objects` + `prune-packed`, info)",
                fmt_s(gc_seconds),
                f"git ({fmt}): {fmt_s(repack_seconds)}",
                f"{gc_seconds / repack_seconds:.2f}x time",
                "—",
                None,
            )
        )

        bench_size(report, store_dir, repo, ours)
        warm_tree(store_dir / "objects")
        warm_tree(repo / ".git" / "objects")
        bench_batch(report, yyb, store_dir, repo, ours, theirs, fmt, args.repeat, work, env)
        bench_doctor(report, yyb, store_dir, repo, args.count, fmt, args.repeat, work, env)
    finally:
        if not (args.keep or args.workdir):
            shutil.rmtree(work, ignore_errors=True)

    print()
    print("\n".join(describe_machine(load_before)))
    print(
        f"- {args.count:,} blobs of 50-2000 random bytes on each side, best of "
        f"{args.repeat} (yyb and Git alternating)"
    )
    print(
        "- warm cache: every object file was read once before the timed runs; child "
        f"processes are timed from spawn to exit (start-up included); peak RSS: {RSS_METHOD}"
    )
    if describe_yyb() != yyb_before:
        report.notes.append(f"yyb changed during the run; at its start it was {yyb_before}")
    for note in report.notes:
        print(f"- {note}")
    print()
    print(report.markdown())
    print()
    print(report.verdict())
    return 0


if __name__ == "__main__":
    sys.exit(main())
