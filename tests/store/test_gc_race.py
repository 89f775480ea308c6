"""`yyb gc` and `yyb repack -a -d` in a loop in another process while `yyb run` runs a real plan
(the built-in example, in the real sandbox) and `yyb report` reads it: nothing fails, the
attempts end as they do without gc, and the store is whole."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import run_yyb
from yyb import example
from yyb.store import gc
from yyb.store.objects.format import check_links
from yyb.store.repo import Store

# Runs `yyb gc` (which consolidates past 2 packs) and `yyb repack -a -d` by turns until the
# file argv[2] appears; prints one line per command: its exit code, then its stdout.
RACER = """
import os, subprocess, sys
store, stop = sys.argv[1], sys.argv[2]
commands = [["gc", "--progress", "none"], ["repack", "-a", "-d"]]
env = {**os.environ, "YYB_GC_PACK_LIMIT": "2"}
i = 0
while not os.path.exists(stop):
    argv = [sys.executable, "-m", "yyb", "--store", store, *commands[i % 2]]
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    out = done.stdout.replace("\\n", " | ")
    print(done.returncode, " ".join(argv[5:]), "|", out, done.stderr.strip())
    sys.stdout.flush()
    i += 1
"""

ATTEMPTS = "4"  # per model: 8 attempts, two at a time


def planned(root: Path) -> tuple[list[str], str]:
    """The example under ``root``, planned and authorized; (the yyb argv prefix, plan file)."""
    paths = example.build(str(root))
    Store.init(str(root / "store"))
    prefix = ["--store", str(root / "store"), "--config", paths["config"]]
    plan = str(root / "plan.json")
    made = run_yyb(
        *prefix, "plan", "--task", paths["task"], "--models", ":fixer,:idler",
        "--attempts", ATTEMPTS, "--max-usd", "2", "--output", plan,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    granted = run_yyb(*prefix, "authorize", "--plan", plan, "--expires", "+1h")
    assert granted.returncode == 0, granted.stderr
    return prefix, plan


def terminals(stdout: bytes) -> list[tuple[str, str, str]]:
    """(model, terminal class, status) of each row of `yyb run`'s summary, in plan order."""
    rows = [line.split() for line in stdout.decode().splitlines()]
    return [(row[2], row[3], row[5]) for row in rows if row[:1] and row[0].isdigit()]


def reachable(store: Store) -> set[str]:
    """Every object reachable from a ref or a ref log head, through the records' links."""
    todo = [oid for name in store.refs.names() for oid in (store.refs.read(name),) if oid]
    todo += [head for name in store.refs.log_names() if (head := store.refs.log_head(name))]
    seen: set[str] = set()
    while todo:
        oid = todo.pop()
        if oid in seen:
            continue
        seen.add(oid)
        found = store.objects.get(oid)
        found.check()  # readable, and its bytes hash to its oid
        if found.kind == "record":
            for targets in check_links(found.value(), oid).values():
                todo.extend(targets)
    return seen


def test_gc_and_repack_racing_a_real_run_and_a_report_lose_and_fail_nothing(tmp_path):
    env = {**os.environ, "YYB_GC_AUTO": "1"}  # the run's own automatic gc joins the race
    quiet_prefix, quiet_plan = planned(tmp_path / "quiet")
    quiet = run_yyb(*quiet_prefix, "run", "--plan", quiet_plan, "--jobs", "2")
    assert quiet.returncode == 0, quiet.stderr
    expected = terminals(quiet.stdout)
    assert len(expected) == 2 * int(ATTEMPTS)
    assert {(m, t) for m, t, _ in expected} == {
        ("example/fixer", "resolved"),
        ("example/idler", "grader_failure"),
    }

    prefix, plan = planned(tmp_path / "raced")
    store_path = prefix[1]
    stop = tmp_path / "stop"
    log = open(tmp_path / "racer.log", "w+")
    racer = subprocess.Popen(
        [sys.executable, "-c", RACER, store_path, str(stop)], stdout=log, stderr=log, env=env
    )
    try:
        deadline = time.monotonic() + 30
        while os.path.getsize(log.name) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)  # the first gc has run: the race is on before the run starts
        ran = subprocess.run(
            [sys.executable, "-m", "yyb", *prefix, "run", "--plan", plan, "--jobs", "2"],
            capture_output=True, env=env, timeout=120,
        )  # fmt: skip
        reported = run_yyb(*prefix, "report", "--plan", plan, env=env)
    finally:
        stop.touch()
        racer.wait(timeout=60)
    log.seek(0)
    raced = log.read().splitlines()

    assert ran.returncode == 0, ran.stderr.decode()
    assert terminals(ran.stdout) == expected
    assert reported.returncode == 0, reported.stderr.decode()
    assert "\nstatus: complete " in reported.stdout.decode()
    assert racer.returncode == 0 and raced, raced
    # No gc failed either; one may find the gc lock held by the run's automatic gc, which is
    # the lock doing its job (one gc at a time), refused in one line.
    refused = [line for line in raced if not line.startswith("0 ")]
    assert all(
        line.startswith("1 ") and "yyb: error: gc is held by pid" in line for line in refused
    ), refused
    assert len(refused) < len(raced) / 2, raced
    # It did race: packs were written and replaced while the run wrote and the report read.
    assert sum(1 for line in raced if "packs replaced" in line and ", 0 packs" not in line) >= 2
    assert len(raced) >= 6, raced

    store = Store.open(store_path)
    assert gc.count(store)["packs"] >= 1
    doctor = run_yyb(*prefix, "doctor")
    assert doctor.returncode == 0, doctor.stdout.decode() + doctor.stderr.decode()
    chains = run_yyb(*prefix, "doctor", "--plan", plan)
    assert chains.returncode == 0, chains.stdout.decode() + chains.stderr.decode()
    seen = reachable(store)
    assert len(seen) > 100 and seen <= set(store.objects.iter_oids())
