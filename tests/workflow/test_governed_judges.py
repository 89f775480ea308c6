"""Blinded judgements of governed step attempts: judged once the terminal exists, appended
as generations by `workflow rejudge` with no step dispatched, verified by the doctor and
counted by the report; a payload that names the candidate is never judged."""

from __future__ import annotations

import json
from pathlib import Path

from tests.workflow.conftest import build
from yyb.evidence import names
from yyb.store.repo import Store


def chain(g, plan: str) -> list[list[tuple[int, str]]]:
    """Per step attempt, its judgement generations (generation, verdict), oldest first."""
    ref_of = lambda plan_oid, attempt: names.governed_judgement(plan_oid, attempt, "quality")  # noqa: E731
    return [[(j["generation"], j["verdict"]) for j in c] for c in g.histories(plan, ref_of)]


def first_step(g, plan: str) -> tuple[Store, dict, dict]:
    """(store, the first step attempt's terminal, its newest judgement)."""
    store = Store.open(g.store_path)
    oid = json.loads(open(plan).read())["plan"]
    attempt = store.objects.get_record(oid)["links"]["attempts"][0]
    terminal = store.objects.get_record(
        store.refs.read(names.governed_step(oid, attempt, "terminal"))
    )
    judged = store.objects.get_record(
        store.refs.read(names.governed_judgement(oid, attempt, "quality"))
    )
    return store, terminal, judged


def test_judged_steps_are_judged_blind_and_rejudged_as_generations(tmp_path, monkeypatch):
    g = build(tmp_path / "g", monkeypatch, judged=True)
    plan = g.plan("zz/good,zz/bad")
    done = g.run(plan, "--json")
    assert done.exit_code == 0, done.stdout + done.stderr
    steps = json.loads(done.stdout)["steps"]
    assert [(s["step"], s["judgement"]) for s in steps] == [
        ("first", "pass"),
        ("second", None),
        ("first", "fail"),
        ("second", None),
    ]
    # The judged payload never names the model.
    store, _, judged = first_step(g, plan)
    payload = store.objects.get(judged["links"]["input"]).body.decode()
    assert "Step: first" in payload and "<model>" in payload and "good" not in payload

    rejudged = g.yyb("workflow", "rejudge", "--plan", plan, "--profile", "quality")
    assert rejudged.exit_code == 0, rejudged.stderr
    assert "dispatch_count: 0" in rejudged.stdout
    assert chain(g, plan) == [[(1, "pass"), (2, "pass")], [], [(1, "fail"), (2, "fail")], []]
    assert len(g.lines("ledger")) == 4  # nothing dispatched again

    report = json.loads(g.yyb("workflow", "report", "--plan", plan, "--json").stdout)
    judged = {(r["step"], r["model"]): r.get("judged") for r in report["rows"]}
    assert judged[("first", "zz/good")] == {"pass": 1}
    assert judged[("first", "zz/bad")] == {"fail": 1}
    assert g.yyb("workflow", "doctor", "--plan", plan).exit_code == 0
    assert g.yyb("workflow", "rejudge", "--plan", plan, "--profile", "nope").exit_code == 2


def test_a_judge_that_cannot_run_leaves_the_terminal_and_is_judged_again(tmp_path, monkeypatch):
    g = build(tmp_path / "g", monkeypatch, judged=True)
    plan = g.plan("zz/good", steps="first")
    judge = g.root / "tools" / "judge.sh"
    text = judge.read_text()
    judge.unlink()
    assert g.run(plan).exit_code == 0
    assert chain(g, plan) == [[(1, "invalid")]]
    judge.write_text(text)
    assert g.yyb("workflow", "rejudge", "--plan", plan, "--profile", "quality").exit_code == 0
    assert chain(g, plan) == [[(1, "invalid"), (2, "pass")]]
    assert g.yyb("workflow", "doctor", "--plan", plan).exit_code == 0


def test_a_missing_judgement_is_found_by_the_doctor(tmp_path, monkeypatch):
    g = build(tmp_path / "g", monkeypatch, judged=True)
    plan = g.plan("zz/good", steps="first")
    assert g.run(plan).exit_code == 0
    store = Store.open(g.store_path)
    oid = json.loads(open(plan).read())["plan"]
    attempt = store.objects.get_record(oid)["links"]["attempts"][0]
    # As if the run had been killed between the terminal and the judgement: the ref's file
    # is taken away (refs are files: docs/format.md).
    (Path(g.store_path) / names.governed_judgement(oid, attempt, "quality")).unlink()
    doctor = g.yyb("workflow", "doctor", "--plan", plan)
    assert doctor.exit_code == 1 and "unjudged" in doctor.stdout
    # The next run judges it, dispatching nothing.
    again = g.run(plan)
    assert again.exit_code == 0 and "dispatch_count: 0" in again.stdout
    assert chain(g, plan) == [[(1, "pass")]]
    assert g.yyb("workflow", "doctor", "--plan", plan).exit_code == 0


def test_a_step_whose_output_names_the_model_is_not_judged(tmp_path, monkeypatch):
    g = build(tmp_path / "g", monkeypatch, judged=True)
    agent = g.root / "tools" / "yy"
    agent.write_text(agent.read_text().replace("status = ", 'print("I am", model)\nstatus = ', 1))
    plan = g.plan("zz/good", steps="first")
    assert g.run(plan).exit_code == 0
    _, terminal, judged = first_step(g, plan)
    assert "output" in terminal["links"], "the boundary returned what the step printed"
    assert judged["verdict"] == "invalid" and "privacy failure" in judged["reason"]
