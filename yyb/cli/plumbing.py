"""Object plumbing: hash-object and cat-object (their work is in ``yyb.cli.objects``, which
the click-free fast path in ``yyb.cli.fast`` calls too)."""

from __future__ import annotations

import click

from yyb.cli import objects
from yyb.cli.context import open_store


@click.command("hash-object")
@click.option("-w", "write", is_flag=True, help="Write the object into the store.")
@click.option(
    "-t",
    "kind",
    type=click.Choice(["blob", "record"]),
    default="blob",
    show_default=True,
    help="record: the input is JSON, stored canonically.",
)
@click.option("--stdin", "from_stdin", is_flag=True, help="Read one object from standard input.")
@click.option("--stdin-paths", is_flag=True, help="Read file paths from standard input.")
@click.option("-z", "nul", is_flag=True, help="With --stdin-paths: paths end with NUL.")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.pass_context
def hash_object(ctx, write, kind, from_stdin, stdin_paths, nul, files):
    """Print the oid of each input (one per line), writing it to the store with -w.

    A record's JSON may not hold floats or duplicate keys and must name a schema_version
    whose schema accepts it.
    """
    if from_stdin and stdin_paths:
        raise click.UsageError("--stdin and --stdin-paths exclude each other")
    if stdin_paths and files:
        raise click.UsageError("--stdin-paths takes no FILE arguments")
    if not (from_stdin or stdin_paths or files):
        raise click.UsageError("nothing to hash: give FILE..., --stdin or --stdin-paths")
    return objects.hash_objects(
        lambda: open_store(ctx), write, kind, from_stdin, stdin_paths, nul, list(files)
    )


@click.command("cat-object")
@click.option("-t", "mode", flag_value="type", help="Print the kind (blob or record).")
@click.option("-s", "mode", flag_value="size", help="Print the body size in bytes.")
@click.option(
    "-e",
    "mode",
    flag_value="exists",
    help="No output; exit 0 only if the object exists and is valid.",
)
@click.option("-p", "mode", flag_value="pretty", help="Blob bytes, or a record as JSON.")
@click.option("--json", "mode", flag_value="json", help="A record as one line of JSON.")
@click.option("--raw", "mode", flag_value="raw", help="The body bytes exactly as hashed.")
@click.option(
    "--batch",
    "mode",
    flag_value="batch",
    help="For each name on stdin: '<oid> <kind> <size>' LF body LF.",
)
@click.option(
    "--batch-check",
    "mode",
    flag_value="batch-check",
    help="For each name on stdin: '<oid> <kind> <size>'.",
)
@click.option(
    "--buffer",
    is_flag=True,
    help="With --batch*: flush only when the output buffer fills (by default the answers "
    "are flushed whenever yyb waits for more names).",
)
@click.argument("name", required=False)
@click.pass_context
def cat_object(ctx, mode, buffer, name):
    """Show an object named by NAME (full oid, 4+ hex abbreviation, or ref).

    Missing names give '<name> missing' in batch mode, 'ambiguous' and 'corrupt' likewise;
    a corrupt object makes the batch exit 1 at the end. A line over 4096 bytes is answered
    '<its first 4096 bytes> too-long' and makes the batch exit 2 at the end.
    """
    if mode is None:
        raise click.UsageError("choose one of -t -s -e -p --json --raw --batch --batch-check")
    batch = mode in ("batch", "batch-check")
    if batch == (name is not None):
        raise click.UsageError(
            "--batch and --batch-check read names from stdin; the other modes take one NAME"
        )
    return objects.cat_object(open_store(ctx), mode, name, buffer)
