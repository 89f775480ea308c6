"""`yyb run` from the command line: grants, dry runs, reruns, interruptions and signals."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading

import pytest

from tests.attempts.conftest import wait_for
from tests.conftest import signalled
from yyb.attempts import run as attempts_run
from yyb.evidence import names
from yyb.plans import grant, planfile

# Holds while the file tools/hold exists (the tools folder is visible read-only to candidates).
HOLDER = """
if [ -e "$TOOLS/hold" ]; then
  trap '' TERM INT
  echo "holding"
  setsid sh -c "trap '' TERM; sleep $MARK" &
  sleep $MARK
fi
echo "done"
envelope succeeded
"""


def rows(result) -> list[list[str]]:
    """The summary table's rows: [ordinal, case, model, terminal, wall_ms, status]."""
    return [line.split() for line in result.lines if line.split()[:1] and line.split()[0].isdigit()]


def refs_by_attempt(bench, plan_oid: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for name in bench.run_refs():
        _, _, plan, attempt, leaf = name.split("/", 4)
        assert plan == plan_oid
        found.setdefault(attempt, set()).add(leaf)
    return found


def test_dry_run_dispatches_nothing_and_needs_no_grant(bench):
    plan_file = bench.plan_file(["stand/fixer", "stand/idler"], attempts=2, authorize=False)
    done = bench.yyb("run", "--plan", plan_file, "--dry-run")
    assert done.exit_code == 0, done.stderr
    assert len([line for line in done.lines if line.startswith("would dispatch")]) == 4
    assert "already dispatched: 0" in done.lines
    assert done.lines[-1] == "dispatch_count: 0"
    assert bench.run_refs() == []


def test_live_run_needs_a_matching_unexpired_grant(bench):
    plan_file = bench.plan_file(["stand/fixer", "stand/idler"], authorize=False)
    plan_oid, records = planfile.load(plan_file)
    refused = bench.yyb("run", "--plan", plan_file)
    assert refused.exit_code == 1
    assert "authorization grant refused: grant" in refused.stderr
    assert "grant it with 'yyb authorize --plan PLAN --expires +24h'" in refused.stderr
    assert refused.stderr.count("\n") == 1
    store = bench.store
    now = grant.now_ms()
    expired = grant.grant_for(plan_oid, records[plan_oid], now - 1, now - 60_000)
    store.refs.update(
        f"refs/grants/{plan_oid}", store.objects.put_record(expired), reason="test: expired"
    )
    refused = bench.yyb("run", "--plan", plan_file)
    assert refused.exit_code == 1 and "expires_ms" in refused.stderr
    other = bench.plan_file(["stand/idler"], authorize=False)
    other_oid, other_records = planfile.load(other)
    foreign = grant.grant_for(other_oid, other_records[other_oid], now + 3_600_000, now)
    store.refs.update(
        f"refs/grants/{plan_oid}",
        store.objects.put_record(foreign),
        reason="test: another plan's grant",
    )
    refused = bench.yyb("run", "--plan", plan_file)
    assert refused.exit_code == 1 and "authorization grant refused" in refused.stderr
    assert bench.run_refs() == []  # nothing was dispatched by any refused run

    assert bench.yyb("authorize", "--plan", plan_file, "--expires", "+1h").exit_code == 0
    done = bench.yyb("run", "--plan", plan_file)
    assert done.exit_code == 0, done.stderr
    assert [(r[2], r[3], r[5]) for r in rows(done)] == [
        ("stand/fixer", "resolved", "ran"),
        ("stand/idler", "grader_failure", "ran"),
    ]
    assert "dispatch_count: 2" in done.lines
    assert bench.yyb("doctor").exit_code == 0


def test_rerun_never_dispatches_an_attempt_again(bench):
    plan_file = bench.plan_file(["stand/fixer", "stand/idler"])
    first = bench.yyb("run", "--plan", plan_file)
    assert first.exit_code == 0 and "dispatch_count: 2" in first.lines
    again = bench.yyb("run", "--plan", plan_file)
    assert again.exit_code == 0, again.stderr
    assert [(r[3], r[5]) for r in rows(again)] == [
        ("resolved", "reused"),
        ("grader_failure", "reused"),
    ]
    assert "dispatch_count: 0" in again.lines
    dry = bench.yyb("run", "--plan", plan_file, "--dry-run")
    assert "already dispatched: 2" in dry.lines and "dispatch_count: 0" in dry.lines
    plan_oid, _ = planfile.load(plan_file)
    for attempt, leaves in refs_by_attempt(bench, plan_oid).items():
        assert leaves == {"intent", "execution", "terminal", "evidence", "evaluations/tests"}
        ref = names.attempt(plan_oid, attempt, "intent")
        assert len(list(bench.store.refs.log(ref))) == 1  # written once, never again


def test_missing_secret_refuses_the_run_before_dispatch(bench, monkeypatch):
    monkeypatch.delenv("YYB_T_SECRET", raising=False)
    bench.configure(secrets=["YYB_T_SECRET"])
    plan_file = bench.plan_file(["stand/idler"])
    done = bench.yyb("run", "--plan", plan_file)
    assert done.exit_code == 2
    assert "YYB_T_SECRET" in done.stderr
    assert bench.run_refs() == []


def test_host_without_a_sandbox_fails_closed(bench):
    plan_file = bench.plan_file(["stand/idler"])
    env = {**os.environ, "PATH": "/nonexistent"}  # no bwrap to be found
    done = subprocess.run(
        bench.subprocess_argv("run", "--plan", plan_file),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "sandbox unavailable" in done.stderr and "bubblewrap" in done.stderr
    assert bench.run_refs() == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_cancels_in_flight_attempts_and_dispatches_no_more(bench, sig):
    (bench.tools / "hold").touch()
    model = bench.behaviour("holder", HOLDER)
    plan_file = bench.plan_file([model], attempts=3)
    plan_oid, _ = planfile.load(plan_file)
    argv = bench.subprocess_argv("run", "--plan", plan_file, "--jobs", "2")
    try:
        with signalled(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
            started = wait_for(lambda: len(bench.alive()) >= 4)  # two attempts, two sleeps each
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=30)
        left = bench.alive()
    finally:
        for pid, _ in bench.alive():  # the sandboxes have sessions of their own
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert started, "the attempts never started"
    assert left == []  # nothing outlived the run
    assert proc.returncode == 130, err
    table = [
        line.split() for line in out.splitlines() if line.split()[:1] and line.split()[0].isdigit()
    ]
    assert [(r[3], r[5]) for r in table[:2]] == [("cancelled", "ran"), ("cancelled", "ran")]
    assert table[2][5] == "skipped"  # never dispatched
    assert "dispatch_count: 2" in out.splitlines()
    refs = refs_by_attempt(bench, plan_oid)
    assert (
        sorted(map(sorted, refs.values())) == [["evidence", "execution", "intent", "terminal"]] * 2
    )
    store = bench.store
    for attempt in refs:
        terminal = store.objects.get_record(
            store.refs.read(names.attempt(plan_oid, attempt, "terminal"))
        )
        assert terminal["class"] == "cancelled"
        assert terminal["exit"]["cleanup_confirmed"] is True
        assert store.objects.get(terminal["links"]["stdout"]).body == b"holding\n"
    assert bench.doctor_errors() == []

    # The rerun dispatches only the attempt that never started.
    (bench.tools / "hold").unlink()
    again = bench.yyb("run", "--plan", plan_file)
    assert again.exit_code == 0, again.stderr
    assert sorted((r[3], r[5]) for r in rows(again)) == [
        ("cancelled", "reused"),
        ("cancelled", "reused"),
        ("grader_failure", "ran"),
    ]
    assert "dispatch_count: 1" in again.lines


def test_attempt_interrupted_by_a_crash_is_closed_not_redispatched(bench):
    (bench.tools / "hold").touch()
    model = bench.behaviour("holder", HOLDER)
    plan_file = bench.plan_file([model], attempts=2)
    plan_oid, _ = planfile.load(plan_file)
    roots = bench.kill_controller(plan_file, running=2)
    assert len(roots) == 1
    [(attempt, leaves)] = refs_by_attempt(bench, plan_oid).items()
    assert leaves == {"intent"}
    intent = bench.store.refs.read(names.attempt(plan_oid, attempt, "intent"))

    (bench.tools / "hold").unlink()
    again = bench.yyb("run", "--plan", plan_file)
    assert again.exit_code == 0, again.stderr
    assert [(r[3], r[5]) for r in rows(again)] == [
        ("harness_failure", "closed"),
        ("grader_failure", "ran"),
    ]
    assert "dispatch_count: 1" in again.lines
    store = bench.store
    closed = store.objects.get_record(store.refs.read(names.attempt(plan_oid, attempt, "terminal")))
    assert "interrupted" in closed["reason"]
    assert closed["links"]["intent"] == intent
    assert "stdout" not in closed["links"]  # it was not run again
    assert store.refs.read(names.attempt(plan_oid, attempt, "intent")) == intent
    assert bench.doctor_errors() == []


# --- library-level races ----------------------------------------------------------------


def test_second_run_of_a_plan_in_flight_is_refused_and_closes_nothing(bench):
    from yyb.errors import LockHeld

    (bench.tools / "hold").touch()
    model = bench.behaviour("holder", HOLDER)
    plan = bench.plan([model])
    first_ctx, second_ctx = bench.context(plan), bench.context(plan)
    outcome: dict = {}

    def first():
        try:
            outcome["first"] = attempts_run.run_plan(first_ctx)
        except Exception as exc:  # noqa: BLE001 - asserted below
            outcome["first"] = exc

    worker = threading.Thread(target=first)
    worker.start()
    try:
        assert wait_for(lambda: len(bench.alive()) >= 2), "the candidate never started"
        with pytest.raises(LockHeld):
            attempts_run.run_plan(second_ctx)
        # The second run must not have closed the first one's attempt in flight.
        assert [n.rsplit("/", 1)[1] for n in bench.run_refs()] == ["intent"]
    finally:
        first_ctx.cancel.set()  # end the held candidate either way
        worker.join(timeout=30)
    assert not isinstance(outcome["first"], Exception), outcome["first"]
    assert [(r.terminal_class, r.status) for r in outcome["first"]] == [("cancelled", "ran")]
    assert bench.doctor_errors() == []


def test_interrupt_during_grading_is_cancelled(bench):
    bench.configure(grader="#!/bin/sh\nsleep " + bench.mark + "\n")
    plan = bench.plan(["stand/fixer"])
    ctx = bench.context(plan)
    outcome: dict = {}
    worker = threading.Thread(
        target=lambda: outcome.setdefault("results", attempts_run.run_plan(ctx))
    )
    worker.start()
    try:
        assert wait_for(lambda: bench.alive()), "the grader never started"
    finally:
        ctx.cancel.set()
        worker.join(timeout=30)
    assert bench.alive() == []
    [result] = outcome["results"]
    assert result.terminal_class == "cancelled", result.reason
