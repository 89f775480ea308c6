"""What a run needs, resolved and checked before anything is dispatched."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from yyb import signing
from yyb.attempts import candidate
from yyb.errors import UsageError
from yyb.evidence import environment, names
from yyb.evidence.kinds.attempt import Terminal

Status = Literal["ran", "reused", "converted", "closed", "skipped", "not dispatched"]


@dataclass
class Result:
    """What happened to one attempt in this run (``status``) and the terminal it has."""

    attempt: str
    ordinal: int
    model: str
    case_id: str | None
    terminal_class: str
    reason: str
    terminal: str | None
    status: Status
    wall_ms: int = 0

    @classmethod
    def of(
        cls, attempt_oid: str, attempt: dict, terminal_oid: str, terminal: Terminal, status
    ) -> Result:
        """The result of an attempt that has ``terminal`` (record) as ``terminal_oid``."""
        return cls(
            attempt_oid,
            attempt["ordinal"],
            attempt["model"]["resolved"],
            attempt.get("case_id"),
            terminal.class_,
            terminal.reason,
            terminal_oid,
            status,
            terminal.runtime.wall_ms,
        )

    @classmethod
    def without_terminal(cls, attempt_oid: str, attempt: dict, reason: str, status) -> Result:
        return cls(
            attempt_oid,
            attempt["ordinal"],
            attempt["model"]["resolved"],
            attempt.get("case_id"),
            "-",
            reason,
            None,
            status,
        )


@dataclass
class RunContext:
    """Everything a run needs, resolved before anything is dispatched.

    ``signer`` is the private key that signs terminals and evaluation receipts (None: signing
    off); signing is a step of publishing, so recovery completes what a crash cut short.
    """

    store: Any
    config: Any
    plan_oid: str
    plan: dict
    attempts: dict[str, dict]  # attempt oid -> attempt plan
    keep_workspaces: bool = False
    cancel: threading.Event = field(default_factory=threading.Event)
    progress: Callable[[Result], None] | None = None
    started: Callable[[dict], None] | None = None  # called with each attempt plan dispatched
    secrets: dict[str, str] = field(default_factory=dict)
    environ: dict[str, str] = field(default_factory=dict)  # for judge harness secrets
    signer: Any = None
    grades: bool = True  # this process grades what it runs (a worker's controller grades)
    offline: bool = False  # nothing it starts can spend: it needs no grant (``authorize``)
    # Where candidates run (a receipt's ``executor``) and what the sandbox probe verified there.
    executor: dict = field(default_factory=lambda: local_executor())
    sandbox_verified: list[str] = field(default_factory=list)
    # The plan's built environments (harness.environments.build.Ready), by spec oid, each
    # checked against its manifest before anything was dispatched.
    environments: dict[str, Any] = field(default_factory=dict)
    # The run's model gateway (yyb.gateway.Gateway) when the plan's candidates reach their
    # models through it (yyb/attempts/metering.py); None for every other plan.
    gateway: Any = None
    journal: Any = None  # and the metering.Journal keeping its calls as they end
    judges: Any = None  # and its judges' way to their models (metering.JudgeAccess)

    @property
    def harness(self) -> dict:
        return self.plan["candidate_harness"]["config"]

    def protected(self) -> list[str]:
        """What no sandboxed process may see: ``sandbox.protected_roots``, the signing key, and
        the home the run's controller environment names (it may differ from this process's)."""
        from yyb.harness.sandbox import protected_roots

        key = signing.configured_key_path(self.environ) if self.signer is not None else None
        extra = tuple(path for path in (key, self.environ.get("HOME")) if path)
        return protected_roots(self.store.path, self.config, self.plan, extra)

    def tools(self) -> dict[str, str]:
        """The plan's read-only tool paths as bound in the sandbox, each checked.

        Raises:
            UnsafeToolPath: one would expose a protected root.
        """
        from yyb.harness.sandbox import tool_paths

        return tool_paths(self.plan["tool_policy"]["read_only_paths"], self.protected())

    def environment(self, case: dict | None):
        """The built environment ``case`` runs in (build.Ready), None for the host's.

        Raises:
            EnvironmentMismatch: not built here, or its tree differs from its manifest (the
                first time this process uses it: ``build.pinned``).
        """
        if case is None or "environment" not in case:
            return None
        if case["environment"] not in self.environments:
            self.environments = environment.pinned(self.store, self.plan)
        return self.environments[case["environment"]]

    def ref(self, attempt_oid: str, leaf: names.Leaf) -> str:
        return names.attempt(self.plan_oid, attempt_oid, leaf)

    def read(self, attempt_oid: str, leaf: names.Leaf) -> str | None:
        return self.store.refs.read(names.attempt(self.plan_oid, attempt_oid, leaf))


def run_lock(plan_oid: str) -> str:
    """The store lock one run (or recovery) of the plan holds (``locks/run-<plan>.lock``)."""
    return f"run-{plan_oid}"


def local_executor() -> dict:
    """A receipt's ``executor`` for an attempt run by this process."""
    import socket

    return {"kind": "local", "host": socket.gethostname(), "worker": None}


def authorize(store, plan_oid: str, plan: dict, offline: bool = False) -> None:
    """A plan with a budget dispatches only under a grant that authorizes it exactly; an
    ``offline`` run (the built-in stand-ins of ``yyb release-readiness``) needs none, provided
    nothing it starts can spend: the network is denied to its candidates and no judge grades.

    Raises:
        GrantError: no grant, or one that does not match the plan or has expired; an offline
            run of a plan that could spend.
    """
    from yyb.plans import grant

    if plan.get("budget") is None:
        return
    if offline:
        catalog = plan["evaluators"]["catalog"]
        if plan["tool_policy"]["network"] != "denied":
            raise grant.GrantError("grant", "an offline run must deny its candidates the network")
        if any(catalog[p]["kind"] == "llm_judge" for p in plan["evaluators"]["selected"]):
            raise grant.GrantError("grant", "an offline run cannot select a judge")
        return
    grant_oid = store.refs.read(names.grant(plan_oid))
    if grant_oid is None:
        raise grant.GrantError("grant", "no grant authorizes this plan's spend", missing=True)
    grant.check(store.objects.get_record(grant_oid), plan_oid, plan, grant.now_ms())


def prepare(
    store,
    config,
    plan_oid: str,
    plan: dict,
    attempts: dict[str, dict],
    environ: dict[str, str],
    offline: bool = False,
    candidates_here: bool = True,
) -> RunContext:
    """Check everything a live run needs before any dispatch (fails closed); an ``offline``
    one needs no grant (``authorize``). Unless ``candidates_here``, candidates run on other
    machines (the Dask executor, whose probe checks the harness and its secrets there): this
    one needs neither.

    Raises:
        SandboxUnavailable: the sandbox cannot start here, or not without privileges.
        UnsafeToolPath: a read-only tool path would expose a protected root.
        GrantError: the plan has a budget and no grant authorizes it.
        UsageError: the harness executable, a secret or the named signing key is missing.
        EnvironmentMismatch: an environment of the plan is not built here or differs from
            its manifest.
    """
    from yyb.harness import adapters, probe

    authorize(store, plan_oid, plan, offline)
    if plan["tool_policy"]["network"] == "gateway" and not candidates_here:
        raise UsageError(
            "the plan sends its candidates' model calls through the gateway "
            "(tool_policy.network gateway), which runs with the local executor only "
            "(docs/gateway.md)"
        )
    _, verified = probe.verify()
    harness = plan["candidate_harness"]["config"]
    if candidates_here:
        candidate.check_program(harness, plan["tool_policy"]["read_only_paths"])
    secrets = {}
    for name in harness.get("secrets", []) if candidates_here else ():
        if name not in environ:
            raise UsageError(f"the candidate harness needs the secret {name}, which is not set")
        secrets[name] = environ[name]
    for profile in plan["evaluators"]["selected"]:
        spec = plan["evaluators"]["catalog"][profile]
        if spec["kind"] != "llm_judge":
            continue
        judge = plan["evaluators"]["harnesses"].get(spec["harness"])
        if judge is None:
            raise UsageError(f"the judge {profile} has no harness bound in the plan")
        if spec.get("executable"):
            from yyb.harness.pinned import pinned_bytes

            _, problem = pinned_bytes(spec["executable"], spec["sha256"])
            if problem is not None:  # fail closed before any candidate is dispatched
                raise UsageError(f"the judge {profile}'s pinned executable: {problem}")
        if judge["kind"] != "command" or judge["argv"][0] != "{judge}":
            adapters.executable(judge)
        for name in judge.get("secrets", []):
            if name not in environ:
                raise UsageError(f"the judge {profile} needs the secret {name}, which is not set")
    context = RunContext(
        store,
        config,
        plan_oid,
        plan,
        attempts,
        secrets=secrets,
        environ=dict(environ),
        signer=signing.configured_signer(environ),
        offline=offline,
        sandbox_verified=verified,
        environments=environment.pinned(store, plan),
    )
    context.tools()  # a tool path that would expose a protected root: refused now
    return context
