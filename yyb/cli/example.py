"""`yyb example`: a whole benchmark run on a built-in example, start to finish."""

from __future__ import annotations

import os
import tempfile

import click


@click.command("example")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    help="Where to create the example (default: a new temporary folder).",
)
@click.option("--attempts", type=click.IntRange(1, 20), default=3, show_default=True)
@click.option("--jobs", type=click.IntRange(1, 16), default=2, show_default=True)
@click.pass_context
def example(ctx, directory, attempts, jobs):
    """Build a repository with a bug, plan two stand-in agents x N attempts, run, verify.

    One agent fixes the bug, the other does nothing; a pinned grader runs the test on a
    rebuild of each final workspace. Prints the outcome and where the evidence is.
    """
    from yyb import config as configuration
    from yyb import signing
    from yyb.attempts import run as attempts_run
    from yyb.cli.run import print_summary
    from yyb.evidence import names
    from yyb.example import build
    from yyb.plans import build as plans
    from yyb.plans import grant, planfile
    from yyb.reports import build as report_build
    from yyb.reports import layer as report_layer
    from yyb.reports import render
    from yyb.store.fsck import fsck
    from yyb.store.repo import Store

    root = os.path.abspath(directory or tempfile.mkdtemp(prefix="yyb-example-"))
    os.makedirs(root, exist_ok=True)
    if os.listdir(root):
        raise click.UsageError(f"--dir {root} is not empty")
    paths = build(root)
    store_path = ctx.find_root().obj.get("store_path") or os.path.join(root, "store")
    store, _ = Store.init(store_path)
    config = configuration.load(paths["config"])
    click.echo(f"example repository  {paths['repo']} (base {paths['base'][:12]})")
    click.echo(f"case                {paths['task']}")
    plan = plans.task_plan(config, [paths["task"]], ":fixer,:idler", attempts, "2")
    plans.write(store, plan)
    plan_file = os.path.join(root, "plan.json")
    planfile.write_new(plan_file, planfile.render(plan.oid, plan.records))
    click.echo(
        f"plan                {plan.oid} ({plan.experiment['attempt_count']} attempts, {plan_file})"
    )
    now = grant.now_ms()
    store.refs.update(
        names.grant(plan.oid),
        store.objects.put_record(grant.grant_for(plan.oid, plan.experiment, now + 3_600_000, now)),
        reason="example",
    )
    chosen = {oid: plan.records[oid] for oid in plan.attempt_oids}
    run_ctx = attempts_run.prepare(
        store, config, plan.oid, plan.experiment, chosen, dict(os.environ)
    )
    results = attempts_run.run_plan(run_ctx, jobs)
    click.echo()
    print_summary(results)
    problems = [f for f in fsck(store) if f.level == "error"]
    report, _ = report_build.build(store, plan.oid)
    stored = report_layer.store_layer(store, plan.oid, report, signer=run_ctx.signer)
    if run_ctx.signer is not None:  # signed evidence comes with a signed checkpoint of its log
        signing.checkpoint(store, run_ctx.signer)
    click.echo()
    click.echo(f"report ({report['status']}; layer {stored['oid'][:12]}):")
    for entry in report["models"]:
        itt = render.rate_text(entry["intent_to_treat"], "-")
        click.echo(
            f"  {entry['model']:<14} valid resolved rate {render.rate_text(entry)}; "
            f"intent-to-treat {itt}"
        )
    click.echo()
    click.echo(f"doctor: {len(problems)} problem(s) in {store.path}")
    click.echo(f"evidence: refs/runs/{plan.oid}/<attempt>/(intent|terminal|evidence)")
    click.echo(f"  yyb --store {store.path} show-ref refs/runs/{plan.oid}")
    click.echo(f"  yyb --store {store.path} doctor --plan {plan.oid[:12]}")
    click.echo(f"  yyb --store {store.path} report --plan {plan.oid[:12]}")
    by_model = {}
    for r in results:
        by_model.setdefault(r.model, set()).add(r.terminal_class)
    expected = {"example/fixer": {"resolved"}, "example/idler": {"grader_failure"}}
    complete = report["status"] == "complete"
    return 0 if by_model == expected and complete and not problems else 1
