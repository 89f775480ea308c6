"""Freezing an attempt matrix into an experiment plan and its attempt plans.

Everything is validated and every record is built in memory first; only then is anything
written, so bad input leaves the store untouched. Order (docs/plans.md): cases sorted by case
id, models in the order given, attempts 1..N; case-major, then model, then attempt.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yyb import __version__, agents
from yyb.cases import Task, environment_of, hidden_patch, load_case
from yyb.config import Config
from yyb.errors import InvalidArgument, UsageError
from yyb.evidence import names
from yyb.evidence.kinds.plan import (
    AttemptPlan,
    AttemptPlanLinks,
    AttemptPlanModel,
    ExperimentPlan,
    ExperimentPlanCandidateHarness,
    ExperimentPlanEvaluators,
    ExperimentPlanLinks,
    ExperimentPlanToolPolicy,
    ExperimentPlanVersions,
    ExperimentPlanWorkflow,
)
from yyb.evidence.record import Record
from yyb.plans import budget
from yyb.plans import harness as files
from yyb.store import file
from yyb.store.objects.format import hash_object
from yyb.store.objects.store import record_body


@dataclass
class Plan:
    """A built plan: the experiment record, every record it needs, and blobs to store."""

    oid: str
    experiment: dict
    records: dict[str, dict] = field(default_factory=dict)  # oid -> value (all records)
    bodies: list[tuple[str, bytes]] = field(default_factory=list)  # (kind, body) to write
    attempt_oids: list[str] = field(default_factory=list)

    def add(self, record: Record | dict) -> str:
        """Add a record (typed, or its value) to the plan, once; its oid."""
        value = record.to_value() if isinstance(record, Record) else record
        body = record_body(value)
        oid = hash_object("record", body)
        if oid not in self.records:
            self.records[oid] = value
            self.bodies.append(("record", body))
        return oid


def parse_models(text: str, config: Config) -> list[dict]:
    """``M1,M2`` -> [{"requested", "resolved"[, "accept"]}], refusing unknown and duplicate
    models; ``accept`` holds the observed ids the configuration accepts for one (absent when
    it accepts only itself, so that such a plan hashes as before)."""
    names = [m.strip() for m in text.split(",")]
    if not text.strip() or any(not m for m in names):
        raise InvalidArgument(
            "models", "give a comma-separated list of models, without empty items", text
        )
    models, seen = [], {}
    for requested in names:
        resolved = config.resolve_model(requested)
        if resolved in seen:
            raise InvalidArgument(
                "models",
                f"{requested!r} and {seen[resolved]!r} are both {resolved}; "
                "each model may appear once",
                text,
            )
        seen[resolved] = requested
        accept = config.accepted(resolved)
        models.append(
            {"requested": requested, "resolved": resolved, **({"accept": accept} if accept else {})}
        )
    return models


def _versions(config: Config) -> ExperimentPlanVersions:
    return ExperimentPlanVersions(
        yyb=__version__, yylo=config.data["yylo_version"], python=platform.python_version()
    )


def _harness(config: Config) -> ExperimentPlanCandidateHarness:
    harness_id = config.data["default_candidate_harness"]
    return ExperimentPlanCandidateHarness(id=harness_id, config=config.harness(harness_id))


def unprotected(catalog: dict) -> str | None:
    """The first command profile of ``catalog`` that says nothing of ``protected_paths``.

    A command evaluator that runs the candidate's tests as the candidate left them grades
    whatever the candidate made of them; a plan binds one only when its profile names the
    paths the benchmark owns, or says with ``protected_paths: []`` that it protects nothing.
    """
    for name, spec in sorted(catalog.items()):
        if spec.get("kind") == "command" and "protected_paths" not in spec:
            return name
    return None


def _evaluators(config: Config, selected: set[str]) -> ExperimentPlanEvaluators:
    catalog = config.evaluators()
    missing = unprotected(catalog)
    if missing is not None:
        raise UsageError(
            f"evaluator profile {missing}: a command evaluator must name the paths the "
            "benchmark owns in protected_paths (protected_paths: [] to protect nothing)"
        )
    judges = sorted({spec["harness"] for spec in catalog.values() if spec["kind"] == "llm_judge"})
    return ExperimentPlanEvaluators(
        selected=tuple(sorted(selected)),
        defaults=tuple(sorted(config.data["default_evaluators"])),
        catalog=catalog,
        harnesses={h: config.harness(h) for h in judges},
    )


def _experiment(
    config: Config, plan: Plan, models: list[dict], attempts: int, **rest
) -> ExperimentPlan:
    """The experiment plan's fields every kind of plan shares, its harness's files added to
    ``plan`` and linked; ``rest`` holds the others."""
    harness = _harness(config)
    scratch = _scratch_paths(harness.config)
    links = dataclasses.replace(rest.pop("links"), **_harness_files(config, plan, harness.config))
    gateway = _gateway(config, plan, models)
    if gateway is not None:
        gateway, prices = gateway
        rest["gateway"] = gateway
        if prices is not None:
            links = dataclasses.replace(links, prices=prices)
    return ExperimentPlan(
        versions=_versions(config),
        models=tuple(models),
        attempts_per_cell=attempts,
        tool_policy=ExperimentPlanToolPolicy.from_stored(config.tool_policy()),
        timeout_ms=config.timeout_ms(),
        excluded_paths=tuple(config.excluded_paths()),
        candidate_harness=harness,
        links=links,
        **({"scratch_paths": scratch} if scratch else {}),
        **rest,
    )


def _gateway(config: Config, plan: Plan, models: list[dict]) -> tuple[dict, str | None] | None:
    """For a plan whose candidates reach their models through the gateway (docs/gateway.md):
    its providers as configured (credentials by name) and the oid of its price table, read
    now and added to ``plan``; None for any other plan.

    Raises:
        UsageError: a model whose provider the gateway lacks; an unreadable price table.
    """
    if config.tool_policy()["network"] != "gateway":
        return None
    from yyb.errors import SchemaViolation
    from yyb.evidence.prices import read_price_table

    section = config.gateway()
    providers = section["providers"]
    # Every judge of the catalog (a later rejudge may select any) reaches its model there too.
    judges = [s["model"] for s in config.evaluators().values() if s.get("kind") == "llm_judge"]
    for model in [m["resolved"] for m in models] + judges:
        provider = model.split("/", 1)[0]
        if provider not in providers:
            known = ", ".join(sorted(providers))
            raise UsageError(
                f"model {model}: the gateway has no provider {provider!r} (configured: {known})"
            )
    prices = None
    if "prices" in section:
        path = os.path.join(config.folder, section["prices"])
        try:
            prices = _add(plan, read_price_table(Path(path)))
        except SchemaViolation as exc:
            raise UsageError(f"the gateway's price table {path}: {exc}") from None
    return {"providers": providers}, prices


def _scratch_paths(harness: dict) -> tuple[str, ...]:
    """The result-side exclusions of the candidate harness: its own, else its agent kind's."""
    if "scratch_paths" in harness:
        return tuple(harness["scratch_paths"])
    kind = agents.KINDS.get(harness["kind"])
    return tuple(kind.scratch) if kind is not None else ()


def _harness_files(config: Config, plan: Plan, harness: dict) -> dict[str, str]:
    """The listings of the harness's home folder and of its agent kind's adapter program,
    their blobs added to ``plan``: the plan's links to them by role."""
    found = {}
    if harness.get("home"):
        found["harness_home"] = files.home_files(os.path.join(config.folder, harness["home"]))
    if harness["kind"] in agents.KINDS:
        found["harness_program"] = {
            name: (0o100644, data) for name, data in agents.program(harness["kind"])
        }
    links = {}
    for role, named in found.items():
        listing, blobs = files.listing(named)
        for data in blobs:
            _add_blob(plan, data)
        links[role] = _add(plan, listing)
    return links


def _add(plan: Plan, record: Record | dict) -> str:
    return plan.add(record)


def _add_attempt(plan: Plan, model: dict, k: int, **rest) -> None:
    """Add attempt ``k`` of ``model`` as the plan's next attempt plan (its ordinal is the
    plan's count so far); ``rest`` holds the fields that depend on the kind of plan."""
    attempt = AttemptPlan(
        ordinal=len(plan.attempt_oids), model=AttemptPlanModel(**model), attempt=k, **rest
    )
    plan.attempt_oids.append(_add(plan, attempt))


def _add_blob(plan: Plan, data: bytes) -> str:
    plan.bodies.append(("blob", data))
    return hash_object("blob", data)


def _check_attempts(attempts: int) -> None:
    if attempts < 1:
        raise InvalidArgument("attempts", f"must be at least 1, not {attempts}", attempts)


def task_plan(
    config: Config,
    task_paths: list[str],
    models_text: str,
    attempts: int,
    max_usd: str | None,
    environments: Environments | None = None,
) -> Plan:
    """Build (in memory) the plan for task cases x models x attempts; ``environments`` builds
    (or finds built) the environment a case declares, before anything of the plan is written
    (a case that declares one needs it).

    Raises:
        UsageError (CaseError, ConfigError...): any bad input, before anything is written.
        EnvironmentBuildFailed, EnvironmentMismatch: an environment could not be had.
    """
    _check_attempts(attempts)
    if not task_paths:
        raise InvalidArgument("task", "give at least one case file")
    models = parse_models(models_text, config)
    total = budget.DEFAULT_TOTAL_MICROS if max_usd is None else budget.parse_usd(max_usd)
    loaded = _load_cases(config, task_paths)
    count = len(loaded) * len(models) * attempts
    plan = Plan("", {})
    case_oids = _add_cases(plan, loaded)
    pinned = _environments(config, plan, loaded, environments)
    ceilings = iter(budget.split(total, count))
    for case_id in sorted(loaded):
        for model in models:
            for k in range(1, attempts + 1):
                _add_attempt(
                    plan,
                    model,
                    k,
                    kind="task",
                    case_id=case_id,
                    budget={"currency": budget.CURRENCY, "ceiling_micros": next(ceilings)},
                    links=AttemptPlanLinks(case=case_oids[case_id]),
                )
    selected = set(config.data["default_evaluators"])
    selected.update(case["grader_profile"] for _, case in loaded.values())
    experiment = _experiment(
        config,
        plan,
        models,
        attempts,
        kind="task",
        cases=tuple(
            {"case_id": cid, "input_hash": loaded[cid][1]["input_hash"]} for cid in sorted(loaded)
        ),
        attempt_count=count,
        budget={
            "currency": budget.CURRENCY,
            "total_micros": total,
            "per_attempt_micros": total // count,
            "remainder_micros": total % count,
        },
        evaluators=_evaluators(config, selected),
        comparison="model_only",
        links=ExperimentPlanLinks(
            cases=tuple(case_oids[cid] for cid in sorted(loaded)),
            attempts=tuple(plan.attempt_oids),
            **({"environments": tuple(p["environment"] for p in pinned)} if pinned else {}),
        ),
        **({"environments": tuple(pinned)} if pinned else {}),
    )
    plan.experiment = experiment.to_value()
    plan.oid = _add(plan, experiment)
    return plan


def _load_cases(config: Config, task_paths: list[str]) -> dict[str, tuple[Task, dict]]:
    """Each task file's (task, case record), by case id, refusing a case id given twice."""
    loaded: dict[str, tuple[Task, dict]] = {}
    for path in task_paths:
        task, case = load_case(path, config)
        if case["case_id"] in loaded:
            raise UsageError(
                f"{path}: case id {case['case_id']!r} is also in "
                f"{loaded[case['case_id']][0].path}; each case may appear once"
            )
        loaded[case["case_id"]] = (task, case)
    return loaded


# Builds or finds the environment a case declares: (the declared spec, the case's repository
# path) -> (the environment record's oid, its value); yyb/evidence/environment.py.
Environments = Callable[[Any, "str | None"], "tuple[str, dict]"]


def _environments(config: Config, plan: Plan, loaded, environments) -> list[dict]:
    """Each environment the cases declare, built: (spec, manifest hash, environment record)
    by spec oid, the specs added to the plan."""
    from yyb.evidence import environment

    pinned = {}
    for case_id in sorted(loaded):
        task, case = loaded[case_id]
        if "environment" not in case or case["environment"] in pinned:
            continue
        if environments is None:
            raise UsageError(f"{task.path}: declares an environment, and none can be built here")
        declared = environment_of(task)
        oid, record = environments(declared, config.repository_path(case["repository"]))
        pinned[declared.oid] = environment.identity(declared.oid, record, oid)
    return [pinned[spec] for spec in sorted(pinned)]


def _add_cases(plan: Plan, loaded: dict[str, tuple[Task, dict]]) -> dict[str, str]:
    """Add each case record with its task, prompt, hidden test patch and environment spec;
    their oids by id."""
    case_oids = {}
    for case_id in sorted(loaded):
        task, case = loaded[case_id]
        links = {"task": _add_blob(plan, task.data), "prompt": _add_blob(plan, task.prompt)}
        if case.get("tests"):  # hidden from candidates: only evaluators read it
            links["test_patch"] = _add_blob(plan, hidden_patch(task))
        if case.get("environment"):
            for _, value in environment_of(task).records():
                _add(plan, value)
            links["environment"] = case["environment"]
        case_oids[case_id] = _add(plan, dict(case, links=links))
    return case_oids


def parse_vars(items: list[str]) -> dict:
    """``--var K=V`` values: literal strings, or canonical JSON text for typed JSON values."""
    out: dict[str, dict] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise InvalidArgument("var", f"{item!r}: expected NAME=VALUE", item)
        if name in out:
            raise InvalidArgument("var", f"{name}: given twice", item)
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        if isinstance(value, str):
            out[name] = {"type": "string", "value": text}
        else:
            canonical = json.dumps(
                value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
            )
            out[name] = {"type": "json", "value": canonical}
    return out


def workflow_plan(
    config: Config,
    workflow_path: str,
    models_text: str,
    attempts: int,
    controlled_variable: str | None,
    var_items: list[str],
) -> Plan:
    """Build (in memory) the plan for a Workflow Runner YAML x models x attempts."""
    import yaml

    _check_attempts(attempts)
    models = parse_models(models_text, config)
    data = file.read_input(workflow_path)
    try:
        parsed = yaml.safe_load(data)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{workflow_path}: not valid YAML{where}") from None
    if not isinstance(parsed, dict):
        raise UsageError(f"{workflow_path}: a workflow must be a YAML mapping")
    variables = parse_vars(var_items)
    if controlled_variable is not None:
        if not controlled_variable or controlled_variable in variables:
            raise InvalidArgument(
                "controlled_model_variable",
                f"{controlled_variable!r} must be a name not also given a value",
                controlled_variable,
            )
    plan = Plan("", {})
    workflow_oid = _add_blob(plan, data)
    for model in models:
        for k in range(1, attempts + 1):
            _add_attempt(
                plan,
                model,
                k,
                kind="workflow",
                case_id=None,
                budget=None,
                links=AttemptPlanLinks(workflow=workflow_oid),
            )
    experiment = _experiment(
        config,
        plan,
        models,
        attempts,
        kind="workflow",
        cases=(),
        attempt_count=len(models) * attempts,
        budget=None,
        evaluators=_evaluators(config, set(config.data["default_evaluators"])),
        comparison="model_only" if controlled_variable else "agent_system",
        workflow=ExperimentPlanWorkflow(
            variables=variables, controlled_model_variable=controlled_variable
        ),
        links=ExperimentPlanLinks(workflow=workflow_oid, attempts=tuple(plan.attempt_oids)),
    )
    plan.experiment = experiment.to_value()
    plan.oid = _add(plan, experiment)
    return plan


def write(store, plan: Plan) -> None:
    """Store every object of ``plan``, then point ``refs/plans/<oid>`` at it."""
    store.objects.put_many(plan.bodies)
    ref = names.plan(plan.oid)
    if store.refs.read(ref) != plan.oid:
        store.refs.update(ref, plan.oid, old=None, reason="plan")
