"""Packs: `yyb gc`, `yyb repack`, `yyb count-objects`, `yyb verify-pack`."""

from __future__ import annotations

import dataclasses
import sys

import click

from yyb.cli.context import open_store
from yyb.cli.output import emit_json, failed_check, json_option
from yyb.cli.progress import Steps, mode_for, progress_option


@click.command("gc")
@json_option
@progress_option
@click.pass_context
def gc_command(ctx, as_json, progress_mode):
    """Move loose objects into a pack, durably, while others read and write.

    Prints '<packed> objects packed, <removed> loose files removed' and the new pack; a loose
    object that does not hash to its name is left for 'yyb doctor' and named on stderr. When
    the store would then hold more than $YYB_GC_PACK_LIMIT packs (default 50; 0: no limit),
    every object goes into one new pack and the line ends ', <k> packs replaced'. With --json,
    one object: packed, removed, skipped, pack, packs_removed. --progress tells its phases
    and the objects each has done on stderr.
    """
    import os

    from yyb.store import gc

    limit = gc.pack_limit(dict(os.environ))
    store = open_store(ctx)
    shown = Steps(mode_for(progress_mode, sys.stderr), None)
    try:
        done = gc.gc(store, limit, _told(shown))
        shown.end_phase()
    finally:
        shown.close()
    _report(done, always_packs=False, as_json=as_json)


def _told(shown: Steps):
    """gc's phases and counts (``gc.Told``) as steps of ``shown``."""

    def told(phase: str, done: int, total: int | None) -> None:
        if phase != shown.phase_name:
            shown.phase(phase, total)
        if done:
            shown.advance(done, total)

    return told


@click.command("repack")
@click.option("-a", "everything", is_flag=True, help="Every object, packed or loose, in one pack.")
@click.option("-d", "delete", is_flag=True, help="Then remove what the new pack makes redundant.")
@json_option
@click.pass_context
def repack_command(ctx, everything, delete, as_json):
    """Pack the loose objects no pack holds into a new pack (as 'git repack').

    With -a, every object of every pack and every loose object goes into one new pack; with -d,
    the loose files and (with -a) the packs it replaces are then removed, once it is durable
    and verified. Prints '<packed> objects packed, <removed> loose files removed, <k> packs
    replaced' and the new pack, if one was written; with --json, one object as gc's.
    """
    from yyb.store import gc

    _report(gc.repack(open_store(ctx), everything, delete), always_packs=True, as_json=as_json)


def _report(done, always_packs: bool, as_json: bool) -> None:
    """What a gc or repack did: its line and pack, or (``as_json``) one object of them all;
    each loose object left is named on stderr."""
    for oid in done.skipped:
        click.echo(f"yyb: left {oid} loose: it does not hash to its name", err=True)
    if as_json:
        emit_json(dataclasses.asdict(done))
        return
    line = f"{done.packed} objects packed, {done.removed} loose files removed"
    if always_packs or done.packs_removed:
        line += f", {done.packs_removed} packs replaced"
    click.echo(line)
    if done.pack:
        click.echo(done.pack)


@click.command("count-objects")
@click.option("-v", "--verbose", is_flag=True, help="Packs and bytes too.")
@json_option
@click.pass_context
def count_objects(ctx, verbose, as_json):
    """Count loose objects (as 'git count-objects': '<n> objects, <k> kilobytes').

    With --json (with or without -v), one object: loose, loose_bytes, packs, packed,
    pack_bytes (sizes in bytes).
    """
    from yyb.store import gc

    counted = gc.count(open_store(ctx))
    if as_json:
        emit_json(counted)
        return
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
@json_option
def verify_pack(paths, verbose, as_json):
    """Verify packs (each PACK a .pack or .idx file): every hash, the index and the tiling.

    Prints 'ok <path> <count> objects' per pack; exit 1 at the first that fails. With
    --json, one object: ok and packs, each with pack and count (with -v, objects: oid,
    kind, size, offset); a pack that fails gives ok false and its finding, exit 1.
    """
    import os

    from yyb.errors import UsageError
    from yyb.store.objects import pack

    checked: list[dict] = []
    for path in paths:
        stem = path[: -len(".idx")] if path.endswith(".idx") else path.removesuffix(".pack")
        if not os.path.isfile(stem + ".pack") or not os.path.isfile(stem + ".idx"):
            raise UsageError(f"{path}: no pack with its index there")
        with failed_check(as_json, stem + ".pack", packs=checked):
            held = pack.Pack.open(stem + ".pack")
            try:
                held.verify()
                listed = [
                    {"oid": oid, "kind": kind, "size": size, "offset": offset}
                    for oid, kind, size, offset in (held.listing() if verbose else ())
                ]
                count = held.count
            finally:
                held.close()
        checked.append({"pack": stem + ".pack", "count": count})
        if verbose and as_json:
            checked[-1]["objects"] = listed
        elif not as_json:
            for item in listed:
                click.echo(f"{item['oid']} {item['kind']} {item['size']} {item['offset']}")
            click.echo(f"ok {stem}.pack {count} objects")
    if as_json:
        emit_json({"ok": True, "packs": checked})
