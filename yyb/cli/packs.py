"""Packs: `yyb gc`, `yyb repack`, `yyb count-objects`, `yyb verify-pack`."""

from __future__ import annotations

import click

from yyb.cli.context import open_store


@click.command("gc")
@click.pass_context
def gc_command(ctx):
    """Move loose objects into a pack, durably, while others read and write.

    Prints '<packed> objects packed, <removed> loose files removed' and the new pack; a loose
    object that does not hash to its name is left for 'yyb doctor' and named on stderr. When
    the store would then hold more than $YYB_GC_PACK_LIMIT packs (default 50; 0: no limit),
    every object goes into one new pack and the line ends ', <k> packs replaced'.
    """
    import os

    from yyb.store import gc

    limit = gc.pack_limit(dict(os.environ))
    done = gc.gc(open_store(ctx), limit)
    _report(done, always_packs=False)


@click.command("repack")
@click.option("-a", "everything", is_flag=True, help="Every object, packed or loose, in one pack.")
@click.option("-d", "delete", is_flag=True, help="Then remove what the new pack makes redundant.")
@click.pass_context
def repack_command(ctx, everything, delete):
    """Pack the loose objects no pack holds into a new pack (as 'git repack').

    With -a, every object of every pack and every loose object goes into one new pack; with -d,
    the loose files and (with -a) the packs it replaces are then removed, once it is durable
    and verified. Prints '<packed> objects packed, <removed> loose files removed, <k> packs
    replaced' and the new pack, if one was written.
    """
    from yyb.store import gc

    _report(gc.repack(open_store(ctx), everything, delete), always_packs=True)


def _report(done, always_packs: bool) -> None:
    for oid in done.skipped:
        click.echo(f"yyb: left {oid} loose: it does not hash to its name", err=True)
    line = f"{done.packed} objects packed, {done.removed} loose files removed"
    if always_packs or done.packs_removed:
        line += f", {done.packs_removed} packs replaced"
    click.echo(line)
    if done.pack:
        click.echo(done.pack)


@click.command("count-objects")
@click.option("-v", "--verbose", is_flag=True, help="Packs and bytes too.")
@click.pass_context
def count_objects(ctx, verbose):
    """Count loose objects (as 'git count-objects': '<n> objects, <k> kilobytes')."""
    from yyb.store import gc

    counted = gc.count(open_store(ctx))
    if not verbose:
        click.echo(f"{counted['loose']} objects, {counted['loose_bytes'] // 1024} kilobytes")
        return
    click.echo(f"count: {counted['loose']}")
    click.echo(f"size: {counted['loose_bytes'] // 1024}")
    click.echo(f"in-pack: {counted['packed']}")
    click.echo(f"packs: {counted['packs']}")
    click.echo(f"size-pack: {counted['pack_bytes'] // 1024}")


@click.command("verify-pack")
@click.argument("paths", nargs=-1, required=True, metavar="PACK...")
@click.option("-v", "--verbose", is_flag=True, help="List each object: oid, kind, size, offset.")
def verify_pack(paths, verbose):
    """Verify packs (each PACK a .pack or .idx file): every hash, the index and the tiling.

    Prints 'ok <path> <count> objects' per pack; exit 1 at the first that fails.
    """
    import os

    from yyb.errors import UsageError
    from yyb.store.objects import pack

    for path in paths:
        stem = path[: -len(".idx")] if path.endswith(".idx") else path.removesuffix(".pack")
        if not os.path.isfile(stem + ".pack") or not os.path.isfile(stem + ".idx"):
            raise UsageError(f"{path}: no pack with its index there")
        held = pack.Pack.open(stem + ".pack")
        try:
            held.verify()
            if verbose:
                for i in range(held.count):
                    oid = held._oid(i).hex()
                    data = held._entry(i, oid)
                    kind, size, _ = pack.parse_header(data[: pack.MAX_HEADER], oid)
                    click.echo(f"{oid} {kind} {size} {held._offset(i)}")
            click.echo(f"ok {stem}.pack {held.count} objects")
        finally:
            held.close()
