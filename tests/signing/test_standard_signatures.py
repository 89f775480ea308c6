"""Signatures other tools verify: a signed run's terminal is a DSSE envelope of an in-toto
Statement v1 that the in-toto library checks with the public key alone, and its checkpoint is
a C2SP signed note that a verifier written here from the C2SP spec (not yyb's code) checks.
A flipped byte fails both."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from tests.conftest import Yyb
from yyb import signing
from yyb.store.repo import Store


def _terminal(store: Store) -> str:
    name = next(n for n in store.refs.names() if n.endswith("/terminal"))
    return store.refs.read(name)


def _envelope(store: Store, oid: str) -> dict:
    """The DSSE envelope of the newest signature of ``oid``, as a DSSE tool takes it."""
    record = store.objects.get_record(signing.signatures_of(store, oid)[0])
    return {k: record[k] for k in ("payload", "payloadType", "signatures")}


def _in_toto_verifies(envelope: dict, public: str) -> bool:
    in_toto = pytest.importorskip("in_toto.models.metadata")
    from securesystemslib.exceptions import VerificationError

    loaded = in_toto.Envelope.from_dict(json.loads(json.dumps(envelope)))
    keyid = envelope["signatures"][0]["keyid"]
    key = {"keyid": keyid, "keytype": "ed25519", "scheme": "ed25519"}
    key["keyval"] = {"public": public}
    try:
        loaded.verify_signature(key)
    except (VerificationError, Exception) as exc:  # in-toto's SignatureVerificationError
        if "Verification" not in type(exc).__name__:
            raise
        return False
    return True


def test_a_signed_terminal_verifies_with_the_in_toto_library_and_the_key_alone(signed):
    root, public, _ = signed
    store = Store.open(str(root / "store"))
    oid = _terminal(store)
    envelope = _envelope(store, oid)
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    assert _in_toto_verifies(envelope, public)
    statement = json.loads(base64.b64decode(envelope["payload"]))
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    (subject,) = statement["subject"]
    # The subject's digest is the SHA-256 of the object's stored bytes: the oid, recomputed.
    stored = store.objects.get(oid)
    raw = b"record %d\0" % len(stored.body) + stored.body
    assert subject["digest"] == {"sha256": hashlib.sha256(raw).hexdigest()} == {"sha256": oid}
    assert statement["predicateType"] == signing.PREDICATE_TYPE
    assert statement["predicate"] == {"kind": "yylo_benchmark_terminal.v2"}
    for field in ("payload", "sig"):
        flipped = json.loads(json.dumps(envelope))
        target = flipped if field == "payload" else flipped["signatures"][0]
        data = bytearray(base64.b64decode(target[field]))
        data[len(data) // 2] ^= 0x01
        target[field] = base64.b64encode(bytes(data)).decode()
        assert not _in_toto_verifies(flipped, public), field


# --- a signed-note verifier from the C2SP spec (c2sp.org/signed-note, c2sp.org/tlog-checkpoint)


def parse_vkey(vkey: str) -> tuple[str, bytes, bytes]:
    """(name, key hash, 32-byte Ed25519 key) of a verifier key ``name+hash+base64(type||key)``."""
    name, hash_hex, encoded = vkey.split("+", 2)  # the name has no "+"; base64 may
    raw = base64.b64decode(encoded)
    assert raw[0] == 0x01 and len(raw) == 33, "not an Ed25519 verifier key"
    assert hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4] == bytes.fromhex(hash_hex)
    return name, bytes.fromhex(hash_hex), raw[1:]


def note_verifies(note: bytes, vkey: str) -> bool:
    """Whether ``note`` carries a signature by ``vkey`` over its text, per the spec: the text
    is everything up to and including the newline before the blank line; each signature line
    is an em dash, a space, the key name, a space and base64(key hash || signature)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    name, key_hash, public = parse_vkey(vkey)
    text, sep, signatures = note.partition(b"\n\n")
    if not sep or not signatures.endswith(b"\n"):
        return False
    text += b"\n"
    for line in signatures.decode("utf-8").split("\n")[:-1]:
        dash, _, rest = line.partition(" ")
        signer, _, encoded = rest.partition(" ")
        if dash != "\u2014" or signer != name:
            continue
        raw = base64.b64decode(encoded)
        if raw[:4] != key_hash:
            continue
        try:
            Ed25519PublicKey.from_public_bytes(public).verify(raw[4:], text)
            return True
        except InvalidSignature:
            return False
    return False


def test_a_checkpoint_is_a_c2sp_signed_note_an_independent_verifier_accepts(signed, tmp_path):
    root, public, key = signed
    yyb = Yyb(str(root / "store"))
    with pytest.MonkeyPatch.context() as env:
        env.setenv(signing.KEY_ENV, key)
        done = yyb("checkpoint")
    assert done.exit_code == 0, done.stderr
    note = done.stdout_bytes
    origin = note.split(b"\n", 1)[0].decode()
    shown = yyb("key", "export-public", "--key", key, "--note-verifier", origin)
    assert shown.exit_code == 0, shown.stderr
    vkey = shown.stdout.strip()
    assert vkey == signing.note_verifier_key(origin, public) and vkey.startswith(f"{origin}+")
    assert yyb("key", "export-public", "--key", key, "--note-verifier", "a b").exit_code == 2
    assert note_verifies(note, vkey)
    assert f"\u2014 {origin} ".encode() in note  # the key is named by the log's origin
    text, _, lines = note.partition(b"\n\n")
    for at in (0, len(text) - 2):  # a byte of the origin, a byte of the root
        flipped = bytearray(note)
        flipped[at] ^= 0x01
        assert not note_verifies(bytes(flipped), vkey)
    forged = bytearray(note)
    forged[len(text) + 2 + lines.index(b" ", 3) + 20] ^= 0x01  # inside the signature
    assert not note_verifies(bytes(forged), vkey)
    # yyb's own verifier agrees: the note verifies with the key, and not once flipped.
    held = tmp_path / "note.txt"
    held.write_bytes(note)
    assert yyb("verify-log", "--trusted-key", public, "--checkpoint", str(held)).exit_code == 0
    held.write_bytes(bytes(forged))
    assert yyb("verify-log", "--trusted-key", public, "--checkpoint", str(held)).exit_code == 1
    # doctor says which form each signature is.
    checked = yyb("doctor")
    assert checked.exit_code == 0, checked.stderr
    (said,) = [line for line in checked.stderr.splitlines() if "signatures:" in line]
    assert "C2SP signed note" in said and "in-toto Statement v1 (DSSE)" in said


def test_notes_and_envelopes_signed_before_still_verify(tmp_path):
    """A store written before: its records signed with yyb's own statement, its checkpoint
    note with a DSSE signature. Both still verify; each form is named."""
    store, _ = Store.init(str(tmp_path / "store"))
    signing.generate_key(str(tmp_path / "k"))
    key = signing.load_private(str(tmp_path / "k"))
    trusted = [key.public_key()]
    oid = store.objects.put_record({"schema_version": "yyb_note.v1", "message": "old"})
    payload = signing.statement(oid)
    sig = key.sign(signing.pae(signing.PAYLOAD_TYPE, payload))
    old = {
        "schema_version": signing.SIGNATURE,
        "payload": base64.b64encode(payload).decode(),
        "payloadType": signing.PAYLOAD_TYPE,
        "signatures": [{"keyid": "k", "sig": base64.b64encode(sig).decode()}],
        "links": {"signed": oid},
    }
    store.refs.update(signing.signature_ref(oid), store.objects.put_record(old), old=None)
    assert signing.check_signed(store, oid, trusted) == []
    assert signing.form_of(old) == "yyb.statement.v1 (DSSE)"
    body = b"yyb/old\n1\n" + base64.b64encode(bytes(32)) + b"\n"
    blob = store.objects.put("blob", body)
    legacy = signing.pae(signing.PAYLOAD_TYPE, signing.statement(blob))
    raw = bytes.fromhex(signing.key_id(signing.public_hex(key)))[:4] + key.sign(legacy)
    note = body + "\n\u2014 yyb ".encode() + base64.b64encode(raw)
    assert signing.verify_note(note + b"\n", trusted).size == 1
    new = signing.note_signature(blob, body, "yyb/old", key)
    assert signing.form_of(new) == "C2SP signed note"
    assert signing.form_of(signing.envelope(oid, key, "yyb_note.v1")).startswith("in-toto")
    assert signing.signature_forms(store) == {"yyb.statement.v1 (DSSE)": 1}
