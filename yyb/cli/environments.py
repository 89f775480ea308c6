"""`yyb env`: build, list, show, verify and collect built environments (docs/environments.md)."""

from __future__ import annotations

import json
import sys

import click

from yyb.cli.context import open_store
from yyb.cli.progress import Steps, mode_for, progress_option
from yyb.errors import UsageError


@click.group("env")
def env():
    """Environments: the declared, content-addressed roots cases run on."""


@env.command("build")
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--repository",
    type=click.Path(file_okay=False),
    help="The repository a python spec's install step runs in (at its install_commit).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per environment.")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr (--progress none).")
@progress_option
@click.pass_context
def build_command(ctx, specs, repository, as_json, quiet, progress_mode):
    """Build each spec file (its base first) unless it is built; check it if it is.

    Prints '<environment oid> <spec oid> <name>' per spec. A failed step is named on stderr
    (exit 1) and nothing of that build is kept. --progress tells the specs done of all and
    each build's steps on stderr.
    """
    from yyb.evidence import environment
    from yyb.harness.environments import registry

    store = open_store(ctx, create=True)
    shown = Steps("none" if quiet else mode_for(progress_mode, sys.stderr), len(specs))
    try:
        for path in specs:
            declared = environment.load(path)
            name = declared.name
            shown.begin(name)
            ready = environment.ensure(store, declared, repository, _told(shown, name))
            shown.step(f"{name} {ready.oid[:12]}")
            shown.close()  # its line goes to stdout under no status line
            _echo(registry.Entry(ready.spec_oid, ready.oid, ready.record, True), as_json)
    finally:
        shown.close()


def _told(shown: Steps, name: str):
    """A build's steps as lines of its own, kept above the status line."""
    return lambda text: shown.note(f"environment {name}: {text}")


def _echo(entry, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(entry.value(), sort_keys=True))
    else:
        click.echo(f"{entry.oid} {entry.spec_oid} {entry.record['name']}")


@env.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per environment.")
@click.pass_context
def list_command(ctx, as_json):
    """Every built environment: '<spec oid> <environment oid> <kind> <cached|absent> <name>'."""
    from yyb.harness.environments import registry

    for entry in registry.entries(open_store(ctx)):
        if as_json:
            click.echo(json.dumps(entry.value(), sort_keys=True))
        else:
            state = "cached" if entry.cached else "absent"
            kind, name = entry.record["kind"], entry.record["name"]
            click.echo(f"{entry.spec_oid} {entry.oid} {kind} {state} {name}")


def _one(store, name: str):
    from yyb.harness.environments import registry

    found = registry.find(store, name)
    if len(found) != 1:
        what = "no built environment" if not found else f"{len(found)} built environments"
        raise UsageError(f"{what} named {name!r} (yyb env list shows them)")
    return found[0]


@env.command("show")
@click.argument("name")
@click.option("--manifest", is_flag=True, help="Print the tree's manifest instead.")
@click.option("--json", "as_json", is_flag=True, help="Accepted: the document is JSON already.")
@click.pass_context
def show_command(ctx, name, manifest, as_json):
    """An environment's record and spec as JSON (NAME: its name or an oid prefix)."""
    store = open_store(ctx)
    entry = _one(store, name)
    if manifest:
        click.echo(store.objects.get(entry.record["links"]["manifest"]).body, nl=False)
        return
    shown = {
        "environment": entry.oid,
        "record": entry.record,
        "spec": store.objects.get_record(entry.spec_oid),
        "cached": entry.cached,
    }
    click.echo(json.dumps(shown, indent=2, sort_keys=True))


@env.command("verify")
@click.argument("names", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per environment.")
@click.pass_context
def verify_command(ctx, names, as_json):
    """Read every file of each cached environment (all, or NAMES) against its manifest.

    Prints 'ok <name>' or 'bad <name>: <reason>' per environment; exits 1 if any is bad or
    not built here.
    """
    from yyb.harness.environments import registry

    store = open_store(ctx)
    chosen = [_one(store, n) for n in names] if names else registry.entries(store)
    bad = 0
    for entry in chosen:
        problem = registry.verify(store, entry)
        bad += problem is not None
        name = entry.record["name"]
        if as_json:
            click.echo(json.dumps({**entry.value(), "ok": problem is None, "problem": problem}))
        else:
            click.echo(f"ok {name}" if problem is None else f"bad {name}: {problem}")
    ctx.exit(1 if bad else 0)


@env.command("gc")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@click.pass_context
def gc_command(ctx, as_json):
    """Remove cached trees no ref names, crashed builds' leftovers and unlinked pool files.

    Prints '<t> trees, <l> leftovers, <f> pool files (<b> bytes) removed'.
    """
    import dataclasses

    from yyb.harness.environments import registry

    done = registry.gc(open_store(ctx))
    if as_json:
        click.echo(json.dumps(dataclasses.asdict(done), sort_keys=True))
        return
    click.echo(
        f"{done.trees} trees, {done.leftovers} leftovers, "
        f"{done.pool_files} pool files ({done.pool_bytes} bytes) removed"
    )
