"""A run's model gateway (docs/gateway.md, "In a run"): started once per run, an attempt
admitted with a token, its calls retained as evidence, its identity and cost observed there.

A plan whose tool policy is ``network: gateway`` runs its candidates with loopback only and
the gateway's port (yyb/harness/gatewayport.py). Each attempt's harness gets the gateway's
URL and a token in the variables its SDKs read, never the provider's key. What the gateway
metered stands for the attempt's identity and cost; the envelope's claims are kept beside it,
and where they differ, the difference is named.
"""

from __future__ import annotations

import itertools
import queue
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from yyb.errors import InvalidArgument, UsageError
from yyb.evidence import cost, identity, names
from yyb.evidence.kinds.attempt import CandidateCost, Metered, MeteredClaim
from yyb.evidence.kinds.gateway import PriceTable
from yyb.gateway import Call, Gateway, Meter, Provider, Providers, Replay, records
from yyb.gateway.records import meter_record
from yyb.grading.invocation import JudgeCalls
from yyb.harness import envelope, gatewayport

# The loopback port a candidate reaches the gateway at, inside its sandbox.
PORT = 8088
URL_ENV = "YYB_GATEWAY_URL"
TOKEN_ENV = "YYB_GATEWAY_TOKEN"
# The base-URL variables each API kind's clients read: the official SDKs, litellm (aider,
# mini-swe-agent) and the CLIs built on them.
BASE_URLS = {
    "openai": {"OPENAI_BASE_URL": "/v1", "OPENAI_API_BASE": "/v1"},
    "anthropic": {"ANTHROPIC_BASE_URL": ""},
}


def uses_gateway(plan: dict) -> bool:
    return plan["tool_policy"]["network"] == "gateway"


def providers_of(plan: dict) -> Providers:
    """The plan's providers, as bound in it."""
    bound = plan["gateway"]["providers"]
    return Providers.of(
        *(
            Provider(name, spec["base_url"], spec["credential"], tuple(spec["apis"]))
            for name, spec in sorted(bound.items())
        )
    )


def prices_of(store, plan: dict) -> PriceTable | None:
    """The price table the plan pins (None: it pins none, and every call is unpriced)."""
    oid = plan["links"].get("prices")
    return None if oid is None else PriceTable.read(store.objects, oid)


def start(store, plan: dict, environ: dict, folder: str, replay: Replay | None = None) -> Gateway:
    """The run's gateway, serving on a socket in the run's ``folder``; it reads the providers'
    keys from ``environ`` by name (none with ``replay``).

    Raises:
        UsageError: a provider's credential variable is unset.
    """
    gateway = Gateway(
        providers_of(plan),
        prices_of(store, plan),
        Path(folder) / "gateway.sock",
        replay=replay,
        environ=environ,
    )
    try:
        return gateway.start()
    except InvalidArgument as exc:
        raise UsageError(f"the gateway cannot start: {exc}") from None


def recorded(store, plan_oid: str) -> Replay:
    """The answers a run of ``plan_oid`` recorded, to replay (docs/gateway.md, "Replay"):
    every attempt's kept calls (its ``calls`` ref: the final meter, or the calls kept before
    a crash), in plan order.

    Raises:
        UsageError: not a stored plan, or one with no call recorded.
    """
    from yyb.evidence.kinds.plan import ExperimentPlan

    value = store.objects.get_record(plan_oid) if store.objects.contains(plan_oid) else None
    if not ExperimentPlan.holds(value):
        raise UsageError(f"--replay {plan_oid}: not an experiment plan in this store")
    meters = []
    for attempt_oid in value["links"]["attempts"]:
        kept = store.refs.read(names.calls(plan_oid, attempt_oid))
        meters += [kept] if kept is not None else []
        meters += _judge_meters(store, plan_oid, attempt_oid, value)
    if not meters:
        raise UsageError(f"--replay {plan_oid}: the plan's attempts recorded no gateway call")
    return Replay.from_store(store.objects, meters)


def _judge_meters(store, plan_oid: str, attempt_oid: str, plan: dict) -> list[str]:
    """The gateway meters of the attempt's judge runs, every generation, oldest first."""
    found = []
    for profile in sorted(plan["evaluators"]["catalog"]):
        receipt_oid = store.refs.read(names.evaluation(plan_oid, attempt_oid, profile))
        chain = []
        while receipt_oid is not None:
            receipt = store.objects.get_record(receipt_oid)
            chain.append(list(receipt["links"].get("gateway", ())))
            receipt_oid = receipt["links"].get("previous")
        found += [oid for meters in reversed(chain) for oid in meters]
    return found


@dataclass(frozen=True)
class Admission:
    """One attempt's way to its model: the token, the port in its sandbox, its variables."""

    token: str
    port: gatewayport.Port
    variables: dict[str, str]

    @property
    def secrets(self) -> dict[str, str]:
        """What the attempt's redactor hides: the token, under every name it is given."""
        return {name: value for name, value in self.variables.items() if value == self.token}


def admit(
    gateway: Gateway, journal: Journal, plan: dict, attempt_oid: str, attempt: dict
) -> Admission:
    """A token for the attempt's planned model, bounded by its spend ceiling, its calls kept
    by ``journal`` as they end, and the variables that send its harness's SDKs to the gateway
    with it."""
    from yyb.evidence import plan as planned

    model = attempt["model"]["resolved"]
    ceiling = planned.ceiling(attempt)
    own = gateway.socket_path.parent / f"{attempt_oid[:16]}.sock"
    watcher = journal.watcher(attempt_oid, model, ceiling)
    token = gateway.admit(attempt_oid, model, ceiling, own, watcher)
    return admission(plan, model, token, own)


def admission(plan: dict, model: str, token: str, socket_path: Path) -> Admission:
    """The ``Admission`` of ``token`` (admitted for ``model`` on ``socket_path``): the port
    its sandbox reaches it at and the variables its SDKs read."""
    port = gatewayport.Port(str(socket_path), PORT)
    spec = plan["gateway"]["providers"][model.split("/", 1)[0]]
    variables = {URL_ENV: port.url, TOKEN_ENV: token, spec["credential"]: token}
    for api in spec["apis"]:
        for name, suffix in BASE_URLS[api].items():
            variables[name] = port.url + suffix
    return Admission(token, port, variables)


class JudgeAccess:
    """A gateway plan's judges' way to their models (grading.invocation.JudgeAccess): each
    judge run admitted with a token and a socket of its own, no ceiling, its calls stored
    when it ends and its meter's cost standing for the judge's."""

    def __init__(self, store, plan: dict, gateway: Gateway) -> None:
        self.store, self.plan, self.gateway = store, plan, gateway
        self._runs = itertools.count()

    def open(self, model: str) -> Admission:
        own = self.gateway.socket_path.parent / f"judge-{next(self._runs)}.sock"
        token = self.gateway.admit(f"judge {model}", model, None, own)
        return admission(self.plan, model, token, own)

    def close(self, opened: Admission) -> JudgeCalls:
        meter = self.gateway.retire(opened.token)
        oid = retain(self.store, meter, self.gateway.prices)
        return JudgeCalls(oid, cost.metered(meter.spent_micros, meter.completeness != "partial"))


class Journal:
    """Keeps each call of a run's attempts in the store as it ends, so a controller killed
    mid-attempt loses none: the call's bodies and record, then the attempt's ``calls`` ref
    (yyb.evidence.names.calls) moved to a meter of its calls so far. A thread of its own
    writes, so the gateway's loop never waits on the store."""

    def __init__(self, store, plan_oid: str, prices: PriceTable | None) -> None:
        self.store, self.plan_oid, self.prices = store, plan_oid, prices
        self.prices_oid = store.objects.put_record(prices.to_value()) if prices else None
        self._queue: queue.Queue = queue.Queue()
        self._kept: dict[str, list[tuple[str, Call]]] = {}
        self._heads: dict[str, str] = {}
        self._thread = threading.Thread(target=self._write, name="yyb-gateway-journal")
        self._thread.daemon = True
        self._thread.start()

    def watcher(self, attempt_oid: str, model: str, ceiling: int | None):
        """The ``on_call`` of one attempt's token."""
        return lambda call: self._queue.put((attempt_oid, model, ceiling, call))

    def flush(self) -> None:
        """Wait until every call ended so far is kept."""
        self._queue.join()

    def close(self) -> None:
        self.flush()
        self._queue.put(None)
        self._thread.join(timeout=30)

    def settle(self, attempt_oid: str, meter: Meter) -> str:
        """Store the attempt's final meter and move its ``calls`` ref to it; its oid. The
        calls kept as they ended are linked as stored, not hashed again; one the journal
        did not keep (it ended after ``flush``) is stored now."""
        self.flush()
        kept = {call.record.index: oid for oid, call in self._kept.pop(attempt_oid, [])}
        oids = [kept.get(c.record.index) or self._put(c) for c in meter.calls]
        value = meter_record(meter, oids, self.prices_oid).to_value()
        meter_oid = self.store.objects.put_record(value)
        ref = names.calls(self.plan_oid, attempt_oid)
        old = self._heads.pop(attempt_oid, None)
        if old != meter_oid:
            self.store.refs.update(ref, meter_oid, old=old, reason="the attempt's calls, all")
        return meter_oid

    def _put(self, call: Call) -> str:
        """Store one call's bodies and record; the record's oid."""
        self.store.objects.put("blob", call.request)
        self.store.objects.put("blob", call.response)
        return self.store.objects.put_record(call.record.to_value())

    def _write(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                self._keep(*item)
            finally:
                self._queue.task_done()
        self._queue.task_done()

    def _keep(self, attempt_oid: str, model: str, ceiling: int | None, call: Call) -> None:
        objects = self.store.objects
        kept = self._kept.setdefault(attempt_oid, [])
        kept.append((self._put(call), call))
        kept.sort(key=lambda pair: pair[1].record.index)
        calls = tuple(c for _, c in kept)
        reached = any(c.record.outcome == "refused_ceiling" for c in calls)
        meter = Meter(attempt_oid, model, ceiling, reached, calls)
        value = meter_record(meter, [oid for oid, _ in kept], self.prices_oid).to_value()
        oid = objects.put_record(value)
        ref = names.calls(self.plan_oid, attempt_oid)
        old = self._heads.get(attempt_oid)
        self.store.refs.update(ref, oid, old=old, reason="a gateway call ended")
        self._heads[attempt_oid] = oid


@dataclass(frozen=True)
class Observation:
    """What the gateway observed of an attempt, as its execution record keeps it."""

    meter_oid: str
    observed: str | None
    cost: CandidateCost
    metered: Metered
    problem: str | None  # why its identity is not the planned one, if it is not


def retain(store, meter: Meter, prices: PriceTable | None) -> str:
    """Store the meter's calls (bodies, call records), its price table and the meter itself;
    the meter's oid."""
    oid = None
    for kind, body in records(meter, prices):
        oid = store.objects.put(kind, body) if kind == "blob" else store.objects.put_record(body)
    return oid


def observe(meter: Meter, meter_oid: str, model: dict, envelope_value: dict | None) -> Observation:
    """The attempt's identity and cost as its stored meter (``meter_oid``) has them; the
    envelope's claims compared with them."""
    provider = model["resolved"].split("/", 1)[0]
    served = [
        envelope.normalize(provider, c.record.served_model)
        for c in meter.calls
        if c.record.served_model is not None
    ]
    foreign = [s for s in served if not identity.accepts(model["resolved"], _accept(model), s)]
    observed = (foreign or served or [None])[0]
    problem = None
    if meter.unanswered:  # a replay the candidate left: what it asked was never recorded
        hashes = ", ".join(c.record.request_sha256 for c in meter.unanswered[:3])
        problem = (
            f"replay had no recorded answer for {len(meter.unanswered)} of its calls "
            f"(request sha256 {hashes}{', ...' if len(meter.unanswered) > 3 else ''})"
        )
    elif foreign:
        problem = f"the gateway observed {foreign[0]} served, not the planned {model['resolved']}"
    elif not served:
        problem = "no model call went through the gateway: the candidate's identity is unobserved"
    spent = metered_cost(meter.spent_micros, meter.completeness)
    claimed = MeteredClaim(
        observed=envelope.observed(envelope_value) if envelope_value is not None else None,
        cost=CandidateCost(**cost.reported(envelope_value)),
    )
    metered = Metered(
        calls=len(meter.calls),
        ceiling_reached=meter.ceiling_reached,
        claimed=claimed,
        disagreements=tuple(_disagreements(claimed, observed, spent, model)),
    )
    return Observation(meter_oid, observed, spent, metered, problem)


def _accept(model: dict) -> tuple:
    return tuple(model.get("accept", ()))


def metered_cost(micros: int, completeness: str) -> CandidateCost:
    """A meter's spend (its known micros, its completeness) as an attempt's cost."""
    return CandidateCost(**cost.metered(micros, completeness != "partial"))


def _disagreements(claimed: MeteredClaim, observed, spent: CandidateCost, model) -> list[str]:
    """Where the envelope's claims differ from what the gateway metered, in words (nothing
    is compared when there is no envelope)."""
    if claimed.observed is None:
        return []
    found = []
    same = claimed.observed == observed or (
        observed is not None
        and identity.accepts(model["resolved"], _accept(model), claimed.observed)
        and identity.accepts(model["resolved"], _accept(model), observed)
    )
    if not same:
        found.append(
            f"identity: the envelope claims {claimed.observed}, the gateway observed {observed}"
        )
    if claimed.cost.micros != spent.micros or claimed.cost.completeness != spent.completeness:
        found.append(
            f"cost: the envelope claims {_said(claimed.cost)}, the gateway metered {_said(spent)}"
        )
    return found


def _said(value: CandidateCost) -> str:
    if value.micros is None:
        return value.completeness
    return f"{value.micros} micro-USD ({value.completeness})"


# A UNIX socket's path has room for 107 bytes; an attempt's is the run's folder, the socket
# folder ("/yyb-gw-" and mkdtemp's 8 characters) and "/<16 hex>.sock": 38 more.
SOCKET_ROOM = 107
SOCKET_TAIL = len("/yyb-gw-") + 8 + len("/") + 16 + len(".sock")


def socket_folder(run_folder: str) -> str:
    """A new folder, private to the controller, for the run's gateway sockets: in the run's
    folder, or in /tmp when that path is too long for a socket's."""
    parent = run_folder if len(run_folder) + SOCKET_TAIL <= SOCKET_ROOM else "/tmp"
    return tempfile.mkdtemp(prefix="yyb-gw-", dir=parent)
