"""Checkpoints of the transparency log: its origin, size and root, as a note and a record.

The note is the C2SP checkpoint body, three lines::

    <origin>
    <tree size, decimal>
    <root hash, standard base64>

stored as a blob (signing it signs the checkpoint). The ``yyb_checkpoint.v1`` record holds the
same values and links the note and the log's leaves up to that size, in chunks of
``CHUNK`` leaves (each a blob of whole leaf lines), so that a bundle carrying the record carries
the whole log: anyone can recompute the root from the chunks, check an older checkpoint of
the same origin against it, and audit the refs they hold against every update ever logged.
Complete chunks are the same bytes in every later checkpoint, so they are stored once.
"""

from __future__ import annotations

import base64
import binascii
from collections import namedtuple

from yyb.errors import UsageError, YybError
from yyb.store.log import merkle, transparency

CHECKPOINT = "yyb_checkpoint.v1"


class NotExtended(YybError):
    """A log that does not extend a checkpoint of its origin: history rewritten or cut back."""


CHUNK = 4096
REF = "refs/transparency/checkpoint"


class Note(namedtuple("Note", "origin size root")):
    """A checkpoint: the log's ``origin``, its ``size`` in leaves and its ``root`` hash."""

    __slots__ = ()

    def body(self) -> bytes:
        encoded = base64.b64encode(self.root).decode("ascii")
        return f"{self.origin}\n{self.size}\n{encoded}\n".encode("ascii")


def parse_body(body: bytes) -> Note:
    """The checkpoint a note body states.

    Raises:
        UsageError: it is not three lines of origin, decimal size and a base64 SHA-256.
    """
    try:
        origin, size, root, end = body.decode("ascii").split("\n")
        value = base64.b64decode(root, validate=True)
    except (UnicodeDecodeError, ValueError, binascii.Error):
        raise UsageError("not a checkpoint: expected origin, size and root lines") from None
    if end or not origin or not size.isdigit() or str(int(size)) != size or len(value) != 32:
        raise UsageError("not a checkpoint: expected origin, size and root lines")
    return Note(origin, int(size), value)


def make(store) -> tuple[str, dict]:
    """Store a checkpoint of the log as it is now (its note blob, leaf chunks and record) and
    return the record's (oid, value); the caller points ``REF`` at it and signs the note."""
    refs = store.refs
    with refs.transparency.locked() as log:
        refs.complete(log)
        note = Note(log.origin(), log.size(), log.root())
        chunks = []
        lines: list[bytes] = []
        for oid, ref in log.entries():
            lines.append(transparency.leaf_line(oid, ref))
            if len(lines) == CHUNK:
                chunks.append(store.objects.put("blob", b"".join(lines)))
                lines = []
        if lines:
            chunks.append(store.objects.put("blob", b"".join(lines)))
    record = {
        "schema_version": CHECKPOINT,
        "origin": note.origin,
        "size": note.size,
        "root": note.root.hex(),
        "chunk": CHUNK,
        "links": {"note": store.objects.put("blob", note.body()), "leaves": chunks},
    }
    return store.objects.put_record(record), record


def leaves(store, record: dict) -> list[tuple[str, str]]:
    """The leaves a checkpoint record carries, each chunk checked for its shape.

    Raises:
        UsageError: a chunk is missing, malformed, or they do not add up to its size.
    """
    found: list[tuple[str, str]] = []
    chunks = record["links"].get("leaves", [])
    for i, oid in enumerate(chunks):
        try:
            data = store.objects.get(oid).body
        except YybError as exc:
            raise UsageError(f"checkpoint leaves chunk {i}: {exc}") from None
        parts = data.split(b"\n")
        if parts.pop() != b"" or (len(parts) != record["chunk"] and i != len(chunks) - 1):
            raise UsageError(f"checkpoint leaves chunk {i} is not {record['chunk']} whole lines")
        try:
            found += [transparency.parse_line(line) for line in parts]
        except UnicodeDecodeError:
            raise UsageError(f"checkpoint leaves chunk {i} is not ASCII") from None
    if len(found) != record["size"]:
        raise UsageError(f"the checkpoint carries {len(found)} leaves, not {record['size']}")
    return found


def check(store, oid: str) -> tuple[dict, list[tuple[str, str]]]:
    """A checkpoint record whose note, root and carried leaves agree; its leaves.

    Raises:
        UsageError: they do not.
    """
    record = store.objects.get_record(oid)
    if record.get("schema_version") != CHECKPOINT:
        raise UsageError(f"{oid} is not a checkpoint")
    note = parse_body(store.objects.get(record["links"]["note"]).body)
    if (note.origin, note.size, note.root.hex()) != (
        record["origin"],
        record["size"],
        record["root"],
    ):
        raise UsageError(f"checkpoint {oid}: its note and its record disagree")
    entries = leaves(store, record)
    if root_of(entries) != note.root:
        raise UsageError(f"checkpoint {oid}: its leaves do not hash to its root")
    return record, entries


def root_of(entries: list[tuple[str, str]]) -> bytes:
    return merkle.root_of([f"{oid} {ref}".encode("ascii") for oid, ref in entries])


def extends(old: Note, entries: list[tuple[str, str]]) -> None:
    """Check that the log of ``entries`` extends the checkpoint ``old`` (its first
    ``old.size`` leaves hash to ``old.root``).

    Raises:
        NotExtended: it does not: history was rewritten or cut back.
    """
    if len(entries) < old.size:
        raise NotExtended(
            f"the log has {len(entries)} leaves, fewer than the {old.size} of the checkpoint"
        )
    if root_of(entries[: old.size]) != old.root:
        raise NotExtended(
            f"the first {old.size} leaves of the log do not hash to the checkpoint's root: "
            "its history was rewritten"
        )


def guard(store, incoming: str) -> None:
    """Refuse a checkpoint ``incoming`` (a record in ``store``) that does not extend the one
    the store holds under ``REF``, when both are of one log.

    Raises:
        NotExtended, UsageError: it does not, or it is malformed.
    """
    current = store.refs.read(REF)
    if current is None or current == incoming:
        return
    record, entries = check(store, incoming)
    held = store.objects.get_record(current)
    if held.get("schema_version") != CHECKPOINT or held.get("origin") != record["origin"]:
        return
    extends(Note(held["origin"], held["size"], bytes.fromhex(held["root"])), entries)
