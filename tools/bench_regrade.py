#!/usr/bin/env python3
"""Regrade and doctor --plan over an experiment of --attempts attempts, run by hand.

Runs the built-in example's plan (two stand-in agents, a trivial grader) with --attempts
attempts in all, then measures in the same run:
  regrade:        `regrade` of every attempt; overhead per attempt beyond the grader's own
                  measured run time (the evaluation receipts record it)
  doctor --plan:  the whole experiment's verification, against the store-wide fsck of the
                  same store
Usage: python tools/bench_regrade.py [--attempts 1000] [--jobs 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    from yyb import config as configuration
    from yyb.attempts import run as attempts_run
    from yyb.evidence.experiment import verify_experiment
    from yyb.evidence.names import grant as grant_ref
    from yyb.example import build
    from yyb.grading import regrade
    from yyb.harness.sandbox import protected_roots
    from yyb.plans import build as plans
    from yyb.plans import grant
    from yyb.store.fsck import fsck
    from yyb.store.repo import Store

    with tempfile.TemporaryDirectory(prefix="yyb-bench-regrade-") as root:
        paths = build(root)
        store, _ = Store.init(os.path.join(root, "store"))
        config = configuration.load(paths["config"])
        per_model = max(1, args.attempts // 2)
        plan = plans.task_plan(config, [paths["task"]], ":fixer,:idler", per_model, "1000")
        plans.write(store, plan)
        now = grant.now_ms()
        store.refs.update(grant_ref(plan.oid), store.objects.put_record(
            grant.grant_for(plan.oid, plan.experiment, now + 86_400_000, now)))
        chosen = {oid: plan.records[oid] for oid in plan.attempt_oids}
        ctx = attempts_run.prepare(store, config, plan.oid, plan.experiment, chosen,
                                   dict(os.environ))
        start = time.perf_counter()
        attempts_run.run_plan(ctx, args.jobs)
        run_s = time.perf_counter() - start
        protected = protected_roots(store.path, config, plan.experiment)
        start = time.perf_counter()
        rows = regrade.reevaluate(store, plan.oid, plan.experiment, chosen, "tests", "regrade",
                                  protected)
        regrade_s = time.perf_counter() - start
        graded = [r for r in rows if r.action == "evaluated"]
        grader_ms = 0
        from yyb.evidence.chain import history

        for r in graded:
            grader_ms += history(store, plan.oid, r.attempt, "tests")[-1][1]["wall_ms"]
        start = time.perf_counter()
        findings, summary = verify_experiment(store, plan.oid)
        doctor_s = time.perf_counter() - start
        start = time.perf_counter()
        problems = [f for f in fsck(store) if f.level == "error"]
        fsck_s = time.perf_counter() - start
        objects = sum(1 for _ in store.objects.iter_oids())
    n = len(graded)
    if summary["status"] != "complete" or findings or problems:
        sys.exit(f"unexpected: {summary} {findings[:3]} {problems[:3]}")
    print(f"| measure ({len(chosen)} attempts, {objects} objects) | value |")
    print("|---|---|")
    print(f"| yyb run, --jobs {args.jobs} | {run_s:.1f} s ({len(chosen) / run_s * 60:.0f} "
          "attempts/min) |")
    print(f"| regrade of {n} attempts | {regrade_s:.1f} s |")
    print(f"| grader's own measured time, total | {grader_ms / 1000:.1f} s |")
    print(f"| regrade overhead per attempt beyond the grader | "
          f"{(regrade_s * 1000 - grader_ms) / max(n, 1):.0f} ms |")
    print(f"| doctor --plan | {doctor_s:.2f} s |")
    print(f"| store-wide doctor (fsck) of the same store | {fsck_s:.2f} s |")
    print(f"| ratio doctor --plan / fsck | {doctor_s / fsck_s:.2f}x |")


if __name__ == "__main__":
    main()
