"""Records of one attempt's chain: dispatch intent, workspace receipt, execution, terminal, attempt
evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from yyb.evidence.record import ABSENT, Absent, Record, Shape, named, shape
from yyb.evidence.records import (
    EVIDENCE,
    EXECUTION,
    INTENT,
    RECEIPT,
    RECEIPT_V2,
    TERMINAL,
    CostCompleteness,
    EnvelopeStatus,
    ExecutorKind,
    TerminalClass,
)


@shape
class DispatchIntentLinks(Shape):
    """The ``links`` of a DispatchIntent."""

    plan: str
    attempt: str


@shape
class DispatchIntent(Record):
    """Durable before a candidate starts: this attempt of this plan is being dispatched."""

    schema_version: ClassVar[str] = INTENT

    plan: str
    attempt: str
    ordinal: int
    model: str
    harness: str
    time_ms: int
    host: str
    pid: int
    links: DispatchIntentLinks


@shape
class WorkspaceReceiptSandbox(Shape):
    """The ``sandbox`` of a WorkspaceReceipt."""

    kind: Literal["bubblewrap"]
    version: str
    network: Literal["allowed", "denied"]
    limits: Mapping[str, Any] | Absent = ABSENT
    verified: tuple[str, ...]


@shape
class WorkspaceReceiptExecutor(Shape):
    """Where the attempt ran (docs/dask.md)."""

    kind: ExecutorKind
    host: str
    worker: str | None


@shape
class WorkspaceReceiptEnvironment(Shape):
    """The same object in WorkspaceReceipt and WorkspaceReceiptV2."""

    variables: tuple[str, ...]
    path: tuple[str, ...]
    secrets: tuple[str, ...]


@shape
class WorkspaceReceiptLinks(Shape):
    """The same object in WorkspaceReceipt and WorkspaceReceiptV2."""

    intent: str
    listing: str


@shape
class WorkspaceReceipt(Record):
    """The initial workspace of an attempt: snapshot, sandbox, environment policy and where it
    ran.
    """

    schema_version: ClassVar[str] = RECEIPT

    base_commit: str
    snapshot_commit: str
    snapshot_tree: str
    excluded_paths: tuple[str, ...]
    excluded: tuple[str, ...]
    file_count: int
    sandbox: WorkspaceReceiptSandbox
    executor: WorkspaceReceiptExecutor
    environment: WorkspaceReceiptEnvironment
    links: WorkspaceReceiptLinks
    built_environment: Mapping[str, Any] | Absent = ABSENT
    scratch_paths: tuple[str, ...] | Absent = ABSENT


@shape
class WorkspaceReceiptV2Sandbox(Shape):
    """The ``sandbox`` of a WorkspaceReceiptV2."""

    kind: Literal["bubblewrap"]
    version: str
    network: Literal["allowed", "denied"]
    limits: Mapping[str, Any] | Absent = ABSENT


@shape
class WorkspaceReceiptV2(Record):
    """The initial workspace of an attempt: snapshot, sandbox and environment policy."""

    schema_version: ClassVar[str] = RECEIPT_V2

    base_commit: str
    snapshot_commit: str
    snapshot_tree: str
    excluded_paths: tuple[str, ...]
    excluded: tuple[str, ...]
    file_count: int
    sandbox: WorkspaceReceiptV2Sandbox
    environment: WorkspaceReceiptEnvironment
    links: WorkspaceReceiptLinks


@shape
class ExecutionFacts(Shape):
    """The ``facts`` of an Execution."""

    cancelled: bool
    timed_out: bool
    cleanup_confirmed: bool
    exit_code: int | None
    signal: int | None
    envelope_problem: str | None
    envelope_status: EnvelopeStatus | None
    limit: str | None | Absent = ABSENT


@shape
class Identity(Shape):
    """The same object in Execution and Terminal."""

    requested: str
    resolved: str
    observed: str | None


@shape
class Runtime(Shape):
    """The same object in Execution and Terminal."""

    wall_ms: int
    started_ms: int
    ended_ms: int
    resources: Mapping[str, Any] | Absent = ABSENT


@shape
class CandidateCost(Shape):
    """The same object in Execution and Terminal."""

    completeness: CostCompleteness
    currency: Literal["USD"]
    micros: int | None


@shape
class MeteredClaim(Shape):
    """What the candidate's envelope claimed of its identity and cost (null observed: no
    envelope was accepted), kept beside what the gateway metered."""

    observed: str | None
    cost: CandidateCost


@shape
class Metered(Shape):
    """What the model gateway observed of an attempt (docs/gateway.md, "In a run"): its calls,
    whether its ceiling refused one, the envelope's claims and where they differ from it."""

    calls: int
    ceiling_reached: bool
    claimed: MeteredClaim
    disagreements: tuple[str, ...]


@shape
class ExecutionLinks(Shape):
    """The ``links`` of an Execution."""

    plan: str
    attempt: str
    intent: str
    receipt: str
    manifest: str
    listing: str
    envelope: str | Absent = ABSENT
    envelope_raw: str | Absent = ABSENT
    stdout: str
    stderr: str
    patch: str
    gateway: str | Absent = ABSENT  # the attempt's yyb_gateway_meter.v1


@shape
class Execution(Record):
    """What a candidate's run proved, retained before grading and the terminal."""

    schema_version: ClassVar[str] = EXECUTION

    plan: str
    attempt: str
    facts: ExecutionFacts
    identity: Identity
    runtime: Runtime
    outputs: Mapping[str, Any]
    candidate_cost: CandidateCost
    links: ExecutionLinks
    metered: Metered | Absent = ABSENT


@shape
class TerminalExit(Shape):
    """The ``exit`` of a Terminal."""

    code: int | None
    signal: int | None
    timed_out: bool
    cleanup_confirmed: bool


@shape
class TerminalLinks(Shape):
    """The ``links`` of a Terminal."""

    plan: str
    attempt: str
    intent: str
    receipt: str | Absent = ABSENT
    manifest: str | Absent = ABSENT
    envelope: str | Absent = ABSENT
    envelope_raw: str | Absent = ABSENT
    stdout: str | Absent = ABSENT
    stderr: str | Absent = ABSENT
    patch: str | Absent = ABSENT
    evaluations: tuple[str, ...] | Absent = ABSENT
    execution: str | Absent = ABSENT
    gateway: str | Absent = ABSENT


@shape
class TerminalSpend(Shape):
    """The attempt's spend ceiling and by how much the reported cost exceeded it (null: it did
    not). Present when the plan has a budget.
    """

    ceiling_micros: int
    over_ceiling_micros: int | None


@shape
class Terminal(Record):
    """The one terminal of one attempt, with the evidence that decided it."""

    schema_version: ClassVar[str] = TERMINAL

    class_: TerminalClass = named("class")
    reason: str
    plan: str
    attempt: str
    ordinal: int
    identity: Identity
    runtime: Runtime
    exit: TerminalExit
    outputs: Mapping[str, Any]
    candidate_cost: CandidateCost
    links: TerminalLinks
    spend: TerminalSpend | Absent = ABSENT
    metered: Metered | Absent = ABSENT


@shape
class AttemptEvidenceLinks(Shape):
    """The ``links`` of an AttemptEvidence."""

    terminal: str
    manifest: str | Absent = ABSENT
    listing: str | Absent = ABSENT
    patch: str | Absent = ABSENT
    evaluations: tuple[str, ...] | Absent = ABSENT


@shape
class AttemptEvidence(Record):
    """What later commands (regrade, reports, doctor) start from for one attempt."""

    schema_version: ClassVar[str] = EVIDENCE

    plan: str
    attempt: str
    class_: TerminalClass = named("class")
    links: AttemptEvidenceLinks
