"""`yyb import swe-bench`: SWE-bench instances into case files, offline."""

from __future__ import annotations

import click

from yyb.cli.output import emit_json, json_option


@click.group("import")
def import_group():
    """Turn another benchmark's records into yyb cases (no network)."""


@import_group.command("swe-bench")
@click.argument("instances_file", metavar="FILE")
@click.option(
    "--repos",
    required=True,
    metavar="DIR",
    help="Where the repositories are cloned: DIR/<owner>__<name>, else DIR/<name>.",
)
@click.option(
    "--out",
    default="swe-bench",
    show_default=True,
    metavar="FOLDER",
    help="Where the cases, hidden patches and configuration go.",
)
@click.option(
    "--python",
    default="python3",
    show_default=True,
    metavar="PATH",
    help="The interpreter the imported profiles run pytest with.",
)
@click.option(
    "--tool-path",
    "tool_paths",
    multiple=True,
    metavar="DIR",
    help="Add a read-only tool path (the test environment) to the tool policy (repeatable).",
)
@click.option(
    "--environments",
    "environments_file",
    metavar="FILE",
    help="Environment recipes by instance id (JSON: python, requirements, install); "
    "instances it does not name use SWE-bench's per-repository specs (docs/swe-bench.md).",
)
@click.option(
    "--check-ids",
    is_flag=True,
    help="Check every listed test id against pytest's collection at the base with the test "
    "patch applied, in the sandbox; repair ids cut short, refuse unknown ones.",
)
@json_option
@click.pass_context
def swe_bench(
    ctx, instances_file, repos, out, python, tool_paths, environments_file, check_ids, as_json
):
    """Import SWE-bench instance records (a JSON list, or JSON Lines) from FILE.

    Prints each case's task file, one per line. Exit 0 when every instance was imported,
    2 when any is refused (nothing is written then). docs/swe-bench.md gives the formats.
    """
    from yyb.cli.context import open_store
    from yyb.swebench import importer

    written = importer.run(
        instances_file,
        repos,
        out,
        python,
        tuple(tool_paths),
        check_ids,
        environments_file,
        lambda: open_store(ctx, create=True),
    )
    for line in written.repairs:
        click.echo(f"yyb: {line}", err=True)
    if as_json:
        tasks = [{"instance_id": instance, "task": path} for instance, path in written.tasks]
        emit_json({"tasks": tasks, "config": written.config, "repairs": list(written.repairs)})
    else:
        for _, path in written.tasks:
            click.echo(path)
    click.echo(f"yyb: {len(written.tasks)} case(s); configuration {written.config}", err=True)
    return 0
