"""Records of release readiness (docs/readiness.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from yyb.evidence.record import ABSENT, Absent, Record, Shape, named, shape
from yyb.evidence.records import (
    READINESS_CHECK,
    READINESS_RECEIPT,
    Cheat,
    LeakageCheck,
    TerminalClass,
)


@shape
class ReleaseReadinessHost(Shape):
    """The ``host`` of a ReleaseReadiness."""

    sandbox: Mapping[str, Any]
    kernel: Mapping[str, Any]
    python: Mapping[str, Any]


@shape
class ReleaseReadinessSuite(Shape):
    """The ``suite`` of a ReleaseReadiness."""

    model: str
    cases: int
    stand_in_sha256: str
    graders_sha256: tuple[str, ...]


@shape
class ReleaseReadinessCoverage(Shape):
    """The ``coverage`` of a ReleaseReadiness."""

    terminal_classes: Mapping[str, Any]
    evaluation_outcomes: Mapping[str, Any]
    cheats: Mapping[str, Any]
    missing: tuple[str, ...]


@shape
class ReleaseReadinessLinks(Shape):
    """The ``links`` of a ReleaseReadiness."""

    checks: tuple[str, ...]
    canary: str


@shape
class ReleaseReadiness(Record):
    """The offline release-readiness receipt: the identities of the build, the harnesses and the
    host, the six leakage checks and the coverage its synthetic cases reached (deterministic:
    times live in the ref log).
    """

    schema_version: ClassVar[str] = READINESS_RECEIPT

    passed: bool
    yyb: Mapping[str, Any]
    harnesses: tuple[Mapping[str, Any], ...]
    host: ReleaseReadinessHost
    suite: ReleaseReadinessSuite
    leakage: Mapping[str, Any]
    coverage: ReleaseReadinessCoverage
    links: ReleaseReadinessLinks
    environment: Mapping[str, Any] | Absent = ABSENT


@shape
class ReadinessCheckExpected(Shape):
    """The ``expected`` of a ReadinessCheck."""

    class_: TerminalClass = named("class")
    verdicts: tuple[tuple[Any, ...], ...]


@shape
class ReadinessCheckObserved(Shape):
    """The ``observed`` of a ReadinessCheck."""

    class_: Any = named("class")
    verdicts: tuple[tuple[Any, ...], ...]
    probe: Literal["complete", "incomplete", "absent"] | Absent = ABSENT
    findings: tuple[str, ...] | Absent = ABSENT
    changed: tuple[str, ...] | Absent = ABSENT


@shape
class ReadinessCheck(Record):
    """One synthetic case of yyb release-readiness: what its attempt had to end as, what it ended
    as, and whether that passed (no time, path or attempt oid: the same build and host give the
    same record).
    """

    schema_version: ClassVar[str] = READINESS_CHECK

    case: str
    case_id: str
    behaviour: str
    part: Literal["suite", "timeout", "cancel"]
    leakage: LeakageCheck | Absent = ABSENT
    cheat: Cheat | Absent = ABSENT
    expected: ReadinessCheckExpected
    observed: ReadinessCheckObserved
    passed: bool
    links: Mapping[str, Any] | Absent = ABSENT
