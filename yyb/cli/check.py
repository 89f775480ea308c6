"""Checks: verify-chain and doctor (the store-wide fsck)."""

from __future__ import annotations

import sys

import click

from yyb.cli.context import emit_findings, open_store


@click.command("verify-chain")
@click.option("--json", "as_json", is_flag=True, help="One JSON array of findings.")
@click.argument("name")
@click.pass_context
def verify_chain(ctx, as_json, name):
    """Verify everything reachable from NAME (an oid or a ref, with its update chain).

    Prints one line per problem, '<level> <code> <subject>: <detail>'; exit 1 on any.
    """
    from yyb.store.chain import verify_chain as walk

    store = open_store(ctx)
    errors, _ = emit_findings(walk(store, name), as_json)
    return 1 if errors else 0


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="One JSON array of findings.")
@click.pass_context
def doctor(ctx, as_json):
    """Check the whole store, like git fsck: exit 0 when clean, 1 when problems are found.

    Prints one line per finding, '<level> <code> <subject>: <detail>'; 'info' lines (dangling
    objects, leftovers of interrupted writes) do not fail the check.
    """
    from yyb.store.fsck import fsck

    store = open_store(ctx)
    errors, infos = emit_findings(fsck(store), as_json)
    sys.stderr.write(f"doctor: {errors} problem(s), {infos} note(s) in {store.path}\n")
    return 1 if errors else 0
