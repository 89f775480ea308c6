"""Signing: key generate/export-public and sign (verification is verify-chain --trusted-key)."""

from __future__ import annotations

import click

from yyb.cli.context import open_store
from yyb.cli.output import emit_json, json_option


@click.group("key")
def key():
    """Ed25519 signing keys, kept outside the store."""


@key.command("generate")
@click.option(
    "--out",
    "path",
    metavar="PATH",
    help="Where to write the private key (default: $XDG_CONFIG_HOME/yyb/signing.key, "
    "else ~/.config/yyb/signing.key). Never overwritten.",
)
@json_option
def generate(path, as_json):
    """Write a new private key (PEM, mode 0600); print its public key as 64 hex digits."""
    from yyb import signing

    path = path or signing.default_key_path()
    public = signing.generate_key(path)
    if as_json:
        emit_json({"public_key": public, "path": path})
    else:
        click.echo(public)
    click.echo(f"key: private key written to {path}", err=True)


@key.command("export-public")
@click.option("--key", "path", metavar="PATH", help="The private key (default as for generate).")
@click.option(
    "--note-verifier",
    "note_name",
    metavar="NAME",
    help="Print instead the C2SP signed-note verifier key of the key under NAME (a checkpoint's "
    "origin, its first line): NAME+HASH+BASE64, for any signed-note verifier.",
)
@json_option
def export_public(path, note_name, as_json):
    """Print the public key of a private key: 64 lowercase hex digits (raw Ed25519)."""
    from yyb import signing
    from yyb.errors import UsageError

    path = path or signing.default_key_path()
    public = signing.public_hex(signing.load_private(path))
    shown = public
    if note_name is not None:
        if not note_name or any(c.isspace() or c == "+" for c in note_name):
            raise UsageError("--note-verifier NAME: a key name has no space and no '+'")
        shown = signing.note_verifier_key(note_name, public)
    if as_json:
        extra = {"note_verifier": shown} if note_name is not None else {}
        emit_json({"public_key": public, "path": path, **extra})
    else:
        click.echo(shown)


@click.command("sign")
@click.argument("name", metavar="OID|REF")
@click.option("--key", "path", metavar="PATH", help="The private key (default as for generate).")
@json_option
@click.pass_context
def sign(ctx, name, path, as_json):
    """Sign the object NAME stands for; store the signature under refs/signatures/<oid>.

    Prints the oid of the yyb_signature.v1 record.
    """
    from yyb import signing

    store = open_store(ctx)
    oid = store.rev_parse(name)
    signature = signing.sign(store, oid, signing.load_private(path or signing.default_key_path()))
    if as_json:
        emit_json({"object": oid, "signature": signature, "ref": signing.signature_ref(oid)})
    else:
        click.echo(signature)
