"""--json of log-proof and verify-log: the proofs verify from the JSON alone, verify-log's
verdict carries ok and its findings."""

from __future__ import annotations

import os

import pytest

from tests.cli.test_json_refs import answer
from tests.conftest import Yyb, note
from yyb import signing
from yyb.store.log import checkpoint, merkle
from yyb.store.repo import Store


@pytest.fixture
def source(tmp_path, monkeypatch):
    """(yyb, the store, a public key, a checkpoint signed by it that the store outgrew)."""
    yyb = Yyb(str(tmp_path / "store"))
    key = answer(yyb("key", "generate", "--json", "--out", str(tmp_path / "k.key")))
    monkeypatch.setenv(signing.KEY_ENV, key["path"])
    store = Store.init(yyb.store_path)[0]

    def move(ref: str, text: str) -> None:
        oid = store.objects.put_record(note(text))
        assert yyb("update-ref", f"refs/notes/{ref}", oid).exit_code == 0

    for ref, text in (("n0", "a"), ("n1", "b"), ("n0", "c")):
        move(ref, text)
    held = tmp_path / "held.txt"
    assert yyb("checkpoint", "--output", str(held)).exit_code == 0
    move("later", "d")  # the store goes on growing after the auditor's checkpoint
    return yyb, store, key["public_key"], held


def test_proofs_as_json_verify_with_hashes_alone(source):
    yyb, store, _, held = source
    update = store.refs.log_head("refs/notes/n1")
    text = yyb("log-proof", "inclusion", update).lines
    found = answer(yyb("log-proof", "inclusion", "--json", update))
    assert text == [f"{found['index']} {found['size']} {found['root']}", *found["proof"]]
    assert found["update"] == update
    leaf = merkle.leaf_hash(f"{update} refs/notes/n1".encode())
    proof = [bytes.fromhex(p) for p in found["proof"]]
    root = bytes.fromhex(found["root"])
    merkle.verify_inclusion(leaf, found["index"], found["size"], proof, root)
    old = checkpoint.parse_body(held.read_bytes().split(b"\n\n")[0] + b"\n")
    grown = answer(yyb("log-proof", "consistency", "--json", str(old.size)))
    assert (grown["old"], bytes.fromhex(grown["old_root"])) == (old.size, old.root)
    proof = [bytes.fromhex(p) for p in grown["proof"]]
    new_root = bytes.fromhex(grown["new_root"])
    merkle.verify_consistency(old.size, grown["new"], old.root, new_root, proof)
    assert yyb("log-proof", "consistency", str(old.size)).lines[0] == (
        f"{old.size} {grown['new']} {grown['old_root']} {grown['new_root']}"
    )
    missing = yyb("log-proof", "inclusion", "--json", "0" * 64)
    assert missing.exit_code == 1 and missing.stdout == ""
    beyond = yyb("log-proof", "consistency", "--json", "1", "99")
    assert beyond.exit_code == 2 and beyond.stdout == ""


def verify(yyb, public, held, *options):
    return yyb("verify-log", *options, "--checkpoint", str(held), "--trusted-key", public)


def test_verify_log_passes_an_honest_store(source):
    yyb, _, public, held = source
    text = verify(yyb, public, held)
    done = verify(yyb, public, held, "--json")
    assert done.exit_code == text.exit_code == 0 and done.stderr == text.stderr
    found = answer(done)
    assert found["ok"] is True and found["errors"] == 0
    assert [f for f in found["findings"] if f["level"] == "error"] == []
    assert found["checked"].startswith("this store's log (") and found["checked"] in done.stderr


def test_verify_log_names_a_rolled_back_ref(source):
    yyb, store, public, held = source
    os.remove(store.refs.path("refs/notes/n0"))
    os.remove(store.refs.log_path("refs/notes/n0"))
    text = verify(yyb, public, held)
    done = verify(yyb, public, held, "--json")
    assert done.exit_code == text.exit_code == 1
    found = answer(done)
    assert found["ok"] is False and found["errors"] >= 1
    lines = [f"{f['level']} {f['code']} {f['subject']}: {f['detail']}" for f in found["findings"]]
    assert lines == text.lines and any("refs/notes/n0" in line for line in lines)


def test_verify_log_with_an_untrusted_key_is_not_ok(source, tmp_path):
    yyb, _, _, held = source
    other = signing.generate_key(str(tmp_path / "other.key"))
    text = verify(yyb, other, held)
    done = verify(yyb, other, held, "--json")
    assert done.exit_code == text.exit_code == 1 and done.stderr == text.stderr
    found = answer(done)
    assert found["ok"] is False and found["checked"] is None
    [finding] = found["findings"]
    assert finding["code"] == "bad-signature" and finding["detail"] in done.stderr
