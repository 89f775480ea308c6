#!/usr/bin/env python3
"""Per-attempt overhead of `yyb run` with a no-op candidate, against plain git, run by hand.

Builds a repository of --files files totalling --mib MiB, then measures in the same run:
  baseline: git archive BASE | tar -x; git init; git add -A; git commit   (best of 3)
  yyb:      one attempt end to end (intent, snapshot, receipt, sandbox start, no-op candidate,
            manifest, grading on a rebuilt workspace, terminal, its folders removed), in sequence
  yyb -j2:  attempts per minute with --jobs 2
Each run's time is printed too. What a file creation costs depends on what was deleted shortly
before: on ext4 without a journal (this project's machines), a new inode is looked for past
every inode freed in the last minute or more (``recently_deleted`` in the kernel's
``find_inode_bit``), so each baseline or attempt removing its 10,000 files slows the
creations of the next. The first baseline follows none; every attempt follows some.
Usage: python tools/bench_attempt.py [--files 5000] [--mib 50] [--attempts 4]

With --sparse MIB it measures instead what retaining a hostile workspace costs the controller:
a workspace of a few files to which a sparse file of MIB MiB is added (what `truncate -s`
makes in an instant), scanned into a disk store, diffed against its base and rebuilt from its
listing, in a fresh child process whose peak RSS (VmHWM) is read after each step. It runs
whichever yyb is importable (PYTHONPATH=<an older tree> measures that one).
Usage: python tools/bench_attempt.py --sparse 1900
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from yyb.example import git


def make_repo(root: str, files: int, mib: int) -> tuple[str, str]:
    repo = os.path.join(root, "repo")
    os.makedirs(repo)
    git(repo, "init", "-q")
    size = mib * (1 << 20) // files
    for i in range(files):
        folder = os.path.join(repo, f"d{i % 50:02d}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"f{i:05d}.txt"), "wb") as handle:
            handle.write(os.urandom(size // 2 + 1).hex().encode()[:size])
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    return repo, git(repo, "rev-parse", "HEAD")


def baseline(repo: str, base: str, root: str) -> float:
    dest = tempfile.mkdtemp(dir=root)
    start = time.perf_counter()
    archive = subprocess.Popen(["git", "-C", repo, "archive", base], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", dest], stdin=archive.stdout, check=True)
    archive.wait()
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", "snapshot")
    elapsed = time.perf_counter() - start
    shutil.rmtree(dest)
    return elapsed


NOOP_AGENT = "\n".join(
    [
        "#!/bin/sh",
        'printf \'%s\' \'{"schema_version": "juno_execution_envelope.v1", "provider": "bench", '
        '"model": "noop", "status": "succeeded", "cost": {"completeness": '
        '"genuine_zero", "currency": "USD", "micros": 0}, "started_ms": 0, '
        '"ended_ms": 0, "elapsed_ms": 0}\' > "$3"',
        "",
    ]
)


GRADER = (
    '#!/bin/sh\nprintf \'%s\' \'{"schema_version": "yylo_benchmark_grader_output.v2", '
    '"passed": true}\' > "$YYB_GRADER_OUTPUT"\n'
)


def setup(root: str, repo: str, base: str, attempts: int):
    from yyb import config as configuration
    from yyb.plans import build

    tools = os.path.join(root, "tools")
    os.makedirs(tools)
    agent = os.path.join(tools, "agent.sh")
    os.makedirs(os.path.join(root, "grader"))  # a grader's folder is hidden from candidates
    grader = os.path.join(root, "grader", "grader.sh")
    for path, text in ((agent, NOOP_AGENT), (grader, GRADER)):
        with open(path, "w") as handle:
            handle.write(text)
        os.chmod(path, 0o755)
    with open(grader, "rb") as handle:
        grader_sha = hashlib.sha256(handle.read()).hexdigest()
    data = configuration.template("repo", "bench")
    data["repositories"] = {"repo": "."}
    data["harnesses"] = {
        "candidate": {"kind": "command", "argv": [agent, "{model}", "{workspace}", "{envelope}"]}
    }
    data["evaluators"] = {
        "noop": {
            "kind": "command",
            "grader_id": "noop",
            "version": "1",
            "executable": grader,
            "sha256": grader_sha,
            "argv": [],
        }
    }
    data["tool_policy"] = {"network": "denied", "read_only_paths": [tools]}
    cfg = os.path.join(repo, configuration.CONFIG_NAME)
    with open(cfg, "w") as handle:
        json.dump(data, handle)
    task = os.path.join(root, "task.md")
    with open(task, "w") as handle:
        handle.write(
            f"---\nid: bench\ntitle: b\ntags: [benchmark-case]\nfields:\n  benchmark:\n"
            f"    repository: repo\n    base_commit: {base}\n    case_version: '1'\n"
            "    category: bench\n    grader_profile: noop\n---\nNothing to do.\n"
        )
    config = configuration.load(cfg)
    return config, build.task_plan(config, [task], "bench/noop", attempts, None)


def prepare(root: str, config, plan):
    """A run context for ``plan`` in a new store, the plan granted as `yyb authorize` does."""
    from yyb.attempts import run as attempts
    from yyb.evidence import names
    from yyb.plans import build, grant
    from yyb.store.repo import Store

    store, _ = Store.init(os.path.join(tempfile.mkdtemp(dir=root), "store"))
    build.write(store, plan)
    now = grant.now_ms()
    record = grant.grant_for(plan.oid, plan.experiment, now + 3_600_000, now)
    store.refs.update(names.grant(plan.oid), store.objects.put_record(record), reason="authorize")
    chosen = {oid: plan.records[oid] for oid in plan.attempt_oids}
    return attempts.prepare(store, config, plan.oid, plan.experiment, chosen, dict(os.environ))


def check(results) -> None:
    classes = {r.terminal_class for r in results}
    if classes != {"resolved"}:
        sys.exit(f"unexpected terminals: {classes} ({results[0].reason})")


def run_attempts(root: str, config, plan, jobs: int) -> list[float]:
    """Each attempt's time in a run of ``plan`` with ``jobs`` at once (with more than one job
    at once, the whole run's time, once)."""
    from yyb.attempts import run as attempts

    ctx = prepare(root, config, plan)
    if jobs > 1:
        start = time.perf_counter()
        check(attempts.run_plan(ctx, jobs))
        return [time.perf_counter() - start]
    attempts.authorize(ctx.store, ctx.plan_oid, ctx.plan)
    times = []
    for oid in sorted(ctx.attempts, key=lambda oid: ctx.attempts[oid]["ordinal"]):
        start = time.perf_counter()
        check([attempts.run_attempt(ctx, oid)])  # what run_plan does, attempt by attempt
        times.append(time.perf_counter() - start)
    return times


SPARSE_CHILD = """
import os, sys, time
from yyb.harness import manifest
from yyb.store.repo import Store
try:
    from yyb.harness.patch import diff
except ImportError:  # before the patch had its own module
    diff = manifest.diff

def hwm():
    with open("/proc/self/status") as handle:
        line = next(line for line in handle if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024

root, mib = sys.argv[1], int(sys.argv[2])
store, _ = Store.init(os.path.join(root, "store"))
work = os.path.join(root, "work")
os.makedirs(work)
for i in range(20):
    with open(os.path.join(work, f"f{i}.txt"), "w") as handle:
        handle.write(f"file {i}\\n" * 100)
base = manifest.scan(store, work)
ready = hwm()
with open(os.path.join(work, "big"), "wb") as handle:
    handle.write(b"a sparse file\\n")
    handle.truncate(mib << 20)
start = time.perf_counter()
final = manifest.scan(store, work)
scanned = time.perf_counter()
patch = diff(store, base.entries, final.entries)
diffed = time.perf_counter()
retained = hwm()
manifest.rebuild(store, manifest.listing_record(final), os.path.join(root, "rebuilt"))
rebuilt = time.perf_counter()
print(ready, scanned - start, diffed - scanned, retained, rebuilt - diffed, hwm(), len(patch))
"""


def sparse(mib: int) -> None:
    """Peak RSS and time of retaining (scan + diff) and rebuilding a workspace holding a
    sparse file of ``mib`` MiB, in a fresh child process."""
    with tempfile.TemporaryDirectory(prefix="yyb-bench-sparse-") as root:
        done = subprocess.run(
            [sys.executable, "-c", SPARSE_CHILD, root, str(mib)],
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        sys.exit(f"the measurement failed:\n{done.stderr}")
    ready, scan_s, diff_s, retained, rebuild_s, rebuilt, patch = done.stdout.split()
    print(f"| measure (a sparse file of {mib} MiB) | value |")
    print("|---|---|")
    print(f"| peak RSS before (interpreter, imports, base scan) | {float(ready):.0f} MiB |")
    print(f"| scan of the final workspace | {float(scan_s):.2f} s |")
    print(f"| diff against the base ({int(patch)} bytes of patch) | {float(diff_s):.2f} s |")
    print(f"| peak RSS after scan + diff | **{float(retained):.0f} MiB** |")
    print(f"| rebuild from the listing | {float(rebuild_s):.2f} s |")
    print(f"| peak RSS after the rebuild | {float(rebuilt):.0f} MiB |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--mib", type=int, default=50)
    parser.add_argument("--attempts", type=int, default=4)
    parser.add_argument("--sparse", type=int, metavar="MIB", help="measure a sparse file instead")
    args = parser.parse_args()
    if args.sparse:
        sparse(args.sparse)
        return
    with tempfile.TemporaryDirectory(prefix="yyb-bench-") as root:
        repo, base = make_repo(root, args.files, args.mib)
        base_times = [baseline(repo, base, root) for _ in range(3)]
        config, plan = setup(root, repo, base, args.attempts)
        yyb_times = run_attempts(root, config, plan, 1)
        (parallel,) = run_attempts(root, config, plan, 2)
    per_base = min(base_times)
    per_yyb = sum(yyb_times) / len(yyb_times)
    print(f"| measure ({args.files} files, {args.mib} MiB) | value |")
    print("|---|---|")
    print(f"| baseline: git archive + tar + init + add + commit (best of 3) | {per_base:.2f} s |")
    print(
        f"| yyb: one attempt with a no-op candidate ({args.attempts} in sequence; the first "
        f"also stores the snapshot's blobs) | {per_yyb:.2f} s |"
    )
    print(f"| ratio yyb / baseline | {per_yyb / per_base:.2f}x |")
    print(f"| attempts per minute, --jobs 2 | {args.attempts / parallel * 60:.1f} |")
    print(f"| each baseline, in order | {' '.join(f'{t:.2f}' for t in base_times)} s |")
    print(f"| each attempt, in order | {' '.join(f'{t:.2f}' for t in yyb_times)} s |")


if __name__ == "__main__":
    main()
