"""Blinded judgements of governed step attempts, as appended generations.

A step whose policy names a judge profile gets a judgement once its terminal exists: the
isolated lane's LLM judge (yyb/grading/judge.py: payload, blinding and privacy check, strict
parsing, repetitions) on a payload built from the step attempt's retained evidence only (the
workflow and step, the step's command with the model selector masked, its exit status, its
envelope's status and, when the profile selects ``outputs``, what the step printed). Each
judgement is a ``yylo_benchmark_governed_judgement.v1`` record under
``refs/governed/<plan>/<step attempt>/judgements/<profile>``; ``workflow rejudge`` appends the
next generation, linking the one before, and never dispatches a step.
"""

from __future__ import annotations

import json
import os

from yyb.evidence import names
from yyb.evidence.kinds.governed import (
    GovernedJudgement,
    GovernedJudgementLinks,
    GovernedTerminal,
)
from yyb.evidence.record import ABSENT
from yyb.grading import judge
from yyb.grading.invocation import Invocation
from yyb.workflow.plan import Plan

MASK = "<model>"


def profile_of(step: dict) -> str | None:
    return step["policy"].get("judge")


def payload_task(plan: Plan, step: dict, terminal: GovernedTerminal) -> bytes:
    """The '# Task' part of the judged payload: what the step was and how it ended, without
    the model selector anywhere."""
    workflow = plan.records[step["links"]["workflow"]]["workflow"]
    run = next(s["run"] for s in workflow["steps"] if s["id"] == step["step"])
    selector = step["model"]["resolved"]
    shown = [MASK if arg == selector else arg for arg in run]
    lines = [
        f"Workflow: {workflow['name']}",
        f"Step: {step['step']}",
        f"Command: {json.dumps(shown)}",
        f"Exit status: {terminal.exit_code}",
        f"Outcome recorded: {terminal.class_}",
    ]
    return ("\n".join(lines) + "\n").encode()


def protected_roots(store, cfg) -> list[str]:
    """What a judge's sandbox never shows: the store, the lock store, the boundary's journal
    and program, the project and the configuration's folder."""
    return sorted(
        {
            os.path.realpath(p)
            for p in (
                store.path,
                cfg.lock_store,
                cfg.boundary.journal,
                cfg.boundary.executable,
                cfg.project,
                os.path.dirname(cfg.path),
            )
        }
    )


def judge_step(
    store, cfg, plan: Plan, attempt_oid: str, profile: str, environ=None
) -> GovernedJudgement:
    """Judge the step attempt's retained terminal with ``profile`` as its next generation;
    return the judgement record (stored, its ref moved)."""
    step = plan.records[attempt_oid]
    terminal_oid = store.refs.read(names.governed_step(plan.oid, attempt_oid, "terminal"))
    terminal = GovernedTerminal.read(store.objects, terminal_oid)
    spec = dict(plan.value["judges"][profile])
    harness = spec.pop("harness")
    spec.setdefault("evidence", ["outputs"])
    truth = {}
    if "outputs" in spec["evidence"] and terminal.links.output:
        truth["stdout"] = terminal.links.output
    identities = [step["model"]["requested"], step["model"]["resolved"], terminal.observed or ""]
    protected = [r for r in protected_roots(store, cfg) if not _shows(cfg.tool_paths, r)]
    call = Invocation(spec, protected, list(cfg.tool_paths), harness=harness)
    outcome = judge.run(store, call, truth, payload_task(plan, step, terminal), identities)
    ref = names.governed_judgement(plan.oid, attempt_oid, profile)
    previous = store.refs.read(ref)
    generation = 1 + (GovernedJudgement.read(store.objects, previous).generation if previous else 0)
    links = GovernedJudgementLinks(
        plan=plan.oid,
        attempt=attempt_oid,
        terminal=terminal_oid,
        input=store.objects.put("blob", outcome.input_bytes),
        output=ABSENT
        if outcome.output_bytes is None
        else store.objects.put("blob", outcome.output_bytes),
        previous=ABSENT if previous is None else previous,
    )
    record = GovernedJudgement(
        plan=plan.oid,
        attempt=attempt_oid,
        step=step["step"],
        profile=profile,
        generation=generation,
        verdict=outcome.verdict,
        reason=outcome.reason,
        judge_model=spec["model"],
        judge_cost=outcome.judge_cost,
        wall_ms=outcome.wall_ms,
        links=links,
    )
    oid = store.objects.put_record(record.to_value())
    store.refs.update(ref, oid, old=previous, reason=f"judgement {generation}")
    return record


def _shows(tool_paths, root: str) -> bool:
    """Whether a configured tool path lies inside ``root`` (then ``root`` cannot be hidden
    whole: the judge's programs are in it; the sandbox shows only the tool path)."""
    return any(os.path.realpath(p).startswith(root.rstrip("/") + "/") for p in tool_paths)


def newest(store, plan: Plan, attempt_oid: str, profile: str) -> GovernedJudgement | None:
    """The newest judgement generation of ``profile`` for the step attempt (None: unjudged)."""
    oid = store.refs.read(names.governed_judgement(plan.oid, attempt_oid, profile))
    return GovernedJudgement.read(store.objects, oid) if oid else None


def rejudge(store, cfg, plan: Plan, profile: str) -> list[dict]:
    """The next judgement generation of ``profile`` for every step attempt that its policy
    judges with it and that has a terminal. Dispatches no step."""
    if profile not in plan.value["judges"]:
        from yyb.errors import UsageError

        raise UsageError(f"the plan has no judge profile {profile!r}")
    done = []
    for attempt_oid in plan.attempts:
        step = plan.records[attempt_oid]
        if profile_of(step) != profile:
            continue
        if store.refs.read(names.governed_step(plan.oid, attempt_oid, "terminal")) is None:
            continue
        done.append(judge_step(store, cfg, plan, attempt_oid, profile).to_value())
    return done
