"""--json of the ref, store and signing commands: the same facts as their text, as one object."""

from __future__ import annotations

import json

from tests.conftest import note
from yyb import signing
from yyb.store.objects.format import ZERO_OID


def answer(done) -> dict:
    """The one JSON object a command printed (keys sorted, one trailing newline)."""
    assert done.stdout.endswith("}\n") and done.stdout.count("\n}\n") == 1, done.stdout
    value = json.loads(done.stdout)
    assert done.stdout == json.dumps(value, indent=2, sort_keys=True) + "\n"
    return value


def test_show_ref_lists_the_refs_the_text_lists(yyb, disk_store):
    for name in ("refs/notes/b", "refs/notes/a", "refs/plans/p1"):
        disk_store.refs.update(name, disk_store.objects.put_record(note(name)))
    for patterns in ((), ("refs/notes",), ("plans/*",), ("p1", "a")):
        text = yyb("show-ref", *patterns)
        done = yyb("show-ref", "--json", *patterns)
        assert done.exit_code == text.exit_code == 0
        listed = [f"{ref['oid']} {ref['name']}" for ref in answer(done)["refs"]]
        assert listed == text.lines and listed
    none = yyb("show-ref", "--json", "refs/nothing")
    assert none.exit_code == yyb("show-ref", "refs/nothing").exit_code == 1
    assert answer(none) == {"refs": []}


def test_update_ref_names_the_update_and_the_move(yyb, disk_store):
    first, second = (disk_store.objects.put_record(note(n)) for n in ("one", "two"))
    done = yyb("update-ref", "--json", "-m", "why", "refs/notes/x", first)
    assert done.exit_code == 0, done.stderr
    made = answer(done)
    assert made == {
        "update": disk_store.refs.log_head("refs/notes/x"),
        "ref": "refs/notes/x",
        "old": None,
        "new": first,
        "reason": "why",
    }
    moved = answer(yyb("update-ref", "--json", "--old", first, "refs/notes/x", second))
    assert (moved["old"], moved["new"]) == (first, second)
    gone = answer(yyb("update-ref", "--json", "-d", "refs/notes/x"))
    assert (gone["old"], gone["new"]) == (second, None)
    # A refused move: one stderr line, the text form's exit code, nothing on stdout.
    assert yyb("update-ref", "refs/notes/y", first).exit_code == 0
    refused = yyb("update-ref", "--json", "--old", ZERO_OID, "refs/notes/y", second)
    assert refused.exit_code == 1 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and refused.stderr.startswith("yyb: error:")


def test_pack_refs_counts_what_it_packed(yyb, disk_store):
    for name in ("refs/notes/a", "refs/notes/b"):
        disk_store.refs.update(name, disk_store.objects.put_record(note(name)))
    done = answer(yyb("pack-refs", "--json"))
    assert done == {"refs": 2, "log_heads": 2, "removed": 4}
    again = yyb("pack-refs")
    assert again.lines == ["2 refs and 2 log heads packed, 0 loose files removed"]


def test_store_init_and_path(yyb, tmp_path):
    made = answer(yyb("store", "init", "--json", str(tmp_path / "new")))
    assert made == {"path": str(tmp_path / "new"), "created": True}
    kept = answer(yyb("store", "init", "--json", str(tmp_path / "new")))
    assert kept == {"path": str(tmp_path / "new"), "created": False}
    assert answer(yyb("store", "path", "--json")) == {"path": yyb("store", "path").lines[0]}


def test_key_and_sign(yyb, disk_store, tmp_path):
    key = str(tmp_path / "k.key")
    made = yyb("key", "generate", "--json", "--out", key)
    assert made.exit_code == 0 and "private key written" in made.stderr
    public = answer(made)
    assert public == {"public_key": signing.public_hex(signing.load_private(key)), "path": key}
    exported = answer(yyb("key", "export-public", "--json", "--key", key))
    assert exported == public
    assert yyb("key", "export-public", "--key", key).lines == [public["public_key"]]
    oid = disk_store.objects.put_record(note("signed"))
    signed = answer(yyb("sign", "--json", "--key", key, oid))
    assert signed == {
        "object": oid,
        "signature": disk_store.refs.read(signing.signature_ref(oid)),
        "ref": signing.signature_ref(oid),
    }
    again = yyb("key", "generate", "--json", "--out", key)  # never overwritten: exit 2
    assert again.exit_code == 2 and again.stdout == "" and again.stderr.count("\n") == 1
