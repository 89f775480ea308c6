"""The transparency log: `yyb checkpoint`, `yyb log-proof`, `yyb verify-log`."""

from __future__ import annotations

import os
import sys

import click

from yyb.cli.context import open_store, output_option
from yyb.cli.output import emit_json, failed_check, json_option, verdict
from yyb.errors import UsageError


@click.command("checkpoint")
@output_option("Write the signed note to FILE (which must not exist) instead of stdout.")
@click.pass_context
def checkpoint(ctx, output):
    """Checkpoint the store's transparency log and sign it with the configured key.

    Stores the checkpoint (its note, and the log's leaves in chunks) under
    refs/transparency/checkpoint, signs the note (refs/signatures/<note>) and prints it as a
    signed note: origin, size and root lines, an empty line, one signature line per key.
    Without a configured key the checkpoint is stored unsigned and says so on stderr.
    """
    from yyb import signing
    from yyb.plans.planfile import check_output_free
    from yyb.store import file

    if output is not None:
        check_output_free(output)
    store = open_store(ctx)
    key = signing.configured_signer(os.environ)
    if key is None:
        click.echo("yyb: no signing key is configured: the checkpoint is unsigned", err=True)
    record = signing.checkpoint(store, key)
    note = record["links"]["note"]
    records = [store.objects.get_record(s) for s in signing.signatures_of(store, note)]
    text = signing.signed_note(store.objects.get(note).body, records)
    if output is not None:
        file.write_new(output, text)
    else:
        sys.stdout.buffer.write(text)


@click.group("log-proof")
def log_proof():
    """Proofs from the store's transparency log (docs/format.md gives their encoding)."""


def _size(log, size: int | None) -> int:
    if size is None:
        return log.size()
    if not 0 <= size <= log.size():
        raise UsageError(f"--size {size}: the log has {log.size()} leaves")
    return size


@log_proof.command("inclusion")
@click.argument("update")
@click.option("--size", type=int, help="The tree size to prove against (default: the log's).")
@json_option
@click.pass_context
def inclusion(ctx, update, size, as_json):
    """Prove that ref update UPDATE (an oid) is a leaf of the log.

    Prints '<leaf index> <tree size> <root hex>', then one proof hash (hex) per line. Exit 1
    when UPDATE is not in the log (within the size).
    """
    from yyb.errors import YybError

    store = open_store(ctx)
    oid = store.rev_parse(update)
    try:
        ref = store.objects.get_record(oid).get("ref", "")
    except YybError:
        ref = ""  # not a record here: not a leaf either
    with store.refs.transparency.locked() as log:
        n = _size(log, size)
        index = log.index_of(oid, ref)
        if index is None or index >= n:
            click.echo(f"yyb: error: {oid} is not among the first {n} leaves of the log", err=True)
            return 1
        proof = log.inclusion(index, n)
        top = log.root(n)
    header = {"update": oid, "index": index, "size": n, "root": top.hex()}
    return _proof(f"{index} {n} {top.hex()}", header, proof, as_json)


def _proof(line: str, header: dict, proof: list[bytes], as_json: bool) -> int:
    """Print a proof: its header line then a hash a line, or ``header`` with ``proof``."""
    if as_json:
        emit_json({**header, "proof": [node.hex() for node in proof]})
        return 0
    click.echo(line)
    for node in proof:
        click.echo(node.hex())
    return 0


@log_proof.command("consistency")
@click.argument("old", type=int)
@click.argument("new", type=int, required=False)
@json_option
@click.pass_context
def consistency(ctx, old, new, as_json):
    """Prove that the log of OLD leaves is a prefix of the log of NEW (default: now).

    Prints '<old> <new> <old root hex> <new root hex>', then one proof hash (hex) per line.
    """
    store = open_store(ctx)
    with store.refs.transparency.locked() as log:
        new = _size(log, new)
        if not 0 <= old <= new:
            raise UsageError(f"OLD ({old}) must lie between 0 and NEW ({new})")
        proof = log.consistency(old, new)
        first, second = log.root(old), log.root(new)
    header = {"old": old, "new": new, "old_root": first.hex(), "new_root": second.hex()}
    return _proof(f"{old} {new} {first.hex()} {second.hex()}", header, proof, as_json)


@click.command("verify-log")
@click.option(
    "--checkpoint",
    "notes",
    metavar="FILE",
    multiple=True,
    required=True,
    help="A signed checkpoint you hold (a note from 'yyb checkpoint'); repeatable.",
)
@click.option(
    "--trusted-key",
    "keys",
    metavar="KEY",
    multiple=True,
    required=True,
    help="A public key (64 hex, or a file holding it) whose signatures you trust.",
)
@click.option(
    "--remote",
    "remote_name",
    metavar="REMOTE",
    help="Check the store in a bucket instead (a remote's name or an s3:// URL).",
)
@json_option
@click.pass_context
def verify_log(ctx, notes, keys, remote_name, as_json):
    """Check, offline, that the history in this store only grew since the checkpoints held.

    Each FILE must carry a trusted signature. The log it is checked against is this store's
    own when the origins match, else the checkpoint carried under refs/transparency/checkpoint
    (from a bundle), whose note must carry a trusted signature too. That log must extend each
    held checkpoint (its first leaves hash to the held root), and the refs here must agree with
    it: no ref set back, no update outside it, no logged ref gone. Prints what it checked and
    the findings; exit 0 when none is an error, else 1.
    """
    from yyb import signing
    from yyb.cli.context import emit_findings
    from yyb.store import file

    trusted = [signing.load_public(k) for k in keys]
    held = [file.read_input(path) for path in notes]
    if remote_name is not None:
        where, findings = _bucket_log(ctx, remote_name, held, trusted, as_json)
    else:
        store = open_store(ctx)
        with failed_check(as_json, store.path, checked=None):
            where, findings = signing.verify_log(store, held, trusted)
    if as_json:
        answer = verdict(findings)
        emit_json({**answer, "checked": where})
        errors = answer["errors"]
    else:
        errors, _ = emit_findings(findings, False)
    click.echo(f"verify-log: {where}; {errors} problem(s)", err=True)
    return 1 if errors else 0


def _bucket_log(ctx, given: str, held: list, trusted: list, as_json: bool):
    """``verify-log --remote``: the same check, on the store in a bucket read where it lies."""
    import tempfile

    from yyb import signing
    from yyb.cli.check import bucket_location
    from yyb.store.bucket.view import reading

    location = bucket_location(ctx, given)
    with tempfile.TemporaryDirectory(prefix="yyb-verify-log-") as scratch:
        with reading(location, scratch) as view:
            with failed_check(as_json, location.url, checked=None):
                where, findings = signing.verify_log(view, held, trusted)
            findings = list(findings)
    return f"{location.url}: {where}", findings
