"""What a governed run needs in place, checked without dispatching anything.

``checks`` is ``yyb workflow setup``: the boundary answers with its reviewed identity, the lock
store and the boundary's journal folder exist, the workflow and policy files are tracked as
they are on disk. ``readiness`` is ``yyb workflow readiness``: those, the credentials the
boundary needs (by name; their values are never read into the answer) and the policy's
resources free, per model.
"""

from __future__ import annotations

import os

from yyb.errors import UsageError
from yyb.workflow import boundary, files, locks, plan
from yyb.workflow.config import GovernedConfig


def checks(
    cfg: GovernedConfig,
    environ: dict[str, str],
    workflow_path: str | None = None,
    policy_path: str | None = None,
) -> list[tuple[str, str]]:
    """(check, problem or "") for what a governed run needs in place, in a fixed order:
    boundary, lock store, journal, project."""
    found = []
    try:
        identity = boundary.identify(cfg.boundary, environ)
        problem = (
            ""
            if identity == cfg.boundary.identity
            else f"it says it is {identity!r}, not the reviewed {cfg.boundary.identity!r}"
        )
    except boundary.BoundaryFailure as exc:
        problem = exc.reason
    found.append(("boundary", problem))
    store = cfg.lock_store
    found.append(
        ("lock store", "" if os.path.isdir(store) else f"{store} is not a folder (create it)")
    )
    journal = os.path.dirname(os.path.abspath(cfg.boundary.journal))
    found.append(("journal", "" if os.path.isdir(journal) else f"{journal} does not exist"))
    tracked = [p for p in (workflow_path, policy_path) if p]
    try:
        plan.source(cfg.project, tracked)
        found.append(("project", ""))
    except UsageError as exc:
        found.append(("project", exc.message))
    return found


def readiness(
    cfg: GovernedConfig, environ: dict[str, str], models: list[str], policy_path: str | None
) -> dict[str, dict]:
    """Per model (empty names skipped): whether a live governed run could start now,
    ``{"ready": bool, "problems": [words, ...]}``; the resources of the policy at
    ``policy_path``, if given, must not be held by another."""
    common = [p for name, p in checks(cfg, environ) if p and name != "project"]
    missing = [n for n in cfg.boundary.credentials if not environ.get(n)]
    if missing:
        common.append(f"credentials not set: {', '.join(missing)}")
    if policy_path:
        common += _held_resources(cfg, policy_path)
    out = {}
    for model in [m for m in models if m]:
        problems = list(common)
        if not plan.MODEL.match(model):
            problems.append(f"{model!r} is not provider/model")
        out[model] = {"ready": not problems, "problems": problems}
    return out


def _held_resources(cfg: GovernedConfig, policy_path: str) -> list[str]:
    """A problem for each resource the policy names that another holds (or may hold)."""
    _, value = files.read(policy_path)
    rules = files.policy_steps(policy_path, value, list(value.get("steps") or {}))
    found = []
    for rule in rules.values():
        for resource in rule["resources"]:
            state = locks.state(cfg.lock_store, resource["type"], resource["name"])
            if state in ("held", "unknown"):
                found.append(
                    f"resource {resource['type']}:{resource['name']} is {state} by another"
                )
    return found
