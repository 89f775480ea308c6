#!/usr/bin/env python3
"""Time planning 200 cases x 3 models x 5 attempts (3,000 attempt plans), run by hand.

Prints the time to validate the cases and build the records in memory, to write them to a
fresh store, and to write and re-load the plan file; then the whole `yyb plan` command.
Usage: python tools/bench_plan.py [--cases 200] [--models 3] [--attempts 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from yyb.example import git


def setup(root: Path, cases: int) -> tuple[Path, list[str]]:
    from yyb import config

    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "src.py").write_text("x = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD")
    data = config.template("repo")
    data["evaluators"] = {
        "checks": {
            "kind": "command",
            "grader_id": "g",
            "version": "1",
            "executable": "/bin/true",
            "sha256": "0" * 64,
            "argv": [],
        }
    }
    cfg = repo / config.CONFIG_NAME
    cfg.write_text(json.dumps(data))
    tasks = []
    for i in range(cases):
        path = root / f"task-{i:04d}.md"
        path.write_text(
            f"---\nid: case-{i:04d}\ntitle: Case {i}\ntags: [benchmark-case]\n"
            f"fields:\n  benchmark:\n    repository: repo\n    base_commit: {base}\n"
            "    case_version: '1'\n    category: bench\n    grader_profile: checks\n"
            f"---\nPrompt number {i}.\n"
        )
        tasks.append(str(path))
    return cfg, tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--models", type=int, default=3)
    parser.add_argument("--attempts", type=int, default=5)
    args = parser.parse_args()
    from yyb import config
    from yyb.plans import build, planfile
    from yyb.store.repo import Store

    models = ",".join(f"vendor/model-{i}" for i in range(args.models))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cfg_path, tasks = setup(root, args.cases)
        start = time.perf_counter()
        cfg = config.load(str(cfg_path))
        plan = build.task_plan(cfg, tasks, models, args.attempts, None)
        built = time.perf_counter()
        store, _ = Store.init(str(root / "store"))
        build.write(store, plan)
        stored = time.perf_counter()
        out = root / "plan.json"
        planfile.write_new(str(out), planfile.render(plan.oid, plan.records))
        written = time.perf_counter()
        planfile.load(str(out))
        loaded = time.perf_counter()
        yyb = [
            sys.executable,
            "-m",
            "yyb",
            "--store",
            str(root / "store2"),
            "--config",
            str(cfg_path),
            "plan",
            "--models",
            models,
            "--attempts",
            str(args.attempts),
            "--output",
            str(root / "plan2.json"),
        ]
        for task in tasks:
            yyb += ["--task", task]
        cli_start = time.perf_counter()
        subprocess.run(yyb, check=True, capture_output=True)
        cli = time.perf_counter() - cli_start
    n = plan.experiment["attempt_count"]
    print(
        f"| step | seconds ({args.cases} cases x {args.models} models x "
        f"{args.attempts} attempts = {n} attempt plans) |"
    )
    print("|---|---|")
    print(f"| validate cases + build records in memory | {built - start:.2f} |")
    print(f"| write {len(plan.bodies)} objects + ref to a new store | {stored - built:.2f} |")
    print(f"| write the plan file | {written - stored:.2f} |")
    print(f"| build total (validate, build, store, file) | {written - start:.2f} |")
    print(f"| re-load and verify the plan file | {loaded - written:.2f} |")
    print(f"| whole `yyb plan` command (new process) | {cli:.2f} |")


if __name__ == "__main__":
    main()
