"""Running the release-readiness suite and writing its receipt.

The suite's cases run as real attempts of three plans (``suite``, ``timeout``, ``cancel``)
through the same code as any run: ``attempts.run.prepare`` and ``run_plan``, the real sandbox,
the real graders. They run offline: the network is denied to everything they start and no
judge grades, so nothing can be spent and no grant is written. While they run, the
controller's home is the suite's (credential files holding a canary) and its environment holds
secrets no harness names; a sibling attempt's folder lies in this process's run folder.
Afterwards each planted place is checked unchanged.

Records: one ``yylo_benchmark_readiness_check.v1`` per case and the
``yylo_benchmark_release_readiness.v1`` receipt linking them, none holding a time, a temporary
path or an attempt's oid, so the same build, host and inputs give the same receipt. Refs:
``refs/release-readiness/<receipt>/receipt``, ``.../runs/<part>`` (the plans whose attempts are
the evidence) and ``refs/release-readiness/latest``; the ref log holds the times.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from yyb import signing
from yyb.errors import YybError
from yyb.evidence import names
from yyb.evidence.kinds.readiness import (
    ReleaseReadiness,
    ReleaseReadinessCoverage,
    ReleaseReadinessHost,
    ReleaseReadinessLinks,
    ReleaseReadinessSuite,
)
from yyb.readiness import identity, standin, suite, verify
from yyb.readiness.suite import CASES, MODEL, PARTS, Suite

TIMEOUTS_MS = {"suite": 60_000, "timeout": 1_000, "cancel": 60_000}
CANCEL_AFTER_S = 0.5  # after the cancel case's intent is durable: its candidate is in flight
JOBS = 2


class Watcher(Protocol):
    """Told of each attempt of the suite as it starts and as it ends, from the run's threads
    (``yyb run``'s progress has this shape)."""

    def started(self, ordinal: int, model: str, case_id: str | None) -> None: ...

    def finished(self, result) -> None: ...


@dataclass
class Outcome:
    oid: str
    receipt: dict
    checks: list[dict]
    plans: dict[str, str]  # part -> plan oid


def release_readiness(
    store,
    config,
    environ: dict[str, str],
    build: identity.Build | None = None,
    host: dict | None = None,
    jobs: int = JOBS,
    environment=None,
    watcher: Watcher | None = None,
) -> Outcome:
    """Bind the identities (``build`` and ``host``: ``identity.build()`` and
    ``identity.host()`` unless given), run the suite, write the records and refs; nothing is
    spent. The modules the receipt binds are those imported once the suite has run, each
    checked to be the build's before the receipt is written. With ``environment`` (a declared
    spec: yyb/evidence/environment.py), every case of the suite runs on it, built first, and
    the receipt names it. ``watcher`` is told of each of the suite's ``len(CASES)`` attempts.

    Raises:
        DirtyCheckout: yyb runs from a checkout with uncommitted changes.
        SandboxUnavailable: the sandbox cannot start here.
        UnboundBuild: a module that ran is not the build's (the suite's evidence is kept;
            no receipt is written).
        UsageError: the installed distribution differs from its RECORD.
    """
    from yyb.harness import sandbox, scratch, worktree
    from yyb.harness.sandbox import protected_roots

    build = build or identity.build()
    host = host or identity.host()
    catalog = config.evaluators() if config is not None else {}
    harnesses = identity.harnesses(
        config, protected_roots(store.path, config, {"evaluators": {"catalog": catalog}})
    )
    root = suite.new_root()
    sibling = scratch.folder("attempt", store.path)
    try:
        built = suite.build(root)
        suite.plant_sibling(sibling)
        sandbox.hand_over(sibling)  # as a running attempt's folder is: the sandbox uid's
        suite.write_json(
            os.path.join(built.tools, "targets.json"), suite.targets(built, store.path, sibling)
        )
        secret_oid = store.objects.put("blob", suite.store_canary())
        watched = _watched(built, sibling)
        before = {label: suite.fingerprint(path) for label, path in watched.items()}
        if environment is not None:
            suite.declare_environment(built, environment.path)
        plans = {part: _plan(store, built, part, environment) for part in PARTS}
        # Planned while it was there; gone when its attempt is prepared.
        os.rename(built.path("vanishing"), built.path("vanished"))
        with controller(built, environ) as env:
            for part, (config_part, plan) in plans.items():
                _run(store, config_part, plan, env, jobs, part == "cancel", watcher)
        changed = _changed(store, secret_oid, watched, before)
        checks = []
        for case in CASES:
            _, plan = plans[case.part]
            attempt_oid = next(
                oid for oid in plan.attempt_oids if plan.records[oid]["case_id"] == case.case_id
            )
            observed = verify.observe(store, plan.oid, attempt_oid, case)
            checks.append(verify.check_record(case, observed, changed.get(case.leakage, [])))
    finally:
        worktree.remove(root)
        worktree.remove(sibling)
    runs = {part: plans[part][1].oid for part in PARTS}
    pins = plans[PARTS[0]][1].experiment.get("environments")
    return _write(store, build.identity(), host, harnesses, checks, runs, secret_oid, pins)


def _plan(store, built: Suite, part: str, environment=None):
    """The configuration and the stored plan of one part's cases (one attempt each), built
    on ``environment`` when given."""
    from yyb import config as configuration
    from yyb.evidence.environment import resolver
    from yyb.plans import build as plans

    path = built.path("config", f"{part}.json")
    suite.write_json(path, suite.config(built, TIMEOUTS_MS[part]))
    config = configuration.load(path)
    tasks = [built.task(case) for case in CASES if case.part == part]
    built_on = resolver(lambda: store) if environment is not None else None
    plan = plans.task_plan(config, tasks, MODEL, 1, None, built_on)
    plans.write(store, plan)
    return config, plan


def _run(store, config, plan, environ: dict, jobs: int, cancel: bool, told=None) -> None:
    from yyb.attempts import run as attempts_run

    chosen = {oid: plan.records[oid] for oid in plan.attempt_oids}
    ctx = attempts_run.prepare(
        store, config, plan.oid, plan.experiment, chosen, environ, offline=True
    )
    if told is not None:
        ctx.progress = told.finished
        ctx.started = lambda a: told.started(a["ordinal"], a["model"]["resolved"], a.get("case_id"))
    if not cancel:
        attempts_run.run_plan(ctx, jobs)
        return
    done = threading.Event()

    def interrupt() -> None:
        """Cancel once the attempt is dispatched (its intent durable) and under way."""
        [attempt_oid] = plan.attempt_oids
        while not done.is_set() and ctx.read(attempt_oid, "intent") is None:
            done.wait(0.02)
        done.wait(CANCEL_AFTER_S)
        ctx.cancel.set()

    watcher = threading.Thread(target=interrupt, daemon=True)
    watcher.start()
    try:
        attempts_run.run_plan(ctx, jobs)
    finally:
        done.set()
        watcher.join()


@contextmanager
def controller(built: Suite, environ: dict[str, str]) -> Iterator[dict[str, str]]:
    """This process as the controller of the suite's runs: its home is the suite's and its
    environment holds the planted secrets (in ``os.environ`` itself, so that anything that
    leaks the process's own environment leaks them). The signing key stays the one
    ``environ`` names. Restored on leaving."""
    saved = dict(os.environ)
    key = signing.configured_key_path(environ)
    secret = suite.canary("environment")
    changes = {
        "HOME": built.home,
        signing.KEY_ENV: key or "",
        **{name: secret for name in suite.SECRET_VARIABLES},
    }
    os.environ.update(changes)
    try:
        yield {**environ, **changes}
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _watched(built: Suite, sibling: str) -> dict[str, str]:
    """The planted places each leakage check watches for changes (label -> path)."""
    return {
        "history": built.path("repo"),
        "graders": built.path("graders"),
        "sibling": sibling,
        "home": built.home,
    }


def _changed(store, secret_oid: str, watched: dict, before: dict) -> dict[str, list[str]]:
    """Per leakage check, what changed at the places it planted."""
    changed: dict[str, list[str]] = {check: [] for check in watched}
    for check, path in watched.items():
        if suite.fingerprint(path) != before[check]:
            changed[check].append(f"changed: {check} canary place")
    store_changes = []
    try:
        if store.objects.get(secret_oid).body != suite.store_canary():
            store_changes.append("changed: the registry's canary")
    except YybError:  # missing, or no longer hashing to its name
        store_changes.append("changed: the registry's canary")
    if os.path.lexists(os.path.join(store.path, suite.WROTE)):
        store_changes.append("changed: a file written into the registry")
    changed["store"] = store_changes
    return changed


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def receipt_record(
    build,
    host,
    harnesses,
    checks: list[dict],
    check_oids: list[str],
    canary_oid: str,
    pins: list | None = None,
) -> dict:
    """The receipt's value: what its checks claim, with the build, host and harnesses, and
    the environment its cases ran on (``pins``: the plans' one ``environments`` entry)."""
    covered = verify.coverage(checks)
    graders = (standin.TESTS_GRADER, standin.SAFETY_GRADER, standin.BROKEN_GRADER)
    return ReleaseReadiness(
        passed=verify.verdict(checks, covered, harnesses),
        yyb=build,
        harnesses=tuple(harnesses),
        host=ReleaseReadinessHost(**host),
        suite=ReleaseReadinessSuite(
            model=MODEL,
            cases=len(CASES),
            stand_in_sha256=_sha256(standin.AGENT),
            graders_sha256=tuple(sorted(_sha256(text) for text in graders)),
        ),
        leakage=verify.leakage(checks),
        coverage=ReleaseReadinessCoverage(
            terminal_classes=covered["terminal_classes"],
            evaluation_outcomes=covered["evaluation_outcomes"],
            cheats=covered["cheats"],
            missing=tuple(covered["missing"]),
        ),
        links=ReleaseReadinessLinks(checks=tuple(check_oids), canary=canary_oid),
        **({"environment": dict(pins[0])} if pins else {}),
    ).to_value()


def _write(
    store,
    build,
    host,
    harnesses,
    checks: list[dict],
    plans: dict[str, str],
    canary_oid: str,
    pins: list | None = None,
) -> Outcome:
    check_oids = [store.objects.put_record(record) for record in checks]
    receipt = receipt_record(build, host, harnesses, checks, check_oids, canary_oid, pins)
    oid = store.objects.put_record(receipt)
    store.refs.update(names.readiness_receipt(oid), oid, reason="release-readiness")
    for part, plan_oid in plans.items():
        store.refs.update(names.readiness_run(oid, part), plan_oid, reason="release-readiness")
    store.refs.update(names.READINESS_LATEST, oid, reason="release-readiness")
    return Outcome(oid, receipt, checks, plans)
