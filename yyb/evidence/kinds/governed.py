"""Records of the governed workflow lane (docs/workflow.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from yyb.evidence.record import ABSENT, Absent, Record, Shape, named, shape
from yyb.evidence.records import (
    GOVERNED_AUTHORIZATION,
    GOVERNED_CONFIG,
    GOVERNED_INTENT,
    GOVERNED_JUDGEMENT,
    GOVERNED_PLAN,
    GOVERNED_STEP,
    GOVERNED_TERMINAL,
    GOVERNED_WORKFLOW,
    Verdict,
)


@shape
class GovernedPlanVersions(Shape):
    """The ``versions`` of a GovernedPlan."""

    yyb: str
    yylo: str
    python: str


@shape
class GovernedPlanWorkflow(Shape):
    """The ``workflow`` of a GovernedPlan."""

    path: str
    name: str
    sha256: str
    meaning: str


@shape
class GovernedPlanPolicy(Shape):
    """The ``policy`` of a GovernedPlan."""

    path: str
    name: str | Absent = ABSENT
    sha256: str
    meaning: str


@shape
class GovernedPlanSource(Shape):
    """The ``source`` of a GovernedPlan."""

    commit: str
    tree: str


@shape
class GovernedPlanBoundary(Shape):
    """The ``boundary`` of a GovernedPlan."""

    identity: str
    sha256: str


@shape
class GovernedPlanLinks(Shape):
    """The ``links`` of a GovernedPlan."""

    attempts: tuple[str, ...]
    workflows: tuple[str, ...]


@shape
class GovernedPlan(Record):
    """An immutable governed workflow plan: model x attempt x selected step, bound to the workflow,
    the policy, the project's tree and the boundary.
    """

    schema_version: ClassVar[str] = GOVERNED_PLAN

    versions: GovernedPlanVersions
    workflow: GovernedPlanWorkflow
    policy: GovernedPlanPolicy
    variables: Mapping[str, Any]
    steps: tuple[str, ...]
    models: tuple[Mapping[str, Any], ...]
    attempts_per_cell: int
    attempt_count: int
    source: GovernedPlanSource
    boundary: GovernedPlanBoundary
    dispatch_count: Literal[0]
    links: GovernedPlanLinks
    judges: Mapping[str, Any]


@shape
class GovernedModel(Shape):
    """The same object in GovernedStep and GovernedIntent."""

    requested: str
    resolved: str


@shape
class GovernedStepPolicy(Shape):
    """The ``policy`` of a GovernedStep."""

    retry_safe: bool
    recovery_budget: int
    resources: tuple[Mapping[str, Any], ...]
    judge: str | None


@shape
class GovernedStepLinks(Shape):
    """The ``links`` of a GovernedStep."""

    workflow: str


@shape
class GovernedStep(Record):
    """One step attempt of a governed plan: a step, a model, an attempt number, the step's
    policy.
    """

    schema_version: ClassVar[str] = GOVERNED_STEP

    ordinal: int
    step: str
    model: GovernedModel
    attempt: int
    policy: GovernedStepPolicy
    links: GovernedStepLinks


@shape
class CompiledWorkflow(Record):
    """A governed workflow compiled for one model: the bytes its boundary runs are this record's
    workflow as canonical JSON.
    """

    schema_version: ClassVar[str] = GOVERNED_WORKFLOW

    model: str
    sha256: str
    workflow: Mapping[str, Any]


@shape
class ProductionAuthorization(Record):
    """A separate authorization for a governed plan to touch production, until it expires."""

    schema_version: ClassVar[str] = GOVERNED_AUTHORIZATION

    plan: str
    created_ms: int
    expires_ms: int


@shape
class GovernedIntentLinks(Shape):
    """The ``links`` of a GovernedIntent."""

    plan: str
    attempt: str
    previous: str | Absent = ABSENT


@shape
class GovernedIntent(Record):
    """Written durably before a governed step attempt's dispatch: which dispatch, with which id, of
    which model, holding which resources.
    """

    schema_version: ClassVar[str] = GOVERNED_INTENT

    plan: str
    attempt: str
    step: str
    dispatch: int
    dispatch_id: str
    model: GovernedModel
    resources: tuple[Mapping[str, Any], ...]
    created_ms: int
    recovery: Mapping[str, Any] | None
    links: GovernedIntentLinks


@shape
class GovernedTerminalLinks(Shape):
    """The ``links`` of a GovernedTerminal."""

    plan: str
    attempt: str
    intent: str
    envelope: str | Absent = ABSENT
    output: str | Absent = ABSENT


@shape
class GovernedTerminal(Record):
    """How a governed step attempt ended, concluded from its dispatch's envelope and exit status."""

    schema_version: ClassVar[str] = GOVERNED_TERMINAL

    plan: str
    attempt: str
    step: str
    dispatch_id: str
    class_: Literal["resolved", "model_failure", "harness_failure"] = named("class")
    reason: str
    requested: str
    observed: str | None
    exit_code: int | None
    recovered: Literal["completed"] | None
    created_ms: int
    links: GovernedTerminalLinks


@shape
class GovernedJudgementLinks(Shape):
    """The ``links`` of a GovernedJudgement."""

    plan: str
    attempt: str
    terminal: str
    input: str
    output: str | Absent = ABSENT
    previous: str | Absent = ABSENT


@shape
class GovernedJudgement(Record):
    """One generation of a blinded judgement of a governed step attempt's retained terminal."""

    schema_version: ClassVar[str] = GOVERNED_JUDGEMENT

    plan: str
    attempt: str
    step: str
    profile: str
    generation: int
    verdict: Verdict
    reason: str
    judge_model: str
    judge_cost: Mapping[str, Any] | None
    wall_ms: int
    links: GovernedJudgementLinks


@shape
class GovernedConfigBoundary(Shape):
    """The ``boundary`` of a GovernedConfig: the pinned boundary program (docs/boundary.md)."""

    executable: str
    sha256: str
    identity: str
    interpreter: str | Absent = ABSENT
    journal: str
    credentials: tuple[str, ...] | Absent = ABSENT


@shape
class GovernedConfig(Record):
    """The governed lane's configuration file (juno-benchmark.config.json, docs/workflow.md);
    its paths are relative to the file's folder. A file the user writes, not a stored record:
    it is read through this class once its schema has passed it."""

    schema_version: ClassVar[str] = GOVERNED_CONFIG

    yylo_version: str
    project: str | Absent = ABSENT
    boundary: GovernedConfigBoundary
    lock_store: str
    judges: Mapping[str, Any] | Absent = ABSENT
    tool_paths: tuple[str, ...] | Absent = ABSENT
