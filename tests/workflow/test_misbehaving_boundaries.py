"""Boundaries and controllers that fail on purpose: no step runs twice unless its policy's
gate allows it, no resource is held by two runs, ambiguity stops for a person with a clear
report, and nothing retained is lost.

Each stand-in boundary is a pinned Python program in front of the reference boundary: on the
first dispatch of its chosen step it crashes before journaling, or sets the reference
boundary's crash hook (after ``dispatched``, after ``launched``, after the effect), or answers
garbage after a complete dispatch; or it answers ``identify`` with another identity.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.workflow.conftest import Governed, build
from yyb.evidence import names
from yyb.workflow import locks

REFERENCE = Path(__file__).resolve().parents[2] / "yyb" / "workflow" / "reference_boundary.py"
DEEP = os.environ.get("YYB_DEEP") == "1"

STANDIN = """import json, os, subprocess, sys
RULES = json.loads(%r)
op = sys.argv[1]
data = sys.stdin.buffer.read()
request = json.loads(data)
env = dict(os.environ)
if op == "identify" and RULES.get("identity"):
    print(json.dumps({"protocol": "yyb_boundary.v1", "identity": RULES["identity"]}))
    sys.exit(0)
chosen = op == "dispatch" and request.get("step") == RULES.get("step")
first = chosen and not os.path.exists(RULES["mark"])
if chosen and (first or RULES.get("always")):
    open(RULES["mark"], "a").close()
    if RULES["crash"] == "before-journal":
        sys.exit(70)
    if RULES["crash"] not in ("garbage", "bad-envelope"):
        env["YYB_BOUNDARY_CRASH"] = RULES["crash"]
done = subprocess.run([sys.executable, RULES["reference"], op], input=data, env=env,
                      capture_output=True, pass_fds=tuple(request.get("lock_fds", [])))
sys.stderr.buffer.write(done.stderr)
if chosen and first and RULES["crash"] == "garbage":
    sys.stdout.write("this is not the answer")
    sys.exit(0)
if chosen and first and RULES["crash"] == "bad-envelope":
    answer = json.loads(done.stdout)
    answer["envelope_b64"] = "*** not base64 ***"
    sys.stdout.write(json.dumps(answer))
    sys.exit(0)
sys.stdout.buffer.write(done.stdout)
sys.exit(done.returncode)
"""


def pin(g: Governed, crash: str = "", step: str = "", **rules) -> None:
    """Put a stand-in boundary in front of the reference one and pin it in the config."""
    path = g.root / "tools" / f"boundary-{crash or 'identity'}.py"
    values = dict(
        rules, crash=crash, step=step, mark=str(g.root / "crashed"), reference=str(REFERENCE)
    )
    path.write_text(STANDIN % json.dumps(values))
    config = json.loads(g.config_path.read_text())
    config["boundary"]["executable"] = str(path)
    config["boundary"]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    g.config_path.write_text(json.dumps(config, indent=2))


def steps_of(done) -> list[dict]:
    return json.loads(done.stdout)["steps"]


def intents(g: Governed, plan: str) -> list[dict]:
    """Every intent of every step attempt (each dispatch), oldest first per step."""
    ref_of = lambda plan_oid, attempt: names.governed_step(plan_oid, attempt, "intent")  # noqa: E731
    return [intent for chain in g.histories(plan, ref_of) for intent in chain]


def test_a_crash_before_journaling_is_dispatched_again_through_the_gate(governed):
    pin(governed, "before-journal", "first")
    plan = governed.plan("zz/good")
    stopped = governed.run(plan, "--json")
    assert stopped.exit_code == 1
    assert "exited with status 70" in steps_of(stopped)[0]["reason"]
    assert governed.lines("ledger") == []
    # run never dispatches a step with an intent again; recover asks first.
    again = governed.run(plan, "--json")
    assert again.exit_code == 1 and "recover" in steps_of(again)[0]["reason"]
    recovered = governed.recover(plan, "--json")
    assert recovered.exit_code == 0, recovered.stdout
    assert steps_of(recovered)[0]["terminal_class"] == "resolved"
    assert governed.run(plan).exit_code == 0
    assert [line.split()[0] for line in governed.lines("ledger")] == ["first", "second"]
    assert [i["dispatch"] for i in intents(governed, plan)] == [1, 2, 1]
    assert intents(governed, plan)[1]["recovery"]["state"] == "never_dispatched"
    assert governed.yyb("workflow", "doctor", "--plan", plan).exit_code == 0


def test_a_step_that_is_not_retry_safe_stops_for_a_person(governed):
    pin(governed, "after-dispatched", "second")
    plan = governed.plan("zz/good")
    assert governed.run(plan).exit_code == 1
    recovered = governed.recover(plan, "--json")
    assert recovered.exit_code == 1
    reason = steps_of(recovered)[1]["reason"]
    assert "resumable" in reason and "not retry-safe" in reason and "person" in reason
    assert [line.split()[0] for line in governed.lines("ledger")] == ["first"]
    assert governed.lines("digest") == []
    doctor = governed.yyb("workflow", "doctor", "--plan", plan)
    assert doctor.exit_code == 1 and "incomplete" in doctor.stdout


@pytest.mark.parametrize("crash", ["after-launched", "after-effect"])
def test_an_unknown_effect_is_never_run_again(governed, crash):
    pin(governed, crash, "first")
    plan = governed.plan("zz/good")
    assert governed.run(plan).exit_code == 1
    touched = len(governed.lines("ledger"))
    assert touched == (1 if crash == "after-effect" else 0)
    for _ in range(2):  # asking again changes nothing
        recovered = governed.recover(plan, "--json")
        assert recovered.exit_code == 1
        assert "never completed" in steps_of(recovered)[0]["reason"]
        assert governed.run(plan).exit_code == 1
    assert len(governed.lines("ledger")) == touched
    assert [i["dispatch"] for i in intents(governed, plan)] == [1]


def test_a_lost_answer_is_taken_from_the_journal_without_running_again(governed):
    pin(governed, "garbage", "first")
    plan = governed.plan("zz/good")
    stopped = governed.run(plan, "--json")
    assert stopped.exit_code == 1 and "not one JSON object" in steps_of(stopped)[0]["reason"]
    assert len(governed.lines("ledger")) == 1
    recovered = governed.recover(plan, "--json")
    assert recovered.exit_code == 0 and steps_of(recovered)[0]["terminal_class"] == "resolved"
    assert governed.run(plan).exit_code == 0
    assert [line.split()[0] for line in governed.lines("ledger")] == ["first", "second"]
    assert governed.yyb("workflow", "doctor", "--plan", plan).exit_code == 0


def test_a_malformed_envelope_from_the_boundary_is_a_durable_harness_failure(governed):
    pin(governed, "bad-envelope", "first")
    plan = governed.plan("zz/good")
    done = governed.run(plan, "--json")
    assert done.exit_code == 0, done.stdout
    first, second = steps_of(done)
    assert first["terminal_class"] == "harness_failure" and "malformed" in first["reason"]
    assert second["terminal_class"] == "resolved"
    assert governed.recover(plan).exit_code == 0
    assert len(governed.lines("ledger")) == 2  # nothing ran again
    oid = json.loads(Path(plan).read_text())["plan"]
    assert governed.yyb("doctor", f"workflow-{oid}").exit_code == 0


def test_a_spent_recovery_budget_stops(governed):
    pin(governed, "before-journal", "first", always=True)
    plan = governed.plan("zz/good")
    assert governed.run(plan).exit_code == 1
    assert governed.recover(plan).exit_code == 1  # dispatch 2 crashes too
    spent = governed.recover(plan, "--json")
    assert spent.exit_code == 1 and "budget (1) is spent" in steps_of(spent)[0]["reason"]
    assert [i["dispatch"] for i in intents(governed, plan)] == [1, 2]


def test_a_boundary_that_is_not_the_reviewed_one_is_refused(governed):
    pin(governed, identity="impostor@9")
    plan = governed.plan("zz/good")
    refused = governed.run(plan)
    assert refused.exit_code == 2 and "impostor@9" in refused.stderr
    assert intents(governed, plan) == [] and governed.lines("ledger") == []
    # Bytes changed after planning are refused before anything is asked.
    config = json.loads(governed.config_path.read_text())
    Path(config["boundary"]["executable"]).write_text("print('changed')\n")
    changed = governed.run(plan)
    assert changed.exit_code == 2 and "does not match" in changed.stderr


def controller(g: Governed, plan: str, *args: str, extra_env: dict | None = None):
    env = dict(os.environ, **g.env, **(extra_env or {}))
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "yyb",
            "--store",
            g.store_path,
            "--config",
            str(g.config_path),
            "workflow",
            *args,
            "--plan",
            plan,
            "--steps-file",
            str(g.policy),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def wait_for(condition, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def slow_agent(g: Governed, seconds: float) -> None:
    """The stand-in agent waits before it touches anything."""
    agent = g.root / "tools" / "yy"
    text = agent.read_text()
    agent.write_text(
        text.replace(
            "args = sys.argv[1:]", f"import time; time.sleep({seconds})\nargs = sys.argv[1:]", 1
        )
    )


def test_a_step_another_run_dispatched_meanwhile_is_not_dispatched_again(governed, monkeypatch):
    """Two runs of one plan: between this run's look at the step (no intent) and its own
    intent, the other run writes one. This run stops; the step runs once."""
    from yyb.workflow import run as runs

    plan = governed.plan("zz/good", steps="first")
    real = runs._leases

    def raced(ctx, attempt_oid, step, number, result):
        held = real(ctx, attempt_oid, step, number, result)
        other = ctx.store.objects.put_record({"schema_version": "yyb_note.v1", "message": "x"})
        ctx.store.refs.update(names.governed_step(ctx.plan.oid, attempt_oid, "intent"), other)
        return held

    monkeypatch.setattr(runs, "_leases", raced)
    done = governed.run(plan, "--json")
    assert done.exit_code == 1, done.stdout + done.stderr
    assert "another run wrote an intent" in steps_of(done)[0]["reason"]
    assert governed.lines("ledger") == [] and not governed.journal().exists()


def test_two_runs_never_hold_one_resource(governed):
    slow_agent(governed, 2.0)
    one = governed.plan("zz/good", steps="first")
    other = governed.plan("zz/bad", steps="first")
    first = controller(governed, one, "run")
    lock_store = str(governed.root / "state" / "locks")
    wait_for(lambda: any(h["state"] == "held" for h in locks.holders(lock_store)))
    blocked = governed.run(other, "--json")
    assert blocked.exit_code == 1
    assert "is held" in steps_of(blocked)[0]["reason"]
    assert intents(governed, other) == []  # refused before any intent
    assert first.wait(60) == 0
    assert governed.run(other).exit_code == 0
    assert [line.split()[1] for line in governed.lines("ledger")] == ["zz/good", "zz/bad"]


def test_a_controller_killed_mid_step_leaves_the_resource_held_until_the_step_ends(governed):
    slow_agent(governed, 2.0)
    plan = governed.plan("zz/good", steps="first")
    other = governed.plan("zz/bad", steps="first")
    killed = controller(governed, plan, "run")
    lock_store = str(governed.root / "state" / "locks")
    wait_for(
        lambda: (
            (governed.journal()).exists()
            and any(p.read_text().count("launched") for p in governed.journal().glob("*.jsonl"))
        )
    )
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    # The boundary and its step go on holding the lock they were handed.
    assert [h["state"] for h in locks.holders(lock_store)] == ["held"]
    assert governed.run(other).exit_code == 1
    wait_for(lambda: len(governed.lines("ledger")) == 1)
    wait_for(lambda: all(h["state"] != "held" for h in locks.holders(lock_store)))
    recovered = governed.recover(plan, "--json")
    assert recovered.exit_code == 0, recovered.stdout
    (step,) = steps_of(recovered)
    assert step["terminal_class"] == "resolved" and step["replaced_locks"]
    assert len(governed.lines("ledger")) == 1
    assert governed.yyb("workflow", "doctor", "--plan", plan).exit_code == 0


# A run of this plan makes 17 durable writes (intents, envelopes, terminals, their refs): the
# deep sweep kills at each, the quick one at every third.
@pytest.mark.parametrize("point", range(1, 18) if DEEP else range(1, 18, 3))
def test_a_controller_killed_at_any_durable_point_loses_nothing(tmp_path, monkeypatch, point):
    g = build(tmp_path / "g", monkeypatch, retry_safe_second=True)
    plan = g.plan("zz/good")
    killed = controller(g, plan, "run", extra_env={"YYB_FAULT_KILL_AT": str(point)})
    assert killed.wait(60) == -signal.SIGKILL, "the controller was not killed at that point"
    for _ in range(3):
        g.recover(plan)
        if g.run(plan).exit_code == 0:
            break
    done = g.run(plan, "--json")
    assert done.exit_code == 0, done.stdout
    assert {s["terminal_class"] for s in steps_of(done)} == {"resolved"}
    # Each step touched production once: a dispatch ran again only where the journal proved
    # the earlier one never started anything.
    assert [line.split()[0] for line in g.lines("ledger")] == ["first", "second"]
    assert g.yyb("workflow", "doctor", "--plan", plan).exit_code == 0


@pytest.mark.parametrize("crash", ["before-journal", "after-dispatched", "after-effect", "garbage"])
def test_a_misbehaving_boundary_and_a_killed_controller_together(tmp_path, monkeypatch, crash):
    """Each misbehaving boundary (on its first dispatch of step ``first``) with the controller
    killed at its durable writes as well: however the two combine, no step touches production
    twice, and what cannot be settled stops for a person with the chain otherwise whole."""
    killed = 0
    for point in range(1, 18) if DEEP else range(1, 18, 4):
        g = build(tmp_path / f"g{point}", monkeypatch, retry_safe_second=True)
        pin(g, crash, "first")
        plan = g.plan("zz/good")
        run = controller(g, plan, "run", extra_env={"YYB_FAULT_KILL_AT": str(point)})
        killed += run.wait(60) == -signal.SIGKILL
        for _ in range(3):
            g.recover(plan)
            if g.run(plan).exit_code == 0:
                break
        done = g.run(plan, "--json")
        steps = [line.split()[0] for line in g.lines("ledger")]
        assert steps.count("first") <= 1 and steps.count("second") <= 1, (point, steps)
        doctor = g.yyb("workflow", "doctor", "--plan", plan)
        if done.exit_code == 0:
            assert steps == ["first", "second"] and doctor.exit_code == 0, (point, doctor.stdout)
        else:
            # Stopped for a person: an unknown effect, or a crash that used up the step's
            # recovery budget (the controller killed before dispatch 1, the boundary then
            # crashing on dispatch 2).
            assert "recover" in steps_of(done)[0]["reason"], point
            stopped = steps_of(g.recover(plan, "--json"))[0]["reason"]
            assert "person" in stopped, (point, stopped)
            assert ("never completed" in stopped) == (crash == "after-effect"), (point, stopped)
            codes = {line.split()[1] for line in doctor.stdout.splitlines()}
            assert codes == {"incomplete"}, (point, doctor.stdout)
    assert killed, "no point killed the controller"
