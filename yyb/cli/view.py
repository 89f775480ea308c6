"""`yyb view`: serve the store, read-only, to a browser on this machine; or write one plan's
pages as files that open without a server (``--bundle``)."""

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
@click.option(
    "--bundle",
    metavar="DIR",
    help="Write the pages of --plan as files into DIR (new or empty) instead of serving: "
    "DIR/index.html opens without a server.",
)
@click.option(
    "--plan",
    "plan_name",
    metavar="PLAN",
    help="With --bundle: the plan (a plan file, or a plan oid or ref in the store).",
)
@click.pass_context
def view(ctx, port, trusted, bundle, plan_name):
    """Browse the store in a web browser: experiments, attempts, any object, refs.

    Listens on 127.0.0.1 only, prints 'yyb view: URL', and serves until interrupted (Ctrl-C
    or SIGTERM; exit 0). It never writes to the store: every page reads it, and shows each
    object with its verification. With --bundle DIR --plan PLAN it serves nothing: it writes
    the plan's pages into DIR, verified now, and prints where.
    """
    from yyb import signing

    if (bundle is None) != (plan_name is None):
        raise UsageError("--bundle DIR and --plan PLAN go together")
    if bundle is not None and ctx.get_parameter_source("port").name == "COMMANDLINE":
        raise UsageError("--port is for serving; --bundle writes files")
    if bundle is not None:
        from yyb.view import bundle as bundles

        bundles.check_free(bundle)  # before anything is read: a refused bundle writes nothing
    store = open_store(ctx)
    keys = [signing.load_public(key) for key in trusted]
    if bundle is not None:
        return _bundle(ctx, store, keys, bundle, plan_name)
    return _serve(store, keys, port)


def _bundle(ctx, store, keys: list, folder: str, plan_name: str) -> int:
    from yyb.plans import planfile
    from yyb.view import bundle as bundles

    plan_oid = planfile.plan_oid(plan_name, lambda: store)
    written = bundles.write(store, keys, plan_oid, folder)
    click.echo(
        f"yyb view: wrote {written.pages} pages of plan {plan_oid[:12]} ({written.attempts} "
        f"attempt(s)) to {written.folder}; open {written.folder}/index.html"
    )
    return 0


def _serve(store, keys: list, port: int) -> int:
    from yyb.view import server

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
