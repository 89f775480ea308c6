#!/usr/bin/env python3
"""Grading overhead of the `tests` and command evaluators on a large repository, run by hand.

Builds a repository of a small pytest-tested package plus --files filler files (in 50
folders), one case with hidden tests (a test patch, FAIL_TO_PASS and PASS_TO_PASS), and a plan
of --attempts attempts of a candidate that applies the gold patch; runs it (`--jobs 2`). Then,
for each attempt, in turns in the same run, one more generation (yyb.grading.evaluate.evaluate,
as `yyb regrade` runs it) of each profile on each kind of workspace:
  profiles:   tests (the case's `tests` profile: protected paths and the test patch put back,
              the graded listing stored, pytest in the sandbox, the JUnit report read) and
              command (a command evaluator running the same pytest with the same protected
              paths, its workspace carrying the base's .git)
  workspaces: overlay (yyb/harness/overlay.py: the pristine base, built once per process, under
              an upper layer of the changed files; only where root can mount one) and rebuilt
              (every file written again for every evaluation)
The overhead of one evaluation is its time minus the grader's own (the sandboxed process's
wall time, which its receipt records); the part spent making, handing over (chown) and
removing workspace files is timed apart. The overlay's mount step runs inside that wall time,
so it is timed alone too (a mount and `true`, against `true` alone in the same sandbox).
Then the steps before the sandbox, each timed alone on every attempt.
Usage: python tools/bench_tests.py [--files 5000] [--attempts 6]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

PROTECTED = ["**/conftest.py", "**/pytest.ini", "**/tox.ini", "**/setup.cfg", "**/pyproject.toml"]


def grader(python: str) -> str:
    """The baseline's command evaluator: the same pytest run, its verdict on the channel."""
    return f"""#!/bin/sh
if {python} -m pytest -p no:cacheprovider -q tests >/dev/null 2>&1; then p=true; else p=false; fi
printf '{{"schema_version": "yylo_benchmark_grader_output.v2", "passed": %s}}' "$p" \\
  > "$YYB_GRADER_OUTPUT"
"""


def build(root: str, files: int, attempts: int):
    """(config, store, plan) of an experiment planned and run."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from pathlib import Path

    from tests.grading.conftest import DISPATCHER, write
    from tests.swebench.conftest import command, make_package, task_text, tool_paths
    from yyb import config as configuration
    from yyb.attempts import run as attempts_run
    from yyb.evidence.names import grant as grant_ref
    from yyb.example import git
    from yyb.plans import build as plans
    from yyb.plans import grant
    from yyb.store.repo import Store

    base = Path(root)
    repo = base / "repo"
    pkg = make_package(repo)
    git(repo, "checkout", "-q", pkg.base)
    for i in range(files):
        write(repo / f"d{i % 50:02d}" / f"f{i:05d}.txt", os.urandom(512).hex())
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "filler")
    pkg.base = git(repo, "rev-parse", "HEAD")
    tools = base / "tools"
    write(tools / "agent.sh", DISPATCHER.replace("@TOOLS@", str(tools)), executable=True)
    write(tools / "gold.patch", pkg.gold)
    write(
        tools / "behaviours" / "gold",
        'git apply "$TOOLS/gold.patch"\ncommit gold\nenvelope succeeded\n',
    )
    conf = base / "conf"  # hidden from every sandbox: the task and its hidden patches
    write(conf / "hidden" / "test.patch", pkg.test_patch)
    write(conf / "hidden" / "gold.patch", pkg.gold)
    pkg.repo = conf / "repo"  # task_text finds the patches beside the repository's folder
    task = write(conf / "task.md", task_text("bench", pkg.base, pkg))
    script = write(base / "graders" / "pytest.sh", grader(sys.executable), executable=True)
    data = configuration.template("src", yylo_version="bench")
    data["repositories"] = {"src": "../repo"}
    data["harnesses"] = {
        "candidate": {
            "kind": "command",
            "argv": [
                str(tools / "agent.sh"),
                "{model}",
                "{workspace}",
                "{envelope}",
                "{prompt_file}",
            ],
        }
    }
    data["evaluators"] = {
        "tests": {
            "kind": "tests",
            "grader_id": "pytest-junit",
            "version": "1",
            "command": command(),
            "timeout_ms": 120_000,
            "protected_paths": PROTECTED,
        },
        "command": {
            "kind": "command",
            "grader_id": "pytest-sh",
            "version": "1",
            "executable": str(script),
            "sha256": hashlib.sha256(script.read_bytes()).hexdigest(),
            "argv": [],
            "timeout_ms": 120_000,
            "protected_paths": PROTECTED,
            "required": False,
        },
    }
    data["default_evaluators"] = ["command"]  # generation 1 runs both, as the run grades
    data["tool_policy"] = {"network": "denied", "read_only_paths": [str(tools), *tool_paths()]}
    config_path = conf / "yylo-benchmark.config.json"
    config_path.write_text(json.dumps(data, indent=2))
    config = configuration.load(str(config_path))
    store, _ = Store.init(str(base / "store"))
    plan = plans.task_plan(config, [str(task)], "zz/gold", attempts, "1000")
    plans.write(store, plan)
    now = grant.now_ms()
    store.refs.update(
        grant_ref(plan.oid),
        store.objects.put_record(grant.grant_for(plan.oid, plan.experiment, now + 86_400_000, now)),
    )
    chosen = {oid: plan.records[oid] for oid in plan.attempt_oids}
    ctx = attempts_run.prepare(store, config, plan.oid, plan.experiment, chosen, dict(os.environ))
    with timing_the_run():
        results = attempts_run.run_plan(ctx, 1)  # one at a time: each grading timed alone
    bad = [r for r in results if r.terminal_class != "resolved"]
    if bad:
        sys.exit(f"unexpected: {bad[0].terminal_class}: {bad[0].reason}")
    return config, store, plan


# Seconds spent making, handing over and removing the files of grading workspaces: what the
# file system charges for 5,000 files, timed apart from the rest of the overhead.
FILES = {"seconds": 0.0}
# The run's own evaluations (generation 1), in order: (profile, seconds, the grader's wall_ms).
IN_RUN: list[tuple[str, float, int]] = []


@contextlib.contextmanager
def timing_the_run():
    """Time each evaluation the run makes as it grades each attempt after its candidate (the
    pristine bases built while the candidate ran: yyb/harness/overlay.py, ``warm``)."""
    from yyb.grading import evaluate

    real = evaluate.evaluate

    def timed_evaluate(store, handle, profile, *args, **kwargs):
        start = time.perf_counter()
        held = real(store, handle, profile, *args, **kwargs)
        IN_RUN.append((profile, time.perf_counter() - start, held.record["wall_ms"]))
        return held

    evaluate.evaluate = timed_evaluate
    try:
        yield
    finally:
        evaluate.evaluate = real


def timed(function):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            FILES["seconds"] += time.perf_counter() - start

    return wrapper


def time_the_files() -> None:
    """Wrap what writes, chowns and removes grading workspaces' files (a rebuild, a pristine
    base, an upper layer; the hand-over and take-back; the removal) so that their time is
    counted in ``FILES``."""
    from yyb.harness import manifest, sandbox, worktree

    manifest.write_entries = timed(manifest.write_entries)
    sandbox.hand_over, sandbox.take_back = timed(sandbox.hand_over), timed(sandbox.take_back)
    worktree.remove = timed(worktree.remove)


def mount_step(store, rounds: int = 20) -> tuple[float, float] | None:
    """(mean seconds of a sandboxed `true` behind the overlay's mount step, of `true` alone),
    on the pristine base of the run's listings; None where no overlay can be mounted."""
    from yyb.harness import manifest, overlay, sandbox, scratch, worktree

    if not overlay.usable():
        return None
    base = {}
    for oid in store.objects.iter_oids():
        record = store.objects.get(oid)
        if record.kind == "record" and record.value().get("schema_version") == manifest.LISTING:
            found = manifest.entries_of(record.value())
            if len(found) > len(base):
                base, key = found, oid
    root = scratch.folder("bench")
    times = {True: [], False: []}
    try:
        for n in range(rounds):
            for mounted in (True, False):
                folder = os.path.join(root, f"{n}{mounted}", "workspace")
                os.makedirs(os.path.dirname(folder))
                with overlay.workspace(store, key, base, base, folder) as mount:
                    if not mounted:
                        os.makedirs(folder, exist_ok=True)
                    box = sandbox.Sandbox(
                        writable=[folder], cwd=folder, overlay=mount if mounted else None
                    )
                    start = time.perf_counter()
                    outcome, _ = box.run(["/bin/true"], {"PATH": "/usr/bin:/bin"}, 30_000)
                    times[mounted].append(time.perf_counter() - start)
                    assert outcome.exit_code == 0
    finally:
        worktree.remove(root)
    return statistics.mean(times[True]), statistics.mean(times[False])


def evaluate_once(store, config, plan, attempt_oid: str, profile: str) -> tuple:
    """(seconds of one more generation of ``profile`` on the attempt, the grader's wall_ms,
    the seconds spent on the workspace's files)."""
    from yyb.evidence.attempt import AttemptHandle
    from yyb.grading import evaluate
    from yyb.grading.invocation import Controls
    from yyb.harness.sandbox import protected_roots

    handle = AttemptHandle.read(
        store, plan.oid, attempt_oid, plan.experiment, plan.records[attempt_oid]
    )
    identity = handle.terminal.record["identity"]
    controls = Controls(protected_roots(store.path, config, plan.experiment))
    FILES["seconds"] = 0.0
    start = time.perf_counter()
    _, receipt = evaluate.evaluate(
        store,
        handle,
        profile,
        evaluate.Truth.retained(store, handle),
        [identity["requested"], identity["resolved"], identity["observed"] or ""],
        controls,
    )
    elapsed = time.perf_counter() - start
    if receipt["verdict"] != "pass":
        sys.exit(f"unexpected {profile} verdict {receipt['verdict']}")
    return elapsed, receipt["wall_ms"], FILES["seconds"]


def steps(store, plan, attempt_oid: str) -> dict[str, float]:
    """The tests kind's steps before the sandbox, each timed alone (seconds)."""
    from yyb.evidence import names, testpatch
    from yyb.grading.evaluate import Truth
    from yyb.harness import manifest, scratch

    terminal = store.objects.get_record(
        store.refs.read(names.attempt(plan.oid, attempt_oid, "terminal"))
    )
    truth = Truth.of(store, terminal)
    case = store.objects.get_record(plan.records[attempt_oid]["links"]["case"])
    patch = store.objects.get(case["links"]["test_patch"]).body
    spec = plan.experiment["evaluators"]["catalog"]["tests"]
    out = {}
    start = time.perf_counter()
    base = manifest.entries_of(store.objects.get_record(truth.base_listing(store)))
    final = manifest.entries_of(store.objects.get_record(truth.listing))
    out["read the base and final listings"] = time.perf_counter() - start
    start = time.perf_counter()
    entries, _ = testpatch.graded(
        base,
        final,
        spec.get("protected_paths") or [],
        patch,
        [*case["tests"]["fail_to_pass"], *case["tests"]["pass_to_pass"]],
        lambda o: store.objects.get(o).body,
        lambda d: store.objects.put("blob", d),
    )
    out["restore protected paths, apply the test patch"] = time.perf_counter() - start
    start = time.perf_counter()
    graded = manifest.listing_of(entries)
    store.objects.put_record(graded)
    out["store the graded listing"] = time.perf_counter() - start
    root = scratch.folder("bench")
    try:
        start = time.perf_counter()
        manifest.rebuild(store, graded, os.path.join(root, "workspace"))
        out[f"rebuild the workspace ({len(entries)} files)"] = time.perf_counter() - start
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--attempts", type=int, default=6)
    args = parser.parse_args()
    from yyb.harness import overlay, scratch

    with tempfile.TemporaryDirectory(prefix="yyb-bench-tests-") as root:
        config, store, plan = build(root, args.files, args.attempts)
        scratch.run_folder(store.path)
        time_the_files()
        usable = overlay.usable()
        modes = ("overlay", "rebuilt") if usable else ("rebuilt",)
        found: dict[tuple[str, str], list] = {}
        for attempt_oid in plan.attempt_oids:
            for profile in ("tests", "command"):  # in turns: the same conditions for each
                for mode in modes:
                    overlay.usable = (lambda: usable) if mode == "overlay" else (lambda: False)
                    row = evaluate_once(store, config, plan, attempt_oid, profile)
                    found.setdefault((profile, mode), []).append(row)
        overlay.usable = lambda: usable
        mount = mount_step(store)
        parts: dict[str, list[float]] = {}
        for attempt_oid in plan.attempt_oids:
            for name, seconds in steps(store, plan, attempt_oid).items():
                parts.setdefault(name, []).append(seconds)
    load = os.getloadavg()[0]
    print(f"| {args.attempts} attempts, {args.files} + 8 files, load {load:.1f} | mean | each |")
    print("|---|---|---|")
    for profile in ("tests", "command"):
        over = [(e * 1000 - w) for p, e, w in IN_RUN if p == profile]
        label = "`tests` kind" if profile == "tests" else "command evaluator"
        each = " ".join(f"{v:.0f}" for v in over)
        print(
            f"| {label}, in the run (generation 1, after each candidate; "
            f"{'overlay' if usable else 'rebuilt'}): overhead beyond the grader (ms) | "
            f"**{statistics.mean(over):.0f}** | {each} |"
        )
    for (profile, mode), rows in found.items():
        label = f"{'`tests` kind' if profile == 'tests' else 'command evaluator'}, {mode}"
        over = [e * 1000 - w for e, w, _ in rows]
        files = [f * 1000 for _, _, f in rows]
        rest = [o - f for o, f in zip(over, files, strict=True)]
        for what, values in (
            ("overhead beyond the grader", over),
            ("of which workspace files (write, chown, remove)", files),
            ("the rest of the overhead", rest),
            ("the grader's own time", [w for _, w, _ in rows]),
        ):
            each = " ".join(f"{v:.0f}" for v in values)
            print(f"| {label}: {what} (ms) | **{statistics.mean(values):.0f}** | {each} |")
    if mount is not None:
        with_mount, alone = mount
        print(
            f"| sandboxed `true` behind the mount step / alone (ms) | "
            f"{with_mount * 1000:.0f} / {alone * 1000:.0f} | 20 rounds each, in turns |"
        )
    for name, values in parts.items():
        each = " ".join(f"{v * 1000:.0f}" for v in values)
        print(f"| step: {name} (ms) | {statistics.mean(values) * 1000:.0f} | {each} |")


if __name__ == "__main__":
    main()
