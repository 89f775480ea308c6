"""What the controller accepts from a worker, and what it refuses (attempts/remote.py).

A genuine return is made for real: the attempt is dispatched, shipped and run by
``remote.run`` in this process, in the sandbox, exactly as a worker runs it. Every forged
return below is that genuine return with one thing changed, and each must be refused with
nothing written: no execution ref, no object of the return in the store.
"""

from __future__ import annotations

import dataclasses
import threading
import types

import pytest

from yyb.attempts import remote
from yyb.attempts.dispatch import dispatch
from yyb.errors import CorruptObject
from yyb.harness import snapshot
from yyb.store.objects.format import hash_object, header
from yyb.store.objects.store import record_body


@dataclasses.dataclass
class Made:
    bench: object
    ctx: object
    attempts: list[str]
    intents: dict[str, str]
    shipment: remote.Shipment
    returned: remote.Returned
    worker: remote.Worker

    @property
    def attempt(self) -> str:
        return self.attempts[0]

    @property
    def intent(self) -> str:
        return self.intents[self.attempt]

    def execution_ref(self) -> str | None:
        return self.ctx.read(self.attempt, "execution")


@pytest.fixture
def made(dask_bench) -> Made:
    bench = dask_bench
    plan = bench.plan(["stand/fixer"], attempts=2)
    ctx = bench.context(plan)
    attempts = sorted(plan.attempt_oids, key=lambda a: plan.records[a]["ordinal"])
    intents = {a: dispatch(ctx, a) for a in attempts}
    shipment = remote.ship(ctx, attempts[0], intents[attempts[0]])
    worker = remote.Worker("w-test", list(ctx.sandbox_verified))
    returned = remote.run(shipment, worker, threading.Event())
    assert returned.execution is not None, returned
    return Made(bench, ctx, attempts, intents, shipment, returned, worker)


def record_raw(value: dict) -> tuple[str, bytes]:
    body = record_body(value)
    return hash_object("record", body), header("record", len(body)) + body


def values(returned: remote.Returned) -> dict[str, dict]:
    from yyb.store.objects import codec

    out = {}
    for oid, raw in returned.objects:
        if raw.startswith(b"record "):
            out[oid] = codec.decode(raw[raw.index(b"\0") + 1 :], oid)
    return out


def rewritten(returned: remote.Returned, oid: str, change) -> remote.Returned:
    """``returned`` with record ``oid`` changed by ``change`` and every record linking to it,
    directly or not, relinked: the forgery hashes right all the way up to the execution."""
    records = values(returned)
    objects = dict(returned.objects)
    renamed: dict[str, str] = {}

    def replace(old: str, value: dict) -> None:
        new, raw = record_raw(value)
        del objects[old]
        objects[new] = raw
        records[new] = records.pop(old)
        renamed[old] = new

    value = records[oid]
    change(value)
    replace(oid, value)
    moved = True
    while moved:
        moved = False
        for other, record in list(records.items()):
            links = record.get("links", {})
            stale = {k: renamed[v] for k, v in links.items() if isinstance(v, str) and v in renamed}
            if stale:
                links.update(stale)
                replace(other, record)
                moved = True
    execution = returned.execution
    while execution in renamed:
        execution = renamed[execution]
    return remote.Returned(execution, tuple(objects.items()), worker=returned.worker)


def receive(made: Made, returned, ran_on: remote.Worker | None = None):
    return remote.receive(made.ctx, made.shipment, returned, ran_on or made.worker)


def refused(made: Made, returned, words: str, ran_on: remote.Worker | None = None) -> None:
    before = set(made.ctx.store.objects.iter_oids())
    with pytest.raises(remote.Refused) as caught:
        receive(made, returned, ran_on)
    assert words in caught.value.reason, caught.value.reason
    assert made.execution_ref() is None
    assert set(made.ctx.store.objects.iter_oids()) == before  # nothing written


def test_the_genuine_return_is_accepted(made):
    oid, execution = receive(made, made.returned)
    assert made.execution_ref() == oid == made.returned.execution
    receipt = made.ctx.store.objects.get_record(execution.links.receipt)
    assert receipt["executor"]["kind"] == "dask" and receipt["executor"]["worker"] == "w-test"
    for oid, _ in made.returned.objects:
        made.ctx.store.objects.get(oid)  # every object landed and reads back verified


def test_a_flipped_byte_is_refused(made):
    objects = list(made.returned.objects)
    oid, raw = objects[-1]
    objects[-1] = (oid, raw[:-1] + bytes([raw[-1] ^ 1]))
    forged = dataclasses.replace(made.returned, objects=tuple(objects))
    refused(made, forged, "hash-mismatch")


def test_a_missing_linked_object_is_refused(made):
    execution = values(made.returned)[made.returned.execution]
    stdout = execution["links"]["stdout"]
    objects = tuple(item for item in made.returned.objects if item[0] != stdout)
    forged = dataclasses.replace(made.returned, objects=objects)
    refused(made, forged, "neither returned nor stored")


def test_a_non_canonical_record_is_refused(made):
    from yyb.store.objects import codec

    oid = made.returned.execution
    raw = dict(made.returned.objects)[oid]
    body = raw[raw.index(b"\0") + 1 :]
    value = codec.decode(body, oid)
    import msgpack

    loose = msgpack.packb(dict(reversed(list(value.items()))), use_bin_type=True)
    assert loose != body
    forged_oid = hash_object("record", loose)
    objects = [item for item in made.returned.objects if item[0] != oid]
    objects.append((forged_oid, header("record", len(loose)) + loose))
    forged = remote.Returned(forged_oid, tuple(objects), worker="w-test")
    refused(made, forged, "")


@pytest.mark.parametrize(
    "field, words",
    [("attempt", "names attempt"), ("plan", "names plan"), ("intent", "names intent")],
)
def test_an_execution_of_another_dispatch_is_refused(made, field, words):
    other = {
        "attempt": made.attempts[1],
        "plan": made.attempts[1],  # a stored record, so only the check of the plan can fire
        "intent": made.intents[made.attempts[1]],
    }[field]

    def change(value):
        value["links"][field] = other
        if field != "intent":
            value[field] = other

    forged = rewritten(made.returned, made.returned.execution, change)
    refused(made, forged, words)


def test_a_receipt_that_says_it_ran_locally_is_refused(made):
    execution = values(made.returned)[made.returned.execution]
    receipt = execution["links"]["receipt"]
    forged = rewritten(
        made.returned, receipt, lambda v: v["executor"].update(kind="local", worker=None)
    )
    refused(made, forged, "another dispatch or executor")


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda v: v.update(snapshot_commit="2" * 40), "another snapshot"),
        (lambda v: v.update(base_commit="3" * 40), "another snapshot"),
        (lambda v: v.update(excluded_paths=[]), "another snapshot"),
        (lambda v: v["executor"].update(worker="w-other"), "names worker"),
    ],
)
def test_a_receipt_of_another_snapshot_or_worker_is_refused(made, change, words):
    execution = values(made.returned)[made.returned.execution]
    refused(made, rewritten(made.returned, execution["links"]["receipt"], change), words)


def test_a_return_that_is_not_a_return_is_refused(made):
    refused(made, remote.Returned(None, worker="w-test"), "neither an execution nor")
    bad_pairs = dataclasses.replace(made.returned, objects=(("x", "not bytes"),))
    refused(made, bad_pairs, "not an (oid, bytes) pair")


class Opaque:
    """An object of no use to anyone: not iterable, not a mapping."""


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@dataclasses.dataclass(frozen=True)
class Subclass(remote.Returned):
    """A return that passes for a ``Returned`` by ``isinstance``."""


def without(field: str) -> remote.Returned:
    """A ``Returned`` that unpickled without one of its fields."""
    made = object.__new__(remote.Returned)
    state = {"execution": "0" * 64, "objects": (), "early": None, "worker": "w-test"}
    del state[field]
    made.__dict__.update(state)
    return made


FORMS = {
    "a dict": (lambda r: {"execution": r.execution, "objects": r.objects}, "type dict"),
    "None": (lambda r: None, "returned None"),
    "a non-iterable": (lambda r: Opaque(), "type Opaque"),
    "objects not iterable": (lambda r: dataclasses.replace(r, objects=Opaque()), "objects"),
    "objects a list": (lambda r: dataclasses.replace(r, objects=list(r.objects)), "objects"),
    "execution a list": (lambda r: dataclasses.replace(r, execution=[r.execution]), "execution"),
    "execution in capitals": (
        lambda r: dataclasses.replace(r, execution=r.execution.upper()),
        "execution",
    ),
    "an oid not a string": (
        lambda r: dataclasses.replace(r, objects=((7, r.objects[0][1]), *r.objects[1:])),
        "oid",
    ),
    "an oid not 64 hex": (
        lambda r: dataclasses.replace(r, objects=(("z" * 64, r.objects[0][1]), *r.objects[1:])),
        "oid",
    ),
    "bytes not bytes": (
        lambda r: dataclasses.replace(
            r, objects=((r.objects[0][0], bytearray(r.objects[0][1])), *r.objects[1:])
        ),
        "(oid, bytes) pair",
    ),
    "a triple": (
        lambda r: dataclasses.replace(r, objects=((*r.objects[0], b""), *r.objects[1:])),
        "(oid, bytes) pair",
    ),
    "worker not a string": (lambda r: dataclasses.replace(r, worker=["w-test"]), "worker"),
    "worker huge": (lambda r: dataclasses.replace(r, worker="w" * 1_000_000), "worker"),
    "early deeply nested": (
        lambda r: remote.Returned(None, early=nested(100_000), worker=r.worker),
        "early",
    ),
    "early reason huge": (
        lambda r: remote.Returned(None, early={"environment": "x" * 1_000_000}, worker=r.worker),
        "characters",
    ),
    "early with objects": (
        lambda r: remote.Returned(None, r.objects, {"environment": "disk full"}, r.worker),
        "objects beside",
    ),
    "early and an execution": (
        lambda r: dataclasses.replace(r, early={"environment": "disk full"}),
        "both",
    ),
    "a field missing": (lambda r: without("objects"), "fields"),
    "a subclass": (lambda r: Subclass(r.execution, r.objects, None, r.worker), "type Subclass"),
    "objects deeply nested": (
        lambda r: dataclasses.replace(r, objects=(tuple(nested(100_000)),)),
        "(oid, bytes) pair",
    ),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_return_of_the_wrong_form_is_refused_not_a_crash(made, form):
    """Whatever comes back from a worker, the controller refuses it with a reason and
    writes nothing; it never raises anything else."""
    change, words = FORMS[form]
    refused(made, change(made.returned), words)


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda s: s.update(network="denied"), "network"),
        (lambda s: s["limits"].update(memory_mib=s["limits"]["memory_mib"] * 2), "limits"),
        (lambda s: s["limits"].update(processes=s["limits"]["processes"] + 1), "limits"),
        (lambda s: s["limits"].update(open_files=s["limits"]["open_files"] * 2), "limits"),
    ],
)
def test_a_receipt_unlike_the_plans_tool_policy_is_refused(made, change, words):
    """The plan allows the network (the bench's candidates report over it) and gives the
    default limits: a receipt that says its sandbox had others is not this plan's attempt."""
    assert made.ctx.plan["tool_policy"]["network"] == "allowed"
    execution = values(made.returned)[made.returned.execution]
    forged = rewritten(made.returned, execution["links"]["receipt"], lambda v: change(v["sandbox"]))
    refused(made, forged, words)


def test_a_verified_list_the_probe_did_not_report_is_refused(made):
    execution = values(made.returned)[made.returned.execution]
    receipt = execution["links"]["receipt"]
    boast = rewritten(
        made.returned,
        receipt,
        lambda v: v["sandbox"]["verified"].append("the candidate's network is cut"),
    )
    refused(made, boast, "verified")
    # The genuine receipt, judged against a probe of that worker that reported less.
    probe = remote.Worker(made.worker.name, made.worker.verified[:-1], host=made.worker.host)
    refused(made, made.returned, "verified", ran_on=probe)


def test_a_return_from_another_worker_than_the_one_that_ran_it_is_refused(made):
    """The scheduler says the task ran on w-test; the return says w-other, in its receipt
    and its ``worker`` field alike, or the other way round."""
    execution = values(made.returned)[made.returned.execution]
    impostor = rewritten(
        made.returned, execution["links"]["receipt"], lambda v: v["executor"].update(worker="w2")
    )
    impostor = dataclasses.replace(impostor, worker="w2")
    refused(made, impostor, "ran on w-test")
    other = remote.Worker("w-other", made.worker.verified, host=made.worker.host)
    refused(made, made.returned, "ran on w-other", ran_on=other)
    elsewhere = remote.Worker(made.worker.name, made.worker.verified, host="another-host")
    refused(made, made.returned, "host", ran_on=elsewhere)
    early = remote.Returned(None, early={"environment": "disk full"}, worker="w2")
    refused(made, early, "ran on w-test")


def test_objects_nothing_in_the_return_links_are_dropped(made):
    planted = [b"planted by the worker", b"more of it"]
    extra = tuple((hash_object("blob", data), header("blob", len(data)) + data) for data in planted)
    forged = dataclasses.replace(
        made.returned, objects=tuple(sorted(made.returned.objects + extra))
    )
    oid, _ = receive(made, forged)
    assert made.execution_ref() == oid
    stored = set(made.ctx.store.objects.iter_oids())
    assert {o for o, _ in made.returned.objects} <= stored
    assert not {o for o, _ in extra} & stored


def test_an_early_return_can_only_be_an_environment_failure(made):
    early = remote.early(
        remote.Returned(None, early={"environment": "disk full"}, worker="w9"), made.intent
    )
    assert early.facts.environment == "on worker w9: disk full"
    assert early.facts.invalid_case is None and early.links == {"intent": made.intent}
    for claim in (
        {"invalid_case": "the case cannot be prepared"},
        {"environment": "x", "invalid_case": "y"},
        {"environment": ""},
        {"environment": "x", "cancelled": True},
        None,
    ):
        with pytest.raises(remote.Refused):
            remote.early(remote.Returned(None, early=claim, worker="w9"), made.intent)


def test_a_damaged_shipped_snapshot_is_an_environment_failure(made, tmp_path):
    shipped = made.shipment.snapshot
    data = bytearray(shipped.pack)
    data[len(data) // 2] ^= 0xFF
    damaged = dataclasses.replace(shipped, pack=bytes(data))
    with pytest.raises(CorruptObject):
        snapshot.create_shipped(damaged, str(tmp_path / "w1"))
    other = dataclasses.replace(shipped, commit="1" * 40)
    with pytest.raises(CorruptObject):
        snapshot.create_shipped(other, str(tmp_path / "w2"))
    worker = remote.Worker("w-test", [])
    back = remote.run(
        dataclasses.replace(made.shipment, snapshot=damaged), worker, threading.Event()
    )
    assert back.execution is None and set(back.early) == {"environment"}
    assert "damaged" in back.early["environment"]


def test_the_shipped_snapshot_holds_no_excluded_path(made, tmp_path):
    """The harness-owned paths are not shipped at all, not merely hidden on the worker."""
    marker = made.bench.markers["excluded"].encode()
    import zlib

    shipped = made.shipment.snapshot
    assert shipped.excluded  # the bench's repository has harness-owned paths
    assert marker not in shipped.pack
    # The pack's objects are deflated: inflate every stream found in it and look again.
    found = False
    data = shipped.pack
    for start in range(12, len(data) - 20):
        try:
            inflated = zlib.decompressobj().decompress(data[start : start + 4096])
        except zlib.error:
            continue
        found = found or marker in inflated
    assert not found
    made_here = snapshot.create_shipped(shipped, str(tmp_path / "w"))
    assert made_here.excluded == list(shipped.excluded)


def test_blobs_the_controller_holds_are_not_sent_back(made):
    """After the first return of a base is accepted, the controller holds the base's file
    blobs: the next shipment names them, the worker leaves them out of its return, and the
    return still checks (its links resolve in the controller's store)."""
    assert made.shipment.held == ()  # nothing of the base in the store yet
    receive(made, made.returned)
    second, intent = made.attempts[1], made.intents[made.attempts[1]]
    shipment = remote.ship(made.ctx, second, intent)
    assert shipment.held and set(shipment.held) <= set(made.ctx.store.objects.iter_oids())
    worker = remote.Worker("w-test", list(made.ctx.sandbox_verified))
    back = remote.run(shipment, worker, threading.Event())
    sent = {oid for oid, _ in back.objects}
    assert not sent & set(shipment.held)
    assert len(back.objects) < len(made.returned.objects)
    oid, _ = remote.receive(made.ctx, shipment, back, worker)
    assert made.ctx.read(second, "execution") == oid


class Client:
    """A client stand-in: ``who_has`` answers ``held`` (or raises it), ``run`` answers
    ``probed`` (address -> the probe's answer)."""

    def __init__(self, held=(), probed=None) -> None:
        self.held = held
        self.probed = probed or {}

    def who_has(self, futures):
        if isinstance(self.held, BaseException):
            raise self.held
        return {future.key: self.held for future in futures}

    def wait_for_workers(self, count, timeout):
        pass

    def run(self, function, *args, on_error):
        return dict(self.probed)


def stand_in_executor(client: Client):
    pytest.importorskip("distributed")
    from yyb.attempts.dask_run import DaskExecutor

    executor = DaskExecutor("tcp://127.0.0.1:1", {})
    executor.client = client
    return executor


@pytest.mark.parametrize(
    "held, address",
    [
        (("tcp://10.0.0.2:1",), "tcp://10.0.0.2:1"),
        ((), None),
        (("tcp://10.0.0.2:1", "tcp://10.0.0.3:1"), None),
        (OSError("the scheduler is gone"), None),
    ],
)
def test_the_worker_that_ran_a_task_is_the_one_the_scheduler_names(held, address):
    """Exactly one holder of the result names the worker; anything else names none, and
    the return is then refused."""
    executor = stand_in_executor(Client(held=held))
    future = dataclasses.make_dataclass("Future", ["key"])("yyb-attempt-x")
    assert executor._ran_on(future) == address


def probe_answers():
    import yyb
    from yyb.attempts.dask_run import Probed

    address = "tcp://10.0.0.2:40733"
    good = Probed(f"w1 {address}", "node-2", 1, "bubblewrap 0.8.0", ["x"], yyb.__version__)
    fields = dataclasses.asdict(good)
    return (
        address,
        good,
        {
            "a dict": fields,
            "None": None,
            "threads a text": dataclasses.replace(good, nthreads="1"),
            "no threads": dataclasses.replace(good, nthreads=0),
            "threads negative": dataclasses.replace(good, nthreads=-4),
            "another worker's name": dataclasses.replace(good, name="w2 tcp://10.0.0.3:1"),
            "a name not a text": dataclasses.replace(good, name=None),
            "verified a tuple": dataclasses.replace(good, verified=("x",)),
            "verified of numbers": dataclasses.replace(good, verified=[1]),
            "version not a text": dataclasses.replace(good, yyb=[yyb.__version__]),
        },
    )


PROBE_ADDRESS, GOOD_PROBE, PROBE_FORMS = probe_answers()


@pytest.mark.parametrize("form", sorted(PROBE_FORMS))
def test_a_probe_answer_out_of_form_refuses_the_run(form):
    """A probe's answer is the worker's word too: one out of form refuses the run before
    anything is dispatched, in one line (exit 2), instead of crashing the controller."""
    pytest.importorskip("distributed")
    from yyb.errors import UsageError

    address, good, forms = PROBE_ADDRESS, GOOD_PROBE, PROBE_FORMS
    ctx = types.SimpleNamespace(cancel=threading.Event(), harness={}, tools=lambda: [])
    assert stand_in_executor(Client(probed={address: good})).probe(ctx) == 1
    executor = stand_in_executor(Client(probed={address: forms[form]}))
    with pytest.raises(UsageError) as caught:
        executor.probe(ctx)
    assert caught.value.exit_code == 2
    assert f"worker {address} answered the probe with" in str(caught.value)
    assert executor.workers == {}


class Refusing:
    """A future stand-in whose result is a refusal raised on the worker."""

    key = "yyb-attempt-x"

    def __init__(self, reason) -> None:
        self.refusal = remote.Refused.__new__(remote.Refused)
        Exception.__init__(self.refusal, "refused")
        if reason is not None:
            self.refusal.reason = reason

    def result(self, timeout):
        raise self.refusal


@pytest.mark.parametrize(
    "reason, said",
    [
        ("its claim was taken already", "its claim was taken already"),
        ("x" * 1_000_000, "not a text of 1 to 4096 characters"),
        (["a", "list"], "not a text of 1 to 4096 characters"),
        (None, "not a text of 1 to 4096 characters"),
    ],
)
def test_a_tasks_refusal_is_quoted_only_when_it_is_a_short_text(reason, said):
    """What a task raises comes from its worker: its reason becomes a terminal's only when
    it is a text of bounded length."""
    executor = stand_in_executor(Client())
    with pytest.raises(remote.Refused) as caught:
        executor._wait(None, Refusing(reason))
    assert said in caught.value.reason and len(caught.value.reason) < 200
