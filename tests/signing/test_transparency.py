"""An auditor holding an earlier signed checkpoint, the public key and either the store or a
bundle of it detects, offline, a rolled-back ref, a rewritten chain, a rewritten grant, a
forged update and a removed signature; proofs from the CLI verify with nothing but hashes."""

from __future__ import annotations

import os

import pytest

from tests.conftest import Yyb, forged_update, note
from tests.doctor.forge import drop_derived, set_back
from yyb import signing
from yyb.store.log import checkpoint, merkle
from yyb.store.repo import Store

GRANT = "refs/grants/" + "b" * 64


@pytest.fixture
def source(tmp_path, monkeypatch):
    """A store with a history, a signing key, and a checkpoint the auditor took (old.txt)."""
    key = str(tmp_path / "signing.key")
    public = signing.generate_key(key)
    monkeypatch.setenv(signing.KEY_ENV, key)
    yyb = Yyb(str(tmp_path / "store"))
    store, _ = Store.init(yyb.store_path)
    for i in range(5):
        store.refs.update(f"refs/notes/n{i % 2}", store.objects.put_record(note(f"n{i}")))
    grant = store.objects.put_record(note("grant: 5 USD"))
    store.refs.update(GRANT, grant)
    signing.sign(store, grant, signing.load_private(key))
    old = tmp_path / "old.txt"
    made = yyb("checkpoint", "--output", str(old))
    assert made.exit_code == 0, made.stderr
    for i in range(3):  # the store goes on growing
        store.refs.update("refs/notes/later", store.objects.put_record(note(f"later {i}")))
    return yyb, store, public, old


def audit(yyb, public, old) -> tuple[int, str]:
    done = yyb("verify-log", "--checkpoint", str(old), "--trusted-key", public)
    return done.exit_code, done.stdout + done.stderr


def received(yyb, tmp_path) -> Yyb:
    """The auditor's store, holding a bundle of every ref of the source (``--all``)."""
    path = tmp_path / "evidence.bundle"
    assert yyb("bundle", "create", str(path), "--all").exit_code == 0
    auditor = Yyb(str(tmp_path / "auditor"))
    Store.init(auditor.store_path)
    assert auditor("bundle", "unbundle", str(path)).exit_code == 0
    return auditor


def erase_leaf(store, index: int) -> None:
    """Rewrite the log without one leaf, its derived files dropped (rebuilt from it)."""
    folder = os.path.join(store.path, "transparency")
    with open(os.path.join(folder, "leaves"), "rb") as handle:
        lines = handle.read().splitlines(keepends=True)
    del lines[index]
    with open(os.path.join(folder, "leaves"), "wb") as handle:
        handle.writelines(lines)
    drop_derived(store)


def test_an_honest_store_and_its_bundle_pass(source, tmp_path):
    yyb, store, public, old = source
    assert audit(yyb, public, old)[0] == 0
    yyb("checkpoint")
    auditor = received(yyb, tmp_path)
    code, out = audit(auditor, public, old)
    assert code == 0, out
    assert "the carried checkpoint" in out


def test_a_rolled_back_ref_is_detected(source):
    yyb, store, public, old = source
    first = list(store.refs.log("refs/notes/n0"))[-1][0]
    set_back(store, "refs/notes/n0", first)
    code, out = audit(yyb, public, old)
    assert code == 1 and "log-rolled-back refs/notes/n0" in out


def test_a_rewritten_grant_and_a_forged_update_are_detected(source):
    yyb, store, public, old = source
    bigger = store.objects.put_record(note("grant: 5000 USD"))
    set_back(store, GRANT, forged_update(store, GRANT, bigger, None))
    code, out = audit(yyb, public, old)
    assert code == 1 and f"log-unlogged {GRANT}" in out and f"log-rolled-back {GRANT}" in out


def test_a_removed_signature_is_detected(source):
    yyb, store, public, old = source
    [ref] = [n for n, _ in store.refs.iter_refs() if n.startswith("refs/signatures/")][:1]
    os.remove(store.refs.path(ref))
    os.remove(store.refs.log_path(ref))
    code, out = audit(yyb, public, old)
    assert code == 1 and f"log-ref-missing {ref}" in out


def test_a_rewritten_log_is_detected(source):
    """Rewriting history consistently, log included (leaves, derived hashes, a fresh
    checkpoint signed with the key): the held checkpoint's root no longer matches."""
    yyb, store, public, old = source
    erase_leaf(store, 2)  # an update erased from history
    code, out = audit(yyb, public, old)
    assert code == 1 and "rewritten" in out


def test_a_bundle_of_a_rolled_back_store_is_caught_by_its_auditor(source, tmp_path):
    yyb, store, public, old = source
    assert yyb("checkpoint").exit_code == 0  # the log, as the owner checkpointed it
    first = list(store.refs.log(GRANT))[-1][0]
    later = store.objects.put_record(note("grant: 7 USD"))
    store.refs.update(GRANT, later)
    assert yyb("checkpoint").exit_code == 0
    set_back(store, GRANT, first)  # then the grant is set back
    auditor = received(yyb, tmp_path)
    code, out = audit(auditor, public, old)
    assert code == 1 and f"log-rolled-back {GRANT}" in out


def test_unbundling_a_log_that_does_not_extend_the_held_one_moves_nothing(source, tmp_path):
    yyb, store, public, old = source
    assert yyb("checkpoint").exit_code == 0
    first = tmp_path / "first.bundle"
    assert yyb("bundle", "create", str(first), "--all").exit_code == 0
    auditor = Yyb(str(tmp_path / "auditor"))
    Store.init(auditor.store_path)
    assert auditor("bundle", "unbundle", str(first)).exit_code == 0
    # History rewritten at the source (one update erased), then checkpointed again.
    erase_leaf(store, 1)  # an update erased from history
    store.refs.update("refs/notes/after", store.objects.put_record(note("after")))
    assert yyb("checkpoint").exit_code == 0
    second = tmp_path / "second.bundle"
    assert yyb("bundle", "create", str(second), "--all").exit_code == 0
    mine = Store.open(auditor.store_path)
    before = dict(mine.refs.iter_refs())
    refused = auditor("bundle", "unbundle", str(second))
    assert refused.exit_code == 1 and "rewritten" in refused.stderr, refused.stderr
    assert dict(Store.open(auditor.store_path).refs.iter_refs()) == before


def test_cli_proofs_verify_with_hashes_alone(source):
    yyb, store, public, old = source
    update = list(store.refs.log(GRANT))[-1][0]
    done = yyb("log-proof", "inclusion", update)
    assert done.exit_code == 0, done.stderr
    head, *path = done.stdout.split()
    index, size, top = int(head), int(path.pop(0)), bytes.fromhex(path.pop(0))
    leaf = merkle.leaf_hash(f"{update} {GRANT}".encode())
    merkle.verify_inclusion(leaf, index, size, [bytes.fromhex(p) for p in path], top)
    held = checkpoint.parse_body(old.read_bytes().split(b"\n\n")[0] + b"\n")
    done = yyb("log-proof", "consistency", str(held.size))
    first, second, r1, r2, *path = done.stdout.split()
    assert int(first) == held.size and bytes.fromhex(r1) == held.root
    proof = [bytes.fromhex(p) for p in path]
    merkle.verify_consistency(held.size, int(second), held.root, bytes.fromhex(r2), proof)
    missing = yyb("log-proof", "inclusion", "0" * 64)
    assert missing.exit_code == 1


def test_a_note_signed_by_another_key_or_altered_is_refused(source, tmp_path):
    yyb, store, public, old = source
    other = signing.generate_key(str(tmp_path / "other.key"))
    code, out = audit(yyb, other, old)
    assert code == 1 and "bad signature" in out
    text = old.read_bytes()
    altered = tmp_path / "altered.txt"
    altered.write_bytes(text.replace(b"\n", b"0\n", 2).replace(b"0\n", b"\n", 1))
    assert audit(yyb, public, altered)[0] != 0


def test_a_signature_left_out_of_a_bundle_is_detected(source, tmp_path):
    yyb, store, public, old = source
    grant = store.refs.read(GRANT)
    ref = signing.signature_ref(grant)
    assert yyb("checkpoint").exit_code == 0
    os.remove(store.refs.path(ref))
    os.remove(store.refs.log_path(ref))
    auditor = received(yyb, tmp_path)
    code, out = audit(auditor, public, old)
    assert code == 1 and f"log-ref-missing {ref}" in out


def test_a_rewritten_grant_in_a_bundle_is_caught_by_its_auditor(source, tmp_path):
    yyb, store, public, old = source
    assert yyb("checkpoint").exit_code == 0
    bigger = store.objects.put_record(note("grant: 5000 USD"))
    set_back(store, GRANT, forged_update(store, GRANT, bigger, None))  # a chain of its own
    auditor = received(yyb, tmp_path)
    code, out = audit(auditor, public, old)
    assert code == 1 and f"log-rolled-back {GRANT}" in out and "does not hold" in out


def test_a_held_note_is_read_to_its_grammar(source, tmp_path):
    """Signature lines of other signers are passed over; a note without its final newline,
    with a line after its signatures, or with a carriage return is malformed (exit 2)."""
    yyb, store, public, old = source
    body, signatures = old.read_bytes().split(b"\n\n")
    body += b"\n"
    signing.generate_key(str(tmp_path / "other.key"))
    other = signing.load_private(str(tmp_path / "other.key"))
    blob = store.objects.put("blob", body)
    stranger = signing.note_signature(blob, body, "other.example/log", other)
    stranger = signing.signed_note(body, [stranger]).split(b"\n\n")[1]
    cases = {
        "another signer first": (stranger + signatures, 0),
        "no final newline": (signatures[:-1], 2),
        "a line after the signatures": (signatures + b"\n", 2),
        "a carriage return": (signatures.replace(b"\n", b"\r\n"), 2),
        "only another signer": (stranger, 1),
    }
    for what, (lines, code) in cases.items():
        held = tmp_path / "held.txt"
        held.write_bytes(body + b"\n" + lines)
        assert audit(yyb, public, held)[0] == code, what
