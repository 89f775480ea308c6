"""Ref plumbing: update-ref, show-ref, rev-parse, log."""

from __future__ import annotations

import json
import sys

import click

from yyb.cli.context import open_store
from yyb.cli.output import emit_json, json_option
from yyb.store.objects.format import ZERO_OID
from yyb.store.refs.store import ANY


@click.command("update-ref")
@click.option("-m", "reason", default="", metavar="REASON", help="Why the ref moves (one line).")
@click.option(
    "--old",
    metavar="OID",
    help="Move only if the ref holds OID now (64 zeros: only if it does not exist).",
)
@click.option("-d", "--delete", is_flag=True, help="Delete the ref (its update log is kept).")
@json_option
@click.argument("ref")
@click.argument("oid", required=False)
@click.pass_context
def update_ref(ctx, reason, old, delete, as_json, ref, oid):
    """Point REF at OID, appending a yyb_ref_update.v1 record to REF's update chain.

    Prints the oid of that update record.
    """
    if delete == (oid is not None):
        raise click.UsageError("give either OID or --delete")
    store = open_store(ctx)
    expected = ANY
    if old is not None:
        expected = None if old == ZERO_OID else store.rev_parse(old)
    new = None if delete else store.rev_parse(oid)
    update = store.refs.update(ref, new, old=expected, reason=reason)
    if as_json:
        record = store.objects.get_record(update)
        emit_json({"update": update, **{k: record[k] for k in ("ref", "old", "new", "reason")}})
    else:
        click.echo(update)


@click.command("show-ref")
@json_option
@click.argument("patterns", nargs=-1)
@click.pass_context
def show_ref(ctx, as_json, patterns):
    """List refs as '<oid> <name>', sorted; exit 1 if none match.

    A PATTERN with * ? [ is a glob over the full name; otherwise it matches a full name, whole
    trailing components, or a leading folder.
    """
    store = open_store(ctx)
    shown = []
    for name, value in store.refs.iter_refs():
        if patterns and not any(store.refs.matches(name, p) for p in patterns):
            continue
        if as_json:
            shown.append({"name": name, "oid": value})
        else:
            sys.stdout.write(f"{value} {name}\n")
            shown.append(name)
    if as_json:
        emit_json({"refs": shown})
    return 0 if shown else 1


@click.command("rev-parse")
@click.argument("names", nargs=-1, required=True)
@click.pass_context
def rev_parse(ctx, names):
    """Print the full oid each NAME (oid, 4+ hex abbreviation, or ref) stands for."""
    store = open_store(ctx)
    for name in names:
        click.echo(store.rev_parse(name))


@click.command("log")
@click.option("--json", "as_json", is_flag=True, help="One JSON array of updates.")
@click.argument("ref")
@click.pass_context
def log(ctx, as_json, ref):
    """Show REF's update chain, newest first.

    Each line: '<update-oid> <old> <new> <time_ms>' then a tab and the reason; an absent
    value is 64 zeros.
    """
    store = open_store(ctx)
    entries = []
    for oid, record in store.refs.log(ref):
        if as_json:
            entries.append(
                {"oid": oid, **{k: record[k] for k in ("ref", "old", "new", "time_ms", "reason")}}
            )
        else:
            old = record["old"] or ZERO_OID
            new = record["new"] or ZERO_OID
            sys.stdout.write(f"{oid} {old} {new} {record['time_ms']}\t{record['reason']}\n")
    if as_json:
        json.dump(entries, sys.stdout, indent=2)
        sys.stdout.write("\n")


@click.command("pack-refs")
@json_option
@click.pass_context
def pack_refs(ctx, as_json):
    """Move loose refs and their log heads into the packed-refs file (as 'git pack-refs').

    A loose ref is removed once the packed file holds it, unless its lock is held; a loose
    file always wins over the packed entry. Prints '<refs> refs and <heads> log heads packed,
    <removed> loose files removed'. 'yyb gc' does this too, after packing objects.
    """
    from yyb.store.refs import packed as packrefs

    done = packrefs.pack_refs(open_store(ctx))
    if as_json:
        emit_json({"refs": done.refs, "log_heads": done.log_heads, "removed": done.removed})
        return
    click.echo(
        f"{done.refs} refs and {done.log_heads} log heads packed, "
        f"{done.removed} loose files removed"
    )
