"""Records the harness writes (the execution envelope, file listings, the post-execution manifest),
typed for readers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from yyb.evidence.record import ABSENT, Absent, Record, Shape, shape
from yyb.evidence.records import ENVELOPE, LISTING, MANIFEST, CostCompleteness, EnvelopeStatus


@shape
class ExecutionEnvelopeCost(Shape):
    """The ``cost`` of an ExecutionEnvelope."""

    completeness: CostCompleteness
    currency: Literal["USD"]
    micros: int | None


@shape
class ExecutionEnvelope(Record):
    """What a harness observed about one execution; timing is overwritten by the launcher."""

    schema_version: ClassVar[str] = ENVELOPE

    provider: str
    model: str
    status: EnvelopeStatus
    session_id: str | Absent = ABSENT
    usage: Mapping[str, Any] | Absent = ABSENT
    cost: ExecutionEnvelopeCost
    started_ms: int
    ended_ms: int
    elapsed_ms: int


@shape
class FileListingLinks(Shape):
    """The ``links`` of a FileListing."""

    files: tuple[str, ...]


@shape
class FileListing(Record):
    """Every file of a workspace: [path, git mode, index into links.files]."""

    schema_version: ClassVar[str] = LISTING

    entries: tuple[tuple[Any, ...], ...]
    omitted: tuple[tuple[str, ...], ...]
    redacted: tuple[tuple[Any, ...], ...] | Absent = ABSENT
    links: FileListingLinks


@shape
class PostExecutionManifestLinks(Shape):
    """The ``links`` of a PostExecutionManifest."""

    receipt: str
    listing: str
    patch: str
    scratch: str | Absent = ABSENT


@shape
class PostExecutionManifest(Record):
    """The workspace after the candidate: Git state, every file, the change from the base."""

    schema_version: ClassVar[str] = MANIFEST

    git: Mapping[str, Any]
    file_count: int
    added: tuple[str, ...]
    changed: tuple[str, ...]
    deleted: tuple[str, ...]
    omitted: tuple[tuple[str, ...], ...]
    links: PostExecutionManifestLinks
    scratch: tuple[str, ...] | Absent = ABSENT
