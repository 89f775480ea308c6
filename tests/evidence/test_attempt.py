"""The attempt handle: one attempt's plan, attempt plan and chain, read from the store once."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.grading.conftest import build_bench
from yyb.evidence.attempt import AttemptHandle, Held, NotInPlan
from yyb.evidence.check import check_attempt
from yyb.grading import regrade
from yyb.grading.invocation import Controls
from yyb.harness.sandbox import protected_roots


def counting(store) -> Counter:
    """Count every record ``store`` reads, by oid (both readers of the object database)."""
    reads: Counter = Counter()
    for name in ("get_record", "read_record"):
        real = getattr(store.objects, name)

        def counted(oid, real=real):
            reads[oid] += 1
            return real(oid)

        setattr(store.objects, name, counted)
    return reads


def run_one(root):
    """A bench whose one attempt ran, was graded (generation 1) and retained its evidence."""
    bench = build_bench(root / "bench")
    bench.configure()
    plan, (result,) = bench.run(["zz/fixer"])
    return bench, plan, result


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """One run the tests that only read share (a handle never writes)."""
    return run_one(tmp_path_factory.mktemp("handle"))


def test_a_handle_holds_the_whole_chain_each_record_read_once(ran):
    bench, plan, result = ran
    store = bench.store
    reads = counting(store)
    handle = AttemptHandle.read(store, plan.oid, result.attempt)
    assert reads and max(reads.values()) == 1
    assert (handle.plan_oid, handle.oid) == (plan.oid, result.attempt)
    assert handle.plan == plan.experiment and handle.attempt == plan.records[result.attempt]
    assert handle.terminal == Held(result.terminal, bench.terminal(result))
    for role, held in [
        ("intent", handle.intent),
        ("execution", handle.execution),
        ("evidence", handle.evidence),
    ]:
        assert held.oid == store.refs.read(f"refs/runs/{plan.oid}/{result.attempt}/{role}")
        assert held.record == store.objects.get_record(held.oid)
    assert handle.receipt.oid == handle.terminal.record["links"]["receipt"]
    assert [held.record["generation"] for held in handle.generations("tests")] == [1]
    assert handle.next_generation("tests") == 2
    assert handle.generations("absent") == () and handle.next_generation("absent") == 1


def test_a_handle_given_its_plan_and_attempt_does_not_read_them_again(ran):
    bench, plan, result = ran
    store = bench.store
    reads = counting(store)
    AttemptHandle.read(
        store, plan.oid, result.attempt, plan.experiment, plan.records[result.attempt]
    )
    assert plan.oid not in reads and result.attempt not in reads


def test_a_handle_refuses_an_attempt_of_another_plan(ran):
    bench, plan, result = ran
    other = dict(plan.experiment, links=dict(plan.experiment["links"], attempts=[]))
    with pytest.raises(NotInPlan) as refused:
        AttemptHandle.read(bench.store, "f" * 64, result.attempt, other)
    assert (refused.value.plan, refused.value.attempt) == ("f" * 64, result.attempt)
    with pytest.raises(NotInPlan):
        AttemptHandle.planned(plan.oid, plan.experiment, "0" * 64, {})


def test_a_new_generation_makes_a_new_handle(ran):
    bench, plan, result = ran
    handle = AttemptHandle.read(bench.store, plan.oid, result.attempt)
    (first,) = handle.generations("tests")
    made = Held("a" * 64, dict(first.record, generation=2))
    grown = handle.with_generation("tests", made)
    assert grown.generations("tests") == (first, made) and grown.next_generation("tests") == 3
    assert handle.generations("tests") == (first,)  # a handle is never changed in place
    assert grown.histories() == {"tests": [first.record, made.record]}


def test_the_check_reads_the_same_handle_as_the_reader(ran):
    bench, plan, result = ran
    store = bench.store
    check = check_attempt(store, plan.oid, plan.experiment, result.attempt)
    assert check.complete
    assert check.handle == AttemptHandle.read(store, plan.oid, result.attempt)


def test_a_regrade_reads_each_attempt_chain_once(tmp_path):
    """One regrade of one attempt reads each record of its chain once (it read the same
    evaluation chain four times), and the new generation comes from that one read."""
    bench, plan, result = run_one(tmp_path)
    store = bench.store
    first = bench.history(plan, result.attempt, "tests")[0][0]
    reads = counting(store)
    attempts = {oid: plan.records[oid] for oid in plan.attempt_oids}
    controls = Controls(protected_roots(store.path, bench.config(), plan.experiment))
    (row,) = regrade.reevaluate(
        store, plan.oid, plan.experiment, attempts, regrade.Request("tests", "regrade"), controls
    )
    assert (row.action, row.generation, row.verdict, row.current) == (
        "evaluated",
        2,
        "pass",
        "pass",
    )
    assert reads[first] == 1
    assert reads[result.terminal] == 1
