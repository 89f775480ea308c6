"""`yyb example`: a guided run of the plumbing on a throw-away store."""

from __future__ import annotations

import os
import tempfile

import click

from yyb.store.chain import verify_chain
from yyb.store.fsck import fsck
from yyb.store.repo import Store


def _say(text: str = "") -> None:
    click.echo(text)


@click.command("example")
@click.option("--dir", "directory", type=click.Path(file_okay=False),
              help="Where to create the example store (default: a new temporary folder).")
def example(directory):
    """Build a small evidence store with the plumbing, verify it, then tamper with it."""
    root = directory or tempfile.mkdtemp(prefix="yyb-example-")
    store, _ = Store.init(os.path.join(root, "store"))
    _say(f"store: {store.path}")

    patch = b"--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-    return a - b\n+    return a + b\n"
    log = b"collected 3 items\n3 passed in 0.01s\n"
    patch_oid = store.objects.put("blob", patch)
    log_oid = store.objects.put("blob", log)
    _say(f"blob   {patch_oid}  (a candidate's patch)")
    _say(f"blob   {log_oid}  (its test log)")

    note = {
        "schema_version": "yyb_note.v1",
        "message": "example attempt: the patch and the log that shows it passing",
        "links": {"patch": patch_oid, "log": log_oid},
    }
    note_oid = store.objects.put_record(note)
    _say(f"record {note_oid}  (links both by oid)")
    update = store.refs.update("refs/notes/example", note_oid, old=None, reason="example")
    _say(f"ref    refs/notes/example -> {note_oid[:12]}  (update record {update[:12]})")

    problems = [f.line() for f in verify_chain(store, "refs/notes/example")]
    _say(f"verify-chain refs/notes/example: {'clean' if not problems else problems}")

    # Tamper with the log the way a careless edit or a bad disk would: flip one byte.
    path = store.objects.path(log_oid)
    os.chmod(path, 0o644)
    with open(path, "r+b") as handle:
        handle.seek(-3, os.SEEK_END)
        byte = handle.read(1)
        handle.seek(-3, os.SEEK_END)
        handle.write(bytes([byte[0] ^ 0xFF]))
    _say("flipped one byte of the log blob; doctor now says:")
    found = [f for f in fsck(store) if f.level == "error"]
    for finding in found:
        _say(f"  {finding.line()}")
    _say()
    _say("Try the plumbing yourself:")
    _say(f"  export YYB_STORE={store.path}")
    _say("  yyb show-ref; yyb log refs/notes/example; yyb cat-object -p refs/notes/example")
    _say("  yyb verify-chain refs/notes/example; yyb doctor")
    return 0 if len(found) == 1 and found[0].subject == log_oid else 1
