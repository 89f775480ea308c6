"""Records of grading: evaluations, their results, judge intents, grader inputs and outputs,
grades, re-evaluation passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from yyb.evidence.record import ABSENT, Absent, Record, Shape, shape
from yyb.evidence.records import (
    EVALUATION,
    EVALUATION_RESULT,
    GRADE,
    GRADER_INPUT,
    GRADER_OUTPUT,
    JUDGE_INTENT,
    REEVALUATION_PASS,
    EvaluationProblem,
    EvaluatorKind,
    Purpose,
    Verdict,
)


@shape
class EvaluationEvaluator(Shape):
    """The ``evaluator`` of an Evaluation."""

    id: str
    version: str
    bytes_sha256: str
    model: str | None


@shape
class EvaluationLinks(Shape):
    """The ``links`` of an Evaluation."""

    plan: str
    attempt: str
    manifest: str
    evidence: str | Absent = ABSENT
    input: str
    output: str | Absent = ABSENT
    log: str | Absent = ABSENT
    result: str
    previous: str | Absent = ABSENT
    graded_listing: str | Absent = ABSENT
    gateway: tuple[str, ...] | Absent = ABSENT  # a gateway plan's judge runs' meters


@shape
class Evaluation(Record):
    """The receipt of one evaluation: evaluator identity, generation and the artifacts."""

    schema_version: ClassVar[str] = EVALUATION

    plan: str
    attempt: str
    profile: str
    kind: EvaluatorKind
    generation: int
    evaluator: EvaluationEvaluator
    required: bool
    purpose: Purpose
    verdict: Verdict
    wall_ms: int
    judge_cost: Mapping[str, Any] | None
    links: EvaluationLinks
    problem: EvaluationProblem | Absent = ABSENT
    protected: tuple[str, ...] | Absent = ABSENT


@shape
class EvaluationResult(Record):
    """The typed result of one evaluation."""

    schema_version: ClassVar[str] = EVALUATION_RESULT

    verdict: Verdict
    quality: Literal["pass", "fail", "unknown"]
    reason: str
    exit_code: int | None
    details: Mapping[str, Any]
    signal: int | Absent = ABSENT


@shape
class JudgeIntentLinks(Shape):
    """The ``links`` of a JudgeIntent."""

    plan: str
    attempt: str
    previous: str | Absent = ABSENT


@shape
class JudgeIntent(Record):
    """Written before a judge is dispatched for one evaluation generation: a crash after it never
    dispatches that judge again.
    """

    schema_version: ClassVar[str] = JUDGE_INTENT

    plan: str
    attempt: str
    profile: str
    generation: int
    created_ms: int
    links: JudgeIntentLinks


@shape
class GraderInput(Record):
    """The file a command evaluator reads (its path is in $YYB_GRADER_INPUT and {input})."""

    schema_version: ClassVar[str] = GRADER_INPUT

    profile: str
    grader_id: str
    version: str
    generation: int
    case_id: str | None
    workspace: str
    assets: str
    patch_file: str
    output_file: str
    environment: Mapping[str, Any] | Absent = ABSENT


@shape
class GraderOutput(Record):
    """The file a command evaluator writes (its path is in $YYB_GRADER_OUTPUT and {output})."""

    schema_version: ClassVar[str] = GRADER_OUTPUT

    passed: bool
    summary: str | Absent = ABSENT
    checks: tuple[Mapping[str, Any], ...] | Absent = ABSENT


@shape
class GradeLinks(Shape):
    """The ``links`` of a Grade."""

    manifest: str
    output: str | Absent = ABSENT


@shape
class Grade(Record):
    """One grader's verdict on one attempt's final workspace."""

    schema_version: ClassVar[str] = GRADE

    evaluator: str
    kind: str | None
    grader_id: str
    version: str
    executable_sha256: str | None
    verdict: Verdict
    reason: str
    exit_code: int | None
    wall_ms: int
    links: GradeLinks


@shape
class ReevaluationPassLinks(Shape):
    """The ``links`` of a ReevaluationPass."""

    plan: str


@shape
class ReevaluationPass(Record):
    """A regrade or rejudge pass: the generation it brings each attempt to (resumable)."""

    schema_version: ClassVar[str] = REEVALUATION_PASS

    plan: str
    profile: str
    verb: Literal["regrade", "rejudge"]
    goals: Mapping[str, Any]
    links: ReevaluationPassLinks
