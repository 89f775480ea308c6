"""`yyb release-readiness`: the offline pre-flight receipt of this build on this host."""

from __future__ import annotations

import json
import os
import sys

import click

from yyb.cli.context import claim_scratch, config_path, open_store, output_option
from yyb.cli.progress import Progress, mode_for, progress_option
from yyb.errors import UsageError


def _config(ctx):
    """The configuration whose harnesses the receipt binds: the one named, else the one at
    the top of the current repository, else none (outside a repository)."""
    from yyb import config

    named = ctx.find_root().obj.get("config_path")
    try:
        path = config_path(ctx)
    except UsageError:
        return None
    if named is None and not os.path.exists(path):
        return None
    return config.load(path)


@click.command("release-readiness")
@output_option(
    "Also write the receipt, its oid and its checks as JSON to FILE (which must not exist)."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option(
    "--environment",
    "environment_spec",
    metavar="SPEC",
    help="Run every case of the suite on this environment (a spec file; docs/environments.md).",
)
@progress_option
@click.pass_context
def release_readiness(ctx, output, as_json, environment_spec, progress_mode):
    """Prove offline that this build, on this host, isolates candidates and grades honestly.

    Binds the build (a clean checkout's commit, or the installed distribution), the
    configured harnesses, the sandbox, the kernel and Python; runs six leakage checks and a
    coverage suite as real sandboxed attempts of built-in stand-ins (nothing is dispatched to
    a model and nothing can be spent); stores a deterministic receipt under
    refs/release-readiness/. Exit 0 when every check passed; 1 when one failed or the sandbox
    cannot start; 2 when the build cannot be bound (a dirty checkout or one hiding a change
    from git, an installed file that differs from its RECORD or is in none, a module that
    ran that is not the build's, a start-up file reaching yyb) or FILE exists.
    docs/readiness.md explains each check. --progress tells the suite's attempts on stderr.
    """
    from yyb.plans.planfile import check_output_free
    from yyb.readiness import identity, run
    from yyb.store import file

    if output is not None:
        check_output_free(output)
    # A dirty checkout, a module or start-up file that is not the build's, or a host with no
    # sandbox, is refused before anything is written.
    build = identity.build()
    build.identity()
    host = identity.host()
    config = _config(ctx)
    store = open_store(ctx, create=True)
    claim_scratch(store)
    declared = None
    if environment_spec is not None:
        from yyb.evidence import environment

        declared = environment.load(environment_spec)
    shown = Progress(mode_for(progress_mode, sys.stderr), len(run.CASES))
    try:
        outcome = run.release_readiness(
            store, config, dict(os.environ), build, host, environment=declared, watcher=shown
        )
    finally:
        shown.close()
    document = {"oid": outcome.oid, "receipt": outcome.receipt, "checks": outcome.checks}
    if output is not None:
        file.write_new(output, (json.dumps(document, indent=2, sort_keys=True) + "\n").encode())
    if as_json:
        json.dump({**document, "runs": outcome.plans}, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        _text(outcome, store.path)
    return 0 if outcome.receipt["passed"] else 1


def _text(outcome, store_path: str) -> None:
    receipt = outcome.receipt
    out = sys.stdout
    build = receipt["yyb"]
    if build["kind"] == "checkout":
        out.write(f"build      yyb {build['version']} from commit {build['commit']}\n")
    else:
        out.write(
            f"build      {build['name']} {build['version']} installed "
            f"(RECORD {build['record_sha256'][:16]}, {build['files_checked']} files checked)\n"
        )
    modules = build["modules"]
    out.write(
        f"modules    {modules['count']} ran, each the build's (sha256 {modules['sha256'][:16]})\n"
    )
    host = receipt["host"]
    out.write(
        f"sandbox    {host['sandbox']['version']}: {'; '.join(host['sandbox']['verified'])}\n"
    )
    out.write(
        f"host       {host['kernel']['system']} {host['kernel']['release']} "
        f"{host['kernel']['machine']}, {host['python']['implementation']} "
        f"{host['python']['version']}\n"
    )
    for harness in receipt["harnesses"]:
        if "path" in harness:
            version = harness.get("version") or f"unknown ({harness['problem']})"
            out.write(
                f"harness    {harness['id']}: {harness['path']} sha256 "
                f"{harness['sha256'][:16]}, {version}\n"
            )
        else:
            out.write(f"harness    {harness['id']}: {harness['problem']}\n")
    if not receipt["harnesses"]:
        out.write("harness    none configured here\n")
    if "environment" in receipt:
        pin = receipt["environment"]
        out.write(
            f"environment {pin['environment'][:16]} (spec {pin['spec'][:16]}, manifest "
            f"{pin['manifest_sha256'][:16]}): every case ran on it\n"
        )
    out.write("\n")
    for record in outcome.checks:
        observed = record["observed"]
        mark = "ok  " if record["passed"] else "FAIL"
        what = f"leakage {record['leakage']}" if record.get("leakage") else record["case"]
        detail = observed["class"] or "no terminal"
        if observed["class"] != record["expected"]["class"]:
            detail += f" (expected {record['expected']['class']})"
        elif observed["verdicts"] != record["expected"]["verdicts"]:
            detail += (
                f" (verdicts {observed['verdicts']}, expected {record['expected']['verdicts']})"
            )
        problems = observed.get("findings", []) + observed.get("changed", [])
        if record.get("leakage"):
            seen = "; ".join(problems) if problems else "saw nothing, changed nothing"
            ended = "" if detail == record["expected"]["class"] else f" (ended {detail})"
            detail = f"probe {observed['probe']}: {seen}{ended}"
        out.write(f"{mark} {what:<28} {detail}\n")
    missing = receipt["coverage"]["missing"]
    out.write("\n")
    out.write(f"coverage   {'complete' if not missing else 'missing ' + ', '.join(missing)}\n")
    out.write(f"receipt    {outcome.oid} ({'passed' if receipt['passed'] else 'FAILED'})\n")
    out.write(
        f"evidence   yyb --store {store_path} show-ref refs/release-readiness/{outcome.oid}\n"
    )
