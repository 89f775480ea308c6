"""Governed plans: model x attempt x selected step, bound to everything a run depends on.

The plan record (``yylo_benchmark_governed_plan.v1``) binds the workflow's and the policy's
bytes and parsed meaning, the variables, the selected steps in canonical order, the source
commit and tree of the tracked project, the versions, and the boundary's pin; it links one
compiled workflow per model and one step-attempt record per (model, attempt, step), in the
order a run takes them. Planning dispatches nothing.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
from dataclasses import dataclass

from yyb import __version__
from yyb.errors import InvalidArgument, UsageError
from yyb.evidence import names
from yyb.evidence.kinds.governed import (
    CompiledWorkflow,
    GovernedModel,
    GovernedPlan,
    GovernedPlanBoundary,
    GovernedPlanLinks,
    GovernedPlanPolicy,
    GovernedPlanSource,
    GovernedPlanVersions,
    GovernedPlanWorkflow,
    GovernedStep,
    GovernedStepLinks,
    GovernedStepPolicy,
)
from yyb.evidence.records import GOVERNED_PLAN
from yyb.plans import planfile
from yyb.store.objects.format import hash_object
from yyb.store.objects.store import record_body
from yyb.workflow import files
from yyb.workflow.config import GovernedConfig

MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._:@+/-]*$")


@dataclass(frozen=True)
class Plan:
    oid: str
    records: dict[str, dict]  # every record of the plan file, the plan's own included

    @property
    def value(self) -> dict:
        return self.records[self.oid]

    @property
    def attempts(self) -> list[str]:
        return self.value["links"]["attempts"]


def source(project: str, paths: list[str]) -> dict:
    """The project's HEAD commit and tree, every one of ``paths`` proved tracked there with
    the bytes it has on disk (UsageError otherwise)."""
    import pygit2

    try:
        repo = pygit2.Repository(project)
        head = repo.head.peel(pygit2.Commit)
    except (pygit2.GitError, KeyError) as exc:
        raise UsageError(
            f"the project {project} is not a Git repository with a commit ({exc})"
        ) from None
    top = os.path.realpath(repo.workdir)
    for path in paths:
        rel = os.path.relpath(os.path.realpath(path), top)
        if rel.startswith(".."):
            raise UsageError(f"{path} is not inside the project {top}")
        try:
            blob = head.tree[rel]
        except KeyError:
            raise UsageError(f"{path} is not tracked in the project's HEAD commit") from None
        with open(path, "rb") as handle:
            if handle.read() != blob.data:
                raise UsageError(f"{path} differs from the project's HEAD commit; commit it first")
    return {"commit": str(head.id), "tree": str(head.tree.id)}


@dataclass(frozen=True)
class Sources:
    """The workflow and policy files a plan binds, read and checked against the selection:
    their bytes and values, the policy's rule per step, and the selected steps in the
    workflow's order (``chosen``)."""

    workflow_path: str
    policy_path: str
    workflow_bytes: bytes
    workflow: dict
    policy_bytes: bytes
    policy: dict
    rules: dict
    chosen: list[str]

    def bound(self, project: str) -> tuple[GovernedPlanWorkflow, GovernedPlanPolicy]:
        """What the plan binds of both files: path in ``project``, bytes and meaning."""
        top = os.path.realpath(project)
        workflow = GovernedPlanWorkflow(
            path=os.path.relpath(os.path.realpath(self.workflow_path), top),
            name=self.workflow["name"],
            sha256=hashlib.sha256(self.workflow_bytes).hexdigest(),
            meaning=files.meaning(self.workflow),
        )
        policy = GovernedPlanPolicy(
            path=os.path.relpath(os.path.realpath(self.policy_path), top),
            sha256=hashlib.sha256(self.policy_bytes).hexdigest(),
            meaning=files.meaning(self.policy),
        )
        return workflow, policy


def read_sources(workflow_path: str, policy_path: str, selected: list[str]) -> Sources:
    """Read the workflow and the policy, and check that each selected step is in both and is
    an agent dispatch.

    Raises:
        WorkflowFileError: a file is not a workflow or a policy.
        InvalidArgument: ``selected`` is empty or names a step twice.
        UsageError: a selected step is missing from either file, or dispatches no agent.
    """
    workflow_bytes, workflow = files.read(workflow_path)
    policy_bytes, policy = files.read(policy_path)
    steps = files.workflow_steps(workflow_path, workflow)
    order = [s["id"] for s in steps]
    rules = files.policy_steps(policy_path, policy, order)
    if not selected or len(set(selected)) != len(selected):
        raise InvalidArgument("selected", "must name each step once", selected)
    by_id = {s["id"]: s for s in steps}
    for step in selected:
        if step not in by_id:
            raise UsageError(f"step {step!r} is not in {workflow_path}")
        if step not in rules:
            raise UsageError(f"step {step!r} has no entry in the policy {policy_path}")
        if not files.is_agent_dispatch(by_id[step]["run"]):
            raise UsageError(f"step {step!r} is not an agent dispatch (yy pi): no model to swap")
    chosen = [s for s in order if s in selected]  # canonical order
    return Sources(
        workflow_path, policy_path, workflow_bytes, workflow, policy_bytes, policy, rules, chosen
    )


def build(
    cfg: GovernedConfig,
    workflow_path: str,
    policy_path: str,
    selected: list[str],
    models: list[str],
    attempts: int,
    variables: dict,
) -> Plan:
    """The plan (UsageError naming the first thing that keeps one from being made)."""
    if attempts < 1:
        raise InvalidArgument("attempts", "must be at least 1", attempts)
    if not models or len(set(models)) != len(models):
        raise InvalidArgument("models", "must name each model once", models)
    for model in models:
        if not MODEL.match(model):
            raise UsageError(f"model {model!r} is not provider/model")
    sources = read_sources(workflow_path, policy_path, selected)
    judges = _judges(cfg, sources)
    tree = source(cfg.project, [workflow_path, policy_path])
    made = _Records()
    compiled = {model: made.put(_compiled(sources, model).to_value()) for model in models}
    attempt_oids = [
        made.put(v.to_value()) for v in _step_attempts(sources, models, attempts, compiled)
    ]
    workflow, policy = sources.bound(cfg.project)
    plan = GovernedPlan(
        versions=GovernedPlanVersions(
            yyb=__version__, yylo=cfg.yylo_version, python=platform.python_version()
        ),
        workflow=workflow,
        policy=policy,
        variables=variables,
        steps=tuple(sources.chosen),
        models=tuple({"requested": m, "resolved": m} for m in models),
        attempts_per_cell=attempts,
        attempt_count=len(attempt_oids),
        source=GovernedPlanSource(**tree),
        boundary=GovernedPlanBoundary(**cfg.boundary.pin()),
        judges=judges,
        dispatch_count=0,
        links=GovernedPlanLinks(
            attempts=tuple(attempt_oids), workflows=tuple(compiled[m] for m in models)
        ),
    )
    oid = made.put(plan.to_value())
    return Plan(oid, made.records)


class _Records:
    """The records of a plan being made, by oid, in the order they were made."""

    def __init__(self) -> None:
        self.records: dict[str, dict] = {}

    def put(self, value: dict) -> str:
        oid = hash_object("record", record_body(value))
        self.records[oid] = value
        return oid


def _judges(cfg: GovernedConfig, sources: Sources) -> dict:
    """The configuration's judge of each judge profile the chosen steps' rules name."""
    judges = {}
    for step in sources.chosen:
        profile = sources.rules[step]["judge"]
        if profile is not None:
            if profile not in cfg.judges:
                raise UsageError(
                    f"step {step!r} is judged by {profile!r}, which the configuration's "
                    "judges do not define"
                )
            judges[profile] = cfg.judges[profile]
    return judges


def _compiled(sources: Sources, model: str) -> CompiledWorkflow:
    """The compiled workflow record of ``model``: the workflow with its agent steps swapped."""
    value = files.compile_for(sources.workflow, sources.chosen, model)
    return CompiledWorkflow(
        model=model, sha256=hashlib.sha256(files.canonical(value)).hexdigest(), workflow=value
    )


def _step_attempts(
    sources: Sources, models: list[str], attempts: int, compiled: dict
) -> list[GovernedStep]:
    """One step-attempt record per (model, attempt, chosen step), in the order a run takes
    them, each linking its model's compiled workflow."""
    found: list[GovernedStep] = []
    for model in models:
        for attempt in range(1, attempts + 1):
            for step in sources.chosen:
                rule = sources.rules[step]
                found.append(
                    GovernedStep(
                        ordinal=len(found),
                        step=step,
                        model=GovernedModel(requested=model, resolved=model),
                        attempt=attempt,
                        policy=GovernedStepPolicy(
                            retry_safe=rule["retry_safe"],
                            recovery_budget=rule["recovery_budget"],
                            resources=tuple(rule["resources"]),
                            judge=rule["judge"],
                        ),
                        links=GovernedStepLinks(workflow=compiled[model]),
                    )
                )
    return found


def write(store, plan: Plan) -> None:
    """Store every record of ``plan`` and point ``refs/governed/<plan>/plan`` at it."""
    for value in plan.records.values():
        store.objects.put_record(value)
    ref = names.governed_plan(plan.oid)
    if store.refs.read(ref) != plan.oid:
        store.refs.update(ref, plan.oid, old=None, reason="governed plan")


def load(name: str, open_store) -> Plan:
    """A governed plan from a plan file, else from the store (oid, abbreviation or ref)."""
    if os.path.exists(name):
        oid, records = planfile.load(name, GOVERNED_PLAN)
    else:
        store = open_store()
        oid = store.rev_parse(name)
        records = {oid: store.objects.get_record(oid)}
        if GovernedPlan.holds(records[oid]):
            # The store validated the plan when it was written: its links are there to follow.
            links = GovernedPlan.from_stored(records[oid]).links
            for linked in links.attempts + links.workflows:
                records[linked] = store.objects.get_record(linked)
    value = records[oid]
    if not GovernedPlan.holds(value):
        raise UsageError(f"{name} is not a governed plan ({GOVERNED_PLAN})")
    for linked in value["links"]["workflows"]:
        if linked not in records:
            raise UsageError(f"{name}: the plan links {linked}, which it does not hold")
    return Plan(oid, records)


def check_current(cfg: GovernedConfig, plan: Plan, policy_path: str) -> None:
    """Refuse (UsageError) to run ``plan`` where it no longer describes what would run: the
    policy given is not the planned one, the tracked project moved, or the boundary pinned
    in the configuration is not the planned one."""
    value = plan.value
    data = files.read(policy_path)[0]
    if hashlib.sha256(data).hexdigest() != value["policy"]["sha256"]:
        raise UsageError(f"{policy_path} is not the policy the plan binds")
    workflow_path = os.path.join(cfg.project, value["workflow"]["path"])
    now = source(cfg.project, [workflow_path, policy_path])
    if now["tree"] != value["source"]["tree"]:
        raise UsageError(
            f"the project's tree is {now['tree']}, not the planned {value['source']['tree']}"
        )
    if cfg.boundary.pin() != value["boundary"]:
        raise UsageError("the configuration pins another boundary than the plan")
