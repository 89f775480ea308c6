"""Checks: verify-chain and doctor (the store-wide fsck)."""

from __future__ import annotations

import click

from yyb.cli.context import emit_findings, open_store


@click.command("verify-chain")
@click.option("--json", "as_json", is_flag=True, help="One JSON array of findings.")
@click.option(
    "--trusted-key",
    "trusted",
    multiple=True,
    metavar="PUB",
    help="A trusted public key (64 hex digits, or a file holding them); repeatable. The "
    "object NAME stands for, and every terminal, evaluation and report layer it links, must "
    "then carry a valid signature by one of them.",
)
@click.argument("name")
@click.pass_context
def verify_chain(ctx, as_json, trusted, name):
    """Verify everything reachable from NAME (an oid or a ref, with its update chain).

    Prints one line per problem, '<level> <code> <subject>: <detail>'; exit 1 on any.
    """
    from yyb.store.fsck.verify_chain import verify_chain as walk

    store = open_store(ctx)
    findings = walk(store, name)
    if trusted:
        import itertools

        from yyb import signing

        keys = [signing.load_public(k) for k in trusted]
        head = store.rev_parse(name)
        findings = itertools.chain(findings, signing.check_vouched(store, head, keys))
    errors, _ = emit_findings(findings, as_json)
    return 1 if errors else 0


@click.command("doctor")
@click.option(
    "--plan",
    "plan_name",
    metavar="PLAN",
    help="Verify one experiment end to end (a plan file, or its oid or ref).",
)
@click.option(
    "--remote",
    "remote_name",
    metavar="REMOTE",
    help="Check the store in a bucket instead (a remote's name or an s3:// URL), streaming "
    "each pack from it.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON array of findings.")
@click.argument("experiment", required=False, metavar="[workflow-<PLAN OID>]")
@click.pass_context
def doctor(ctx, plan_name, remote_name, as_json, experiment):
    """Check the whole store, like git fsck, or one experiment with --plan.

    Prints one line per finding, '<level> <code> <subject>: <detail>'; exit 0 when clean, 1
    when problems are found. 'info' lines (dangling objects, leftovers of interrupted writes)
    do not fail the check. With --plan, an experiment whose attempts do not all have a
    complete, exactly linked evidence chain is reported incomplete. 'workflow-<plan oid>'
    verifies a governed experiment from retained evidence alone (docs/workflow.md).
    """
    if remote_name is not None:
        if plan_name is not None or experiment is not None:
            from yyb.errors import UsageError

            raise UsageError("--remote checks a whole store in a bucket (no --plan, no workflow)")
        return _bucket(ctx, remote_name, as_json)
    store = open_store(ctx)
    if experiment is not None:
        return _governed(store, experiment, plan_name, as_json)
    if plan_name is not None:
        from yyb.cli.plans import plan_oid as resolve_plan
        from yyb.evidence.experiment import verify_experiment

        plan_oid = resolve_plan(ctx, plan_name)
        findings, summary = verify_experiment(store, plan_oid)
        errors, _ = emit_findings(findings, as_json)
        click.echo(
            f"doctor: experiment {plan_oid} is {summary['status']}: "
            f"{summary['complete']} of {summary['attempts']} attempts have a "
            f"complete chain; {errors} problem(s)",
            err=True,
        )
        return 1 if errors or summary["status"] != "complete" else 0
    from yyb.cli.findings import store_doctor

    return store_doctor(store, as_json)


def bucket_location(ctx, given: str):
    """The s3:// store a remote's name or URL names (a name needs this command's store).

    Raises:
        UsageError: no such remote, or one that is not in a bucket.
    """
    from yyb.errors import UsageError
    from yyb.store import remotes

    store = None if "://" in given else open_store(ctx)
    url = remotes.resolve(store, given)
    if url.kind != "s3":
        raise UsageError(f"{given}: --remote names a store in a bucket (s3://bucket/prefix)")
    return remotes.bucket_location(url)


def _bucket(ctx, given: str, as_json: bool) -> int:
    """``yyb doctor --remote``: the store in a bucket, checked where it lies."""
    import tempfile

    from yyb.readiness.doctor import bucket_findings

    location = bucket_location(ctx, given)
    with tempfile.TemporaryDirectory(prefix="yyb-doctor-") as scratch:
        errors, infos = emit_findings(bucket_findings(location, scratch), as_json)
    click.echo(f"doctor: {errors} problem(s), {infos} note(s) in {location.url}", err=True)
    return 1 if errors else 0


def _governed(store, experiment: str, plan_name, as_json: bool) -> int:
    """``yyb doctor workflow-<plan oid>``: the governed experiment's chain (check.doctor)."""
    from yyb.errors import UsageError
    from yyb.evidence import names
    from yyb.store.objects.format import is_oid
    from yyb.workflow import check
    from yyb.workflow.plan import load

    oid = experiment.removeprefix("workflow-")
    if plan_name is not None or not experiment.startswith("workflow-") or not is_oid(oid):
        raise UsageError(
            f"{experiment!r}: name a governed experiment as workflow-<64 hex> (without --plan)"
        )
    if store.refs.read(names.governed_plan(oid)) != oid:
        raise UsageError(f"no governed plan {oid} in {store.path}")
    findings = check.doctor(store, load(oid, lambda: store))
    errors, _ = emit_findings(findings, as_json)
    click.echo(f"doctor: governed experiment {oid}: {errors} problem(s)", err=True)
    return 1 if errors else 0
