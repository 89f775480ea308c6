"""Bundles: bundle create/verify/list-heads/unbundle, and push/fetch between stores."""

from __future__ import annotations

import sys

import click

from yyb.cli.context import open_store
from yyb.cli.output import emit_json, failed_check, json_option
from yyb.store.objects.format import ZERO_OID


@click.group("bundle")
def bundle():
    """Move evidence between machines as one self-verifying file (docs/format.md)."""


def plan_ref_names(store, plan_oid: str) -> list[str]:
    """The refs of one experiment (names.experiment), and the signature refs an auditor needs:
    those of every signed-kind record the experiment's refs and their histories reach."""
    from yyb import signing
    from yyb.evidence import names

    found = []
    for name in names.experiment(plan_oid):
        if name.endswith("/"):
            found.extend(store.refs.names(under=name.rstrip("/")))
        elif store.refs.read(name) is not None:
            found.append(name)
    roots = [store.refs.read(name) for name in found]
    roots += [head for name in found if (head := store.refs.log_head(name)) is not None]
    return sorted(set(found) | set(signing.signature_refs(store, [r for r in roots if r])))


def readiness_ref_names(store, receipt: str) -> list[str]:
    """The refs of one release-readiness receipt and every ref of the plans its checks ran.

    Raises:
        UsageError: no such receipt in the store.
    """
    from yyb.errors import UsageError
    from yyb.evidence import names

    oid = store.refs.read(names.READINESS_LATEST) if receipt == "latest" else receipt
    if oid is None or store.refs.read(names.readiness_receipt(oid)) != oid:
        raise UsageError(f"no release-readiness receipt {receipt} in {store.path}")
    found = [names.readiness_receipt(oid), *store.refs.names(under=names.readiness_runs(oid))]
    for name in found[1:]:
        found += plan_ref_names(store, store.refs.read(name))
    return sorted(set(found))


def with_checkpoint(store, names: list[str]) -> list[str]:
    """``names`` and the latest checkpoint of the transparency log, with the signature refs
    of every checkpoint note its chain reaches, so that the bundle carries the log its refs
    can be audited against."""
    from yyb import signing
    from yyb.store.log import checkpoint

    if store.refs.read(checkpoint.REF) is None:
        return names
    extra = [checkpoint.REF]
    for _, update in store.refs.log(checkpoint.REF):  # every checkpoint its chain carries
        if update.get("new"):
            note = store.objects.get_record(update["new"])["links"]["note"]
            if store.refs.read(signing.signature_ref(note)) is not None:
                extra.append(signing.signature_ref(note))
    return sorted(set(names) | set(extra))


def selected_refs(ctx, store, refs, plan_name, receipt, everything) -> list[str]:
    """The refs REF... (or --plan, --readiness or --all) name: what a bundle or a push
    carries; an experiment's or a receipt's with the latest checkpoint of the log.

    Raises:
        click.UsageError: not exactly one of them, or no ref at all.
    """
    if sum(map(bool, (refs, plan_name, receipt, everything))) != 1:
        raise click.UsageError(
            "give REF..., --plan PLAN, --readiness RECEIPT or --all (exactly one)"
        )
    if receipt is not None:
        names = readiness_ref_names(store, receipt)
    elif everything:
        names = [name for name, _ in store.refs.iter_refs()]
    elif plan_name is not None:
        from yyb.cli.plans import plan_oid as resolve_plan
        from yyb.store.objects.format import is_oid

        governed = plan_name.removeprefix("workflow-")
        if plan_name.startswith("workflow-") and is_oid(governed):
            plan_oid = governed  # a governed experiment, named as yyb doctor names it
        else:
            plan_oid = resolve_plan(ctx, plan_name)
        names = plan_ref_names(store, plan_oid)
    else:
        names = list(refs)
    if not names:
        raise click.UsageError("no refs to send")
    if plan_name is not None or receipt is not None:
        names = with_checkpoint(store, names)
    return names


def selection_options(command):
    """--plan, --readiness and --all, the ref selections of ``bundle create`` and ``push``."""
    for option in reversed(
        [
            click.option(
                "--plan",
                "plan_name",
                metavar="PLAN",
                help="Every ref of one experiment (a governed one: workflow-<plan oid>).",
            ),
            click.option(
                "--readiness",
                "receipt",
                metavar="RECEIPT",
                help="A release-readiness receipt (its oid, or 'latest') with its checks' runs.",
            ),
            click.option("--all", "everything", is_flag=True, help="Every ref in the store."),
        ]
    ):
        command = option(command)
    return command


@bundle.command("create")
@click.argument("path", metavar="FILE")
@click.argument("refs", nargs=-1)
@selection_options
@json_option
@click.pass_context
def create(ctx, path, refs, plan_name, receipt, everything, as_json):
    """Write REFs (or --plan PLAN's refs, --readiness RECEIPT's, or --all) and all they
    reach to FILE.

    FILE must not exist; a failed create leaves nothing behind.
    """
    from yyb.store.bundle import exchange as bundles

    store = open_store(ctx)
    names = selected_refs(ctx, store, refs, plan_name, receipt, everything)
    header = bundles.ref_tips(store, names)
    count = bundles.create(store, path, header)
    click.echo(f"bundle: {count} objects, {len(header.refs)} refs written to {path}", err=True)
    if as_json:
        emit_json({"path": path, "objects": count, "refs": _heads(header)})


def _heads(header) -> list[dict]:
    """A bundle's refs as JSON: ``{"name", "oid"}`` each, sorted by name (as show-ref)."""
    return [{"name": name, "oid": header.refs[name]} for name in sorted(header.refs)]


@bundle.command("verify")
@click.argument("path", metavar="FILE")
@json_option
def verify(path, as_json):
    """Check FILE on its own: trailer, every object's hash, every record, every link.

    Prints 'ok <objects> objects <refs> refs'; exit 1 when a check fails, 2 when FILE is not
    a bundle this version reads (unknown version or capability, a malformed header).
    """
    from yyb.store.bundle import exchange as bundles

    with failed_check(as_json, path, path=path, objects=None, refs=None):
        summary = bundles.verify(path)
    if as_json:
        found = {"path": path, "objects": summary.objects, "refs": _heads(summary.header)}
        emit_json({**found, "ok": True, "errors": 0, "infos": 0, "findings": []})
    else:
        click.echo(f"ok {summary.objects} objects {len(summary.header.refs)} refs")


@bundle.command("list-heads")
@click.argument("path", metavar="FILE")
@json_option
def list_heads(path, as_json):
    """Print the refs FILE records, '<oid> <ref>', sorted (the header only is read)."""
    from yyb.store.bundle import exchange as bundles

    header = bundles.read_header(path)
    if as_json:
        emit_json({"refs": _heads(header)})
        return
    for name in sorted(header.refs):
        sys.stdout.write(f"{header.refs[name]} {name}\n")


def _word(move) -> str:
    """How an import moved one ref, as unbundle prints it."""
    if move.how in ("adopt", "update") and move.old is None:
        return "new"
    return {"adopt": "fast-forward", "update": "forced", "none": "up-to-date"}[move.how]


def _report(imported, as_json: bool, sent=None) -> None:
    """The ref moves (and replaced copies) of an import; of a push or fetch (``sent``) also
    the objects and bytes that crossed, on stderr (in the JSON, as ``transfer``)."""
    crossed = {}
    if sent is not None:
        crossed = {"objects": sent.objects, "bytes_sent": sent.sent}
        crossed["bytes_received"] = sent.received
    if as_json:
        replaced = [{"oid": r.oid, "copy": r.copy} for r in imported.replaced]
        moves = [
            {"ref": m.ref, "old": m.old, "new": m.new, "how": _word(m)} for m in imported.moves
        ]
        emit_json({"replaced": replaced, "refs": moves, **({"transfer": crossed} if sent else {})})
        return
    if sent is not None:
        click.echo(
            f"transfer: {sent.objects} object(s); {sent.sent} bytes sent, {sent.received} received",
            err=True,
        )
    for replaced in imported.replaced:
        sys.stdout.write(f"replaced {replaced.oid} {replaced.copy}\n")
    for move in imported.moves:
        sys.stdout.write(f"{move.old or ZERO_OID} {move.new} {move.ref} {_word(move)}\n")


force_option = click.option(
    "--force", is_flag=True, help="Move refs even when it is not a fast-forward."
)


@bundle.command("unbundle")
@click.argument("path", metavar="FILE")
@force_option
@json_option
@click.pass_context
def unbundle(ctx, path, force, as_json):
    """Import FILE into the store: all verified first, then refs moved if new or fast-forward.

    Prints '<old> <new> <ref> (new|fast-forward|forced|up-to-date)' per ref, after
    'replaced <oid> <copy>' for each local copy of an object that did not hold the bundle's
    bytes (now written over it).
    """
    from yyb.store.bundle import exchange as bundles

    _report(bundles.unbundle(open_store(ctx), path, force), as_json)


@click.command("push")
@click.argument("target", metavar="REMOTE")
@click.argument("refs", nargs=-1)
@selection_options
@force_option
@json_option
@click.pass_context
def push(ctx, target, refs, plan_name, receipt, everything, force, as_json):
    """Send REFs (or --plan PLAN's refs, --readiness RECEIPT's, or --all) and the objects the
    other store lacks to REMOTE (a remote's name, a file:// or ssh:// URL, or a store's
    path), where each ref moves as a fast-forward.

    Prints '<old> <new> <ref> (new|fast-forward|forced|up-to-date)' per ref, as unbundle
    does, and on stderr how many objects and bytes were sent (docs/remotes.md).
    """
    from yyb.store import remotes

    store = open_store(ctx)
    names = selected_refs(ctx, store, refs, plan_name, receipt, everything)
    sent = remotes.push(store, remotes.resolve(store, target), names, force)
    _report(sent.imported, as_json, sent)


@click.command("fetch")
@click.argument("source", metavar="REMOTE")
@click.argument("refs", nargs=-1, required=True)
@force_option
@json_option
@click.pass_context
def fetch(ctx, source, refs, force, as_json):
    """Receive REFs of REMOTE (a remote's name, a file:// or ssh:// URL, or a store's path)
    and the objects this store lacks; each ref moves here as unbundle moves it."""
    from yyb.store import remotes

    store = open_store(ctx)
    sent = remotes.fetch(store, remotes.resolve(store, source), list(refs), force)
    _report(sent.imported, as_json, sent)
