#!/usr/bin/env python3
"""`yyb push` / `yyb fetch` over SSH against `git push` / `git fetch` over the same SSH, by hand.

    python tools/bench_remote.py                       # 10,000 blobs, 5,000 attempts, 3 repeats
    python tools/bench_remote.py --attempts 10000      # the issue's store of 10,000 (~6 min)
    python tools/bench_remote.py --blobs 2000 --attempts 1000 --repeat 1   # a smoke run
    python tools/bench_remote.py --profile             # also cProfile both sides of the pushes

Everything runs through one hermetic OpenSSH server on loopback (tests/remote/sshd.py's
``sshd``: its own keys and config, the far side's PATH starting with a ``yyb`` wrapper of this
Python), so yyb and Git pay the same SSH.

Throughput (--blobs N, 50-2,000 random bytes each, a fixed seed): a store holding the blobs,
tied to one ref by ``yyb_note.v1`` records (one per 1,000 blobs, then one linking those), and
a SHA-256 Git repository holding the same blobs (a tree of subtrees of 1,000 blobs, one
commit, a branch). Each --repeat, yyb and Git alternating, the median kept:
  push:   `yyb push ssh://... REF` into an empty store  vs  `git push ssh://...` into an empty
          bare SHA-256 repository
  fetch:  `yyb fetch ssh://... REF` into an empty store  vs  `git fetch` into an empty bare
          repository, and `git clone --bare`
Incremental (--attempts N): a store of N fabricated attempts (tests/reports/fabricate.py: one
plan, each attempt's chain of records and blobs and its refs), pushed whole (`--all`) once into
an empty store; then, each --repeat, one new attempt is added and its refs alone are pushed,
and another one added and `--all` pushed (every ref: the negotiation's cost), each set against
`ssh HOST true` (SSH start-up) measured in the same run. The objects and bytes each push sent
are checked against the objects the new attempt wrote.

It prints the machine, the load before and after, and a Markdown table of every figure with
its baseline and ratio, and the targets (a miss is reported in the table and the exit status 1).
"""

from __future__ import annotations

import argparse
import os
import pstats
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from bench_store import bench_env, describe_machine, find_yyb, small_blobs, warm_tree  # noqa: E402

SEED = 7
REF = "refs/notes/bench"
BRANCH = "refs/heads/main"
CHUNK = 1000  # blobs per note record, and per Git subtree
TARGET_RATIO = 1.5  # yyb push / fetch against git's
TARGET_INCREMENTAL_S = 1.0  # one attempt's push, beyond SSH start-up
TRANSFER = re.compile(r"transfer: (\d+) object\(s\); (\d+) bytes sent, (\d+) received")


@dataclass
class Run:
    seconds: float
    objects: int | None = None
    sent: int | None = None
    received: int | None = None


@dataclass
class Row:
    figure: str
    value: str
    baseline: str
    ratio: str
    target: str
    met: bool | None


def timed(argv: list[str], env: dict[str, str], cwd: str | None = None) -> Run:
    """Run ``argv`` to completion; its wall time and, for yyb, the transfer line's figures."""
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(
            f"bench: {shlex.join(argv)} exited {done.returncode}:\n{done.stderr.decode()}"
        )
    found = TRANSFER.search(done.stderr.decode())
    if found is None:
        return Run(seconds)
    return Run(seconds, *(int(x) for x in found.groups()))


def median(runs: list[Run]) -> Run:
    """The run of median wall time (the lower middle of an even count)."""
    ordered = sorted(runs, key=lambda r: r.seconds)
    return ordered[(len(ordered) - 1) // 2]


def no_fsync():
    """Building the inputs only: nothing timed runs in this process."""
    real = os.fsync
    os.fsync = lambda fd: None
    return real


# --- the inputs -----------------------------------------------------------------------------


def build_yyb(path: Path, bodies: list[bytes]) -> tuple[int, int]:
    """The blobs in a store under REF: a note per CHUNK blobs, one note linking those.
    Returns (objects, the ref's update record included; bytes of the bodies)."""
    from yyb.store.repo import Store

    store, _ = Store.init(str(path))
    chunks = []
    for start in range(0, len(bodies), CHUNK):
        oids = store.objects.put_many([("blob", b) for b in bodies[start : start + CHUNK]])
        chunks.append(
            store.objects.put_record(
                {
                    "schema_version": "yyb_note.v1",
                    "message": f"blobs {start}-{start + len(oids) - 1}",
                    "links": {"blobs": sorted(set(oids))},
                }
            )
        )
    top = store.objects.put_record(
        {"schema_version": "yyb_note.v1", "message": "all", "links": {"chunks": chunks}}
    )
    store.refs.update(REF, top, reason="bench")
    return len(bodies) + len(chunks) + 2, sum(map(len, bodies))


def git(repo: Path, *args: str, env: dict, stdin: bytes | None = None) -> str:
    out = subprocess.run(
        ["git", "-C", str(repo), *args], input=stdin, env=env, capture_output=True, check=True
    )
    return out.stdout.decode().strip()


def bare(path: Path, env: dict) -> Path:
    subprocess.run(
        ["git", "init", "-q", "--bare", "--object-format=sha256", str(path)], env=env, check=True
    )
    return path


def build_git(path: Path, bodies: list[bytes], scratch: Path, env: dict) -> None:
    """The same blobs, loose, in a SHA-256 repository: subtrees of CHUNK, one commit."""
    subprocess.run(["git", "init", "-q", "--object-format=sha256", str(path)], env=env, check=True)
    scratch.mkdir(parents=True)
    names = []
    for i, body in enumerate(bodies):
        name = scratch / f"{i:07d}"
        name.write_bytes(body)
        names.append(str(name))
    listed = ("\n".join(names) + "\n").encode()
    oids = git(path, "hash-object", "-w", "--stdin-paths", env=env, stdin=listed).split()
    shutil.rmtree(scratch)
    top = []
    for start in range(0, len(oids), CHUNK):
        part = oids[start : start + CHUNK]
        listing = "".join(f"100644 blob {o}\tf{start + i:07d}\n" for i, o in enumerate(part))
        subtree = git(path, "mktree", env=env, stdin=listing.encode())
        top.append(f"040000 tree {subtree}\td{start // CHUNK:05d}\n")
    tree = git(path, "mktree", env=env, stdin="".join(top).encode())
    who = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b"}
    who |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    commit = git(path, "commit-tree", tree, "-m", "all", env={**env, **who})
    git(path, "update-ref", BRANCH, commit, env=env)


def pack_bytes(repo: Path) -> int:
    return sum(p.stat().st_size for p in (repo / "objects" / "pack").glob("*.pack"))


def loose_oids(store_path: Path) -> set[str]:
    """Every loose object of a store (the fabricated store is all loose)."""
    found = set()
    objects = store_path / "objects"
    for fan in os.scandir(objects):
        if len(fan.name) == 2 and fan.is_dir():
            found.update(fan.name + e.name for e in os.scandir(fan.path) if len(e.name) == 62)
    return found


# --- throughput -----------------------------------------------------------------------------


def throughput(args, server, yyb: str, env: dict, work: Path) -> tuple[list[Row], dict]:
    from yyb.store.repo import Store

    bodies = list(small_blobs(args.blobs, SEED))
    source, repo = work / "source-store", work / "source.git"
    real = no_fsync()
    try:
        objects, body_bytes = build_yyb(source, bodies)
    finally:
        os.fsync = real
    build_git(repo, bodies, work / "scratch", env)
    del bodies
    warm_tree(source)
    warm_tree(repo)
    runs: dict[str, list[Run]] = {k: [] for k in ("yp", "gp", "yf", "gf", "gc")}
    git_bytes = []
    refspec = f"{BRANCH}:{BRANCH}"
    for i in range(args.repeat):
        there, back = work / f"there-{i}", work / f"back-{i}"
        there_git, back_git = work / f"there-{i}.git", work / f"back-{i}.git"
        clone = work / f"clone-{i}.git"
        for empty in (there, back):
            Store.init(str(empty))
        for empty in (there_git, back_git):
            bare(empty, env)
        steps = [  # in this order: each fetch reads what the push before it left
            ("yp", [yyb, "--store", str(source), "push", server.url(there), REF]),
            ("gp", ["git", "-C", str(repo), "push", "-q", server.url(there_git), refspec]),
            ("yf", [yyb, "--store", str(back), "fetch", server.url(there), REF]),
            ("gf", ["git", "-C", str(back_git), "fetch", "-q", server.url(there_git), refspec]),
            ("gc", ["git", "clone", "-q", "--bare", server.url(there_git), str(clone)]),
        ]
        for key, argv in steps:
            runs[key].append(timed(argv, env))
        git_bytes.append(pack_bytes(there_git))
        if Store.open(str(back)).refs.read(REF) != Store.open(str(source)).refs.read(REF):
            raise SystemExit("bench: the fetched store's ref differs from the pushed one")
        for done in (there, there_git, back, back_git, clone):
            shutil.rmtree(done)
    yp, gp, yf, gf, gc = (median(runs[k]) for k in ("yp", "gp", "yf", "gf", "gc"))
    gbytes = int(statistics.median(git_bytes))
    label = f"{args.blobs:,} blobs ({body_bytes / 1e6:.1f} MB)"
    rows = [
        ratio_row(f"push, {label}: yyb vs git push", yp, gp, TARGET_RATIO),
        ratio_row(f"fetch, {label}: yyb vs git fetch", yf, gf, TARGET_RATIO),
        ratio_row(f"fetch, {label}: yyb vs git clone --bare", yf, gc, TARGET_RATIO),
        Row(
            "push: bytes sent (yyb: its transfer line; git: the pack it left)",
            f"{yp.sent:,} ({yp.objects:,} objects)",
            f"{gbytes:,}",
            f"{yp.sent / gbytes:.2f}",
            "",
            None,
        ),
        Row(
            "fetch: bytes received (yyb's transfer line)",
            f"{yf.received:,} ({yf.objects:,} objects)",
            f"{body_bytes:,} of bodies",
            f"{yf.received / body_bytes:.2f}",
            "",
            None,
        ),
    ]
    if yp.objects != objects or yf.objects != objects:
        raise SystemExit(f"bench: pushed {yp.objects}, fetched {yf.objects}, expected {objects}")
    shutil.rmtree(source)
    shutil.rmtree(repo)
    return rows, {k: [round(r.seconds, 3) for r in v] for k, v in runs.items()}


def ratio_row(figure: str, ours: Run, theirs: Run, target: float) -> Row:
    ratio = ours.seconds / theirs.seconds
    return Row(
        figure,
        f"{ours.seconds:.3f} s",
        f"{theirs.seconds:.3f} s",
        f"{ratio:.2f}",
        f"<= {target}",
        ratio <= target,
    )


# --- incremental ----------------------------------------------------------------------------


class Attempts:
    """A store of fabricated attempts, and one more attempt at a time."""

    def __init__(self, path: Path, count: int):
        from tests.reports.fabricate import Spec, fabricate
        from yyb.store.repo import Store

        self.path = path
        store, _ = Store.init(str(path))
        per_cell = 10 if count % 10 == 0 else 1
        spec = Spec(["bench/m0"], [f"case-{i:05d}" for i in range(count // per_cell)], per_cell)
        real = no_fsync()
        try:
            self.plan = fabricate(store, spec)
        finally:
            os.fsync = real
        self.next = count

    def add_one(self) -> tuple[list[str], int]:
        """One new attempt of the plan, its chain and refs written as fabricate writes them
        (fsync on). Returns (its refs, how many objects it wrote)."""
        from tests.reports.fabricate import _attempt, default_outcome
        from yyb.store.objects import codec
        from yyb.store.repo import Store

        store = Store.open(str(self.path))
        plan = store.objects.get_record(self.plan)
        first = store.objects.get_record(plan["links"]["attempts"][0])
        ordinal, self.next = self.next, self.next + 1
        attempt = {**first, "ordinal": ordinal, "attempt": first["attempt"] + ordinal}
        grader = plan["evaluators"]["catalog"]["tests"]
        refs_before = {name for name, _ in store.refs.iter_refs()}
        objects_before = loose_oids(self.path)
        oid = store.objects.put("record", codec.encode(attempt))
        outcome = default_outcome(ordinal)
        if outcome[1] is None:  # a closed-unrun attempt writes less: give it a full chain
            outcome = ("resolved", "pass", 1000)
        _attempt(store, self.plan, oid, attempt, outcome, grader)
        refs = sorted({name for name, _ in store.refs.iter_refs()} - refs_before)
        return refs, len(loose_oids(self.path) - objects_before)


def incremental(args, server, yyb: str, env: dict, work: Path) -> tuple[list[Row], dict]:
    from yyb.store.repo import Store

    started = time.perf_counter()
    attempts = Attempts(work / "attempts-store", args.attempts)
    made = time.perf_counter() - started
    objects = len(loose_oids(attempts.path))
    refs = sum(1 for _ in Store.open(str(attempts.path)).refs.iter_refs())
    warm_tree(attempts.path)
    there = work / "attempts-there"
    Store.init(str(there))
    url = server.url(there)
    store = str(attempts.path)
    whole = timed([yyb, "--store", store, "push", url, "--all"], env)
    ssh_runs, one_runs, all_runs, checks = [], [], [], []
    for _ in range(args.repeat):
        for _ in range(3):
            ssh_runs.append(timed([*server.ssh_command, server.destination, "true"], env))
        names, wrote = attempts.add_one()
        one = timed([yyb, "--store", store, "push", url, *names], env)
        one_runs.append(one)
        checks.append((one.objects, wrote))
        _, wrote_all = attempts.add_one()
        every = timed([yyb, "--store", store, "push", url, "--all"], env)
        all_runs.append(every)
        checks.append((every.objects, wrote_all))
    ssh = median(ssh_runs)
    after = sum(1 for _ in Store.open(str(attempts.path)).refs.iter_refs())
    one, every = median(one_runs), median(all_runs)
    only_new = all(sent == wrote for sent, wrote in checks)
    label = f"{args.attempts:,} attempts ({objects:,} objects, {refs:,} refs)"
    rows = [
        Row(
            f"push --all of {label} into an empty store",
            f"{whole.seconds:.3f} s",
            "",
            "",
            "",
            None,
        ),
        Row(
            f"  its transfer: {whole.objects:,} objects",
            f"{whole.sent:,} bytes sent",
            f"{whole.received:,} received",
            "",
            "",
            whole.objects == objects,
        ),
        Row("ssh HOST true (SSH start-up)", f"{ssh.seconds:.3f} s", "", "", "", None),
        beyond_row(f"push of one new attempt's {len(names)} refs", one, ssh),
        beyond_row(f"push --all ({after:,} refs) after one new attempt", every, ssh),
        Row(
            "  objects sent by each incremental push / objects the attempt wrote",
            ", ".join(f"{s}/{w}" for s, w in checks),
            "",
            "",
            "only the new ones",
            only_new,
        ),
        Row(
            "  bytes of the one-attempt push (sent / received)",
            f"{one.sent:,} / {one.received:,}",
            "",
            "",
            "",
            None,
        ),
        Row(
            "  bytes of the --all push (sent / received)",
            f"{every.sent:,} / {every.received:,}",
            "",
            "",
            "",
            None,
        ),
    ]
    times = {
        "fabricate_s": round(made, 1),
        "ssh": [round(r.seconds, 3) for r in ssh_runs],
        "one": [round(r.seconds, 3) for r in one_runs],
        "all": [round(r.seconds, 3) for r in all_runs],
    }
    context = {"store": store, "url": url, "attempts": attempts}
    return rows, {**times, "_context": context}


def beyond_row(figure: str, run: Run, ssh: Run) -> Row:
    beyond = run.seconds - ssh.seconds
    return Row(
        figure,
        f"{run.seconds:.3f} s ({run.objects} objects)",
        f"{ssh.seconds:.3f} s (ssh)",
        f"{beyond:+.3f} s beyond",
        f"< {TARGET_INCREMENTAL_S} s beyond",
        beyond < TARGET_INCREMENTAL_S,
    )


# --- profiles -------------------------------------------------------------------------------


def profile(server, env: dict, work: Path, argv: list[str], name: str) -> list[str]:
    """Run ``yyb argv`` (a push or a fetch) under cProfile on both sides; the top functions."""
    far = work / f"{name}-far.prof"
    near = work / f"{name}-near.prof"
    wrapper = server.bin / "yyb"
    saved = wrapper.read_text()
    server.add_program(
        "yyb",
        [sys.executable, "-m", "cProfile", "-o", str(far), "-m", "yyb"],
        {"PYTHONPYCACHEPREFIX": env["PYTHONPYCACHEPREFIX"]},
    )
    try:
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "cProfile", "-o", str(near), "-m", "yyb", *argv],
            env=env,
            check=True,
            capture_output=True,
        )
        seconds = time.perf_counter() - started
    finally:
        wrapper.write_text(saved)
    lines = [f"### profile: {name} ({seconds:.2f} s under cProfile)"]
    for side, path in (("this side", near), ("far side", far)):
        lines.append(f"{side}:")
        lines += top_functions(path)
    return lines


def top_functions(path: Path, count: int = 10) -> list[str]:
    """The functions with the most own time, then yyb's with the most cumulative time."""
    stats = pstats.Stats(str(path))
    total = stats.total_tt or 1e-9
    items = list(stats.stats.items())

    def said(item) -> str:
        (filename, line, function), (_, calls, own, cumulative, _) = item
        where = filename.replace(str(ROOT) + "/", "")
        return (
            f"  {function} ({where}:{line}): own {own:.2f} s ({100 * own / total:.0f}%), "
            f"cumulative {cumulative:.2f} s ({100 * cumulative / total:.0f}%), {calls} calls"
        )

    out = [f"  total {total:.2f} s; by own time:"]
    out += [said(i) for i in sorted(items, key=lambda i: i[1][2], reverse=True)[:count]]
    out.append("  yyb's functions by cumulative time:")
    ours = [i for i in items if i[0][0].startswith(str(ROOT / "yyb"))]
    out += [said(i) for i in sorted(ours, key=lambda i: i[1][3], reverse=True)[:count]]
    return out


# --- the report -----------------------------------------------------------------------------


def table(rows: list[Row]) -> list[str]:
    lines = [
        "| figure | yyb | baseline | ratio / beyond | target | met |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        met = "" if r.met is None else ("yes" if r.met else "**MISS**")
        lines.append(f"| {r.figure} | {r.value} | {r.baseline} | {r.ratio} | {r.target} | {met} |")
    return lines


def remote_parser(doc: str, profile_help: str) -> argparse.ArgumentParser:
    """The options this bench and tools/bench_bucket.py share (``doc``: the script's)."""
    parser = argparse.ArgumentParser(
        description=doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--blobs", type=int, default=10_000, help="throughput blobs (10,000)")
    parser.add_argument(
        "--attempts", type=int, default=5_000, help="attempts in the store (5,000; see docs)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each figure (median)")
    parser.add_argument("--profile", action="store_true", help=profile_help)
    parser.add_argument("--only", choices=("throughput", "incremental"), help="one part")
    parser.add_argument("--yyb", help="the yyb executable (default: next to this Python)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return remote_parser(__doc__, "cProfile both sides of pushes").parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    import pytest

    from tests.remote.sshd import sshd

    args = parse_args(argv)
    yyb = find_yyb(args.yyb)
    load_before = os.getloadavg()
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="yyb-bench-remote-"))
    env = bench_env(work)
    rows: list[Row] = []
    raw: dict = {}
    notes: list[str] = []
    try:
        with sshd(work / "sshd") as server:
            env.update(server.env)
            # The far side's yyb as the near one: bytecode cached in the scratch folder.
            server.add_program(
                "yyb",
                [sys.executable, "-m", "yyb"],
                {"PYTHONPYCACHEPREFIX": env["PYTHONPYCACHEPREFIX"]},
            )
            timed([*server.ssh_command, server.destination, "yyb --help"], env)  # compile once
            steps: list[tuple[str, Callable]] = [
                ("throughput", throughput),
                ("incremental", incremental),
            ]
            for name, step in steps:
                if args.only in (None, name):
                    part_started = time.perf_counter()
                    found, figures = step(args, server, yyb, env, work)
                    rows += found
                    raw[name] = figures
                    notes.append(f"- {name}: {time.perf_counter() - part_started:.0f} s")
            if args.profile:
                notes += profiles(args, server, env, work, raw)
    except pytest.skip.Exception as exc:
        print(f"bench: cannot start sshd: {exc}", file=sys.stderr)
        return 2
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("## Machine")
    print("\n".join(describe_machine(load_before)))
    command = shlex.join(["python", "tools/bench_remote.py", *(argv or sys.argv[1:])])
    print(f"- command: `{command}`; wall time {time.perf_counter() - started:.0f} s")
    print("\n".join(notes))
    print()
    print("\n".join(table(rows)))
    print()
    print("Every run, seconds:")
    for name, figures in raw.items():
        shown = {k: v for k, v in figures.items() if not k.startswith("_")}
        print(f"- {name}: {shown}")
    return 1 if any(r.met is False for r in rows) else 0


def profiles(args, server, env: dict, work: Path, raw: dict) -> list[str]:
    """cProfile of a throughput push (when measured) and of the incremental pushes."""
    from yyb.store.repo import Store

    lines = []
    if "incremental" in raw:
        context = raw["incremental"]["_context"]
        store, url = context["store"], context["url"]
        names, _ = context["attempts"].add_one()
        lines += profile(server, env, work, ["--store", store, "push", url, *names], "one attempt")
        context["attempts"].add_one()
        lines += profile(server, env, work, ["--store", store, "push", url, "--all"], "push --all")
        empty = work / "profile-attempts-there"
        Store.init(str(empty))
        argv = ["--store", store, "push", server.url(empty), "--all"]
        lines += profile(server, env, work, argv, "push --all into an empty store")
    if args.only in (None, "throughput"):
        source = work / "profile-source"
        real = no_fsync()
        try:
            build_yyb(source, list(small_blobs(args.blobs, SEED)))
        finally:
            os.fsync = real
        there = work / "profile-there"
        Store.init(str(there))
        argv = ["--store", str(source), "push", server.url(there), REF]
        lines += profile(server, env, work, argv, f"push of {args.blobs:,} blobs")
        back = work / "profile-back"
        Store.init(str(back))
        argv = ["--store", str(back), "fetch", server.url(there), REF]
        lines += profile(server, env, work, argv, f"fetch of {args.blobs:,} blobs")
    return lines


if __name__ == "__main__":
    sys.exit(main())
