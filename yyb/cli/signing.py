"""Signing: key generate/export-public and sign (verification is verify-chain --trusted-key)."""

from __future__ import annotations

import click

from yyb.cli.context import open_store


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
def generate(path):
    """Write a new private key (PEM, mode 0600); print its public key as 64 hex digits."""
    from yyb import signing

    path = path or signing.default_key_path()
    click.echo(signing.generate_key(path))
    click.echo(f"key: private key written to {path}", err=True)


@key.command("export-public")
@click.option("--key", "path", metavar="PATH", help="The private key (default as for generate).")
def export_public(path):
    """Print the public key of a private key: 64 lowercase hex digits (raw Ed25519)."""
    from yyb import signing

    click.echo(signing.public_hex(signing.load_private(path or signing.default_key_path())))


@click.command("sign")
@click.argument("name", metavar="OID|REF")
@click.option("--key", "path", metavar="PATH", help="The private key (default as for generate).")
@click.pass_context
def sign(ctx, name, path):
    """Sign the object NAME stands for; store the signature under refs/signatures/<oid>.

    Prints the oid of the yyb_signature.v1 record.
    """
    from yyb import signing

    store = open_store(ctx)
    oid = store.rev_parse(name)
    click.echo(signing.sign(store, oid, signing.load_private(path or signing.default_key_path())))
