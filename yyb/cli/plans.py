"""Planning porcelain: init, validate, plan, plan show, authorize. All zero-dispatch."""

from __future__ import annotations

import json
import os
import sys

import click

from yyb.cli.context import load_config, open_store
from yyb.cli.output import emit_json, json_option
from yyb.cli.progress import Steps, mode_for, progress_option
from yyb.cli.tasks import TaskCommand, TaskGroup, task_files, tasks_from_option
from yyb.errors import UsageError
from yyb.evidence import names


def progress_line(text: str) -> None:
    """A long step's progress, one line on stderr (an environment's build)."""
    click.echo(f"environment: {text}", err=True)


@click.command("init")
@click.option("--stdout", "to_stdout", is_flag=True, help="Print the configuration instead.")
@click.option(
    "--harness",
    "kind",
    metavar="NAME",
    help="Start from a shipped agent: claude_code, codex, aider, mini_swe_agent, openhands.",
)
@json_option
def init(to_stdout, kind, as_json):
    """Write yylo-benchmark.config.json at the top of the current repository.

    An existing file is never overwritten. With --harness NAME the candidate harness is that
    agent's adapter (docs/agents.md); without it, the YYLO CLI (yylo_pi). Prints the file's
    path; with --json, one object: path and harness (--stdout prints the configuration, JSON
    itself).
    """
    from yyb import config
    from yyb.agents import start
    from yyb.store.location import find_repository

    if kind is not None and kind not in start.STARTS:
        raise UsageError(f"--harness: {kind!r} is not one of {', '.join(start.names())}")
    root = find_repository(os.getcwd())
    if root is None and not to_stdout:
        raise UsageError(f"not inside a Git repository: {os.getcwd()} (use --stdout)")
    name = os.path.basename(root) if root else "source"
    data = config.template(name)
    if kind is not None:
        data = start.apply(data, kind)
    if to_stdout:
        click.echo(config.render(data), nl=False)
        return 0
    path = os.path.join(root, config.CONFIG_NAME)
    config.write_new(path, data)
    if as_json:
        emit_json({"path": path, "harness": kind})
    else:
        click.echo(path)
    return 0


@click.command("validate", cls=TaskCommand)
@click.option(
    "--task",
    "task_paths",
    multiple=True,
    metavar="FILE",
    help="A task file (repeatable; several files or a glob after one --task).",
)
@tasks_from_option
@click.option("--write", is_flag=True, help="Store the case record under refs/cases/<id>.")
@click.option(
    "--gold",
    is_flag=True,
    help="Run each case's gold and empty patches through the sandbox and its tests evaluator.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the identity as JSON.")
@progress_option
@click.pass_context
def validate(ctx, task_paths, tasks_from, write, gold, as_json, progress_mode):
    """Check that a task is a valid benchmark case and print its identity.

    Nothing is written unless --write is given; the task file is never touched.

    With --gold (one or more --task): for each case, its gold patch must resolve it and the
    empty patch must not; each result is kept as evidence under refs/validations/<case id>.
    Prints one line per case; exit 0 when every case discriminates, 1 when any is flagged,
    2 on bad input. --progress tells the cases done of all on stderr.
    """
    from yyb import cases

    task_paths = task_files(task_paths, tasks_from)
    if not task_paths:
        raise click.UsageError("give --task FILE (one or more) or --tasks-from FILE")

    if gold:
        return _validate_gold(ctx, task_paths, as_json, mode_for(progress_mode, sys.stderr))
    if len(task_paths) != 1:
        raise click.UsageError("give one --task (several only with --gold)")
    config = load_config(ctx)
    task, case = cases.load_case(task_paths[0], config)
    identity = {
        "case_id": case["case_id"],
        "task_hash": case["task_hash"],
        "prompt_hash": case["prompt_hash"],
        "input_hash": case["input_hash"],
    }
    if write:
        store = open_store(ctx, create=True)
        oid = cases.write_case(store, task, case)
        ref = names.case(case["case_id"])
        if store.refs.read(ref) != oid:
            store.refs.update(ref, oid, reason=f"case {case['case_id']} {case['case_version']}")
        identity["record"] = oid
    if as_json:
        click.echo(json.dumps(identity, indent=2))
    else:
        for key, value in identity.items():
            click.echo(f"{key} {value}")
    return 0


def _validate_gold(ctx, task_paths, as_json: bool, mode: str) -> int:
    """``validate --gold``: one line (or JSON object) per case; exit 1 if any is flagged."""
    from yyb.cli.context import claim_scratch
    from yyb.grading import gold

    config = load_config(ctx)
    store = open_store(ctx, create=True)
    claim_scratch(store)
    found = []
    shown = Steps(mode, len(task_paths))
    try:
        for path in task_paths:
            shown.begin(path)
            line = _gold_row(*gold.validate(store, config, path, dict(os.environ)))
            found.append(line)
            status = "ok" if line["discriminating"] else "NOT-DISCRIMINATING"
            shown.step(f"{line['case_id']} {status}")
            shown.close()  # the case's line goes to stdout under no status line
            if not as_json:
                text = (
                    f"{line['case_id']} {status} gold={line['gold']} empty={line['empty']} "
                    f"{line['record']}"
                )
                click.echo(text if line["discriminating"] else f"{text}: {line['reason']}")
    finally:
        shown.close()
    if as_json:
        click.echo(json.dumps(found, indent=2))
    flagged = [f["case_id"] for f in found if not f["discriminating"]]
    if flagged:
        listed = ", ".join(flagged)
        click.echo(f"yyb: {len(flagged)} case(s) not discriminating: {listed}", err=True)
        return 1
    return 0


def _gold_row(oid: str, record: dict) -> dict:
    """One case of ``validate --gold`` as its line (and JSON object) tells it."""
    runs = record["runs"]
    return {
        "case_id": record["case_id"],
        "discriminating": record["discriminating"],
        "gold": runs["gold"]["verdict"],
        "empty": runs["empty"]["verdict"],
        "record": oid,
        "reason": record["reason"],
    }


@click.group("plan", invoke_without_command=True, cls=TaskGroup)
@click.option(
    "--task",
    "tasks",
    multiple=True,
    metavar="FILE",
    help="A case (repeatable; several files or a glob after one --task).",
)
@tasks_from_option
@click.option("--workflow", metavar="FILE", help="A Workflow Runner YAML file.")
@click.option("--models", metavar="M1,M2", help="Exact provider/model ids or :selectors.")
@click.option("--attempts", type=int, default=1, show_default=True, help="Attempts per cell.")
@click.option("--max-usd", metavar="X", help="Aggregate ceiling for task plans (default 20).")
@click.option(
    "--controlled-model-variable",
    metavar="NAME",
    help="Workflow variable that carries the model (a model_only comparison).",
)
@click.option("--var", "variables", multiple=True, metavar="K=V", help="Workflow variable.")
@click.option("--output", metavar="PLAN.json", help="The plan file to create.")
@click.option(
    "--retry-of",
    "retry_of",
    metavar="PLAN",
    help="Plan again the attempts of PLAN whose terminal the infrastructure caused.",
)
@click.option("--dry-run", is_flag=True, help="Accepted: planning never dispatches anything.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.pass_context
def plan(
    ctx,
    tasks,
    tasks_from,
    workflow,
    models,
    attempts,
    max_usd,
    controlled_model_variable,
    variables,
    output,
    retry_of,
    dry_run,
    as_json,
):
    """Freeze cases (or a workflow) x models x attempts into an immutable plan.

    Writes the plan's records to the store under refs/plans/<oid> and the plan file to
    --output. Planning never dispatches anything: dispatch_count is always 0.

    With --retry-of PLAN: a new plan of exactly the attempts of PLAN whose terminal the
    infrastructure caused (cancelled, environment_failure, invalid_case, an unconfirmed or
    interrupted harness_failure), measuring what PLAN measured; exit 1 when there is none.
    """
    if ctx.invoked_subcommand is not None:
        return None
    from yyb.plans import build, planfile

    tasks = tuple(task_files(tasks, tasks_from))

    if retry_of is not None:
        if tasks or workflow or models or max_usd or controlled_model_variable or variables:
            raise click.UsageError("--retry-of takes only --output (and --json)")
        return _retry(ctx, retry_of, output, as_json)
    if bool(tasks) == bool(workflow):
        raise click.UsageError("give --task FILE (one or more) or --workflow FILE")
    if not models:
        raise click.UsageError("--models is required")
    if not output:
        raise click.UsageError("--output is required")
    if workflow and max_usd is not None:
        raise click.UsageError("--max-usd applies to task plans only")
    if tasks and (controlled_model_variable or variables):
        raise click.UsageError("--controlled-model-variable and --var apply to workflow plans")
    config = load_config(ctx)
    planfile.check_output_free(output)
    if tasks:
        from yyb.evidence import environment

        resolve = environment.resolver(lambda: open_store(ctx, create=True), progress_line)
        built = build.task_plan(config, list(tasks), models, attempts, max_usd, resolve)
    else:
        built = build.workflow_plan(
            config, workflow, models, attempts, controlled_model_variable, list(variables)
        )
    store = open_store(ctx, create=True)
    build.write(store, built)
    planfile.write_new(output, planfile.render(built.oid, built.records))
    return _summary(built, output, as_json)


def _retry(ctx, name: str, output, as_json: bool) -> int:
    """``plan --retry-of PLAN``: freeze the retry plan of PLAN (docs/plans.md, "Retries")."""
    from yyb.plans import build, planfile, retry

    if not output:
        raise click.UsageError("--output is required")
    planfile.check_output_free(output)
    parent = plan_oid(ctx, name)
    store = open_store(ctx)
    if not store.objects.contains(parent):
        raise UsageError(f"plan {parent} is not in the store {store.path}")
    built, selection = retry.retry_plan(store, parent)
    for line in selection.notes():
        click.echo(f"yyb: {line}", err=True)
    build.write(store, built)
    planfile.write_new(output, planfile.render(built.oid, built.records))
    return _summary(built, output, as_json, retry_of=parent)


def _summary(built, output: str, as_json: bool, **extra) -> int:
    summary = {
        "plan": built.oid,
        "file": output,
        **extra,
        "kind": built.experiment["kind"],
        "attempt_count": built.experiment["attempt_count"],
        "comparison": built.experiment["comparison"],
        "dispatch_count": 0,
    }
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        for key, value in summary.items():
            click.echo(f"{key}: {value}" if key == "dispatch_count" else f"{key} {value}")
    return 0


def load_plan(ctx, name: str) -> tuple[str, dict[str, dict]]:
    """A plan named by a plan file path, or by an oid or ref in the store."""
    from yyb.plans import planfile

    return planfile.resolve(name, lambda: open_store(ctx))


def plan_oid(ctx, name: str) -> str:
    """Only the oid of the plan ``name``, for a command that reads the plan from the store."""
    from yyb.plans import planfile

    return planfile.plan_oid(name, lambda: open_store(ctx))


@plan.command("show")
@click.argument("name", metavar="PLAN")
@click.option("--json", "as_json", is_flag=True, help="The whole matrix as JSON.")
@click.pass_context
def show(ctx, name, as_json):
    """Print a plan's matrix and budget (PLAN: a plan file, or an oid or ref in the store)."""
    from yyb.plans.budget import format_usd

    oid, records = load_plan(ctx, name)
    plan_value = records[oid]
    attempts = [records[a] for a in plan_value["links"]["attempts"]]
    rows = [
        {
            "oid": a,
            "ordinal": r["ordinal"],
            "case_id": r["case_id"],
            "model": r["model"]["resolved"],
            "attempt": r["attempt"],
            "ceiling_micros": (r["budget"] or {}).get("ceiling_micros"),
        }
        for a, r in zip(plan_value["links"]["attempts"], attempts, strict=True)
    ]
    if as_json:
        doc = {
            "plan": oid,
            **{
                k: plan_value[k]
                for k in (
                    "kind",
                    "comparison",
                    "attempt_count",
                    "attempts_per_cell",
                    "models",
                    "cases",
                    "budget",
                    "tool_policy",
                    "timeout_ms",
                    "versions",
                )
            },
            "evaluators": plan_value["evaluators"]["selected"],
            "attempts": rows,
        }
        click.echo(json.dumps(doc, indent=2))
        return 0
    out = sys.stdout
    spend = plan_value["budget"]
    out.write(f"plan {oid}\n")
    out.write(f"kind {plan_value['kind']}, comparison {plan_value['comparison']}\n")
    out.write(
        f"cases {len(plan_value['cases'])}, models {len(plan_value['models'])}, "
        f"attempts per cell {plan_value['attempts_per_cell']}: "
        f"{plan_value['attempt_count']} attempts\n"
    )
    if spend:
        extra = (
            f" (+0.000001 for the first {spend['remainder_micros']})"
            if spend["remainder_micros"]
            else ""
        )
        out.write(
            f"budget {format_usd(spend['total_micros'])} total; "
            f"{format_usd(spend['per_attempt_micros'])} per attempt{extra}\n"
        )
    else:
        out.write("budget none (workflow plans carry no spend grant)\n")
    for model in plan_value["models"]:
        arrow = (
            f"{model['requested']} -> {model['resolved']}"
            if model["requested"] != model["resolved"]
            else model["resolved"]
        )
        out.write(f"model {arrow}\n")
    out.write(f"evaluators {', '.join(plan_value['evaluators']['selected']) or '(none)'}\n")
    width_case = max([len(r["case_id"] or "-") for r in rows] + [4])
    width_model = max([len(r["model"]) for r in rows] + [5])
    out.write(f"{'#':>5}  {'case':<{width_case}}  {'model':<{width_model}}  attempt  ceiling\n")
    for r in rows:
        ceiling = format_usd(r["ceiling_micros"]) if r["ceiling_micros"] else "-"
        out.write(
            f"{r['ordinal']:>5}  {(r['case_id'] or '-'):<{width_case}}  "
            f"{r['model']:<{width_model}}  {r['attempt']:>7}  {ceiling}\n"
        )
    return 0


@click.command("authorize")
@click.option("--plan", "plan_name", required=True, metavar="PLAN", help="The plan to authorize.")
@click.option(
    "--expires",
    required=True,
    metavar="WHEN",
    help="+24h, 7d, 30m, or an ISO 8601 time with a zone.",
)
@json_option
@click.pass_context
def authorize(ctx, plan_name, expires, as_json):
    """Write a grant that lets a live run of this task plan spend up to its ceilings.

    Prints the grant's oid; with --json, one object: grant, plan, expires_ms and the
    ceilings it grants."""
    from yyb.plans import grant

    oid, records = load_plan(ctx, plan_name)
    now = grant.now_ms()
    record = grant.grant_for(oid, records[oid], grant.parse_expiry(expires, now), now)
    store = open_store(ctx, create=True)
    if not store.objects.contains(oid):
        raise UsageError(f"plan {oid} is not in the store {store.path}; plan it there first")
    grant_oid = store.objects.put_record(record)
    store.refs.update(names.grant(oid), grant_oid, reason="authorize")
    if as_json:
        kept = ("models", "currency", "total_ceiling_micros", "attempt_ceiling_micros")
        emit_json(
            {
                "grant": grant_oid,
                "plan": oid,
                "expires_ms": record["expires_ms"],
                **{k: record[k] for k in kept},
            }
        )
    else:
        click.echo(grant_oid)
    return 0
