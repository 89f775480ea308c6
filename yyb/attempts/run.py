"""Running the attempts of a plan: intent, snapshot, sandboxed execution, evidence, terminal.

Each attempt's records live under ``refs/runs/<plan>/<attempt>/``: ``intent`` (durable before
the candidate starts; its compare-and-swap creation is what makes a dispatch happen at most
once), ``terminal`` and ``evidence``. docs/attempts.md walks through the chain.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from yyb.attempts.terminal import Facts, decide
from yyb.errors import CorruptRef, RefMismatch, UsageError, YybError
from yyb.grading import evaluate
from yyb.harness import adapters, envelope, manifest, sandbox, snapshot, supervise
from yyb.harness.environment import Folders, build, redact

INTENT = "yylo_benchmark_dispatch_intent.v2"
RECEIPT = "yylo_benchmark_workspace_receipt.v2"
TERMINAL = "yylo_benchmark_terminal.v2"
EXECUTION = "yylo_benchmark_execution.v2"
EVIDENCE = "yylo_benchmark_attempt_evidence.v2"


def attempt_ref(plan_oid: str, attempt_oid: str, leaf: str) -> str:
    return f"refs/runs/{plan_oid}/{attempt_oid}/{leaf}"


@dataclass
class Result:
    attempt: str
    ordinal: int
    model: str
    case_id: str | None
    terminal_class: str
    reason: str
    terminal: str | None
    status: str  # "ran" | "reused" | "closed" (intent without terminal) | "skipped"
    wall_ms: int = 0


@dataclass
class RunContext:
    """Everything a run needs, resolved before anything is dispatched."""

    store: object
    config: object
    plan_oid: str
    plan: dict
    attempts: dict[str, dict]  # attempt oid -> attempt plan
    keep_workspaces: bool = False
    cancel: threading.Event = field(default_factory=threading.Event)
    progress: Callable[[Result], None] | None = None
    secrets: dict[str, str] = field(default_factory=dict)
    environ: dict[str, str] = field(default_factory=dict)  # for judge harness secrets

    @property
    def harness(self) -> dict:
        return self.plan["candidate_harness"]["config"]

    def protected(self) -> list[str]:
        return protected_roots(self.store.path, self.config, self.plan)


def protected_roots(store_path: str | None, config, plan: dict) -> list[str]:
    """Roots a sandboxed process must not see: the registry, the sources and the config,
    the controller's home, the system temp folder (so sibling attempts), grader files."""
    roots = [store_path, os.path.expanduser("~"), tempfile.gettempdir()]
    if config is not None:
        roots.append(os.path.dirname(os.path.abspath(config.path)))
        for repo_id in config.data.get("repositories", {}):
            roots.append(config.repository_path(repo_id))
    for spec in plan["evaluators"]["catalog"].values():
        if spec.get("executable"):
            roots.append(os.path.abspath(spec["executable"]))
        roots += [os.path.abspath(a["path"]) for a in spec.get("assets", [])]
    return sorted({os.path.realpath(r) for r in roots if r})


def prepare(
    store, config, plan_oid: str, plan: dict, attempts: dict[str, dict], environ: dict[str, str]
) -> RunContext:
    """Check everything a live run needs before any dispatch (fails closed).

    Raises:
        SandboxUnavailable: the sandbox cannot start here.
        UsageError: the harness executable or a secret is missing.
    """
    sandbox.probe()
    harness = plan["candidate_harness"]["config"]
    adapters.executable(harness)
    secrets = {}
    for name in harness.get("secrets", []):
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
        adapters.executable(judge)
        for name in judge.get("secrets", []):
            if name not in environ:
                raise UsageError(f"the judge {profile} needs the secret {name}, which is not set")
    from yyb import signing

    signing.configured_key_path(environ)  # a signing key that is named but missing: refuse now
    context = RunContext(store, config, plan_oid, plan, attempts, secrets=secrets)
    context.environ = environ
    return context


def reconcile(ctx: RunContext, attempt_oid: str) -> Result | None:
    """An attempt already dispatched is never dispatched again: reuse, convert or close it.

    - a terminal: verified (it must be this attempt's) and reused; missing evidence is added;
    - an execution record without a terminal: the retained evidence proves the terminal, which
      is published from it (grading what was not graded yet);
    - an intent alone: closed as an indeterminate harness_failure;
    - nothing: None, the attempt may be dispatched.
    """
    attempt = ctx.attempts[attempt_oid]
    refs = ctx.store.refs
    terminal_oid = refs.read(attempt_ref(ctx.plan_oid, attempt_oid, "terminal"))
    if terminal_oid is not None:
        terminal = ctx.store.objects.get_record(terminal_oid)
        if terminal.get("attempt") != attempt_oid or terminal.get("plan") != ctx.plan_oid:
            raise CorruptRef(
                attempt_ref(ctx.plan_oid, attempt_oid, "terminal"),
                f"names terminal {terminal_oid} of another attempt; run 'yyb doctor --plan'",
            )
        if refs.read(attempt_ref(ctx.plan_oid, attempt_oid, "evidence")) is None:
            listing = None
            if terminal["links"].get("execution"):
                execution = ctx.store.objects.get_record(terminal["links"]["execution"])
                listing = execution["links"].get("listing")
            _publish_evidence(ctx, attempt_oid, terminal_oid, terminal, listing)
        return _result(
            attempt_oid,
            attempt,
            terminal["class"],
            terminal["reason"],
            terminal_oid,
            "reused",
            terminal["runtime"]["wall_ms"],
        )
    if refs.read(attempt_ref(ctx.plan_oid, attempt_oid, "intent")) is None:
        return None
    execution_ref = attempt_ref(ctx.plan_oid, attempt_oid, "execution")
    execution_oid = refs.read(execution_ref)
    pending = refs.pending(execution_ref) if execution_oid is None else None
    if pending is not None and ctx.store.objects.contains(pending):
        # The execution record is durable; only its ref update was cut short: finish it.
        refs.update(execution_ref, pending, old=None, reason="finish an interrupted update")
        execution_oid = pending
    if execution_oid is not None:
        execution = ctx.store.objects.get_record(execution_oid)
        if execution.get("attempt") == attempt_oid and execution.get("plan") == ctx.plan_oid:
            return _conclude(ctx, attempt_oid, execution_oid, execution, "converted")
    return _close_indeterminate(ctx, attempt_oid)


def _result(attempt_oid, attempt, cls, reason, terminal, status, wall_ms=0) -> Result:
    return Result(
        attempt_oid,
        attempt["ordinal"],
        attempt["model"]["resolved"],
        attempt.get("case_id"),
        cls,
        reason,
        terminal,
        status,
        wall_ms,
    )


def _close_indeterminate(ctx: RunContext, attempt_oid: str) -> Result:
    intent = ctx.store.refs.read(attempt_ref(ctx.plan_oid, attempt_oid, "intent"))
    facts = Facts(environment=None)
    reason = (
        "dispatched earlier without a terminal (interrupted run): closed as "
        "indeterminate, never dispatched again"
    )
    # A crash may have left a lock on the execution ref, which nothing will update again:
    # remove it if its holder is gone, and say so in the terminal.
    execution_ref = attempt_ref(ctx.plan_oid, attempt_oid, "execution")
    holder = ctx.store.refs.break_abandoned_lock(execution_ref)
    if holder is not None:
        reason += f"; replaced the abandoned lock on {execution_ref} left by pid {holder['pid']}"
    terminal = _terminal_record(
        ctx, attempt_oid, "harness_failure", reason, {"intent": intent}, facts
    )
    return _publish(ctx, attempt_oid, terminal, {}, "closed")


def run_attempt(ctx: RunContext, attempt_oid: str) -> Result:
    """Dispatch one attempt (unless already dispatched) and publish its terminal."""
    known = reconcile(ctx, attempt_oid)
    if known is not None:
        return known
    attempt = ctx.attempts[attempt_oid]
    if ctx.cancel.is_set():
        return _result(
            attempt_oid, attempt, "-", "not dispatched: the run was interrupted", None, "skipped"
        )
    intent_oid = _dispatch(ctx, attempt_oid, attempt)
    if intent_oid is None:  # another process dispatched it first
        return _result(attempt_oid, attempt, "-", "dispatched by another run", None, "skipped")
    root = tempfile.mkdtemp(prefix="yyb-attempt-")
    try:
        return _execute(ctx, attempt_oid, attempt, intent_oid, Folders(root))
    finally:
        if not ctx.keep_workspaces:
            shutil.rmtree(root, ignore_errors=True)


def _dispatch(ctx: RunContext, attempt_oid: str, attempt: dict) -> str | None:
    intent = {
        "schema_version": INTENT,
        "plan": ctx.plan_oid,
        "attempt": attempt_oid,
        "ordinal": attempt["ordinal"],
        "model": attempt["model"]["resolved"],
        "harness": ctx.plan["candidate_harness"]["id"],
        "time_ms": supervise.now_ms(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "links": {"plan": ctx.plan_oid, "attempt": attempt_oid},
    }
    oid = ctx.store.objects.put_record(intent)
    try:
        ctx.store.refs.update(
            attempt_ref(ctx.plan_oid, attempt_oid, "intent"),
            oid,
            old=None,
            reason="dispatch intent",
        )
    except RefMismatch:
        return None
    return oid


def _inputs(ctx: RunContext, attempt: dict) -> tuple[dict | None, bytes | None, bytes | None]:
    """(case record, prompt bytes, workflow bytes) from the store."""
    objects = ctx.store.objects
    if attempt["kind"] == "workflow":
        return None, None, objects.get(attempt["links"]["workflow"]).body
    case = objects.get_record(attempt["links"]["case"])
    return case, objects.get(case["links"]["prompt"]).body, None


def _execute(
    ctx: RunContext, attempt_oid: str, attempt: dict, intent_oid: str, folders: Folders
) -> Result:
    store, facts, links = ctx.store, Facts(), {"intent": intent_oid}
    case, prompt, workflow = _inputs(ctx, attempt)
    protected = ctx.protected()
    try:
        folders.create()
        if case is not None:
            repo = ctx.config.repository_path(case["repository"])
            if repo is None:
                raise UsageError(f"repository {case['repository']!r} is not configured")
            snap = snapshot.create(
                repo, case["base_commit"], ctx.plan["excluded_paths"], folders.workspace
            )
        else:
            snap = _empty_workspace(folders.workspace)
    except UsageError as exc:
        facts.invalid_case = f"the case cannot be prepared: {exc}"
        return _finish(ctx, attempt_oid, facts, links)
    except (OSError, YybError) as exc:
        facts.environment = f"the attempt workspace could not be prepared: {exc}"
        return _finish(ctx, attempt_oid, facts, links)

    base = manifest.scan(store, folders.workspace)
    base_listing = store.objects.put_record(manifest.listing_record(base))
    model = attempt["model"]["resolved"]
    argv, envelope_path = adapters.invocation(
        ctx.harness,
        model,
        folders.workspace,
        folders.control,
        prompt,
        workflow,
        ctx.plan.get("workflow", {}).get("variables"),
        ctx.plan.get("workflow", {}).get("controlled_model_variable"),
    )
    env, policy = build(
        folders, ctx.plan["tool_policy"]["read_only_paths"], sorted(ctx.secrets), ctx.secrets
    )
    network = ctx.plan["tool_policy"]["network"] == "allowed"
    receipt = {
        "schema_version": RECEIPT,
        "base_commit": snap.base_commit,
        "snapshot_commit": snap.commit,
        "snapshot_tree": snap.tree,
        "excluded_paths": list(ctx.plan["excluded_paths"]),
        "excluded": snap.excluded,
        "file_count": snap.file_count,
        "sandbox": {
            "kind": "bubblewrap",
            "version": sandbox.version(),
            "network": "allowed" if network else "denied",
        },
        "environment": policy,
        "links": {"intent": intent_oid, "listing": base_listing},
    }
    links["receipt"] = store.objects.put_record(receipt)
    box = sandbox.Sandbox(
        writable=[folders.workspace, *folders.private()],
        masked=protected,
        read_only=ctx.plan["tool_policy"]["read_only_paths"],
        network=network,
        cwd=folders.workspace,
    )
    envelope.remove_stale(envelope_path)
    outcome = supervise.run(box.argv(argv), env, None, ctx.plan["timeout_ms"], ctx.cancel)
    facts.cancelled, facts.timed_out = outcome.cancelled, outcome.timed_out
    facts.cleanup_confirmed = outcome.cleanup_confirmed
    facts.exit_code, facts.signal = outcome.exit_code, outcome.signal
    links["stdout"] = store.objects.put("blob", redact(outcome.stdout.data, ctx.secrets))
    links["stderr"] = store.objects.put("blob", redact(outcome.stderr.data, ctx.secrets))
    value, problem = envelope.read(envelope_path, outcome.started_ms, outcome.ended_ms)
    observed = None
    if value is not None:
        value = envelope.redact_strings(value, lambda data: redact(data, ctx.secrets))
        observed = envelope.observed(value)
        if observed != model.lower():
            problem = f"the envelope observed {observed}, not the planned {model}"
        links["envelope"] = store.objects.put_record(value)
        facts.envelope_status = value["status"]
    else:
        try:
            raw = envelope.read_regular(envelope_path, envelope.MAX_ENVELOPE)
        except (envelope.NotRegular, OSError):
            raw = None
        if raw:
            links["envelope_raw"] = store.objects.put(
                "blob", redact(raw[: envelope.MAX_ENVELOPE], ctx.secrets)
            )
    facts.envelope_problem = problem

    final = manifest.scan(store, folders.workspace)
    final_listing = store.objects.put_record(manifest.listing_record(final))
    patch = manifest.diff(store, base.entries, final.entries)
    links["patch"] = store.objects.put("blob", patch)
    post = {
        "schema_version": manifest.MANIFEST,
        "git": manifest.git_state(folders.workspace),
        "file_count": len(final.entries),
        **manifest.changes(base.entries, final.entries),
        "omitted": final.omitted,
        "links": {"receipt": links["receipt"], "listing": final_listing, "patch": links["patch"]},
    }
    links["manifest"] = store.objects.put_record(post)
    links["listing"] = final_listing
    execution = _execution_record(ctx, attempt_oid, attempt, facts, links, outcome, value, observed)
    execution_oid = store.objects.put_record(execution)
    store.refs.update(
        attempt_ref(ctx.plan_oid, attempt_oid, "execution"),
        execution_oid,
        old=None,
        reason="execution retained",
    )
    return _conclude(ctx, attempt_oid, execution_oid, execution, "ran")


def _execution_record(ctx, attempt_oid, attempt, facts, links, outcome, value, observed) -> dict:
    """Everything the candidate's run proved, durable before any grading or terminal."""
    return {
        "schema_version": EXECUTION,
        "plan": ctx.plan_oid,
        "attempt": attempt_oid,
        "facts": {
            "cancelled": facts.cancelled,
            "timed_out": facts.timed_out,
            "cleanup_confirmed": facts.cleanup_confirmed,
            "exit_code": facts.exit_code,
            "signal": facts.signal,
            "envelope_problem": facts.envelope_problem,
            "envelope_status": facts.envelope_status,
        },
        "identity": {
            "requested": attempt["model"]["requested"],
            "resolved": attempt["model"]["resolved"],
            "observed": observed,
        },
        "runtime": {
            "wall_ms": outcome.wall_ms,
            "started_ms": outcome.started_ms,
            "ended_ms": outcome.ended_ms,
        },
        "outputs": {
            name: {"bytes": cap.total, "retained": len(cap.data), "truncated": cap.truncated}
            for name, cap in (("stdout", outcome.stdout), ("stderr", outcome.stderr))
        },
        "candidate_cost": _cost(value),
        "links": {
            "plan": ctx.plan_oid,
            "attempt": attempt_oid,
            **{k: v for k, v in links.items() if v},
        },
    }


def _conclude(ctx, attempt_oid: str, execution_oid: str, execution: dict, status: str) -> Result:
    """Grade (generation 1, reusing any already retained) and publish the terminal."""
    attempt = ctx.attempts[attempt_oid]
    facts = Facts(**execution["facts"])
    links = {k: v for k, v in execution["links"].items() if k not in ("plan", "attempt", "listing")}
    links["execution"] = execution_oid
    ran_cleanly = (
        not (facts.cancelled or facts.timed_out or facts.envelope_problem)
        and facts.cleanup_confirmed
        and facts.exit_code == 0
        and facts.envelope_status == "succeeded"
    )
    if ran_cleanly:
        case, prompt, _ = _inputs(ctx, attempt)
        listing = execution["links"]["listing"]
        truth = evaluate.Truth(
            links["manifest"],
            listing,
            links.get("patch"),
            links.get("stdout"),
            links.get("stderr"),
            prompt or b"",
        )
        identity = execution["identity"]
        identities = evaluate.identities(identity)
        _grade(ctx, attempt_oid, attempt, case, truth, identities, ctx.protected(), facts, links)
        facts.cancelled = ctx.cancel.is_set()  # stopped while grading: still in flight
    cls, reason = decide(facts)
    terminal = _terminal_record(ctx, attempt_oid, cls, reason, links, facts, execution)
    return _publish(ctx, attempt_oid, terminal, {"listing": execution["links"]["listing"]}, status)


def profiles_for(plan: dict, case: dict | None) -> list[str]:
    """The evaluators generation 1 runs for an attempt: the defaults and its case's grader."""
    wanted = set(plan["evaluators"].get("defaults", []))
    if case is not None:
        wanted.add(case["grader_profile"])
    return sorted(wanted & set(plan["evaluators"]["selected"]))


def _grade(ctx, attempt_oid, attempt, case, truth, identities, protected, facts, links) -> None:
    """Generation 1 of every selected evaluator; their conjunction decides the verdict."""
    histories, receipts = {}, []
    for profile in profiles_for(ctx.plan, case):
        retained = evaluate.history(ctx.store, ctx.plan_oid, attempt_oid, profile)
        if retained:  # graded before an interruption: reuse, never grade generation 1 twice
            receipts.append(retained[0][0])
            histories[profile] = [record for _, record in retained]
            continue
        oid, receipt = evaluate.evaluate(
            ctx.store,
            ctx.plan_oid,
            ctx.plan,
            attempt_oid,
            attempt,
            profile,
            truth,
            identities,
            protected,
            cancel=ctx.cancel,
            environ=ctx.environ,
        )
        receipts.append(oid)
        histories[profile] = [receipt]
    if not histories:
        facts.verdict, facts.verdict_reason = "pass", "no evaluator is selected for this attempt"
        return
    verdict, reason = evaluate.conclude(histories)
    facts.safety_failed = verdict == "safety"
    facts.verdict = "fail" if verdict == "safety" else verdict
    facts.verdict_reason = reason
    links["evaluations"] = receipts


def _empty_workspace(path: str) -> snapshot.Snapshot:
    import pygit2

    repo = pygit2.init_repository(path, bare=False, initial_head="main")
    snapshot._scrub(repo.path)
    return snapshot.Snapshot(path, "", "", "", 0, [])


def _finish(ctx, attempt_oid: str, facts: Facts, links: dict) -> Result:
    """Publish the terminal of an attempt that ended before its candidate ran."""
    cls, reason = decide(facts)
    return _publish(
        ctx, attempt_oid, _terminal_record(ctx, attempt_oid, cls, reason, links, facts), {}, "ran"
    )


def _cost(value: dict | None) -> dict:
    if value is None:
        return {"completeness": "unavailable", "currency": "USD", "micros": None}
    return dict(value["cost"])


def _terminal_record(
    ctx,
    attempt_oid: str,
    cls: str,
    reason: str,
    links: dict,
    facts: Facts,
    execution: dict | None = None,
) -> dict:
    attempt = ctx.attempts[attempt_oid]
    now = supervise.now_ms()
    if execution is None:
        execution = {
            "identity": {
                "requested": attempt["model"]["requested"],
                "resolved": attempt["model"]["resolved"],
                "observed": None,
            },
            "runtime": {"wall_ms": 0, "started_ms": now, "ended_ms": now},
            "outputs": {},
            "candidate_cost": _cost(None),
        }
    return {
        "schema_version": TERMINAL,
        "class": cls,
        "reason": reason,
        "plan": ctx.plan_oid,
        "attempt": attempt_oid,
        "ordinal": attempt["ordinal"],
        "identity": execution["identity"],
        "runtime": execution["runtime"],
        "exit": {
            "code": facts.exit_code,
            "signal": facts.signal,
            "timed_out": facts.timed_out,
            "cleanup_confirmed": facts.cleanup_confirmed,
        },
        "outputs": execution["outputs"],
        "candidate_cost": execution["candidate_cost"],
        "links": {
            "plan": ctx.plan_oid,
            "attempt": attempt_oid,
            **{k: v for k, v in links.items() if v},
        },
    }


def _publish(ctx, attempt_oid, terminal: dict, extra: dict, status: str) -> Result:
    store = ctx.store
    terminal_oid = store.objects.put_record(terminal)
    store.refs.update(
        attempt_ref(ctx.plan_oid, attempt_oid, "terminal"),
        terminal_oid,
        old=None,
        reason=f"terminal {terminal['class']}",
    )
    # Signed evidence (issue 8): sign the terminal when a signing key is configured.
    from yyb import signing

    signing.sign_if_configured(store, terminal_oid)
    _publish_evidence(ctx, attempt_oid, terminal_oid, terminal, extra.get("listing"))
    attempt = ctx.attempts[attempt_oid]
    result = _result(
        attempt_oid,
        attempt,
        terminal["class"],
        terminal["reason"],
        terminal_oid,
        status,
        terminal["runtime"]["wall_ms"],
    )
    if ctx.progress:
        ctx.progress(result)
    return result


def _publish_evidence(
    ctx, attempt_oid: str, terminal_oid: str, terminal: dict, listing: str | None
) -> str:
    evidence_links = {"terminal": terminal_oid}
    for key in ("manifest", "patch", "evaluations"):
        if terminal["links"].get(key):
            evidence_links[key] = terminal["links"][key]
    if listing:
        evidence_links["listing"] = listing
    evidence = {
        "schema_version": EVIDENCE,
        "plan": ctx.plan_oid,
        "attempt": attempt_oid,
        "class": terminal["class"],
        "links": evidence_links,
    }
    evidence_oid = ctx.store.objects.put_record(evidence)
    ctx.store.refs.update(
        attempt_ref(ctx.plan_oid, attempt_oid, "evidence"),
        evidence_oid,
        old=None,
        reason="attempt evidence",
    )
    return evidence_oid


def run_lock(plan_oid: str) -> str:
    return f"run-{plan_oid}"


def run_plan(ctx: RunContext, jobs: int = 1) -> list[Result]:
    """Run every attempt of the plan in plan order with at most ``jobs`` at once.

    One process at a time runs a plan (``locks/run-<plan>.lock``): a second one is refused
    at once rather than mistaking the first one's in-flight attempts for interrupted ones.

    Raises:
        LockHeld: another live process is running this plan.
    """
    order = sorted(ctx.attempts, key=lambda oid: ctx.attempts[oid]["ordinal"])
    with ctx.store.exclusive(run_lock(ctx.plan_oid)):
        if jobs <= 1:
            return [run_attempt(ctx, oid) for oid in order]
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            return list(pool.map(lambda oid: run_attempt(ctx, oid), order))


def recover(
    store,
    plan_oid: str,
    plan: dict,
    attempts: dict[str, dict],
    environ: dict[str, str] | None = None,
) -> list[Result]:
    """Reconcile every attempt of the plan without dispatching anything.

    A retained terminal is verified and reused; an intent without a terminal is closed as an
    indeterminate ``harness_failure``; an attempt never dispatched is left for ``yyb run``.

    Raises:
        LockHeld: a run of this plan is in progress.
    """
    ctx = RunContext(store, None, plan_oid, plan, attempts)
    ctx.environ = dict(environ or {})  # judges that finish an interrupted grading need secrets
    results = []
    with store.exclusive(run_lock(plan_oid)):
        for attempt_oid in sorted(attempts, key=lambda a: attempts[a]["ordinal"]):
            known = reconcile(ctx, attempt_oid)
            if known is None:
                attempt = attempts[attempt_oid]
                known = _result(
                    attempt_oid,
                    attempt,
                    "-",
                    "never dispatched; left for yyb run",
                    None,
                    "not dispatched",
                )
            results.append(known)
    return results
