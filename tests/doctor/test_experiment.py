"""doctor --plan and recover on the built-in example: complete, incomplete, tampered."""

from __future__ import annotations

import os

import pytest

from tests.conftest import Yyb, flip_byte
from tests.doctor.forge import drop_derived
from yyb.attempts import run as attempts
from yyb.evidence.experiment import verify_experiment


def codes(findings):
    return {f.code for f in findings}


def run_refs(store, plan_oid, leaf):
    return sorted(
        n
        for n in store.refs.names()
        if n.startswith(f"refs/runs/{plan_oid}/") and n.endswith("/" + leaf)
    )


def test_complete_experiment(copy):
    store, plan_oid, plan_file = copy
    findings, summary = verify_experiment(store, plan_oid)
    assert findings == [] and summary == {
        "plan": plan_oid,
        "attempts": 4,
        "complete": 4,
        "status": "complete",
    }
    result = Yyb(store.path)("doctor", "--plan", plan_file)
    assert result.exit_code == 0 and "is complete" in result.stderr


def test_terminal_ref_pointing_at_another_attempts_terminal(copy):
    store, plan_oid, _ = copy
    first, second = run_refs(store, plan_oid, "terminal")[:2]
    store.refs.update(first, store.refs.read(second), reason="tamper")
    findings, summary = verify_experiment(store, plan_oid)
    assert "wrong-attempt" in codes(findings) and summary["status"] == "incomplete"
    assert any(first.split("/")[3] == f.subject for f in findings)


def test_manifest_from_another_run(copy):
    """Splice a terminal whose manifest comes from another attempt's run."""
    store, plan_oid, _ = copy
    first, second = run_refs(store, plan_oid, "terminal")[:2]
    mine = store.objects.get_record(store.refs.read(first))
    other = store.objects.get_record(store.refs.read(second))
    forged = dict(mine, links=dict(mine["links"], manifest=other["links"]["manifest"]))
    store.refs.update(first, store.objects.put_record(forged), reason="tamper")
    assert "wrong-link" in codes(verify_experiment(store, plan_oid)[0])


def test_flipped_byte_in_evidence(copy):
    store, plan_oid, _ = copy
    terminal = store.objects.get_record(store.refs.read(run_refs(store, plan_oid, "terminal")[0]))
    target = terminal["links"]["stdout"]
    flip_byte(store.objects.path(target))
    findings, _ = verify_experiment(store, plan_oid)
    assert ("hash-mismatch", target) in {(f.code, f.subject) for f in findings}


def test_deleted_object(copy):
    store, plan_oid, _ = copy
    terminal = store.objects.get_record(store.refs.read(run_refs(store, plan_oid, "terminal")[0]))
    os.unlink(store.objects.path(terminal["links"]["patch"]))
    assert "broken-link" in codes(verify_experiment(store, plan_oid)[0])


def test_evaluation_spliced_from_another_plan(copy):
    store, plan_oid, _ = copy
    name = next(n for n in store.refs.names() if "/evaluations/" in n)
    receipt = store.objects.get_record(store.refs.read(name))
    foreign = dict(receipt, plan="1" * 64, links=dict(receipt["links"]))
    foreign["links"].pop("previous", None)
    # the foreign plan oid must exist for the link to be valid, so link the real plan object
    foreign["links"]["plan"] = plan_oid
    store.refs.update(name, store.objects.put_record(foreign), reason="tamper")
    assert "wrong-plan" in codes(verify_experiment(store, plan_oid)[0])


def _lose(store, plan_oid, attempt_oid, leaves):
    """The state a crash leaves before these refs were ever written: no ref file, no log
    head, no leaf in the transparency log. (Deleting them with an update would leave the
    deletion on record, as it must.)"""
    gone = set()
    for leaf in leaves:
        name = f"refs/runs/{plan_oid}/{attempt_oid}/{leaf}"
        os.unlink(store.refs.path(name))
        os.unlink(store.refs.log_path(name))
        gone.add(name)
    path = os.path.join(store.path, "transparency", "leaves")
    with open(path, "rb") as handle:
        lines = handle.read().splitlines(keepends=True)
    with open(path, "wb") as handle:
        handle.writelines(line for line in lines if line[65:-1].decode() not in gone)
    drop_derived(store)


def test_retained_execution_is_converted_into_its_terminal(copy):
    store, plan_oid, plan_file = copy
    last = run_refs(store, plan_oid, "terminal")[-1]
    attempt_oid = last.split("/")[3]
    before = store.objects.get_record(store.refs.read(last))
    _lose(store, plan_oid, attempt_oid, ("terminal", "evidence"))
    findings, summary = verify_experiment(store, plan_oid)
    assert summary["status"] == "incomplete" and summary["complete"] == 3
    assert ("incomplete", attempt_oid) in {(f.code, f.subject) for f in findings}
    result = Yyb(store.path)("recover", "--plan", plan_file)
    assert result.exit_code == 0 and "converted" in result.stdout
    assert result.lines[-1] == "dispatch_count: 0"
    after = store.objects.get_record(store.refs.read(last))
    assert after["class"] == before["class"]
    assert after["links"]["evaluations"] == before["links"]["evaluations"]  # not regraded
    assert len(run_refs(store, plan_oid, "intent")) == 4  # recovery dispatched nothing
    assert verify_experiment(store, plan_oid)[1]["status"] == "complete"


def test_a_run_ref_deleted_and_written_again_stays_on_record(copy):
    """Deleting a terminal with update-ref and letting recovery write it again leaves a
    whole chain, but the deletion is on record: doctor --plan names exactly those refs."""
    store, plan_oid, plan_file = copy
    last = run_refs(store, plan_oid, "terminal")[-1]
    attempt_oid = last.split("/")[3]
    for leaf in ("terminal", "evidence"):
        store.refs.update(f"refs/runs/{plan_oid}/{attempt_oid}/{leaf}", None, reason="lose it")
    assert Yyb(store.path)("recover", "--plan", plan_file).exit_code == 0
    findings, summary = verify_experiment(store, plan_oid)
    assert summary["complete"] == 3 and summary["status"] == "incomplete"
    rewritten = [f for f in findings if f.level == "error"]
    assert {f.code for f in rewritten} == {"rewritten-ref"}
    assert {f.detail.split()[0].rsplit("/", 1)[1] for f in rewritten} == {"terminal", "evidence"}


def test_intent_alone_is_closed_as_indeterminate(copy):
    store, plan_oid, plan_file = copy
    last = run_refs(store, plan_oid, "terminal")[-1]
    attempt_oid = last.split("/")[3]
    _lose(store, plan_oid, attempt_oid, ("terminal", "evidence", "execution"))
    result = Yyb(store.path)("recover", "--plan", plan_file)
    assert result.exit_code == 0 and "closed as indeterminate" in result.stdout
    terminal = store.objects.get_record(store.refs.read(last))
    assert terminal["class"] == "harness_failure" and "never dispatched again" in terminal["reason"]
    assert verify_experiment(store, plan_oid)[1]["status"] == "complete"


def test_terminal_without_evidence_gets_its_evidence(copy):
    store, plan_oid, plan_file = copy
    last = run_refs(store, plan_oid, "terminal")[-1]
    attempt_oid = last.split("/")[3]
    _lose(store, plan_oid, attempt_oid, ("evidence",))
    assert Yyb(store.path)("recover", "--plan", plan_file).exit_code == 0
    assert store.refs.read(f"refs/runs/{plan_oid}/{attempt_oid}/evidence") is not None
    assert verify_experiment(store, plan_oid)[1]["status"] == "complete"


def test_reconcile_refuses_a_terminal_of_another_attempt(copy):
    from yyb.errors import CorruptRef

    store, plan_oid, _ = copy
    first, second = run_refs(store, plan_oid, "terminal")[:2]
    store.refs.update(first, store.refs.read(second), reason="tamper")
    plan = store.objects.get_record(plan_oid)
    chosen = {a: store.objects.get_record(a) for a in plan["links"]["attempts"]}
    with pytest.raises(CorruptRef, match="another attempt"):
        attempts.recover(store, plan_oid, plan, chosen)


def test_zero_attempt_dispatch_is_incomplete(copy):
    store, plan_oid, _ = copy
    for name in run_refs(store, plan_oid, "intent"):
        store.refs.update(name, None, reason="forget")
    findings, summary = verify_experiment(store, plan_oid)
    assert summary["complete"] == 0 and summary["status"] == "incomplete"
