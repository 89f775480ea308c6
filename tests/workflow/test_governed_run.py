"""The governed lane end to end through the reference boundary: plan, authorize, run,
report, doctor; terminals for every honest and dishonest agent; nothing retained lost."""

from __future__ import annotations

import json
import os

from yyb.evidence import names
from yyb.store.repo import Store


def plan_oid(path: str) -> str:
    return json.loads(open(path).read())["plan"]


def test_a_two_model_workflow_runs_end_to_end(governed):
    plan = governed.plan("zz/good,zz/bad")
    done = governed.run(plan)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert "dispatch_count: 4" in done.stdout
    # Every step touched its resources once, in plan order; the non-selected step never ran.
    ledger = governed.lines("ledger")
    assert [line.split()[:2] for line in ledger] == [
        ["first", "zz/good"],
        ["second", "zz/good"],
        ["first", "zz/bad"],
        ["second", "zz/bad"],
    ]
    assert [line.split()[:2] for line in governed.lines("digest")] == [
        ["second", "zz/good"],
        ["second", "zz/bad"],
    ]
    # The model went in at the agent dispatch, replacing the one the workflow had.
    assert "someone/else" not in "".join(ledger)

    report = governed.yyb("workflow", "report", "--plan", plan, "--json")
    assert report.exit_code == 0, report.stderr
    rows = {(r["step"], r["model"]): r for r in json.loads(report.stdout)["rows"]}
    assert rows[("first", "zz/good")]["resolved"] == 1
    assert rows[("second", "zz/bad")]["classes"] == {"model_failure": 1}
    doctor = governed.yyb("workflow", "doctor", "--plan", plan)
    assert doctor.exit_code == 0, doctor.stdout
    # yyb doctor verifies it by its identity from the store alone: no configuration, no plan
    # file, no project.
    from tests.conftest import Yyb

    alone = Yyb(governed.store_path)("doctor", f"workflow-{plan_oid(plan)}")
    assert alone.exit_code == 0, alone.stdout + alone.stderr

    # A second run reuses every terminal: nothing is dispatched again.
    again = governed.run(plan)
    assert again.exit_code == 0 and "dispatch_count: 0" in again.stdout
    assert len(governed.lines("ledger")) == 4


def test_credentials_never_reach_plans_or_evidence(governed):
    """The step gets its credential through the boundary and prints it, base64 and all: the
    retained output has it redacted, and no object in the store holds any form of it."""
    import base64

    agent = governed.root / "tools" / "yy"
    agent.write_text(
        agent.read_text().replace(
            "status = ",
            "import base64\ntoken = os.environ['OPS_TOKEN']\n"
            "print('token', token, base64.b64encode(token.encode()).decode())\nstatus = ",
            1,
        )
    )
    plan = governed.plan("zz/good", steps="first")
    assert governed.run(plan).exit_code == 0
    store = Store.open(governed.store_path)
    forms = [b"s3cret", base64.b64encode(b"s3cret")]
    bodies = [store.objects.get(oid).body for oid in store.objects.iter_oids()]
    assert not [f for f in forms for body in bodies if f in body]
    assert any(b"[REDACTED:OPS_TOKEN]" in body for body in bodies)
    assert b"s3cret" not in open(plan, "rb").read()


def test_a_governed_experiment_is_audited_on_another_machine_from_a_bundle(governed, tmp_path):
    """Its refs, bundled, carry everything the doctor needs: unbundled into an empty store,
    `yyb doctor workflow-<id>` verifies it there; a bundle missing a terminal is incomplete."""
    from tests.conftest import Yyb

    plan = governed.plan("zz/good,zz/liar")
    assert governed.run(plan).exit_code == 0
    oid = plan_oid(plan)
    bundle = tmp_path / "governed.bundle"
    made = governed.yyb("bundle", "create", str(bundle), "--plan", f"workflow-{oid}")
    assert made.exit_code == 0, made.stderr
    elsewhere = Yyb(str(tmp_path / "elsewhere"))
    assert elsewhere("store", "init").exit_code == 0
    assert elsewhere("bundle", "unbundle", str(bundle)).exit_code == 0
    audit = elsewhere("doctor", f"workflow-{oid}")
    assert audit.exit_code == 0, audit.stdout + audit.stderr
    assert elsewhere("doctor").exit_code == 0

    # Leave one terminal out: the experiment audited there is incomplete, not whole.
    refs = Store.open(governed.store_path).refs.names(under=f"refs/governed/{oid}")
    dropped = next(r for r in refs if r.endswith("/terminal"))
    partial = tmp_path / "partial.bundle"
    kept = [r for r in refs if r != dropped]
    assert governed.yyb("bundle", "create", str(partial), *kept).exit_code == 0
    third = Yyb(str(tmp_path / "third"))
    assert third("store", "init").exit_code == 0
    assert third("bundle", "unbundle", str(partial)).exit_code == 0
    incomplete = third("doctor", f"workflow-{oid}")
    assert incomplete.exit_code == 1 and "incomplete" in incomplete.stdout


def test_planning_and_a_dry_run_dispatch_nothing(governed):
    plan = governed.plan("zz/good")
    store = Store.open(governed.store_path)
    before = sorted(store.objects.iter_oids())
    done = governed.run(plan, "--dry-run")
    assert done.exit_code == 0 and "would_run" in done.stdout
    assert "dispatch_count: 0" in done.stdout
    assert governed.lines("ledger") == [] and not governed.journal().exists()
    assert sorted(store.objects.iter_oids()) == before  # and writes nothing
    # Without any store a dry run still says what would run, and makes none.
    import shutil

    shutil.rmtree(governed.store_path)
    again = governed.run(plan, "--dry-run")
    assert again.exit_code == 0 and "would_run" in again.stdout
    assert not os.path.exists(governed.store_path)


def test_a_live_run_needs_an_authorization(governed, tmp_path):
    out = tmp_path / "p.json"
    done = governed.make_plan(out, "--steps", "first", "--models", "zz/good")
    assert done.exit_code == 0, done.stderr
    refused = governed.run(str(out))
    assert refused.exit_code == 2 and "not authorized" in refused.stderr
    assert governed.lines("ledger") == []


def test_dishonest_agents_end_as_durable_harness_failures(governed):
    plan = governed.plan("zz/liar,zz/mute,zz/garbled", steps="first")
    done = governed.run(plan, "--json")
    assert done.exit_code == 0, done.stdout + done.stderr
    steps = json.loads(done.stdout)["steps"]
    assert [s["terminal_class"] for s in steps] == ["harness_failure"] * 3
    assert "reports zz/other, not zz/liar" in steps[0]["reason"]
    assert governed.yyb("workflow", "doctor", "--plan", plan).exit_code == 0
    # Durable: recovery has nothing to do, and nothing runs again.
    assert governed.recover(plan).exit_code == 0
    assert len(governed.lines("ledger")) == 3


def test_the_report_does_not_reward_invalid_failures(governed):
    """A model whose every step ends without an envelope has no valid step attempt: its
    valid rate is undefined, its intent-to-treat rate 0, and the report warns that the two
    models' invalidity differs."""
    plan = governed.plan("zz/good,zz/mute", steps="first", attempts=5)
    assert governed.run(plan).exit_code == 0
    done = governed.yyb("workflow", "report", "--plan", plan, "--json")
    value = json.loads(done.stdout)
    models = {m["model"]: m for m in value["models"]}
    assert (models["zz/good"]["valid"], models["zz/good"]["resolved_rate_ppm"]) == (5, 1_000_000)
    assert models["zz/mute"]["invalid"] == 5 and models["zz/mute"]["valid_rate_ppm"] is None
    assert models["zz/mute"]["resolved_rate_ppm"] == 0
    (comparison,) = value["comparisons"]
    assert comparison["invalidity_fisher_exact"]["significant"]
    text = governed.yyb("workflow", "report", "--plan", plan)
    assert "warning: zz/good and zz/mute differ in invalidity" in text.stdout


def test_a_terminal_rewritten_to_another_model_or_class_is_found(governed):
    plan = governed.plan("zz/bad", steps="first")
    assert governed.run(plan).exit_code == 0
    store = Store.open(governed.store_path)
    oid = plan_oid(plan)
    attempt = store.objects.get_record(oid)["links"]["attempts"][0]
    ref = names.governed_step(oid, attempt, "terminal")
    old = store.refs.read(ref)
    forged = dict(store.objects.get_record(old), **{"class": "resolved"})
    store.refs.update(ref, store.objects.put_record(forged), old=old)
    doctor = governed.yyb("workflow", "doctor", "--plan", plan)
    assert doctor.exit_code == 1 and "terminal-derivation" in doctor.stdout
    alone = governed.yyb("doctor", f"workflow-{oid}")
    assert alone.exit_code == 1 and "terminal-derivation" in alone.stdout
    assert governed.yyb("doctor", f"workflow-{'0' * 64}").exit_code == 2
    assert governed.yyb("doctor", "workflow-xyz").exit_code == 2


def test_neither_lane_takes_the_others_plan(governed, tmp_path):
    """The isolated commands refuse a governed plan with one line, and the governed ones an
    isolated plan: a governed plan can never be run, regraded, reported or pooled as an
    isolated experiment."""
    from tests.grading.conftest import build_bench

    plan = governed.plan("zz/good", steps="first")
    bench = build_bench(tmp_path / "isolated")
    bench.configure()
    isolated, _ = bench.run(["zz/fixer"])
    for args in (
        ["run", "--plan", plan],
        ["recover", "--plan", plan],
        ["regrade", "--plan", plan, "--profile", "tests"],
        ["report", "--plan", plan],
        ["doctor", "--plan", plan],
        ["plan", "show", plan],
    ):
        done = bench.yyb(*args)  # the isolated configuration and store
        assert done.exit_code == 2, (args, done.stdout, done.stderr)
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and "yylo_benchmark_governed_plan.v1 plan" in lines[0], args
    refused = governed.yyb("workflow", "doctor", "--plan", bench.plan_file(isolated))
    assert refused.exit_code == 2 and "governed" in refused.stderr


def test_a_governed_configuration_is_not_an_isolated_one(governed, tmp_path):
    """The isolated lane refuses the governed file: it cannot widen what an attempt sees."""
    done = governed.yyb(
        "plan",
        "--models",
        "zz/good",
        "--attempts",
        "1",
        "--output",
        str(tmp_path / "x.json"),
        "--task",
        str(governed.workflow),
    )
    assert done.exit_code == 2
    assert "expected 'yylo_benchmark_config.v2'" in done.stderr, done.stderr
    assert not (tmp_path / "x.json").exists()
