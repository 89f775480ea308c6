"""`yyb remote add|remove|list`, and the plumbing that serves the other side of a push or a
fetch: `yyb receive-pack`, `yyb upload-pack` (docs/remotes.md)."""

from __future__ import annotations

import sys

import click

from yyb.cli.context import open_store
from yyb.cli.output import emit_json, json_option


@click.group("remote")
def remote():
    """The store's remotes: names for other stores' URLs (file://, ssh://, s3://)."""


@remote.command("add")
@click.argument("name")
@click.argument("url")
@click.pass_context
def add(ctx, name, url):
    """Name URL (file:///path, ssh://[user@]host[:port]/path, s3://bucket/prefix, or a path)
    as remote NAME."""
    from yyb.store import remotes

    remotes.add(open_store(ctx), name, url)


@remote.command("remove")
@click.argument("name")
@click.pass_context
def remove(ctx, name):
    """Forget the remote NAME (nothing on the other side changes)."""
    from yyb.store import remotes

    remotes.remove(open_store(ctx), name)


@remote.command("list")
@json_option
@click.pass_context
def list_remotes(ctx, as_json):
    """Print '<name> <url>' per remote, sorted by name."""
    from yyb.store import remotes

    named = remotes.read(open_store(ctx))
    if as_json:
        emit_json({"remotes": [{"name": n, "url": u} for n, u in named.items()]})
        return
    for name, url in named.items():
        click.echo(f"{name} {url}")


def _serve(ctx, service: str) -> int:
    from yyb.store import remotes, transfer

    store = open_store(ctx)
    channel = transfer.Channel(sys.stdin.buffer, sys.stdout.buffer)
    return remotes.serve(store, service, channel)


@click.command("receive-pack")
@click.pass_context
def receive_pack(ctx):
    """Serve a push into this store on stdin and stdout (run by 'yyb push', over ssh or as a
    child process; the protocol is in docs/remotes.md)."""
    return _serve(ctx, "receive-pack")


@click.command("upload-pack")
@click.pass_context
def upload_pack(ctx):
    """Serve a fetch from this store on stdin and stdout (run by 'yyb fetch')."""
    return _serve(ctx, "upload-pack")
