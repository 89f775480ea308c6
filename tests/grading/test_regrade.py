"""Regrade and rejudge: the next generation over retained evidence, and no candidate at all."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import authorize
from tests.grading.conftest import ALWAYS_PASS, JUDGE_PASS
from yyb.errors import LockHeld, UsageError
from yyb.grading import evaluate
from yyb.grading.evaluate import GenerationError

INTENT = "yylo_benchmark_dispatch_intent.v2"
RECEIPT = "yylo_benchmark_evaluation.v2"

# Answers by the generation in its input: generation 1 fails (or hangs), later ones pass.
BY_GENERATION = r"""#!/bin/sh
if grep -q '"generation": 1,' "$YYB_GRADER_INPUT"; then
  @FIRST@
fi
printf '{"schema_version": "yylo_benchmark_grader_output.v2", "passed": true}\n' \
  > "$YYB_GRADER_OUTPUT"
"""
FAILS_FIRST = BY_GENERATION.replace(
    "@FIRST@",
    'printf \'{"schema_version": "yylo_benchmark_grader_output.v2", "passed": false}\\n\''
    ' > "$YYB_GRADER_OUTPUT"; exit 0',
)
HANGS_FIRST = BY_GENERATION.replace("@FIRST@", "sleep 30")


def frozen(bench, plan) -> dict:
    """What no regrade may change: the attempts' intents, terminals and evidence."""
    return {
        "intent records": bench.records_of(INTENT),
        "refs": {
            name: oid
            for name, oid in bench.run_refs().items()
            if name.rsplit("/", 1)[-1] in ("intent", "terminal", "evidence")
        },
    }


def generations(bench, plan, result, profile: str = "tests") -> list[tuple[int, str]]:
    return [
        (r["generation"], r["verdict"]) for _, r in bench.history(plan, result.attempt, profile)
    ]


def test_two_regrades_append_generations_2_and_3(bench):
    bench.configure()
    plan, (fixer, idler) = bench.run(["zz/fixer", "zz/idler"])
    before = frozen(bench, plan)
    first = {r.attempt: bench.history(plan, r.attempt, "tests")[0] for r in (fixer, idler)}
    for expected in (2, 3):
        rows = bench.reevaluate(plan, "tests")
        assert [(r.ordinal, r.action, r.generation) for r in rows] == [
            (0, "evaluated", expected),
            (1, "evaluated", expected),
        ]
        assert [(r.verdict, r.current) for r in rows] == [("pass", "pass"), ("fail", "fail")]
    assert frozen(bench, plan) == before
    for result in (fixer, idler):
        history = bench.history(plan, result.attempt, "tests")
        assert [r["generation"] for _, r in history] == [1, 2, 3]
        assert history[0] == first[result.attempt]  # generation 1 is never rewritten
        evidence = bench.run_refs("evidence")[f"refs/runs/{plan.oid}/{result.attempt}/evidence"]
        for (prev_oid, _), (_, receipt) in zip(history, history[1:], strict=False):
            assert receipt["links"]["previous"] == prev_oid
            assert receipt["links"]["evidence"] == evidence
            assert receipt["links"]["manifest"] == history[0][1]["links"]["manifest"]
        ref = f"refs/runs/{plan.oid}/{result.attempt}/evaluations/tests"
        moves = [(u.get("old"), u.get("new")) for _, u in bench.store.refs.log(ref)]
        oids = [oid for oid, _ in history]
        assert moves == [(oids[1], oids[2]), (oids[0], oids[1]), (None, oids[0])]
        assert bench.store.refs.read(ref) == history[-1][0]
        assert bench.terminal(result)["links"]["evaluations"] == [history[0][0]]
    assert bench.doctor_errors() == []


def test_a_replay_or_a_skip_of_a_generation_is_refused(bench):
    bench.configure()
    plan, (fixer,) = bench.run(["zz/fixer"])
    bench.reevaluate(plan, "tests")
    bench.reevaluate(plan, "tests")
    ref = f"refs/runs/{plan.oid}/{fixer.attempt}/evaluations/tests"
    newest, receipts = bench.store.refs.read(ref), bench.records_of(RECEIPT)
    for asked in (2, 3, 1, 5):
        with pytest.raises(GenerationError) as caught:
            bench.evaluate(plan, fixer, "tests", generation=asked)
        assert (caught.value.asked, caught.value.expected) == (asked, 4)
    assert bench.store.refs.read(ref) == newest
    assert bench.records_of(RECEIPT) == receipts
    oid, receipt = bench.evaluate(plan, fixer, "tests", generation=4)
    assert receipt["generation"] == 4 and receipt["links"]["previous"] == newest


def test_a_racing_evaluation_cannot_take_the_same_generation(bench, monkeypatch):
    """Two evaluations that both computed generation 2: the ref moves by compare-and-swap, so
    the slower one is refused instead of replacing the faster one's generation."""
    bench.configure()
    plan, (fixer,) = bench.run(["zz/fixer"])
    real = evaluate.run_evaluator
    raced = []

    def racing(*args, **kwargs):
        if not raced:
            raced.append(True)
            (row,) = bench.reevaluate(plan, "tests")  # another regrade lands generation 2
            assert row.generation == 2
        return real(*args, **kwargs)

    monkeypatch.setattr(evaluate, "run_evaluator", racing)
    with pytest.raises(GenerationError) as caught:
        bench.evaluate(plan, fixer, "tests")
    assert caught.value.asked == 2
    history = bench.history(plan, fixer.attempt, "tests")
    assert [r["generation"] for _, r in history] == [1, 2]
    assert history[1][1]["links"]["previous"] == history[0][0]


def test_regrade_and_rejudge_dispatch_no_candidate(bench, monkeypatch):
    from yyb.harness import adapters, supervise

    spec, harness = bench.judge("j", JUDGE_PASS)
    bench.configure({"tests": bench.command("honest"), "judge": (spec, harness)})
    plan, (fixer, idler) = bench.run(["zz/fixer", "zz/idler"])
    before = frozen(bench, plan)
    assert len(before["intent records"]) == 2
    # The candidate harness is gone, and starting it would raise.
    agent = Path(plan.experiment["candidate_harness"]["config"]["argv"][0])
    shutil.rmtree(bench.tools)
    real_invocation, real_run = adapters.invocation, supervise.run

    def invocation(harness_config, *args, **kwargs):
        assert harness_config != plan.experiment["candidate_harness"]["config"]
        return real_invocation(harness_config, *args, **kwargs)

    started: list[list[str]] = []

    def run(argv, *args, **kwargs):
        started.append(argv)
        return real_run(argv, *args, **kwargs)

    monkeypatch.setattr(adapters, "invocation", invocation)
    monkeypatch.setattr(supervise, "run", run)
    regraded = bench.reevaluate(plan, "tests")
    rejudged = bench.reevaluate(plan, "judge", "rejudge")
    assert [(r.action, r.generation) for r in regraded] == [("evaluated", 2), ("evaluated", 2)]
    # The judge profile is in the plan's catalog but was not selected for generation 1.
    assert [(r.action, r.generation, r.verdict) for r in rejudged] == [
        ("evaluated", 1, "pass"),
        ("evaluated", 1, "pass"),
    ]
    assert len(started) == 4  # two graders and two judges, nothing else
    assert not any(str(agent) in " ".join(argv) for argv in started)
    assert frozen(bench, plan) == before
    assert [r.current for r in rejudged] == ["pass", "fail"]
    # The experiment's chain still verifies, with the new generations in it.
    done = bench.yyb("doctor", "--plan", plan.oid)
    assert done.exit_code == 0, (done.stdout, done.stderr)
    assert " is complete: 2 of 2 attempts" in done.stdout + done.stderr


def test_an_ungradeable_attempt_does_not_stop_the_others_being_regraded(bench):
    bench.configure()
    plan, (fixer, idler, crasher) = bench.run(["zz/fixer", "zz/idler", "zz/crasher"])
    assert crasher.terminal_class == "model_failure"
    before = frozen(bench, plan)
    rows = bench.reevaluate(plan, "tests")
    assert rows[2].action == "skipped" and "model_failure" in rows[2].reason
    assert frozen(bench, plan) == before
    assert [(r.action, r.generation) for r in rows[:2]] == [("evaluated", 2), ("evaluated", 2)]


def test_regrade_through_the_cli(bench):
    bench.configure()
    plan, _ = bench.run(["zz/fixer", "zz/idler"])
    before = frozen(bench, plan)
    plan_file = bench.plan_file(plan)
    for expected in (2, 3):
        done = bench.yyb("regrade", "--plan", plan_file, "--profile", "tests", "--json")
        assert done.exit_code == 0, done.stderr
        doc = json.loads(done.stdout)
        assert doc["plan"] == plan.oid and doc["dispatch_count"] == 0
        assert [(a["generation"], a["verdict"]) for a in doc["attempts"]] == [
            (expected, "pass"),
            (expected, "fail"),
        ]
    done = bench.yyb("regrade", "--plan", plan.oid, "--profile", "tests")
    assert done.exit_code == 0, done.stderr
    assert "dispatch_count: 0" in done.lines
    assert frozen(bench, plan) == before


def test_a_dry_run_appends_nothing(bench):
    bench.configure()
    plan, (fixer,) = bench.run(["zz/fixer"])
    receipts = bench.records_of(RECEIPT)
    done = bench.yyb(
        "regrade", "--plan", bench.plan_file(plan), "--profile", "tests", "--dry-run", "--json"
    )
    assert done.exit_code == 0, done.stderr
    (row,) = json.loads(done.stdout)["attempts"]
    assert (row["action"], row["generation"]) == ("would evaluate", 2)
    assert bench.records_of(RECEIPT) == receipts
    assert generations(bench, plan, fixer) == [(1, "pass")]


@pytest.mark.parametrize(
    ("verb", "profile", "message"),
    [
        ("regrade", "nope", "not in the plan's evaluator catalog"),
        ("rejudge", "nope", "not in the plan's evaluator catalog"),
        ("regrade", "later", "not in the plan's evaluator catalog"),
        ("regrade", "judge", "use yyb rejudge"),
        ("rejudge", "tests", "use yyb regrade"),
    ],
)
def test_a_profile_outside_the_plan_or_of_the_other_kind_is_refused(bench, verb, profile, message):
    evaluators = {"tests": bench.command("honest"), "judge": bench.judge("j", JUDGE_PASS)}
    bench.configure(evaluators)
    plan, _ = bench.run(["zz/fixer"])
    # A profile added to the configuration after planning is not in the plan's catalog.
    bench.configure({**evaluators, "later": bench.command("later", ALWAYS_PASS)})
    receipts, refs = bench.records_of(RECEIPT), bench.run_refs()
    done = bench.yyb(verb, "--plan", bench.plan_file(plan), "--profile", profile)
    assert done.exit_code == 2, (done.stdout, done.stderr)
    assert message in done.stderr
    with pytest.raises(UsageError):
        bench.reevaluate(plan, profile, verb)
    assert bench.records_of(RECEIPT) == receipts and bench.run_refs() == refs


def test_one_reevaluation_of_a_plan_at_a_time(bench):
    bench.configure()
    plan, _ = bench.run(["zz/fixer"])
    with bench.store.exclusive(f"reevaluate-{plan.oid}"):
        with pytest.raises(LockHeld):
            bench.reevaluate(plan, "tests")
        done = bench.yyb("regrade", "--plan", bench.plan_file(plan), "--profile", "tests")
        assert done.exit_code != 0
    assert len(bench.records_of(RECEIPT)) == 1


def test_a_grader_changed_after_planning_makes_the_new_generation_invalid(bench):
    spec = bench.command("honest")
    bench.configure({"tests": spec})
    plan, (fixer, idler) = bench.run(["zz/fixer", "zz/idler"])
    Path(spec["executable"]).write_text(ALWAYS_PASS)  # "improved" in place, not re-planned
    rows = bench.reevaluate(plan, "tests")
    assert [(r.generation, r.verdict) for r in rows] == [(2, "invalid"), (2, "invalid")]
    # Unknown quality: the fixer's pass is no longer current; the idler's failure still is.
    assert [r.current for r in rows] == ["invalid", "fail"]
    e = bench.evaluation(plan, fixer, "tests")
    assert e["_result"]["quality"] == "unknown" and "output" not in e["links"]
    assert (fixer.terminal_class, idler.terminal_class) == ("resolved", "grader_failure")
    assert bench.terminal(fixer)["class"] == "resolved"  # terminals are never rewritten


def test_a_correctness_failure_stays_authoritative_after_a_passing_regrade(bench):
    bench.configure({"tests": bench.command("flaky", FAILS_FIRST)})
    plan, (fixer,) = bench.run(["zz/fixer"])
    assert fixer.terminal_class == "grader_failure"
    (row,) = bench.reevaluate(plan, "tests")
    assert (row.generation, row.verdict, row.current) == (2, "pass", "fail")
    assert "tests generation 1 failed a required correctness check" in row.reason


def test_an_invalid_generation_can_be_regraded(bench):
    bench.configure({"tests": bench.command("hangs", HANGS_FIRST, timeout_ms=1500)})
    plan, (fixer,) = bench.run(["zz/fixer"])
    assert fixer.terminal_class == "harness_failure"
    (row,) = bench.reevaluate(plan, "tests")
    assert (row.generation, row.verdict, row.current) == (2, "pass", "pass")
    assert generations(bench, plan, fixer) == [(1, "invalid"), (2, "pass")]


def test_a_rejudge_judges_the_same_payload(bench):
    bench.configure(
        {"tests": bench.command("honest"), "judge": bench.judge("j", JUDGE_PASS)},
        defaults=["judge"],
    )
    plan, (fixer,) = bench.run(["zz/fixer"])
    done = bench.yyb("rejudge", "--plan", bench.plan_file(plan), "--profile", "judge", "--json")
    assert done.exit_code == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["dispatch_count"] == 0
    (row,) = doc["attempts"]
    assert (row["generation"], row["verdict"], row["current"]) == (2, "pass", "pass")
    first, second = (bench.evaluation(plan, fixer, "judge", g) for g in (0, 1))
    assert first["links"]["input"] == second["links"]["input"]
    assert second["judge_cost"] == first["judge_cost"] != None  # noqa: E711
    assert second["evaluator"] == first["evaluator"]


def test_the_first_regrade_of_a_two_case_plan_appends_generation_2(bench):
    from yyb.plans import build

    bench.configure({"tests": bench.command("honest"), "other": bench.command("other")})
    second = bench.root / "task-2.md"
    second.write_text(
        bench.task_path.read_text()
        .replace("id: calc-add", "id: calc-add-2")
        .replace("grader_profile: tests", "grader_profile: other")
    )
    plan = build.task_plan(bench.config(), [str(bench.task_path), str(second)], "zz/fixer", 1, "2")
    build.write(bench.store, plan)
    authorize(bench.store, plan.oid, plan.experiment)
    first_case, second_case = bench.execute(plan)
    assert (first_case.case_id, second_case.case_id) == ("calc-add", "calc-add-2")
    assert generations(bench, plan, first_case) == [(1, "pass")]
    assert generations(bench, plan, second_case, "other") == [(1, "pass")]
    rows = bench.reevaluate(plan, "tests")
    assert (rows[0].action, rows[0].generation) == ("evaluated", 2), rows[0].reason


def test_a_regrade_builds_each_attempts_base_before_its_turn(bench, monkeypatch):
    """A regrade begins building the first attempt's pristine base as soon as it knows it,
    and each next attempt's while the one before it is evaluated: every warm of an attempt's
    base comes before that attempt's evaluation and after the previous one's began, and a
    dry run builds nothing."""
    from yyb.evidence import names
    from yyb.harness import overlay

    bench.configure()
    plan, _ = bench.run(["zz/fixer", "zz/idler"])
    events: list[tuple] = []
    real_warm, real_evaluate = overlay.warm, evaluate.evaluate

    def warm(store, key, forms):
        events.append(("warm", key, tuple(forms)))
        return real_warm(store, key, forms)

    def evaluating(store, handle, *args, **kwargs):
        events.append(("evaluate", handle.oid))
        return real_evaluate(store, handle, *args, **kwargs)

    monkeypatch.setattr(overlay, "warm", warm)
    monkeypatch.setattr(evaluate, "evaluate", evaluating)
    bench.reevaluate(plan, "tests", dry_run=True)
    assert events == []
    rows = bench.reevaluate(plan, "tests")
    assert [r.action for r in rows] == ["evaluated", "evaluated"]
    store = bench.store

    def base(attempt: str) -> str:  # the listing the candidate started from
        execution = store.objects.get_record(
            store.refs.read(names.attempt(plan.oid, attempt, "execution"))
        )
        return store.objects.get_record(execution["links"]["receipt"])["links"]["listing"]

    bases = [base(r.attempt) for r in rows]
    assert events == [
        ("warm", bases[0], (True,)),
        ("warm", bases[1], (True,)),
        ("evaluate", rows[0].attempt),
        ("evaluate", rows[1].attempt),
    ]


def test_a_regrade_builds_the_first_base_while_it_checks_the_other_chains(bench, monkeypatch):
    """The first attempt's chain is checked first and its base begins building before the
    other attempts' chains are checked (a regrade of many attempts overlaps the two); it is
    not built a second time once the goals are known, and a dry run builds nothing."""
    from yyb.grading import regrade
    from yyb.harness import overlay

    bench.configure()
    plan, _ = bench.run(["zz/fixer", "zz/idler"])
    events: list[tuple] = []
    real_warm, real_check = overlay.warm, regrade.check_attempt

    def warm(store, key, forms):
        events.append(("warm", key))
        return real_warm(store, key, forms)

    def check(store, plan_oid, plan, attempt_oid, attempt):
        events.append(("check", attempt["ordinal"]))
        return real_check(store, plan_oid, plan, attempt_oid, attempt)

    monkeypatch.setattr(overlay, "warm", warm)
    monkeypatch.setattr(regrade, "check_attempt", check)
    bench.reevaluate(plan, "tests", dry_run=True)
    assert [e[0] for e in events] == ["check", "check"]
    events.clear()
    rows = bench.reevaluate(plan, "tests")
    assert [r.action for r in rows] == ["evaluated", "evaluated"]
    assert [e[0] for e in events] == ["check", "warm", "check", "warm"]
    assert events[0] == ("check", 0) and events[2] == ("check", 1)  # one warm each, in turn
