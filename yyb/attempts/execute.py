"""Execute: the workspace, the sandboxed candidate, and the execution record it proves.

Everything the candidate's run proved is retained and its execution ref created before any
grading or terminal, so a crash after this point loses no candidate work: recovery concludes
from the execution record instead of dispatching again.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

from yyb.attempts import candidate, metering
from yyb.attempts.dispatch import inputs
from yyb.errors import UsageError, YybError
from yyb.evidence import cost, environment, identity
from yyb.evidence import plan as planned
from yyb.evidence.kinds.attempt import (
    CandidateCost,
    Execution,
    ExecutionFacts,
    ExecutionLinks,
    Identity,
    Runtime,
    WorkspaceReceipt,
    WorkspaceReceiptEnvironment,
    WorkspaceReceiptExecutor,
    WorkspaceReceiptLinks,
    WorkspaceReceiptSandbox,
)
from yyb.evidence.kinds.harness import PostExecutionManifest, PostExecutionManifestLinks
from yyb.evidence.terminal import Facts
from yyb.grading import evaluate
from yyb.harness import (
    adapters,
    disk,
    envelope,
    gitstate,
    limits,
    manifest,
    patch,
    sandbox,
    snapshot,
)
from yyb.harness.environment import Folders, build
from yyb.harness.redaction import Redactor
from yyb.store import schema

# The environment variable that tells the harness the attempt's spend ceiling (docs/attempts.md).
CEILING_ENV = "YYB_MAX_COST_MICROS"


@dataclass
class Early:
    """An attempt that ended before its candidate ran: the facts that decide its terminal."""

    facts: Facts
    links: dict = field(default_factory=dict)


def unprepared(exc: Exception, intent_oid: str, what: str) -> Early:
    """The ``Early`` of an attempt whose case or workspace could not be prepared: the case's
    fault for a ``UsageError`` (its repository or base commit is missing: invalid_case),
    else the machine's (``what`` failed: environment)."""
    if isinstance(exc, UsageError):
        return Early(
            Facts(invalid_case=f"the case cannot be prepared: {exc}"), {"intent": intent_oid}
        )
    return Early(Facts(environment=f"{what}: {exc}"), {"intent": intent_oid})


def confinement(plan: dict) -> tuple[bool, dict]:
    """What the plan's tool policy gives its candidates' sandbox: whether the network is
    allowed, and the resource limits in force (a controller holds a worker's receipt to it)."""
    policy = plan["tool_policy"]
    return policy["network"] == "allowed", limits.resolve(policy.get("limits"))


def execute(
    ctx, attempt_oid: str, intent_oid: str, folders: Folders, shipped=None, retain: bool = True
) -> Early | tuple[str, Execution]:
    """Prepare the workspace on the attempt's disk, run the candidate in the sandbox, retain
    what it left.

    Returns the execution record's (oid, record), its ref created unless not ``retain`` (a
    worker's, whose controller creates it); or ``Early`` when the workspace could not be
    prepared. ``shipped`` (``snapshot.Shipped``): the base as a controller shipped it, made
    into the snapshot here instead of from a configured repository.
    """
    _, bounds = confinement(ctx.plan)
    try:
        os.makedirs(folders.root, exist_ok=True)
        held = disk.Disk.mount(folders.root, bounds["disk_mib"])
    except (OSError, YybError) as exc:
        return unprepared(exc, intent_oid, "the attempt's disk could not be mounted")
    with held:
        # The controller reaches the folders on the disk through the holder; the candidate
        # sees them at their own paths.
        mine = Folders(held.reach(folders.root))
        snap = _prepare(ctx, ctx.attempts[attempt_oid], mine, shipped)
        if not isinstance(snap, snapshot.Snapshot):
            return unprepared(snap, intent_oid, "the attempt workspace could not be prepared")
        try:  # checked before the run's first dispatch; a worker's checks its own copy here
            ctx.environment(inputs(ctx, ctx.attempts[attempt_oid])[0])
        except (OSError, YybError) as exc:
            return unprepared(exc, intent_oid, "the case's environment cannot be used")
        executed = _run(ctx, attempt_oid, intent_oid, folders, mine, held, snap, bounds)
    if ctx.keep_workspaces:
        _keep(ctx.store, executed[1].links.listing, folders.workspace)
    if retain:
        ctx.store.refs.update(
            ctx.ref(attempt_oid, "execution"), executed[0], old=None, reason="execution retained"
        )
    return executed


def _keep(store, listing_oid: str, dest: str) -> None:
    """Rebuild the final workspace's files at ``dest`` on the host, from its retained listing
    (what the attempt's disk held went with it): an aid to a person, so a refusal leaves it."""
    try:
        manifest.rebuild(store, store.objects.get_record(listing_oid), dest)
    except (OSError, YybError):
        pass


def _prepare(ctx, attempt: dict, folders: Folders, shipped) -> snapshot.Snapshot | Exception:
    """The attempt's private folders and its workspace at the case's base (or an empty one);
    the error when that failed."""
    case, _, _ = inputs(ctx, attempt)
    try:
        folders.create()
        if case is not None and shipped is not None:
            return snapshot.create_shipped(shipped, folders.workspace)
        if case is not None:
            repo = ctx.config.repository_path(case["repository"])
            if repo is None:
                raise UsageError(f"repository {case['repository']!r} is not configured")
            return snapshot.create(
                repo, case["base_commit"], ctx.plan["excluded_paths"], folders.workspace
            )
        return snapshot.empty(folders.workspace)
    except (OSError, YybError) as exc:
        return exc


def _run(ctx, attempt_oid, intent_oid, folders, mine, held, snap, bounds) -> tuple[str, Execution]:
    """Run the candidate on its prepared workspace and retain what it proved: ``folders`` as
    the candidate sees them, ``mine`` the same as the controller reaches them on the disk
    ``held``. Returns the execution record's (oid, record)."""
    store, attempt = ctx.store, ctx.attempts[attempt_oid]
    _, prompt, workflow = inputs(ctx, attempt)
    links = {"intent": intent_oid}
    admission = None
    if ctx.gateway is not None:
        admission = metering.admit(ctx.gateway, ctx.journal, ctx.plan, attempt_oid, attempt)
    redactor = Redactor({**ctx.secrets, **(admission.secrets if admission else {})})
    base = manifest.scan(store, mine.workspace, redactor, known=snap.known)
    base_listing = store.objects.put_record(manifest.listing_record(base))
    channel = envelope.channel()
    case, _, _ = inputs(ctx, attempt)
    ready = ctx.environment(case)
    shown = ready.workspace if ready is not None else folders.workspace
    try:
        argv, extra, helper = _invocation(
            ctx, attempt, (shown, folders, mine), channel, prompt, workflow
        )
        env, policy = _environment(ctx, attempt, folders, (channel, helper, extra), ready)
        if admission is not None:  # last: the gateway's URL and token stand over any other
            env.update(admission.variables)
        policy["variables"] = sorted(env)
        network, _ = confinement(ctx.plan)  # the limits are bounds, resolved above
        receipt = _receipt(ctx, snap, network, bounds, policy, intent_oid, base_listing)
        if ready is not None:
            pin = environment.identity_of(ready)
            receipt = dataclasses.replace(receipt, built_environment=pin)
        links["receipt"] = store.objects.put_record(receipt.to_value())
        box = sandbox.Sandbox(
            writable=[folders.workspace, *folders.private()],
            hidden=ctx.protected(),
            read_only=ctx.tools(),
            network=network,
            cwd=folders.workspace,
            limits=bounds,
            disk=held,
            gateway=admission.port if admission is not None else None,
        )
        if ready is not None:
            box = ready.place(box, folders.workspace)
        box = candidate.sealed(box, adapters.Places(shown, folders.control, "", mine.control))
        if ctx.grades:  # the evaluators' pristine bases are built while the candidate runs
            evaluate.warm_workspaces(store, ctx.plan, case, base_listing)
        outcome, resources = box.run(
            argv, env, ctx.plan["timeout_ms"], ctx.cancel, mine.root, pass_fds=(channel.fd,)
        )
    finally:
        written = channel.collect()
        meter = ctx.gateway.retire(admission.token) if admission is not None else None
    hit = (
        limits.hit_by(outcome.signal, outcome.exit_code, bounds),
        limits.stopped_by(resources, bounds),
    )
    facts = Facts(
        cancelled=outcome.cancelled,
        timed_out=outcome.timed_out,
        cleanup_confirmed=outcome.cleanup_confirmed,
        exit_code=outcome.exit_code,
        signal=outcome.signal,
        limit="; ".join(filter(None, hit)) or None,
    )
    links["stdout"] = store.objects.put("blob", redactor.redact(outcome.stdout.data))
    links["stderr"] = store.objects.put("blob", redactor.redact(outcome.stderr.data))
    metered = None
    value, observed = _envelope(
        ctx, written, outcome, attempt["model"], facts, links, redactor, meter is not None
    )
    if meter is not None:  # the gateway's observations stand for identity and cost
        meter_oid = ctx.journal.settle(attempt_oid, meter)
        metered = metering.observe(meter, meter_oid, attempt["model"], value)
        links["gateway"], observed = metered.meter_oid, metered.observed
        if metered.problem is not None and facts.envelope_problem is None:
            facts.envelope_problem = metered.problem
    scratch_paths = ctx.plan.get("scratch_paths", ())
    _retain_final(store, mine.workspace, base, links, redactor, scratch_paths)
    ran = (outcome, resources)
    execution = _record(ctx, attempt_oid, facts, links, ran, (value, observed, metered))
    return store.objects.put_record(execution.to_value()), execution


def _environment(ctx, attempt, folders, control, ready) -> tuple[dict, dict]:
    """The candidate's variables and the policy that made them (docs/attempts.md): its
    secrets and fixed variables, the envelope channel, the helper's folder last on its PATH,
    its settings file, its environment's variables and its spend ceiling; ``control`` is
    (the envelope channel, the helper's folder, the placeholders its files fill)."""
    channel, helper, extra = control
    read_only = ctx.plan["tool_policy"]["read_only_paths"]
    fixed = ctx.harness.get("env")
    env, policy = build(folders, read_only, sorted(ctx.secrets), ctx.secrets, fixed)
    env[envelope.FD_ENV] = str(channel.fd)
    env["PATH"] += os.pathsep + helper  # last: it shadows nothing
    policy["path"] = [*policy["path"], helper]
    if "settings_file" in extra:
        env[candidate.SETTINGS_ENV] = extra["settings_file"]
    if ready is not None:
        env.update(ready.view().variables)
    ceiling = planned.ceiling(attempt)
    if ceiling is not None:
        env[CEILING_ENV] = str(ceiling)
    return env, policy


def _invocation(ctx, attempt, where, channel, prompt, workflow) -> tuple[list[str], dict, str]:
    """The candidate's argv, its control files and HOME written (yyb/attempts/candidate.py):
    (argv, the placeholders its files fill, the envelope helper's folder); ``where``: (the
    workspace as the candidate sees it, the folders as it sees them, the same as the
    controller reaches them)."""
    shown, folders, mine = where
    harness, workflow_plan = ctx.harness, ctx.plan.get("workflow", {})
    places = adapters.Places(shown, folders.control, channel.path, mine.control)
    extra = candidate.settings_file(harness, places)
    candidate.write_home(ctx.store, ctx.plan, mine.home)
    helper = candidate.write_helper(places)
    program = None
    if "harness_program" in ctx.plan["links"]:

        def program(values):
            return candidate.agent_argv(ctx.store, ctx.plan, attempt, places, values)

    argv = adapters.invocation(
        harness,
        attempt["model"]["resolved"],
        places,
        candidate.prompt_of(harness, prompt),
        adapters.Workflow(
            workflow,
            workflow_plan.get("variables"),
            workflow_plan.get("controlled_model_variable"),
        ),
        extra=extra,
        program=program,
    )
    return argv, extra, helper


def _receipt(
    ctx, snap, network: bool, bounds, policy, intent_oid, base_listing
) -> WorkspaceReceipt:
    return WorkspaceReceipt(
        base_commit=snap.base_commit,
        snapshot_commit=snap.commit,
        snapshot_tree=snap.tree,
        excluded_paths=tuple(ctx.plan["excluded_paths"]),
        excluded=tuple(snap.excluded),
        file_count=snap.file_count,
        sandbox=WorkspaceReceiptSandbox(
            kind="bubblewrap",
            version=sandbox.version(),
            network="allowed" if network else "denied",
            limits=bounds,
            verified=tuple(ctx.sandbox_verified),
        ),
        executor=WorkspaceReceiptExecutor(**ctx.executor),
        environment=WorkspaceReceiptEnvironment(
            **{name: tuple(values) for name, values in policy.items()}
        ),
        links=WorkspaceReceiptLinks(intent=intent_oid, listing=base_listing),
        **(
            {"scratch_paths": tuple(ctx.plan["scratch_paths"])}
            if "scratch_paths" in ctx.plan
            else {}
        ),
    )


def _retain_final(store, workspace: str, base, links: dict, redactor, scratch_paths) -> None:
    """Retain the final workspace (its listing, the patch from the base, its Git state) and
    the post-execution manifest, linked from ``links``; the files the candidate added under
    ``scratch_paths`` are set aside in a listing of their own, out of the graded listing and
    the patch."""
    final = manifest.scan(store, workspace, redactor)
    scratch = manifest.set_aside(final, base.entries, scratch_paths)
    final_listing = store.objects.put_record(manifest.listing_record(final))
    links["patch"] = store.objects.put("blob", patch.diff(store, base.entries, final.entries))
    changes = manifest.changes(base.entries, final.entries)
    kept = {}
    if scratch.entries:
        kept["scratch"] = tuple(sorted(scratch.entries, key=str.encode))
        scratch_oid = store.objects.put_record(manifest.listing_record(scratch))
    post = PostExecutionManifest(
        git=redactor.value(gitstate.read(workspace)),
        file_count=len(final.entries),
        added=tuple(changes["added"]),
        changed=tuple(changes["changed"]),
        deleted=tuple(changes["deleted"]),
        omitted=tuple(final.omitted),
        links=PostExecutionManifestLinks(
            receipt=links["receipt"],
            listing=final_listing,
            patch=links["patch"],
            **({"scratch": scratch_oid} if kept else {}),
        ),
        **kept,
    )
    links["manifest"] = store.objects.put_record(post.to_value())
    links["listing"] = final_listing


def _envelope(
    ctx, written: bytes | None, outcome, model: dict, facts: Facts, links, redactor, metered=False
):
    """Read and retain what the harness wrote to its envelope channel: (the envelope's value,
    the observed identity), both None unless the envelope was accepted: its identity is the
    planned ``model``'s, or one the plan accepts for it. With a ``metered`` attempt, what it
    claims of its identity is only a claim (the gateway observes it): it is not checked here.

    Every key and value is redacted; an envelope that its schema refuses once redacted (a
    secret in a field of bounded length) is unusable, and so is retained as raw bytes only.
    One that names another model is retained as the record of what it claimed, but nothing
    it says (identity, status, cost, usage) is evidence: the caller gets None for it.
    """
    store = ctx.store
    value, problem = envelope.read(written, outcome.started_ms, outcome.ended_ms)
    observed = None
    if value is not None and redactor.holds(value):
        value = redactor.value(value)
        if schema.problem(value, envelope.ENVELOPE) is not None:
            value = None
            problem = "the execution envelope holds a configured secret where it cannot be redacted"
    if value is not None:
        links["envelope"] = store.objects.put_record(value)
        claimed = envelope.observed(value)
        if metered:
            facts.envelope_status = value["status"]
        elif not identity.accepts(model["resolved"], model.get("accept", ()), claimed):
            problem = f"the envelope observed {claimed}, not the planned {model['resolved']}"
            if model.get("accept"):
                problem += " or an id the plan accepts for it"
            value = None
        else:
            observed, facts.envelope_status = claimed, value["status"]
    elif written:
        retained = redactor.redact(written[: envelope.MAX_ENVELOPE])
        if _escaped_secret(retained, redactor):
            problem += " (its bytes are not retained: they hold a configured secret, escaped)"
        else:
            links["envelope_raw"] = store.objects.put("blob", retained)
    facts.envelope_problem = redactor.text(problem) if problem else problem
    return value, observed


def _escaped_secret(data: bytes, redactor) -> bool:
    """Whether JSON bytes still hold a secret once their strings are decoded (``\\u`` escapes
    can spell a secret that no byte-level search finds)."""
    import json

    try:
        return redactor.holds(json.loads(data))
    except ValueError:
        return False


FACT_FIELDS = (
    "cancelled",
    "timed_out",
    "cleanup_confirmed",
    "exit_code",
    "signal",
    "envelope_problem",
    "envelope_status",
    "limit",
)


def _record(ctx, attempt_oid, facts, links, ran, seen) -> Execution:
    """Everything the candidate's run proved, durable before any grading or terminal: ``ran``
    is the sandbox's (outcome, resources), ``seen`` (the envelope's value, the observed
    identity, the gateway's ``metering.Observation`` or None)."""
    outcome, resources = ran
    value, observed, metered = seen
    spent = CandidateCost(**cost.reported(value)) if metered is None else metered.cost
    model = ctx.attempts[attempt_oid]["model"]
    return Execution(
        plan=ctx.plan_oid,
        attempt=attempt_oid,
        facts=ExecutionFacts(**{name: getattr(facts, name) for name in FACT_FIELDS}),
        identity=Identity(
            requested=model["requested"], resolved=model["resolved"], observed=observed
        ),
        runtime=Runtime(
            wall_ms=outcome.wall_ms,
            started_ms=outcome.started_ms,
            ended_ms=outcome.ended_ms,
            resources=resources,
        ),
        outputs={
            name: {"bytes": cap.total, "retained": len(cap.data), "truncated": cap.truncated}
            for name, cap in (("stdout", outcome.stdout), ("stderr", outcome.stderr))
        },
        candidate_cost=spent,
        links=ExecutionLinks(
            plan=ctx.plan_oid, attempt=attempt_oid, **{k: v for k, v in links.items() if v}
        ),
        **({"metered": metered.metered} if metered is not None else {}),
    )
