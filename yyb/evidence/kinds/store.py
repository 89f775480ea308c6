"""Records the store writes (ref updates, checkpoints, notes) and the signature records, typed for
readers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from yyb.evidence.record import ABSENT, Absent, Record, Shape, shape
from yyb.evidence.records import CHECKPOINT, NOTE, NOTE_SIGNATURE, REF_UPDATE, SIGNATURE


@shape
class RefUpdateBrokeLock(Shape):
    """The holder of an abandoned lock this update replaced."""

    pid: int
    host: str
    boot: str


@shape
class RefUpdate(Record):
    """One update of one ref, linking the previous update of the same ref."""

    schema_version: ClassVar[str] = REF_UPDATE

    ref: str
    old: str | None
    new: str | None
    time_ms: int
    reason: str
    links: Mapping[str, Any] | Absent = ABSENT
    broke_lock: RefUpdateBrokeLock | Absent = ABSENT


@shape
class CheckpointLinks(Shape):
    """The ``links`` of a Checkpoint."""

    note: str
    leaves: tuple[str, ...]


@shape
class Checkpoint(Record):
    """A checkpoint of a store's transparency log: origin, size and root, with its note and its
    leaves in chunks.
    """

    schema_version: ClassVar[str] = CHECKPOINT

    origin: str
    size: int
    root: str
    chunk: int
    links: CheckpointLinks


@shape
class Note(Record):
    """A free-form annotation that links the objects it speaks about."""

    schema_version: ClassVar[str] = NOTE

    message: str
    data: Mapping[str, Any] | Absent = ABSENT
    links: Mapping[str, Any] | Absent = ABSENT


@shape
class SignatureLinks(Shape):
    """The ``links`` of a Signature."""

    signed: str


@shape
class Signature(Record):
    """A DSSE envelope signing one object, which it links as signed."""

    schema_version: ClassVar[str] = SIGNATURE

    payload: str
    payloadType: str
    signatures: tuple[Mapping[str, Any], ...]
    links: SignatureLinks


@shape
class NoteSignature(Record):
    """A C2SP signed-note signature of a checkpoint note, which it links as signed: the key's
    name and 4-byte key hash (hex), and the Ed25519 signature over the note's text (base64).
    """

    schema_version: ClassVar[str] = NOTE_SIGNATURE

    name: str
    key_hash: str
    signature: str
    links: SignatureLinks
