"""`yyb workflow ...`: the governed workflow lane (docs/workflow.md, docs/boundary.md).

Exit codes: 0 done (for checks: nothing wrong), 1 a check failed or a run stopped before every
step attempt had a terminal (the output says why and what a person must decide), 2 bad input.
"""

from __future__ import annotations

import os

import click

from yyb.cli.context import claim_scratch, config_path, emit_findings
from yyb.cli.output import emit_json, json_option
from yyb.errors import UsageError


def _config(ctx):
    from yyb.workflow import config

    return config.load(config_path(ctx))


def _store(ctx, cfg, create: bool = False):
    """The store, kept apart from the governed project (docs/cli.md, "Where a store may be")."""
    from yyb.store.location import check_apart, find_repository, resolve_store_path
    from yyb.store.repo import Store

    path = resolve_store_path(ctx.find_root().obj.get("store_path"), os.getcwd(), os.environ)
    project = find_repository(cfg.project) or cfg.project
    check_apart(path, [project])
    return Store.init(path)[0] if create else Store.open(path)


def _plan(ctx, cfg, name: str):
    from yyb.workflow import plan

    return plan.load(name, lambda: _store(ctx, cfg))


def _rate(ppm, interval) -> str:
    if ppm is None:
        return "-"
    span = f" [{interval['low_ppm'] / 1e4:.1f}, {interval['high_ppm'] / 1e4:.1f}]"
    return f"{ppm / 1e4:.1f}%{span}"


def _evidence(ctx, plan_name: str):
    """(the store, the plan) for the commands that read retained evidence only."""
    cfg = _config(ctx)
    return _store(ctx, cfg), _plan(ctx, cfg, plan_name)


def _print(value, as_json: bool, lines) -> None:
    if as_json:
        emit_json(value)
    else:
        for line in lines:
            click.echo(line)


plan_option = click.option(
    "--plan", "plan_name", required=True, metavar="PLAN", help="A governed plan file or oid."
)
steps_file_option = click.option(
    "--steps-file",
    "policy_path",
    required=True,
    metavar="POLICY",
    help="The reviewed policy (steps file) the plan binds.",
)


@click.group("workflow")
def workflow():
    """The governed workflow lane: selected steps of a tracked, production-touching workflow
    run through one pinned boundary, under typed exclusive locks (docs/workflow.md)."""


@workflow.command("migrate-config")
@click.option("--input", "input_path", required=True, metavar="FILE")
@click.option("--output", "output_path", metavar="NEW", help="Write a governed template here.")
@json_option
def migrate_config(input_path, output_path, as_json):
    """Inspect a configuration without changing it; from an isolated v2 one, write a
    governed template for review to an unused --output path."""
    from yyb.workflow import config

    report = config.migrate(input_path, output_path)
    lines = [f"{input_path}: {report['kind']} ({report['schema_version']})"]
    lines += [f"  lacks: {reason}" for reason in report["lacks"]]
    if "written" in report:
        lines.append(f"wrote a governed template for review: {report['written']}")
    lines.append("dispatch_count: 0")
    _print(report, as_json, lines)


@workflow.command("setup")
@click.option("--workflow", "workflow_path", metavar="W", help="Check this workflow is tracked.")
@click.option("--steps-file", "policy_path", metavar="POLICY", help="And this policy.")
@json_option
@click.pass_context
def setup(ctx, workflow_path, policy_path, as_json):
    """Check that the governed configuration, the boundary, the tracked files and the lock
    store are in place. Dispatches nothing."""
    from yyb.workflow import setup as preflight

    cfg = _config(ctx)
    checks = preflight.checks(cfg, dict(os.environ), workflow_path, policy_path)
    ok = all(not problem for _, problem in checks)
    lines = [f"{'ok  ' if not p else 'FAIL'} {name}{': ' + p if p else ''}" for name, p in checks]
    lines.append("dispatch_count: 0")
    _print({"ok": ok, "checks": dict(checks), "dispatch_count": 0}, as_json, lines)
    return 0 if ok else 1


@workflow.command("readiness")
@click.option("--models", required=True, metavar="A,B")
@click.option("--steps-file", "policy_path", metavar="POLICY", help="Check its resources too.")
@json_option
@click.pass_context
def readiness(ctx, models, policy_path, as_json):
    """Per model: whether a live governed run could start now. Credentials are checked by
    name only; their values are never read into the output."""
    from yyb.workflow import setup as preflight

    out = preflight.readiness(_config(ctx), dict(os.environ), models.split(","), policy_path)
    lines = []
    for model, verdict in out.items():
        lines.append(f"{model}: {'ready' if verdict['ready'] else 'not ready'}")
        lines += [f"  {p}" for p in verdict["problems"]]
    _print(out, as_json, lines)
    return 0 if all(v["ready"] for v in out.values()) else 1


@workflow.command("plan")
@click.option("--workflow", "workflow_path", required=True, metavar="W")
@steps_file_option
@click.option("--steps", required=True, metavar="S1,S2")
@click.option("--models", required=True, metavar="A,B")
@click.option("--attempts", type=int, default=1, show_default=True)
@click.option("--var", "variables", multiple=True, metavar="NAME=VALUE")
@click.option("--output", required=True, metavar="P")
@click.option("--dry-run", is_flag=True, help="Accepted: planning never dispatches anything.")
@json_option
@click.pass_context
def plan_command(
    ctx, workflow_path, policy_path, steps, models, attempts, variables, output, dry_run, as_json
):
    """Plan model x attempt x selected step, in the workflow's step order. Dispatches
    nothing; writes the plan file and stores the plan."""
    from yyb.plans import planfile
    from yyb.workflow import plan as plans

    cfg = _config(ctx)
    named = {}
    for item in variables:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--var {item!r} is not NAME=VALUE")
        named[key] = value
    planfile.check_output_free(output)
    built = plans.build(
        cfg,
        workflow_path,
        policy_path,
        [s for s in steps.split(",") if s],
        [m for m in models.split(",") if m],
        attempts,
        named,
    )
    # --dry-run is an affirmation, as for ``yyb plan``: planning dispatches nothing either way.
    plans.write(_store(ctx, cfg, create=True), built)
    planfile.write_new(output, planfile.render(built.oid, built.records))
    count = built.value["attempt_count"]
    lines = [f"plan {built.oid}", f"step attempts: {count}", "dispatch_count: 0"]
    found = {"plan": built.oid, "output": output, "step_attempts": count, "dispatch_count": 0}
    _print(found, as_json, lines)


@workflow.command("authorize")
@plan_option
@click.option("--hours", type=float, default=24.0, show_default=True)
@json_option
@click.pass_context
def authorize(ctx, plan_name, hours, as_json):
    """Authorize a governed plan to run in production for --hours (a record in the store)."""
    from yyb.workflow import run as runs

    cfg = _config(ctx)
    store = _store(ctx, cfg, create=True)
    plan = _plan(ctx, cfg, plan_name)
    grant = runs.authorize(store, plan, hours)
    expires = store.objects.get_record(grant)["expires_ms"]
    _print({"plan": plan.oid, "authorization": grant, "expires_ms": expires}, as_json, [grant])


def _results(results, as_json: bool) -> int:
    rows = [vars(r) for r in results]
    lines = []
    for r in results:
        what = (r.terminal_class or "") + (f", judged {r.judgement}" if r.judgement else "")
        lines.append(f"{r.ordinal:>4} {r.step} {r.model}: {r.status} {what}".rstrip())
        if r.reason and r.status == "stopped":
            lines.append(f"     {r.reason}")
        for held in r.replaced_locks:
            lines.append(f"     replaced an abandoned lock of process {held.get('pid')}")
    dispatched = sum(r.dispatched for r in results)
    lines.append(f"dispatch_count: {dispatched}")
    _print({"steps": rows, "dispatch_count": dispatched}, as_json, lines)
    return 1 if any(r.status == "stopped" for r in results) else 0


def _context(ctx, plan_name, policy_path, lock_timeout, dry_run: bool = False):
    """What a run or recovery needs; a dry run reads the store if there is one and writes
    nothing to it."""
    from yyb.errors import StoreNotFound
    from yyb.store.repo import Store
    from yyb.workflow import plan as plans
    from yyb.workflow import run as runs

    cfg = _config(ctx)
    plan = _plan(ctx, cfg, plan_name)
    plans.check_current(cfg, plan, policy_path)
    if dry_run:
        try:
            store = _store(ctx, cfg)
        except StoreNotFound:
            store = Store.memory()
    else:
        store = _store(ctx, cfg, create=True)
        plans.write(store, plan)
        claim_scratch(store)
    return runs.Context(store, cfg, plan, dict(os.environ), lock_timeout)


lock_timeout_option = click.option(
    "--lock-timeout", type=float, default=0.0, show_default=True, help="Seconds to wait."
)


@workflow.command("run")
@plan_option
@steps_file_option
@click.option("--dry-run", is_flag=True, help="Show what would run; dispatch nothing.")
@lock_timeout_option
@json_option
@click.pass_context
def run_command(ctx, plan_name, policy_path, dry_run, lock_timeout, as_json):
    """Run the plan's step attempts in order through the pinned boundary (live only with a
    production authorization); stop at the first that cannot be concluded."""
    from yyb.workflow import run as runs

    context = _context(ctx, plan_name, policy_path, lock_timeout, dry_run)
    return _results(runs.run(context, dry_run), as_json)


@workflow.command("recover")
@plan_option
@steps_file_option
@lock_timeout_option
@json_option
@click.pass_context
def recover_command(ctx, plan_name, policy_path, lock_timeout, as_json):
    """Ask the boundary's journal what happened to each interrupted step attempt, and settle
    it: its retained answer, a new dispatch through the policy's gate, or a stop for a
    person."""
    from yyb.workflow import run as runs

    return _results(runs.recover(_context(ctx, plan_name, policy_path, lock_timeout)), as_json)


@workflow.command("rejudge")
@plan_option
@click.option("--profile", required=True, metavar="ID", help="The judge profile.")
@json_option
@click.pass_context
def rejudge(ctx, plan_name, profile, as_json):
    """Judge again, as a new generation, every step attempt the profile judges that has a
    terminal. Dispatches no step."""
    from yyb.workflow import judging

    cfg = _config(ctx)
    store = _store(ctx, cfg)
    claim_scratch(store)
    records = judging.rejudge(store, cfg, _plan(ctx, cfg, plan_name), profile)
    lines = [
        f"{r['step']} {r['attempt'][:12]} generation {r['generation']}: {r['verdict']}"
        for r in records
    ]
    lines.append("dispatch_count: 0")
    _print({"judgements": records, "dispatch_count": 0}, as_json, lines)


@workflow.command("history")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--expect", metavar="SHA256", help="The hash to check (else each file's name).")
@json_option
def history(files, expect, as_json):
    """Read and check historical v1 governed objects (JSON objects carrying juno_version),
    each against its SHA-256; never writes. Exit 1 when any is refused."""
    from yyb.workflow import history as old

    rows, lines = [], []
    for path in files:
        try:
            found = old.read(path, expect)
        except old.HistoricalRefused as exc:
            rows.append({"file": path, "ok": False, "reason": exc.reason})
            lines.append(f"refused {path}: {exc.reason}")
            continue
        rows.append(
            {
                "file": path,
                "ok": True,
                "sha256": found.sha256,
                "size": found.size,
                "schema_version": found.schema_version,
                "juno_version": found.juno_version,
                "fields": sorted(found.value),
            }
        )
        lines.append(f"ok {found.sha256} {found.schema_version} juno {found.juno_version} {path}")
    _print(rows, as_json, lines)
    return 0 if all(r["ok"] for r in rows) else 1


@workflow.command("doctor")
@plan_option
@json_option
@click.pass_context
def doctor(ctx, plan_name, as_json):
    """Verify a governed experiment's retained chain end to end, offline."""
    from yyb.workflow import check

    errors, _ = emit_findings(check.doctor(*_evidence(ctx, plan_name)), as_json)
    return 1 if errors else 0


@workflow.command("report")
@plan_option
@json_option
@click.pass_context
def report(ctx, plan_name, as_json):
    """Per step and model, and per model: outcomes, the intent-to-treat, valid and invalidity
    rates with 95% intervals, and a warning where two models' invalidity differs."""
    from yyb.workflow import check

    value = check.report(*_evidence(ctx, plan_name))
    lines = [f"workflow {value['workflow']} plan {value['plan']}"]
    for row in value["rows"] + value["models"]:
        where = f"{row['step']} {row['model']}" if "step" in row else f"all steps {row['model']}"
        classes = ", ".join(f"{k} {v}" for k, v in sorted(row["classes"].items()))
        if row.get("judged"):
            judged = ", ".join(f"{k} {v}" for k, v in sorted(row["judged"].items()))
            classes += f"; judged {judged}"
        lines.append(
            f"{where}: {row['resolved']}/{row['attempts']} resolved, "
            f"itt {_rate(row['resolved_rate_ppm'], row['interval'])}, "
            f"valid {_rate(row['valid_rate_ppm'], row['valid_interval'])}, "
            f"invalid {_rate(row['invalidity_ppm'], row['invalidity_interval'])}; "
            f"{classes or 'no terminal'}"
            + (f"; {row['incomplete']} incomplete" if row["incomplete"] else "")
        )
    for comparison in value["comparisons"]:
        if comparison["warning"]:
            lines.append(f"warning: {comparison['warning']}")
    _print(value, as_json, lines)
