"""`yyb view`: serve the store, read-only, to a browser on this machine."""

from __future__ import annotations

import signal

import click

from yyb.cli.context import open_store
from yyb.errors import UsageError


@click.command("view")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="The port on 127.0.0.1 (0: a free one).",
)
@click.option(
    "--trusted-key",
    "trusted",
    multiple=True,
    metavar="PUB",
    help="A trusted public key (64 hex digits, or a file holding them); repeatable. Signed "
    "objects then show whether a signature by one of them verifies.",
)
@click.pass_context
def view(ctx, port, trusted):
    """Browse the store in a web browser: experiments, attempts, any object, refs.

    Listens on 127.0.0.1 only, prints 'yyb view: URL', and serves until interrupted (Ctrl-C
    or SIGTERM; exit 0). It never writes to the store: every page reads it, and shows each
    object with its verification.
    """
    from yyb import signing
    from yyb.view import server

    store = open_store(ctx)
    keys = [signing.load_public(key) for key in trusted]
    try:
        viewer = server.start(
            store, port, keys, log=lambda line: click.echo(f"yyb view: {line}", err=True)
        )
    except UsageError as exc:
        raise UsageError(f"{exc.message} (--port 0 picks a free port)") from None
    signal.signal(signal.SIGTERM, _interrupt)
    click.echo(f"yyb view: {viewer.url}")  # flushed: a caller may be reading it from a pipe
    try:
        viewer.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        viewer.server_close()
    return 0


def _interrupt(signum, frame) -> None:
    """SIGTERM stops the viewer as Ctrl-C does."""
    raise KeyboardInterrupt
