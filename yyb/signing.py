"""Signed evidence: Ed25519 keys, DSSE envelopes stored as signature records, verification.

A signature is a ``yyb_signature.v1`` record holding one DSSE envelope, linking the signed
oid as ``signed``. Its payload is an in-toto Statement v1 whose subject is the signed object
(its oid as a ``sha256`` digest) and whose predicate names the object's kind, so any DSSE
or in-toto verifier checks it with the public key alone (docs/audit.md); signatures written
before that carry yyb's own ``yyb.statement.v1`` payload and still verify. A checkpoint note
is signed as a C2SP signed note instead (``yyb_note_signature.v1``: Ed25519 over the note
text). Each signed object has a ref ``refs/signatures/<oid>`` whose update chain lists every
signature made of it. The ``cryptography`` package is imported only when a key is used.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
from collections.abc import Iterator
from typing import Any

from yyb.errors import BadSignature, InvalidArgument, UsageError, YybError
from yyb.evidence import names, records
from yyb.evidence.kinds.store import NoteSignature, Signature, SignatureLinks
from yyb.evidence.record import kind_of
from yyb.store.log import checkpoint as checkpoints
from yyb.store.objects.format import check_links, is_oid
from yyb.store.repo import Store

SIGNATURE = records.SIGNATURE
# yyb's own statement, the payload of signatures written before in-toto's (still verified).
PAYLOAD_TYPE = "application/vnd.yyb.statement+json"
STATEMENT_TYPE = "yyb.statement.v1"
# The in-toto Statement v1 every new signature carries (docs/format.md, "Signatures").
INTOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
INTOTO_STATEMENT = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://yyb.invalid/attestation/object/v1"
FORMS = {
    PAYLOAD_TYPE: "yyb.statement.v1 (DSSE)",
    INTOTO_PAYLOAD_TYPE: "in-toto Statement v1 (DSSE)",
}
NOTE_FORM = "C2SP signed note"
KEY_ENV = "YYB_SIGNING_KEY"
KEY_FILE = "signing.key"


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: the exact bytes that are signed."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def statement(oid: str) -> bytes:
    """The payload of a signature of ``oid``: canonical JSON (sorted keys, no spaces)."""
    return json.dumps(
        {"signed": oid, "type": STATEMENT_TYPE}, sort_keys=True, separators=(",", ":")
    ).encode("ascii")


def intoto_statement(oid: str, kind: str) -> bytes:
    """The in-toto Statement v1 of a signature of ``oid``, an object of ``kind`` (a record's
    schema_version, or ``blob``): canonical JSON (sorted keys, no spaces, ASCII)."""
    value = {
        "_type": INTOTO_STATEMENT,
        "subject": [{"name": oid, "digest": {"sha256": oid}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {"kind": kind},
    }
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("ascii")


def object_kind(store: Store, oid: str) -> str:
    """What a statement names ``oid`` as: a record's schema_version, else its object type."""
    kind, _, stream = store.objects.open_body(oid)
    stream.close()
    return kind_of(store.objects.get_record(oid)) if kind == "record" else kind


def form_of(record: dict) -> str:
    """Which form a signature record is, in words (docs/audit.md)."""
    if NoteSignature.holds(record):
        return NOTE_FORM
    return FORMS.get(record.get("payloadType"), f"unknown ({record.get('payloadType')!r})")


def signature_forms(store: Store) -> dict[str, int]:
    """How many signed objects' newest signatures (``refs/signatures/*``) are of each form
    (``form_of``), by form; a signature that cannot be read counts as ``unreadable``."""
    counts: dict[str, int] = {}
    for name in store.refs.names(under=names.SIGNATURES):
        oid = store.refs.read(name)
        try:
            form = form_of(store.objects.get_record(oid)) if oid else "unreadable"
        except YybError:
            form = "unreadable"
        counts[form] = counts.get(form, 0) + 1
    return dict(sorted(counts.items()))


def signature_ref(oid: str) -> str:
    return names.signature(oid)


# --- keys -----------------------------------------------------------------------------------


def default_key_path(environ: dict | None = None) -> str:
    """``$XDG_CONFIG_HOME/yyb/signing.key``, else ``~/.config/yyb/signing.key``."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "yyb", KEY_FILE)


def generate_key(path: str) -> str:
    """Write a new Ed25519 private key (PKCS#8 PEM, mode 0600) to ``path``; return its public
    key as hex. An existing file is never overwritten.

    Raises:
        UsageError: ``path`` exists. StoreIOError: the file system refused.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from yyb.store import file

    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise UsageError(f"refusing to overwrite the key {path}") from None
    except OSError as exc:
        raise file.io_error(path, exc) from exc
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, pem)
        os.fsync(fd)
    finally:
        os.close(fd)
    return public_hex(key)


def load_private(path: str) -> Any:
    """The Ed25519 private key in the PEM file at ``path``.

    Raises:
        UsageError: no such file, or not an unencrypted Ed25519 PEM key.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        with open(path, "rb") as handle:
            data = handle.read(64 << 10)
        key = serialization.load_pem_private_key(data, password=None)
    except OSError as exc:
        raise UsageError(f"cannot read the signing key {path}: {exc.strerror}") from None
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{path} is not an unencrypted PEM private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError(f"{path} is not an Ed25519 key")
    return key


def public_hex(key: Any) -> str:
    """The raw 32-byte public key of a private key, as 64 lowercase hex digits."""
    from cryptography.hazmat.primitives import serialization

    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return raw.hex()


def load_public(text_or_path: str) -> Any:
    """A trusted public key: 64 hex digits, or a file whose first line is those digits.

    Raises:
        UsageError: neither.
    """
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    text = text_or_path.strip()
    if not _is_key_hex(text):
        try:
            with open(text_or_path, encoding="ascii", errors="replace") as handle:
                text = handle.readline(200).strip()
        except OSError as exc:
            raise UsageError(f"cannot read the public key {text_or_path}: {exc.strerror}") from None
    if not _is_key_hex(text):
        raise UsageError(f"{text_or_path}: a public key is 64 hex digits (yyb key export-public)")
    return Ed25519PublicKey.from_public_bytes(bytes.fromhex(text))


def _is_key_hex(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdefABCDEF" for c in text)


def key_id(public: str) -> str:
    """An informational key id: the SHA-256 of the raw public key. Never trusted."""
    return hashlib.sha256(bytes.fromhex(public)).hexdigest()


# --- signing ---------------------------------------------------------------------------------


def envelope(oid: str, key: Any, kind: str) -> dict:
    """A ``yyb_signature.v1`` record signing ``oid`` (an object of ``kind``) with ``key``: a
    DSSE envelope of its in-toto Statement."""
    payload = intoto_statement(oid, kind)
    sig = key.sign(pae(INTOTO_PAYLOAD_TYPE, payload))
    return Signature(
        payload=base64.b64encode(payload).decode("ascii"),
        payloadType=INTOTO_PAYLOAD_TYPE,
        signatures=(
            {"keyid": key_id(public_hex(key)), "sig": base64.b64encode(sig).decode("ascii")},
        ),
        links=SignatureLinks(signed=oid),
    ).to_value()


def sign(store: Store, oid: str, key: Any) -> str:
    """Store a signature of ``oid`` and move ``refs/signatures/<oid>`` to it; return its oid.

    Idempotent, and the way to complete a signing that a crash cut short: Ed25519 signatures
    are deterministic, so signing again yields the same record, and an interrupted update of
    the signature ref (its lock abandoned, its log head ahead) is finished by the next update.
    """
    if not store.objects.contains(oid):
        from yyb.errors import ObjectMissing

        raise ObjectMissing(oid)
    record = envelope(oid, key, object_kind(store, oid))
    sig_oid = store.objects.put_record(record)
    if store.refs.read(signature_ref(oid)) != sig_oid:
        store.refs.update(signature_ref(oid), sig_oid, reason="sign")
    return sig_oid


def configured_key_path(environ: dict | None = None) -> str | None:
    """The key automatic signing uses: ``$YYB_SIGNING_KEY`` when set (empty: signing off),
    else the default key if it exists, else None.

    Raises:
        UsageError: ``$YYB_SIGNING_KEY`` names a file that does not exist.
    """
    environ = os.environ if environ is None else environ
    named = environ.get(KEY_ENV)
    if named is not None:
        if not named:
            return None
        if not os.path.isfile(named):
            raise UsageError(f"{KEY_ENV}={named} names no key file")
        return named
    path = default_key_path(environ)
    return path if os.path.isfile(path) else None


def configured_signer(environ: dict | None = None) -> Any:
    """The key automatic signing uses (see configured_key_path), loaded; None when off.

    Raises:
        UsageError: a key is named but missing, or is not an Ed25519 PEM key.
    """
    path = configured_key_path(environ)
    return None if path is None else load_private(path)


# --- verifying ------------------------------------------------------------------------------


def checkpoint(store: Store, key: Any) -> dict:
    """Checkpoint the store's transparency log, sign the note with ``key`` (None: unsigned)
    and point refs/transparency/checkpoint at it.

    ``yyb checkpoint`` is this step; a run or a report that signs its evidence ends with it,
    so signed evidence comes with a signed log. A checkpoint whose move a crash cut short
    (signed or not) is finished first.

    Args:
        store: the store whose log is checkpointed.
        key: the private key that signs the note, or None.

    Returns:
        The checkpoint record (``size``, ``root``, ``origin``, its ``note`` linked).
    """
    pending = store.refs.pending(checkpoints.REF)
    if pending is not None and store.objects.contains(pending):
        _publish_checkpoint(store, pending, store.objects.get_record(pending), key)
    oid, record = checkpoints.make(store)
    _publish_checkpoint(store, oid, record, key)
    return record


def _publish_checkpoint(store: Store, oid: str, record: dict, key: Any) -> None:
    """Move refs/transparency/checkpoint to ``oid``, its note signed first: a crash while
    signing leaves the move pending, and the next ``checkpoint`` finishes it."""
    signed = (lambda: sign_note(store, record["links"]["note"], key)) if key else None
    store.refs.update(
        checkpoints.REF, oid, reason=f"checkpoint of {record['size']} leaves", before_move=signed
    )


def signatures_of(store: Store, oid: str) -> list[str]:
    """Every signature ever recorded for ``oid`` (its signature ref's chain), newest first."""
    name = signature_ref(oid)
    if store.refs.read(name) is None and store.refs.log_head(name) is None:
        return []
    found = []
    for _, update in store.refs.log(name):
        target = update.get("new")
        if target is not None and target not in found:
            found.append(target)
    return found


def verify_envelope(
    record: dict,
    signed: str,
    trusted: list[Any],
    sig_oid: str | None = None,
    kind: str | None = None,
):
    """Check one signature record against trusted public keys.

    Order matters (DSSE): the signature over the PAE first, then the payload type, then the
    payload, which must be exactly the bytes of its statement: ``intoto_statement(signed,
    KIND)`` (KIND the object's kind, ``kind`` when given) or, in a signature written before
    those, ``statement(signed)``; and the record's ``links.signed`` must be ``signed``. The key
    id is never used to decide.

    Raises:
        BadSignature: the first check that fails.
    """
    from cryptography.exceptions import InvalidSignature

    # The envelope may come from a bundle no schema has passed yet: its fields are read
    # defensively below, and what does not fit is a BadSignature, not a crash.
    if not Signature.holds(record):
        raise BadSignature(sig_oid, f"a {kind_of(record)}, not a {SIGNATURE}")
    try:
        payload = base64.b64decode(record["payload"], validate=True)
        payload_type = record["payloadType"]
        sigs = [base64.b64decode(s["sig"], validate=True) for s in record["signatures"]]
    except (KeyError, TypeError, binascii.Error) as exc:
        raise BadSignature(sig_oid, f"a malformed envelope ({exc})") from None
    message = pae(payload_type, payload)
    verified = False
    for sig in sigs:
        for key in trusted:
            try:
                key.verify(sig, message)
            except InvalidSignature:
                continue
            verified = True
    if not verified:
        raise BadSignature(sig_oid, "no signature in it verifies with a trusted key")
    if payload_type not in FORMS:
        raise BadSignature(sig_oid, f"payload type {payload_type!r}, not {INTOTO_PAYLOAD_TYPE}")
    # Bytes, never a parse alone: a BOM, a space, another key order or a repeated key would
    # let two JSON parsers read two statements from one signed payload.
    if payload_type == INTOTO_PAYLOAD_TYPE:
        named, stated = _intoto_subject(payload)
        if named is None:
            raise BadSignature(
                sig_oid, "the payload is not yyb's in-toto statement: not its canonical bytes"
            )
        if kind is not None and stated != kind and named == signed:
            raise BadSignature(sig_oid, f"it signs {signed} as a {stated}, but it is a {kind}")
    else:
        named = _statement_oid(payload)
        if named is None:
            raise BadSignature(
                sig_oid, "the payload is not a yyb statement: not exactly its canonical bytes"
            )
    if named != signed or record.get("links", {}).get("signed") != signed:
        raise BadSignature(sig_oid, f"it signs {named}, not {signed}")


def verify_record(store: Store, oid: str, record: dict, trusted: list[Any], sig_oid: str) -> None:
    """Check one signature record of ``oid`` in ``store``, of either kind: a DSSE envelope
    (``verify_envelope``, the object's kind read from the store) or a C2SP signature of a
    note (Ed25519 over the note's bytes, its key hash that of a trusted key).

    Raises:
        BadSignature: it does not verify.
    """
    from cryptography.exceptions import InvalidSignature

    if not NoteSignature.holds(record):
        verify_envelope(record, oid, trusted, sig_oid, object_kind(store, oid))
        return
    if record["links"]["signed"] != oid:
        raise BadSignature(sig_oid, f"it signs {record['links']['signed']}, not {oid}")
    body = store.objects.get(oid).body
    raw = base64.b64decode(record["signature"])
    for key in trusted:
        public = bytes.fromhex(public_hex_of(key))
        if note_key_hash(record["name"], public).hex() != record["key_hash"]:
            continue
        try:
            key.verify(raw, body)
            return
        except InvalidSignature:
            continue
    raise BadSignature(sig_oid, "no trusted key's signature of the note verifies")


def _intoto_subject(payload: bytes) -> tuple[str | None, str | None]:
    """(the oid, the kind) an in-toto statement ``payload`` names, when it is byte for byte
    ``intoto_statement`` of them; (None, None) otherwise."""
    try:
        value = json.loads(payload)
        (subject,) = value["subject"]
        oid, kind = subject["name"], value["predicate"]["kind"]
    except (ValueError, KeyError, TypeError):
        return None, None
    if not is_oid(oid) or not isinstance(kind, str) or not kind.isascii():
        return None, None
    return (oid, kind) if payload == intoto_statement(oid, kind) else (None, None)


def _statement_oid(payload: bytes) -> str | None:
    """The oid whose statement ``payload`` is, byte for byte; None if it is no statement."""
    start = statement("0" * 64).index(b"0" * 64)
    named = payload[start : start + 64].decode("ascii", "replace")
    return named if is_oid(named) and payload == statement(named) else None


def check_signed(store: Store, oid: str, trusted: list[Any]):
    """Findings for one signed head: none when a trusted signature of ``oid`` verifies."""
    from yyb.store.fsck import error

    sigs = signatures_of(store, oid)
    if not sigs:
        return [error("unsigned", oid, "no signature (refs/signatures/<oid> is absent)")]
    problems = []
    for sig_oid in sigs:
        try:
            verify_record(store, oid, store.objects.get_record(sig_oid), trusted, sig_oid)
            return []
        except YybError as exc:
            problems.append(str(exc))
    return [error("bad-signature", oid, "; ".join(problems))]


def check_vouched(store: Store, head: str, trusted: list[Any]):
    """Findings for the head and every signed-kind record reachable from it by links.

    Every record of ``records.SIGNED_KINDS`` below a signed head must carry its own trusted
    signature, so nothing unsigned sits between a head and what it vouches for.
    """
    findings = list(check_signed(store, head, trusted))
    for oid in signed_records(store, [head]):
        if oid != head:
            findings.extend(check_signed(store, oid, trusted))
    return findings


def signed_records(store: Store, roots: list[str]) -> Iterator[str]:
    """The oid of every record of a signed kind reachable from ``roots`` by links, once each.

    Missing and damaged objects are passed over (verify-chain and doctor report them); blobs
    are recognised by their header and never read.
    """
    seen, stack = set(roots), list(reversed(roots))
    while stack:
        oid = stack.pop()
        try:
            kind, _, stream = store.objects.open_body(oid)
            stream.close()
            if kind != "record":
                continue
            value = store.objects.get_record(oid)
            targets = [t for linked in check_links(value, oid).values() for t in linked]
        except YybError:
            continue
        if kind_of(value) in records.SIGNED_KINDS:
            yield oid
        for target in targets:
            if target not in seen:
                seen.add(target)
                stack.append(target)


def signature_refs(store: Store, roots: list[str]) -> list[str]:
    """The signature refs (sorted) of the signed-kind records reachable from ``roots`` and of
    the roots themselves, those that exist: what a bundle of ``roots`` needs so that
    ``verify-chain --trusted-key`` can check each of those records where it is imported."""
    found = set()
    for oid in [*roots, *signed_records(store, roots)]:
        name = signature_ref(oid)
        if store.refs.read(name) is not None:
            found.add(name)
    return sorted(found)


# --- signed notes (checkpoints of the transparency log) ------------------------------------

NOTE_MARK = "\u2014 "  # an em dash and a space start each signature line of a note
NOTE_KEY_NAME = "yyb"  # the name on signature lines written before C2SP's (DSSE, legacy)
ED25519_NOTE = 0x01  # C2SP signed-note signature type of an Ed25519 key


def note_key_hash(name: str, public: bytes) -> bytes:
    """C2SP signed note: the 4-byte hash of an Ed25519 key named ``name``: the first bytes of
    SHA-256(name || 0x0A || 0x01 || public key)."""
    named = name.encode("utf-8") + b"\n" + bytes([ED25519_NOTE]) + public
    return hashlib.sha256(named).digest()[:4]


def note_verifier_key(name: str, public_hex_key: str) -> str:
    """The C2SP verifier key (``vkey``) of an Ed25519 public key: ``NAME+HASH+KEY``, HASH the
    key hash in hex, KEY standard base64 of 0x01 and the public key."""
    public = bytes.fromhex(public_hex_key)
    encoded = base64.b64encode(bytes([ED25519_NOTE]) + public).decode("ascii")
    return f"{name}+{note_key_hash(name, public).hex()}+{encoded}"


def note_signature(note_oid: str, body: bytes, name: str, key: Any) -> dict:
    """A ``yyb_note_signature.v1`` record: ``key``'s C2SP signature of the note text ``body``
    (the blob ``note_oid``) under the key name ``name``."""
    public = bytes.fromhex(public_hex(key))
    return NoteSignature(
        name=name,
        key_hash=note_key_hash(name, public).hex(),
        signature=base64.b64encode(key.sign(body)).decode("ascii"),
        links=SignatureLinks(signed=note_oid),
    ).to_value()


def sign_note(store: Store, note_oid: str, key: Any) -> str:
    """Sign a checkpoint note as a C2SP signed note (the key named by the log's origin),
    store the signature under ``refs/signatures/<note>``; return its oid. Idempotent, as
    ``sign`` is."""
    body = store.objects.get(note_oid).body
    name = checkpoints.parse_body(body).origin
    sig_oid = store.objects.put_record(note_signature(note_oid, body, name, key))
    if store.refs.read(signature_ref(note_oid)) != sig_oid:
        store.refs.update(signature_ref(note_oid), sig_oid, reason="sign")
    return sig_oid


def signed_note(body: bytes, records: list[dict]) -> bytes:
    """A checkpoint as a signed note: its body, an empty line, and one line per signature,
    ``— NAME <base64 of the 4-byte key hash and the 64-byte signature>``: a
    ``yyb_note_signature.v1``'s (C2SP: over the note text), or one a ``yyb_signature.v1`` of
    the body's blob holds (the form written before, DSSE over its statement; docs/format.md)."""
    lines = []
    for record in records:
        if NoteSignature.holds(record):
            raw = bytes.fromhex(record["key_hash"]) + base64.b64decode(record["signature"])
            lines.append(f"{NOTE_MARK}{record['name']} {base64.b64encode(raw).decode('ascii')}\n")
            continue
        for sig in record["signatures"]:
            raw = bytes.fromhex(sig["keyid"])[:4] + base64.b64decode(sig["sig"])
            lines.append(f"{NOTE_MARK}{NOTE_KEY_NAME} {base64.b64encode(raw).decode('ascii')}\n")
    return body + b"\n" + "".join(lines).encode("utf-8")


def verify_note(text: bytes, trusted: list[Any]):
    """The checkpoint a signed note states, once a trusted key's signature verifies over it.

    The grammar is docs/format.md's ("Checkpoints"): the three body lines, an empty line, then
    signature lines only, ``— <name> <base64>``, each ending in a newline, the last included.
    A signature verifies as C2SP's (Ed25519 over the note text, its key hash that of the
    trusted key under the line's name) or, for notes signed before, over the DSSE statement
    of the body's blob. A signature that verifies with no trusted key (another signer) is
    passed over.

    Raises:
        UsageError: it is not a note of that grammar; BadSignature: no signature verifies.
    """
    from cryptography.exceptions import InvalidSignature

    from yyb.store.objects.format import hash_object

    head, sep, tail = text.partition(b"\n\n")
    if not sep:
        raise UsageError("not a signed note: no empty line after the checkpoint")
    body = head + b"\n"
    note = checkpoints.parse_body(body)
    legacy = pae(PAYLOAD_TYPE, statement(hash_object("blob", body)))
    for name, raw in _note_signatures(tail):
        for key in trusted:
            public = bytes.fromhex(public_hex_of(key))
            message = body if raw[:4] == note_key_hash(name, public) else legacy
            try:
                key.verify(raw[4:], message)
                return note
            except InvalidSignature:
                continue
    raise BadSignature(None, "no signature of the checkpoint verifies with a trusted key")


def public_hex_of(public: Any) -> str:
    """The raw bytes of a public key, as hex."""
    from cryptography.hazmat.primitives import serialization

    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return raw.hex()


_SIGNATURE_LINE = re.compile(f"{NOTE_MARK}([^ \n+]+) ([A-Za-z0-9+/]+={{0,2}})")


def _note_signatures(tail: bytes) -> list[tuple[str, bytes]]:
    """The key name and decoded signature (key hash and signature) of each of a note's
    signature lines.

    Raises:
        UsageError: a line that is not a signature line, or no final newline.
    """
    if tail and not tail.endswith(b"\n"):
        raise UsageError("not a signed note: its last line does not end with a newline")
    try:
        lines = tail.decode("utf-8").split("\n")[:-1]
    except UnicodeDecodeError:
        raise UsageError("not a signed note: its signature lines are not UTF-8") from None
    found = []
    for line in lines:
        match = _SIGNATURE_LINE.fullmatch(line)
        try:
            raw = base64.b64decode(match.group(2), validate=True) if match else b""
        except binascii.Error:
            raw = b""
        if len(raw) < 5:
            raise UsageError(f"not a signed note: {line[:40]!r} is not a signature line")
        found.append((match.group(1), raw))
    return found


def verify_log(store: Store, held: list[bytes], trusted: list[Any]) -> tuple[str, list]:
    """Check, offline, that the history in ``store`` only grew since the signed checkpoints
    ``held`` (note texts, each carrying a ``trusted`` signature): the log is the store's own
    when the origins match, else the checkpoint carried under refs/transparency/checkpoint
    (from a bundle), whose note must carry a trusted signature too. That log must extend each
    held checkpoint, and the refs must agree with it (``logaudit``). Returns what was checked,
    in words, and the audit's findings.

    Raises:
        BadSignature: a note without a trusted signature. UsageError: checkpoints of several
        logs, or no log of theirs here. CorruptObject / CorruptRef: a log that does not
        extend a held checkpoint, or a carried checkpoint that does not verify.
    """
    from yyb.store.log import audit as logaudit

    notes = [verify_note(text, trusted) for text in held]
    origins = {note.origin for note in notes}
    if len(origins) != 1:
        raise InvalidArgument("held", "give checkpoints of one log (one origin)", sorted(origins))
    [origin] = origins
    with store.refs.transparency.reading() as log:
        own = log.size() and log.origin() == origin
        entries = list(log.entries()) if own else []
    if own:
        findings = list(logaudit.audit(store))
        where = f"this store's log ({len(entries)} leaves)"
    else:
        carried = store.refs.read(checkpoints.REF)
        if carried is None:
            raise UsageError(
                f"no log of origin {origin} here: neither this store's nor a carried checkpoint"
            )
        record, entries = checkpoints.check(store, carried)
        if record["origin"] != origin:
            raise UsageError(f"the carried checkpoint is of {record['origin']}, not {origin}")
        note_oid = record["links"]["note"]
        text = signed_note(
            store.objects.get(note_oid).body,
            [store.objects.get_record(s) for s in signatures_of(store, note_oid)],
        )
        verify_note(text, trusted)
        findings = list(logaudit.audit_leaves(store, entries))
        where = f"the carried checkpoint of {len(entries)} leaves"
    sizes = sorted(note.size for note in notes)
    for note in sorted(notes, key=lambda n: n.size):
        checkpoints.extends(note, entries)
    held_sizes = ", ".join(str(size) for size in sizes)
    return f"{where} of {origin} extends the held checkpoint(s) of {held_sizes} leaves", findings
