"""Store management: create a store, show where it is."""

from __future__ import annotations

import click

from yyb.cli.context import store_path
from yyb.cli.output import emit_json, json_option
from yyb.store.repo import Store


@click.group("store")
def store():
    """Create or locate the object store."""


@store.command("init")
@click.argument("directory", required=False)
@json_option
@click.pass_context
def init(ctx, directory, as_json):
    """Create a store at DIRECTORY (default: the store --store / YYB_STORE names, or the
    per-repository default), or in a bucket (s3://bucket/prefix, an archive to push to and
    fetch from); an existing store is left as it is. Prints its path."""
    if directory and directory.startswith("s3://"):
        from yyb.store.bucket import client, sync

        location = client.parse(directory)
        new = sync.init(location)
        if as_json:
            emit_json({"path": location.url, "created": new})
        else:
            click.echo(location.url)
        click.echo("created a new store" if new else "store exists; nothing changed", err=True)
        return
    created, new = Store.init(directory or store_path(ctx))
    if as_json:
        emit_json({"path": created.path, "created": new})
    else:
        click.echo(created.path)
    click.echo("created a new store" if new else "store exists; nothing changed", err=True)


@store.command("path")
@json_option
@click.pass_context
def path(ctx, as_json):
    """Print the path of the store this command line would use."""
    if as_json:
        emit_json({"path": store_path(ctx)})
    else:
        click.echo(store_path(ctx))
