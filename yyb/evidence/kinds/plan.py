"""Records of what is planned: cases, their validation, configurations, plans, attempt plans and
grants.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from yyb.evidence.record import ABSENT, Absent, Record, Shape, shape
from yyb.evidence.records import ATTEMPT_PLAN, CASE, CASE_VALIDATION, CONFIG, GRANT, PLAN


@shape
class CaseLinks(Shape):
    """The ``links`` of a Case."""

    task: str
    prompt: str
    test_patch: str | Absent = ABSENT
    environment: str | Absent = ABSENT


@shape
class CaseTests(Shape):
    """The hidden tests a tests evaluator runs (docs/grading.md, "The tests kind"): the test ids
    that must pass, and the SHA-256 of the test patch's bytes, linked as test_patch (absent for
    a case without hidden tests).
    """

    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    test_patch_sha256: str


@shape
class Case(Record):
    """A validated benchmark case: its identity and where its task and prompt bytes are."""

    schema_version: ClassVar[str] = CASE

    case_id: str
    title: str
    tags: tuple[str, ...]
    repository: str
    base_commit: str
    case_version: str
    category: str
    grader_profile: str
    wiki: tuple[Mapping[str, Any], ...]
    task_hash: str
    prompt_hash: str
    input_hash: str
    links: CaseLinks
    tests: CaseTests | Absent = ABSENT
    environment: str | Absent = ABSENT


@shape
class CaseValidationEvaluator(Shape):
    """The ``evaluator`` of a CaseValidation."""

    id: str
    version: str
    bytes_sha256: str
    model: str | None


@shape
class CaseValidationRuns(Shape):
    """The ``runs`` of a CaseValidation."""

    gold: Mapping[str, Any]
    empty: Mapping[str, Any]


@shape
class CaseValidationLinks(Shape):
    """The ``links`` of a CaseValidation."""

    case: str
    base_listing: str
    gold_patch: str
    gold_listing: str | Absent = ABSENT
    previous: str | Absent = ABSENT
    gold_input: str
    gold_output: str | Absent = ABSENT
    gold_log: str | Absent = ABSENT
    gold_graded_listing: str | Absent = ABSENT
    empty_input: str
    empty_output: str | Absent = ABSENT
    empty_log: str | Absent = ABSENT
    empty_graded_listing: str | Absent = ABSENT


@shape
class CaseValidation(Record):
    """A gold validation of one case: its gold patch and the empty patch through the real sandbox
    and its tests evaluator (docs/swe-bench.md).
    """

    schema_version: ClassVar[str] = CASE_VALIDATION

    case_id: str
    case_version: str
    input_hash: str
    profile: str
    evaluator: CaseValidationEvaluator
    discriminating: bool
    reason: str
    runs: CaseValidationRuns
    links: CaseValidationLinks


@shape
class BenchmarkConfigWorkspace(Shape):
    """The ``workspace`` of a BenchmarkConfig."""

    attempts_root: str
    registry_root: str
    excluded_paths: tuple[str, ...] | Absent = ABSENT


@shape
class BenchmarkConfigToolPolicy(Shape):
    """The ``tool_policy`` of a BenchmarkConfig."""

    network: Literal["allowed", "denied", "gateway"]
    read_only_paths: tuple[str, ...] | Absent = ABSENT
    limits: Mapping[str, Any] | Absent = ABSENT


@shape
class BenchmarkConfig(Record):
    """Yyb configuration (yylo-benchmark.config.json)."""

    schema_version: ClassVar[str] = CONFIG

    yylo_version: str
    workspace: BenchmarkConfigWorkspace
    harnesses: Mapping[str, Any]
    default_candidate_harness: str
    evaluators: Mapping[str, Any]
    default_evaluators: tuple[str, ...]
    models: Mapping[str, Any] | Absent = ABSENT
    repositories: Mapping[str, Any] | Absent = ABSENT
    attempt_timeout_ms: int | Absent = ABSENT
    tool_policy: BenchmarkConfigToolPolicy | Absent = ABSENT
    gateway: Mapping[str, Any] | Absent = ABSENT  # the model gateway (docs/gateway.md)


@shape
class ExperimentPlanVersions(Shape):
    """The ``versions`` of an ExperimentPlan."""

    yyb: str
    yylo: str
    python: str


@shape
class ExperimentPlanToolPolicy(Shape):
    """The ``tool_policy`` of an ExperimentPlan."""

    network: Literal["allowed", "denied", "gateway"]
    read_only_paths: tuple[str, ...]
    limits: Mapping[str, Any] | Absent = ABSENT


@shape
class ExperimentPlanCandidateHarness(Shape):
    """The ``candidate_harness`` of an ExperimentPlan."""

    id: str
    config: Mapping[str, Any]


@shape
class ExperimentPlanEvaluators(Shape):
    """The ``evaluators`` of an ExperimentPlan."""

    selected: tuple[str, ...]
    catalog: Mapping[str, Any]
    defaults: tuple[str, ...]
    harnesses: Mapping[str, Any]


@shape
class ExperimentPlanWorkflow(Shape):
    """The ``workflow`` of an ExperimentPlan."""

    variables: Mapping[str, Any]
    controlled_model_variable: str | None


@shape
class ExperimentPlanLinks(Shape):
    """The ``links`` of an ExperimentPlan."""

    attempts: tuple[str, ...]
    cases: tuple[str, ...] | Absent = ABSENT
    workflow: str | Absent = ABSENT
    environments: tuple[str, ...] | Absent = ABSENT
    harness_home: str | Absent = ABSENT
    harness_program: str | Absent = ABSENT
    retry_of: str | Absent = ABSENT  # the plan a retry plan retries (docs/plans.md, "Retries")
    prices: str | Absent = ABSENT  # the gateway's price table (docs/gateway.md)


@shape
class ExperimentPlan(Record):
    """An immutable experiment plan: everything a run, a regrade or a report is bound to."""

    schema_version: ClassVar[str] = PLAN

    kind: Literal["task", "workflow"]
    versions: ExperimentPlanVersions
    cases: tuple[Mapping[str, Any], ...]
    models: tuple[Mapping[str, Any], ...]
    attempts_per_cell: int
    attempt_count: int
    budget: Mapping[str, Any] | None
    tool_policy: ExperimentPlanToolPolicy
    timeout_ms: int
    excluded_paths: tuple[str, ...]
    candidate_harness: ExperimentPlanCandidateHarness
    evaluators: ExperimentPlanEvaluators
    comparison: Literal["model_only", "agent_system"]
    workflow: ExperimentPlanWorkflow | Absent = ABSENT
    links: ExperimentPlanLinks
    environments: tuple[Mapping[str, Any], ...] | Absent = ABSENT
    scratch_paths: tuple[str, ...] | Absent = ABSENT
    gateway: Mapping[str, Any] | Absent = ABSENT  # its providers, with tool_policy.network gateway


@shape
class AttemptPlanModel(Shape):
    """The ``model`` of an AttemptPlan: ``accept`` holds the observed ids accepted for it
    beside ``resolved`` (yyb/evidence/identity.py)."""

    requested: str
    resolved: str
    accept: tuple[str, ...] | Absent = ABSENT


@shape
class AttemptPlanLinks(Shape):
    """The ``links`` of an AttemptPlan."""

    case: str | Absent = ABSENT
    workflow: str | Absent = ABSENT
    retry_of: str | Absent = ABSENT  # the attempt plan a retry attempt retries


@shape
class AttemptPlan(Record):
    """One planned attempt: a case (or workflow) x one exact model x one attempt number."""

    schema_version: ClassVar[str] = ATTEMPT_PLAN

    kind: Literal["task", "workflow"]
    ordinal: int
    case_id: str | None
    model: AttemptPlanModel
    attempt: int
    budget: Mapping[str, Any] | None
    links: AttemptPlanLinks


@shape
class GrantLinks(Shape):
    """The ``links`` of a Grant."""

    plan: str


@shape
class Grant(Record):
    """An authorization grant: lets a live run of exactly one task plan spend up to its ceilings
    until it expires.
    """

    schema_version: ClassVar[str] = GRANT

    plan: str
    models: tuple[str, ...]
    currency: Literal["USD"]
    total_ceiling_micros: int
    attempt_ceiling_micros: int
    expires_ms: int
    created_ms: int
    links: GrantLinks
