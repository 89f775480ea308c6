"""Environment records (docs/environments.md): a spec a case declares and what was built.

The harness writes both as maps (harness/environments/, below this layer); the classes are
here for the readers above it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from yyb.evidence.record import ABSENT, Absent, Record, Shape, shape
from yyb.evidence.records import ENVIRONMENT, ENVIRONMENT_SPEC

Kind = Literal["python", "rootfs", "oci"]


@shape
class EnvironmentSpecLinks(Shape):
    """The ``links`` of an EnvironmentSpec: the root a python spec's interpreter is in."""

    base: str | Absent = ABSENT


@shape
class EnvironmentSpec(Record):
    """An environment's declaration: its kind, where the workspace is shown, what to build."""

    schema_version: ClassVar[str] = ENVIRONMENT_SPEC

    name: str
    kind: Kind
    workspace: str
    variables: Mapping[str, str] | Absent = ABSENT
    python: Mapping[str, Any] | Absent = ABSENT
    rootfs: Mapping[str, Any] | Absent = ABSENT
    oci: Mapping[str, Any] | Absent = ABSENT
    links: EnvironmentSpecLinks | Absent = ABSENT


@shape
class EnvironmentLinks(Shape):
    """The ``links`` of an Environment."""

    spec: str
    manifest: str
    base: str | Absent = ABSENT
    log: str | Absent = ABSENT


@shape
class Environment(Record):
    """A built environment: its tree's manifest hash, size, mount points and build facts."""

    schema_version: ClassVar[str] = ENVIRONMENT

    name: str
    kind: Kind
    manifest_sha256: str
    file_count: int
    size_bytes: int
    mounts: tuple[str, ...]
    variables: Mapping[str, str] | Absent = ABSENT
    build: Mapping[str, Any]
    links: EnvironmentLinks
