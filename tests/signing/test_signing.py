"""Signatures: DSSE PAE, Ed25519 vectors, keys, signature records and verify-chain --trusted-key."""

from __future__ import annotations

import base64
import os
import stat

import pytest

from tests.conftest import Yyb, note
from yyb import signing
from yyb.errors import BadSignature, UsageError

RFC8032_SECRET = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
RFC8032_PUBLIC = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
RFC8032_SIG = (
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701"
    "cf9b46bd25bf5f0595bbe24655141438e7a100b"
)


def _key(seed_hex: str = RFC8032_SECRET):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.from_private_bytes(bytes.fromhex(seed_hex))


def test_pae_matches_the_dsse_vector_and_its_definition():
    # The DSSE protocol's example: payloadType http://example.com/HelloWorld, "hello world".
    assert (
        signing.pae("http://example.com/HelloWorld", b"hello world")
        == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    kind, body = "application/x", b"a b\x00"
    by_hand = b"DSSEv1" + b" " + b"13" + b" " + kind.encode() + b" " + b"4" + b" " + body
    assert signing.pae(kind, body) == by_hand
    assert signing.pae("", b"") == b"DSSEv1 0  0 "


def test_rfc8032_vector_1():
    key = _key()
    assert signing.public_hex(key) == RFC8032_PUBLIC
    assert key.sign(b"").hex() == RFC8032_SIG
    signing.load_public(RFC8032_PUBLIC).verify(bytes.fromhex(RFC8032_SIG), b"")


def test_key_generate_is_private_and_never_overwrites(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    run = Yyb(str(tmp_path / "unused"))
    made = run("key", "generate")
    assert made.exit_code == 0, made.stderr
    path = tmp_path / "cfg" / "yyb" / "signing.key"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    before = path.read_bytes()
    again = run("key", "generate")
    assert again.exit_code == 2 and "refusing to overwrite" in again.stderr
    assert path.read_bytes() == before
    exported = run("key", "export-public")
    assert exported.stdout.strip() == made.stdout.strip()
    assert len(exported.stdout.strip()) == 64
    other = run("key", "generate", "--out", str(tmp_path / "other.key"))
    assert other.stdout != made.stdout


def test_sign_and_verify_chain_with_a_trusted_key(disk_store, tmp_path):
    key_path = tmp_path / "k.key"
    run = Yyb(disk_store.path)
    public = run("key", "generate", "--out", str(key_path)).stdout.strip()
    oid = disk_store.objects.put_record(note("evidence"))
    disk_store.refs.update("refs/notes/e", oid)
    unsigned = run("verify-chain", "--trusted-key", public, "notes/e")
    assert unsigned.exit_code == 1 and unsigned.lines == [
        f"error unsigned {oid}: no signature (refs/signatures/<oid> is absent)"
    ]
    signed = run("sign", "notes/e", "--key", str(key_path))
    assert signed.exit_code == 0, signed.stderr
    assert disk_store.refs.read(f"refs/signatures/{oid}") == signed.stdout.strip()
    assert run("verify-chain", "--trusted-key", public, "notes/e").exit_code == 0
    pub_file = tmp_path / "pub"
    pub_file.write_text(public + "\n")
    assert run("verify-chain", "--trusted-key", str(pub_file), oid).exit_code == 0
    stranger = signing.public_hex(_key())
    bad = run("verify-chain", "--trusted-key", stranger, oid)
    assert bad.exit_code == 1 and bad.lines[0].startswith(f"error bad-signature {oid}:")
    # Several trusted keys: one valid signature is enough.
    assert (
        run("verify-chain", "--trusted-key", stranger, "--trusted-key", public, oid).exit_code == 0
    )


def test_a_second_signature_appends_to_the_chain(store):
    oid = store.objects.put_record(note("x"))
    first = signing.sign(store, oid, _key())
    other = _key("01" * 32)
    second = signing.sign(store, oid, other)
    assert signing.signatures_of(store, oid) == [second, first]
    assert signing.check_signed(store, oid, [signing.load_public(RFC8032_PUBLIC)]) == []


def _envelope(oid, key, payload=None, payload_type=signing.PAYLOAD_TYPE, keyid="k"):
    payload = signing.statement(oid) if payload is None else payload
    sig = key.sign(signing.pae(payload_type, payload))
    return {
        "schema_version": signing.SIGNATURE,
        "payload": base64.b64encode(payload).decode(),
        "payloadType": payload_type,
        "signatures": [{"keyid": keyid, "sig": base64.b64encode(sig).decode()}],
        "links": {"signed": oid},
    }


def test_verification_order_and_what_it_refuses(store):
    key, trusted = _key(), [signing.load_public(RFC8032_PUBLIC)]
    oid = store.objects.put_record(note("x"))
    other = store.objects.put_record(note("y"))
    record = signing.envelope(oid, key, "yyb_note.v1")
    store.objects.put_record(record)  # schema-valid
    signing.verify_envelope(record, oid, trusted)
    signing.verify_envelope(record, oid, trusted, kind="yyb_note.v1")
    # The statement names the object's kind: a signature of it as another kind is refused.
    with pytest.raises(BadSignature, match="as a yyb_note.v1, but it is a blob"):
        signing.verify_envelope(record, oid, trusted, kind="blob")
    # An in-toto payload that is not exactly its canonical bytes is refused, signed or not.
    spaced = signing.intoto_statement(oid, "yyb_note.v1").replace(b",", b", ")
    loose = _envelope(oid, key, payload=spaced, payload_type=signing.INTOTO_PAYLOAD_TYPE)
    with pytest.raises(BadSignature, match="not yyb's in-toto statement"):
        signing.verify_envelope(loose, oid, trusted)
    # A signature written before the in-toto form (yyb's own statement) still verifies.
    signing.verify_envelope(_envelope(oid, key), oid, trusted)
    # The key id decides nothing: garbage is fine, a trusted key's id on a stranger's sig is not.
    signing.verify_envelope(_envelope(oid, key, keyid="nonsense"), oid, trusted)
    forged = _envelope(oid, _key("02" * 32), keyid=record["signatures"][0]["keyid"])
    with pytest.raises(BadSignature, match="no signature"):
        signing.verify_envelope(forged, oid, trusted)
    # A validly signed envelope of another payload type is refused after the signature check.
    with pytest.raises(BadSignature, match="payload type"):
        signing.verify_envelope(_envelope(oid, key, payload_type="text/plain"), oid, trusted)
    # A valid signature over a statement of another oid does not vouch for this one.
    moved = _envelope(other, key)
    moved["links"] = {"signed": oid}
    with pytest.raises(BadSignature, match="signs"):
        signing.verify_envelope(moved, oid, trusted)
    with pytest.raises(BadSignature, match="not a yyb statement"):
        signing.verify_envelope(_envelope(oid, key, payload=b"[1]"), oid, trusted)
    # A tampered payload breaks the signature before anything parses it.
    tampered = dict(record, payload=base64.b64encode(signing.statement(other)).decode())
    with pytest.raises(BadSignature, match="no signature"):
        signing.verify_envelope(tampered, oid, trusted)


def test_configured_signer(store, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.delenv(signing.KEY_ENV, raising=False)
    oid = store.objects.put_record(note("x"))
    assert signing.configured_signer() is None
    key_path = str(tmp_path / "k.key")
    public = signing.generate_key(key_path)
    monkeypatch.setenv(signing.KEY_ENV, key_path)
    signer = signing.configured_signer()
    assert signing.public_hex(signer) == public
    assert signing.sign(store, oid, signer) == store.refs.read(f"refs/signatures/{oid}")
    # Signing again is a no-op: the same deterministic signature, no new update.
    updates = len(list(store.refs.log(f"refs/signatures/{oid}")))
    signing.sign(store, oid, signer)
    assert len(list(store.refs.log(f"refs/signatures/{oid}"))) == updates
    monkeypatch.setenv(signing.KEY_ENV, "")
    signing.generate_key(signing.default_key_path())
    assert signing.configured_signer() is None  # empty: signing off, whatever the default
    monkeypatch.setenv(signing.KEY_ENV, str(tmp_path / "absent.key"))
    with pytest.raises(UsageError):
        signing.configured_signer()


def test_nothing_unsigned_between_a_signed_head_and_what_it_vouches_for(disk_store, tmp_path):
    key = _key()
    pub = signing.public_hex(key)
    evaluation = disk_store.objects.put_record(
        {"schema_version": "yyb_note.v1", "message": "stands for a receipt"}
    )
    inner = disk_store.objects.put_record(note("inner", about=evaluation))
    head = disk_store.objects.put_record(note("head", inner=inner))
    signing.sign(disk_store, head, key)
    run = Yyb(disk_store.path)
    assert run("verify-chain", "--trusted-key", pub, head).exit_code == 0
    # A record of a signed kind below the head must carry its own signature.
    terminal_like = dict(_terminal_shaped(disk_store), reason="below a signed head")
    below = disk_store.objects.put_record(terminal_like)
    head2 = disk_store.objects.put_record(note("head2", terminal=below))
    signing.sign(disk_store, head2, key)
    unsigned = run("verify-chain", "--trusted-key", pub, head2)
    assert unsigned.exit_code == 1
    assert unsigned.lines == [
        f"error unsigned {below}: no signature (refs/signatures/<oid> is absent)"
    ]
    signing.sign(disk_store, below, key)
    assert run("verify-chain", "--trusted-key", pub, head2).exit_code == 0


def _terminal_shaped(store) -> dict:
    """A schema-valid terminal record (its links point at real objects of this store)."""
    anchor = store.objects.put("blob", b"anchor")
    return {
        "schema_version": "yylo_benchmark_terminal.v2",
        "class": "resolved",
        "reason": "r",
        "plan": anchor,
        "attempt": anchor,
        "ordinal": 0,
        "identity": {"requested": "a/b", "resolved": "a/b", "observed": "a/b"},
        "runtime": {"wall_ms": 1, "started_ms": 1, "ended_ms": 2},
        "exit": {"code": 0, "signal": None, "timed_out": False, "cleanup_confirmed": True},
        "outputs": {},
        "candidate_cost": {"completeness": "genuine_zero", "currency": "USD", "micros": 0},
        "links": {"plan": anchor, "attempt": anchor, "intent": anchor},
    }


def _variants(oid: str, other: str) -> dict[str, bytes]:
    """Payloads a lenient JSON parser reads as the statement of ``oid``; none is its bytes."""
    exact = signing.statement(oid)
    return {
        "bom": b"\xef\xbb\xbf" + exact,
        "spaces": f'{{"signed": "{oid}", "type": "{signing.STATEMENT_TYPE}"}}'.encode(),
        "reordered": f'{{"type":"{signing.STATEMENT_TYPE}","signed":"{oid}"}}'.encode(),
        "duplicate-key": exact.replace(b"{", b'{"signed":"%s",' % other.encode(), 1),
        "newline": exact + b"\n",
        "leading-space": b" " + exact,
        "escaped": exact.replace(b'"signed"', b'"\\u0073igned"'),
        "utf-16": exact.decode().encode("utf-16"),
    }


@pytest.mark.parametrize("variant", list(_variants("0" * 64, "1" * 64)))
def test_the_payload_is_exactly_the_canonical_statement(store, variant):
    """Two parsers must never read two statements: only the exact bytes are accepted."""
    key, trusted = _key(), [signing.load_public(RFC8032_PUBLIC)]
    oid = store.objects.put_record(note("x"))
    other = store.objects.put_record(note("y"))
    payload = _variants(oid, other)[variant]
    forged = _envelope(oid, key, payload=payload)
    store.objects.put_record(forged)  # a schema-valid record: only verification refuses it
    with pytest.raises(BadSignature, match="statement"):
        signing.verify_envelope(forged, oid, trusted)
    signing.verify_envelope(_envelope(oid, key), oid, trusted)  # the exact bytes pass
