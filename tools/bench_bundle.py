#!/usr/bin/env python3
"""`yyb bundle create/verify/unbundle` against Git and plain SHA-256, side by side, run by hand.

    python tools/bench_bundle.py                      # 100,000 small objects, 200 of 1 MiB
    python tools/bench_bundle.py --objects 10000 --large 20 --repeat 1   # a smoke run

Small objects: a store of --objects blobs (50-2000 random bytes, tools/bench_store.py's
``small_blobs``) linked from one record under one ref, and a SHA-256 Git repository of the same
blobs (one tree, one commit). Measured in the same run, yyb and its baseline alternating, the
best of --repeat kept:
  create:   `yyb bundle create F refs/notes/all` (version 2, a pack)  vs  `git bundle create`
  verify:   `yyb bundle verify F`  vs  `git index-pack --verify` of a pack of the same blobs
            (`git pack-objects`, Git's defaults, verified in an empty SHA-256 repository, so
            that Git does not also compare each object with a copy it already has); and
            `yyb bundle verify` of the same refs bundled in version 1 (a zlib frame per object)
  unbundle: into an empty store, the objects installed as one pack, then written loose
            (in this process; `yyb doctor`'s checks run on the result)
  zlib:     what compressing the pack would save and cost: its size and inflate time
Large objects: --large blobs of 1 MiB each, bundled the same way:
  verify:   `yyb bundle verify F`  vs  SHA-256 of F's bytes in this process (hashlib)
It prints the machine, the load, and a Markdown table with the targets (a missed target is
reported in the table, not in the exit status).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import (  # noqa: E402  (tools/ is put on sys.path just above)
    bench_env,
    best,
    build_git_repo,
    describe_machine,
    find_yyb,
    fmt_s,
    hashlib_sha256,
    interleave,
    run_child,
    small_blobs,
)

MIB = 1 << 20
SEED = 7
NOTES = "refs/notes/all"


def build_yyb(path: Path, bodies) -> None:
    from yyb.store.repo import Store

    store, _ = Store.init(str(path))
    oids = []
    batch = []
    for body in bodies:
        batch.append(("blob", body))
        if len(batch) == 4096:
            oids += store.objects.put_many(batch)
            batch = []
    oids += store.objects.put_many(batch)
    note = store.objects.put_record(
        {"schema_version": "yyb_note.v1", "message": "all", "links": {"blobs": sorted(set(oids))}}
    )
    store.refs.update(NOTES, note, reason="bench")


def git(repo: Path, *args: str, env: dict, stdin: bytes | None = None) -> str:
    out = subprocess.run(["git", "-C", str(repo), *args], input=stdin, env=env,
                         capture_output=True, check=True)
    return out.stdout.decode().strip()


def commit_all(repo: Path, oids: list[str], env: dict) -> None:
    """One tree of every blob and one commit on refs/heads/main (for `git bundle create`)."""
    env = {**env, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    listing = "".join(f"100644 blob {oid}\tf{i:07d}\n" for i, oid in enumerate(oids))
    tree = git(repo, "mktree", env=env, stdin=listing.encode())
    commit = git(repo, "commit-tree", tree, "-m", "all", env=env)
    git(repo, "update-ref", "refs/heads/main", commit, env=env)


def git_pack(repo: Path, oids: list[str], verifier: Path, env: dict) -> Path:
    """A pack of ``oids`` by `git pack-objects` (Git's defaults), in a fresh empty repository."""
    subprocess.run(["git", "init", "-q", "--object-format=sha256", str(verifier)], env=env,
                   check=True)
    prefix = verifier / "bench"
    name = git(repo, "pack-objects", "-q", str(prefix), env=env,
               stdin=("\n".join(oids) + "\n").encode())
    return verifier / f"bench-{name}.pack"


def bundle_v1(store_path: Path, path: Path) -> None:
    """The same refs bundled in version 1 (a zlib frame per object), what yyb wrote before."""
    from yyb.store.bundle import exchange as bundle
    from yyb.store.repo import Store

    store = Store.open(str(store_path))
    bundle.create(store, str(path), bundle.ref_tips(store, [NOTES], version=1))


def unbundle_timed(path: Path, target: Path, limit: int | None) -> tuple[float, int, int]:
    """Import ``path`` into a new store at ``target`` (``limit``: bundle.UNPACK_LIMIT);
    (seconds, packs made, doctor errors)."""
    from yyb.store.bundle import exchange as bundle
    from yyb.store.fsck import fsck
    from yyb.store.repo import Store

    store, _ = Store.init(str(target))
    saved = bundle.UNPACK_LIMIT
    if limit is not None:
        bundle.UNPACK_LIMIT = limit
    try:
        start = time.perf_counter()
        bundle.unbundle(store, str(path))
        seconds = time.perf_counter() - start
    finally:
        bundle.UNPACK_LIMIT = saved
    packs = len([n for n in os.listdir(target / "objects" / "pack") if n.endswith(".pack")]) \
        if (target / "objects" / "pack").is_dir() else 0
    errors = sum(1 for f in fsck(Store.open(str(target))) if f.level == "error")
    return seconds, packs, errors


def pack_section(path: Path) -> bytes:
    """The pack a version 2 bundle carries (after the header's empty line, before its trailer)."""
    data = path.read_bytes()
    return data[data.index(b"\n\n") + 2 : -32]


def zlib_figures(section: bytes) -> tuple[int, float]:
    """(compressed size at zlib level 6, seconds to inflate it)."""
    packed = zlib.compress(section, 6)
    start = time.perf_counter()
    zlib.decompress(packed)
    return len(packed), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--large", type=int, default=200, help="blobs of 1 MiB (default 200)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--yyb", help="the yyb executable (default: next to this Python)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    yyb = find_yyb(args.yyb)
    rows = []
    with tempfile.TemporaryDirectory(prefix="yyb-bench-bundle-") as tmp:
        root = Path(tmp)
        env = bench_env(root)
        subprocess.run([sys.executable, "-c", "import yyb.cli, yyb.cli.bundle, yyb.store.bundle.exchange,"
                        " yyb.store.bundle.pack_form, yyb.store.fsck"], env=env, check=True)
        store = root / "store"
        build_yyb(store, small_blobs(args.objects, SEED))
        ours = build_git_repo(root / "git", args.objects, SEED, env, root / "scratch")[0]
        oids = [oid for oid, _ in ours]
        commit_all(root / "git", oids, env)
        gpack = git_pack(root / "git", oids, root / "verifier", env)
        v2, v1, gbundle = root / "v2.bundle", root / "v1.bundle", root / "git.bundle"

        def yyb_create():
            v2.unlink(missing_ok=True)
            return run_child([yyb, "--store", str(store), "bundle", "create", str(v2), NOTES],
                             env=env)

        def git_create():
            gbundle.unlink(missing_ok=True)
            return run_child(["git", "-C", str(root / "git"), "bundle", "create", str(gbundle),
                              "--all"], env=env)

        ours_c, git_c = (best(r) for r in interleave(args.repeat, yyb_create, git_create))
        bundle_v1(store, v1)
        size2, size1, gsize = (p.stat().st_size for p in (v2, v1, gbundle))
        rows.append(("`bundle create` (version 2)", f"{fmt_s(ours_c.seconds)} "
                     f"({size2 / MIB:.1f} MiB)", f"`git bundle create --all`: "
                     f"{fmt_s(git_c.seconds)} ({gsize / MIB:.1f} MiB)",
                     f"{ours_c.seconds / git_c.seconds:.2f}x", "-"))

        def yyb_verify(path):
            return lambda: run_child([yyb, "bundle", "verify", str(path)], env=env)

        def git_verify():
            return run_child(["git", "-C", str(gpack.parent), "index-pack", "--verify",
                              str(gpack)], env=env)

        ours_v, git_v, old_v = (best(r) for r in interleave(args.repeat, yyb_verify(v2),
                                                              git_verify, yyb_verify(v1)))
        ratio = ours_v.seconds / git_v.seconds
        rows.append((f"`bundle verify`, {args.objects:,} small objects (version 2)",
                     f"{fmt_s(ours_v.seconds)}, RSS {ours_v.max_rss_mib:.0f} MiB",
                     f"`git index-pack --verify`: {fmt_s(git_v.seconds)}, RSS "
                     f"{git_v.max_rss_mib:.0f} MiB", f"**{ratio:.2f}x** time",
                     f"<= 1.5x: {'met' if ratio <= 1.5 else '**missed**'}"))
        rows.append(("`bundle verify`, the same in version 1 (zlib frames; before)",
                     f"{fmt_s(old_v.seconds)}", f"`git index-pack --verify`: "
                     f"{fmt_s(git_v.seconds)}", f"{old_v.seconds / git_v.seconds:.2f}x time",
                     "-"))
        _, plain = hashlib_sha256(v2)
        rows.append(("SHA-256 of the version 2 bundle, in process (info)", fmt_s(plain),
                     f"{size2 / MIB / plain:.0f} MiB/s", "-", "-"))
        packed_s, packs, errors = unbundle_timed(v2, root / "into-pack", None)
        loose_s, _, loose_errors = unbundle_timed(v2, root / "into-loose", 10**12)
        rows.append(("`unbundle` into an empty store: one pack installed (doctor errors: "
                     f"{errors}, packs: {packs})", fmt_s(packed_s),
                     f"the same, written loose (doctor errors: {loose_errors}): "
                     f"{fmt_s(loose_s)}", f"{packed_s / loose_s:.2f}x time", "-"))
        section = pack_section(v2)
        zsize, inflate = zlib_figures(section)
        rows.append(("the pack compressed by zlib (level 6) (info)",
                     f"{zsize / MIB:.1f} MiB of {len(section) / MIB:.1f} MiB "
                     f"({zsize / len(section):.3f})", f"inflating it alone: {fmt_s(inflate)}",
                     f"{inflate / ours_v.seconds:.2f} of verify's time", "-"))
        shutil.rmtree(store)
        shutil.rmtree(root / "git")
        for path in (v1, gbundle, root / "into-pack", root / "into-loose"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()

        big = root / "big"
        rng = random.Random(SEED)
        build_yyb(big, (rng.randbytes(MIB) for _ in range(args.large)))
        large = root / "large.bundle"
        run_child([yyb, "--store", str(big), "bundle", "create", str(large), NOTES], env=env)
        large_v1 = root / "large-v1.bundle"
        bundle_v1(big, large_v1)

        def sha():
            return hashlib_sha256(large)[1]

        ours_l, plain_l, old_l = interleave(args.repeat, yyb_verify(large), sha,
                                            yyb_verify(large_v1))
        ours_l, old_l, plain_l = best(ours_l), best(old_l), min(plain_l)
        lsize = large.stat().st_size
        speed = plain_l / ours_l.seconds
        rows.append((f"`bundle verify`, {args.large} objects of 1 MiB (version 2)",
                     f"{fmt_s(ours_l.seconds)} ({lsize / MIB / ours_l.seconds:.0f} MiB/s)",
                     f"SHA-256 of its {lsize / MIB:.0f} MiB in process: {fmt_s(plain_l)} "
                     f"({lsize / MIB / plain_l:.0f} MiB/s)", f"**{speed:.2f}** of its speed",
                     f">= 0.5: {'met' if speed >= 0.5 else '**missed**'}"))
        rows.append(("`bundle verify`, the same in version 1 (before)",
                     f"{fmt_s(old_l.seconds)}", f"SHA-256: {fmt_s(plain_l)}",
                     f"{plain_l / old_l.seconds:.2f} of its speed", "-"))
    print("\n".join(describe_machine(load_before)))
    print()
    print("| measure | yyb | baseline | ratio | target |")
    print("|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
