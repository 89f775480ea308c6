"""Workflow and policy files of the governed lane, and a workflow compiled for one model.

A **workflow** (YAML or JSON, tracked in the project) is ``{"name": str, "steps": [{"id":
str, "run": [str, ...]}, ...]}``; the order of ``steps`` is the canonical step order. A
step's ``run`` is an **agent dispatch** when it starts ``yy pi``: only there is a model put in.

A **policy** (the steps file, reviewed beside the workflow) says for each step that may be
benchmarked: ``retry_safe`` (may it run again after an interruption that the boundary proves
harmless), ``recovery_budget`` (how many such re-runs, default 1), ``resources`` (the
production resources it touches, each ``{"type": ..., "name": ...}``), and ``judge`` (the
profile of the blinded judge of each of its step attempts, from the configuration's judges).

Compiling for a model puts ``--model <selector>`` right after ``yy pi`` in every selected
step (replacing any ``--model`` there) and changes nothing else; the compiled workflow is
the canonical JSON of the result, the bytes the boundary gets.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

import yaml

from yyb.errors import UsageError
from yyb.store import file
from yyb.store.objects import codec
from yyb.workflow import locks

STEP_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
POLICY_FIELDS = {"retry_safe", "recovery_budget", "resources", "judge"}


class WorkflowFileError(UsageError):
    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.reason = reason


def read(path: str) -> tuple[bytes, dict]:
    """(the file's bytes, its parsed value) of a workflow or policy file."""
    data = file.read_input(path)
    try:
        value = yaml.safe_load(data.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise WorkflowFileError(path, f"not YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(value, dict):
        raise WorkflowFileError(path, "not a mapping")
    try:  # JSON values only: no dates, floats or other YAML types
        codec.from_json(json.dumps(value))
    except Exception as exc:  # noqa: BLE001 - any value a record cannot hold
        raise WorkflowFileError(path, f"holds a value a record cannot ({exc})") from None
    return data, value


def meaning(value: dict) -> str:
    """The SHA-256 of a parsed file's canonical JSON: equal for equal meaning."""
    return hashlib.sha256(canonical(value)).hexdigest()


def canonical(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def workflow_steps(path: str, value: dict) -> list[dict]:
    """The workflow's steps, in canonical order, each checked."""
    if not isinstance(value.get("name"), str) or not value["name"]:
        raise WorkflowFileError(path, "the workflow has no name")
    steps = value.get("steps")
    if not isinstance(steps, list) or not steps:
        raise WorkflowFileError(path, "the workflow has no steps")
    seen = set()
    for number, step in enumerate(steps):
        if not isinstance(step, dict) or not isinstance(step.get("id"), str):
            raise WorkflowFileError(path, f"step {number} has no id")
        if not STEP_ID.match(step["id"]):
            raise WorkflowFileError(path, f"step id {step['id']!r} is not a plain name")
        if step["id"] in seen:
            raise WorkflowFileError(path, f"step {step['id']!r} appears twice")
        seen.add(step["id"])
        run = step.get("run")
        if not isinstance(run, list) or not run or not all(isinstance(a, str) for a in run):
            raise WorkflowFileError(path, f"step {step['id']!r}: run must be a list of strings")
    return steps


def is_agent_dispatch(run: list[str]) -> bool:
    return len(run) >= 2 and os.path.basename(run[0]) == "yy" and run[1] == "pi"


def policy_steps(path: str, value: dict, workflow_ids: list[str]) -> dict[str, dict]:
    """step id -> {retry_safe, recovery_budget, resources}, every entry checked."""
    steps = value.get("steps")
    if not isinstance(steps, dict) or not steps:
        raise WorkflowFileError(path, "the policy has no steps")
    out = {}
    for step_id, entry in steps.items():
        if step_id not in workflow_ids:
            raise WorkflowFileError(path, f"the policy names step {step_id!r}, not in the workflow")
        if not isinstance(entry, dict) or set(entry) - POLICY_FIELDS:
            raise WorkflowFileError(path, f"step {step_id!r}: only {sorted(POLICY_FIELDS)}")
        retry_safe = entry.get("retry_safe")
        if not isinstance(retry_safe, bool):
            raise WorkflowFileError(path, f"step {step_id!r}: retry_safe must be true or false")
        budget = entry.get("recovery_budget", 1)
        if type(budget) is not int or not 0 <= budget <= 100:
            raise WorkflowFileError(path, f"step {step_id!r}: recovery_budget must be 0 to 100")
        resources = entry.get("resources", [])
        if not isinstance(resources, list):
            raise WorkflowFileError(path, f"step {step_id!r}: resources must be a list")
        checked = []
        for resource in resources:
            if not isinstance(resource, dict) or set(resource) != {"type", "name"}:
                raise WorkflowFileError(path, f"step {step_id!r}: a resource is {{type, name}}")
            try:
                locks.check_resource(resource["type"], resource["name"])
            except UsageError as exc:
                raise WorkflowFileError(path, f"step {step_id!r}: {exc}") from None
            checked.append({"type": resource["type"], "name": resource["name"]})
        judge = entry.get("judge")
        if judge is not None and not isinstance(judge, str):
            raise WorkflowFileError(path, f"step {step_id!r}: judge must name a judge profile")
        out[step_id] = {
            "retry_safe": retry_safe,
            "recovery_budget": budget,
            "resources": checked,
            "judge": judge,
        }
    return out


def compile_for(workflow: dict, selected: list[str], selector: str) -> dict:
    """``workflow`` with ``--model selector`` in every selected step's agent dispatch."""
    steps = []
    for step in workflow["steps"]:
        step = dict(step)
        if step["id"] in selected:
            run = list(step["run"])
            head, rest = run[:2], run[2:]
            kept = []
            skip = False
            for arg in rest:
                if skip:
                    skip = False
                    continue
                if arg == "--model":
                    skip = True
                    continue
                if arg.startswith("--model="):
                    continue
                kept.append(arg)
            step["run"] = [*head, "--model", selector, *kept]
        steps.append(step)
    return {**workflow, "steps": steps}
