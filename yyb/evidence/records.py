"""Record kinds (schema names) and the benchmark's vocabularies, each with one home.

The values are the ``schema_version`` strings of schemas/ and the words of the methodology;
every module that writes or reads a record names it from here.
"""

from __future__ import annotations

from typing import Literal, get_args

# Kinds that a lower layer writes keep their home there (the harness's workspace listings and
# envelopes, the store's ref updates and checkpoints); they are named here too so that this is
# the one list.
from yyb.harness.envelope import ENVELOPE  # noqa: F401
from yyb.harness.environments import ENVIRONMENT  # noqa: F401
from yyb.harness.environments import SPEC as ENVIRONMENT_SPEC  # noqa: F401
from yyb.harness.manifest import LISTING, MANIFEST  # noqa: F401
from yyb.store.log.checkpoint import CHECKPOINT  # noqa: F401
from yyb.store.refs.store import REF_UPDATE  # noqa: F401

# --- schema names ---------------------------------------------------------------------------

CASE = "yylo_benchmark_case.v2"
CONFIG = "yylo_benchmark_config.v2"
PLAN = "yylo_benchmark_experiment_plan.v2"
ATTEMPT_PLAN = "yylo_benchmark_attempt_plan.v2"
GRANT = "yylo_benchmark_grant.v2"
INTENT = "yylo_benchmark_dispatch_intent.v2"
RECEIPT = "yylo_benchmark_workspace_receipt.v3"
# written before v3 (no executor); still verified
RECEIPT_V2 = "yylo_benchmark_workspace_receipt.v2"
EXECUTION = "yylo_benchmark_execution.v2"
TERMINAL = "yylo_benchmark_terminal.v2"
EVIDENCE = "yylo_benchmark_attempt_evidence.v2"
EVALUATION = "yylo_benchmark_evaluation.v2"
EVALUATION_RESULT = "yylo_benchmark_evaluation_result.v2"
# Written before a judge is dispatched for one evaluation generation (yyb/grading/evaluate.py).
JUDGE_INTENT = "yylo_benchmark_judge_intent.v1"
GRADER_INPUT = "yylo_benchmark_grader_input.v2"
GRADER_OUTPUT = "yylo_benchmark_grader_output.v2"
REEVALUATION_PASS = "yylo_benchmark_reevaluation_pass.v2"
REPORT_LAYER = "yylo_benchmark_report_layer.v4"
REPORT_LAYER_V3 = "yylo_benchmark_report_layer.v3"  # written before v4; still verified
REPORT_LAYER_V2 = "yylo_benchmark_report_layer.v2"  # written before v3; still verified
REPORT_ROWS = "yylo_benchmark_report_rows.v3"
REPORT_CASES = "yylo_benchmark_report_cases.v4"
LONGITUDINAL_LAYER = "yylo_benchmark_longitudinal_layer.v3"
LONGITUDINAL_LAYER_V2 = "yylo_benchmark_longitudinal_layer.v2"
LONGITUDINAL_COHORTS = "yylo_benchmark_longitudinal_cohorts.v3"
SIGNATURE = "yyb_signature.v1"
# A C2SP signed-note signature of a checkpoint note (an Ed25519 signature over the note text).
NOTE_SIGNATURE = "yyb_note_signature.v1"
# A free-form note (``yyb hash-object``'s example record; nothing in yyb writes one itself).
NOTE = "yyb_note.v1"
# One grader's verdict on one attempt's final workspace (its schema ships; nothing writes one).
GRADE = "yylo_benchmark_grade.v2"
CASE_VALIDATION = "yylo_benchmark_case_validation.v2"
# The governed workflow lane (docs/workflow.md): its configuration file, its plan and the
# records each step attempt leaves.
GOVERNED_CONFIG = "juno_benchmark_config.v1"
GOVERNED_PLAN = "yylo_benchmark_governed_plan.v1"
GOVERNED_STEP = "yylo_benchmark_governed_step.v1"
GOVERNED_WORKFLOW = "yylo_benchmark_compiled_workflow.v1"
GOVERNED_AUTHORIZATION = "yylo_benchmark_production_authorization.v1"
GOVERNED_INTENT = "yylo_benchmark_governed_intent.v1"
GOVERNED_TERMINAL = "yylo_benchmark_governed_terminal.v1"
GOVERNED_JUDGEMENT = "yylo_benchmark_governed_judgement.v1"
READINESS_RECEIPT = "yylo_benchmark_release_readiness.v1"
READINESS_CHECK = "yylo_benchmark_readiness_check.v1"
# The model gateway (docs/gateway.md): the prices it meters by, each call, each attempt's sum.
PRICE_TABLE = "yyb_price_table.v1"
GATEWAY_CALL = "yyb_gateway_call.v1"
GATEWAY_METER = "yyb_gateway_meter.v1"

# The model gateway (docs/gateway.md): the API a call spoke, by its path.
Api = Literal["chat_completions", "responses", "messages", "count_tokens", "models"]
APIS: tuple[Api, ...] = get_args(Api)
# What became of a call: answered (2xx from the source), upstream_error (a non-2xx answer),
# failed (no answer: the upstream unreachable or cut off), unanswered (replay had none), or
# refused by the gateway for the model, the ceiling, the size or the attempt's concurrency.
CallOutcome = Literal[
    "answered",
    "upstream_error",
    "failed",
    "unanswered",
    "refused_model",
    "refused_ceiling",
    "refused_size",
    "refused_busy",
]
CALL_OUTCOMES: tuple[CallOutcome, ...] = get_args(CallOutcome)
CallSource = Literal["upstream", "replay", "gateway"]


# What the boundary's journal proves about one dispatch (docs/boundary.md, ``status``).
DispatchState = Literal["never_dispatched", "resumable", "completed", "unknown"]
DISPATCH_STATES: tuple[DispatchState, ...] = get_args(DispatchState)

# Records yyb signs when a signing key is configured. Every one of them reachable from a signed
# head must carry its own trusted signature, so nothing unsigned sits between a head and what
# it vouches for. Ref-update records, grants and signature records are not signed (yet):
# docs/audit.md says what that leaves open. docs/format.md ("Signed kinds") lists them for
# verifiers; tests/signing/test_signed_kinds.py keeps that list and this one equal.
SIGNED_KINDS = frozenset(
    {
        TERMINAL,
        EVALUATION,
        REPORT_LAYER_V2,
        REPORT_LAYER_V3,
        REPORT_LAYER,
        LONGITUDINAL_LAYER_V2,
        LONGITUDINAL_LAYER,
        CASE_VALIDATION,
    }
)

# --- vocabularies ---------------------------------------------------------------------------

# Where an attempt's candidate ran (a workspace receipt's ``executor.kind``; docs/dask.md).
ExecutorKind = Literal["local", "dask"]
EXECUTOR_KINDS: tuple[ExecutorKind, ...] = get_args(ExecutorKind)

TerminalClass = Literal[
    "resolved",
    "model_failure",
    "safety_failure",
    "harness_failure",
    "environment_failure",
    "grader_failure",
    "invalid_case",
    "timeout",
    "cancelled",
]
TERMINAL_CLASSES: tuple[TerminalClass, ...] = get_args(TerminalClass)
# The classes that count in valid rates: the candidate ran and was judged on its merits.
VALID_CLASSES: tuple[TerminalClass, ...] = (
    "resolved",
    "model_failure",
    "safety_failure",
    "grader_failure",
    "timeout",
)
# Terminal classes reached before any workspace existed carry no receipt or manifest.
NO_WORKSPACE: tuple[TerminalClass, ...] = ("invalid_case", "environment_failure")
# Classes whose candidate did not finish, so there is nothing to grade.
UNGRADEABLE: tuple[TerminalClass, ...] = (
    "cancelled",
    "timeout",
    "model_failure",
    "invalid_case",
    "environment_failure",
)

# Who could have caused an invalid attempt (yyb/evidence/invalidity.py decides it): the
# candidate (its envelope, the grader its code runs in), or the infrastructure around it.
InvalidityCause = Literal["candidate", "infrastructure"]
INVALIDITY_CAUSES: tuple[InvalidityCause, ...] = get_args(InvalidityCause)

Verdict = Literal["pass", "fail", "invalid"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
# What the required evaluators of one attempt conclude together: a safety failure is its own.
Conclusion = Literal["pass", "fail", "invalid", "safety"]

CostCompleteness = Literal["complete", "partial", "unavailable", "not_applicable", "genuine_zero"]
COST_COMPLETENESS: tuple[CostCompleteness, ...] = get_args(CostCompleteness)

# What made an evaluation invalid, as its receipt records it (``problem``; absent on a pass or
# a fail, on a judge's receipt, and on receipts written before it was recorded).
EvaluationProblem = Literal[
    "not_started",  # the evaluator could not start: its pinned bytes, harness or secrets
    "interrupted",  # the run was cancelled while it graded
    "cleanup_unconfirmed",  # its processes could not be confirmed ended
    "timed_out",  # it ran past its timeout
    "no_verdict",  # it ended without a usable verdict (no output, malformed or invalid output)
]
EVALUATION_PROBLEMS: tuple[EvaluationProblem, ...] = get_args(EvaluationProblem)

EvaluatorKind = Literal["command", "llm_judge", "tests"]
# Kinds that run the candidate's code and decide by what it did, with no model in the loop:
# their required correctness or safety failure is authoritative, they are regraded (not
# rejudged), and their timeouts and missing verdicts may be the candidate's doing.
DETERMINISTIC: tuple[EvaluatorKind, ...] = ("command", "tests")
Purpose = Literal["correctness", "safety", "quality"]
# How a ``tests`` profile reads its runner's results (docs/grading.md, "The tests kind"): a
# JUnit XML report on the report channel, or the status lines of the runner's printed log.
TestRunner = Literal["junit", "pytest-log", "django", "sympy"]
TEST_RUNNERS: tuple[TestRunner, ...] = get_args(TestRunner)
# The two runs of a gold validation (yyb/grading/gold.py): the case's gold patch, and none.
GoldRun = Literal["gold", "empty"]
GOLD_RUNS: tuple[GoldRun, ...] = get_args(GoldRun)
# Purposes whose required deterministic failure no later generation or judge overrides.
AUTHORITATIVE: tuple[Purpose, ...] = ("correctness", "safety")

EnvelopeStatus = Literal["succeeded", "failed"]

# A pairwise evaluation's ``details.pairwise.design`` (docs/grading.md): every repetition shown
# in both orders. Results written before it have no design (one order per repetition).
PAIRWISE_BOTH_ORDERS = "both_orders"

# The six leakage checks of ``yyb release-readiness`` (docs/readiness.md), each a real attempt
# of a probing stand-in looking for a canary planted where a candidate must never see it.
LeakageCheck = Literal["store", "history", "graders", "sibling", "home", "environment"]
LEAKAGE_CHECKS: tuple[LeakageCheck, ...] = get_args(LeakageCheck)
# The cheats its coverage suite must see fail: a verdict forged from inside the graded code,
# and a protected path (the case's test) rewritten to pass.
Cheat = Literal["forged_verdict", "protected_path_tampering"]
CHEATS: tuple[Cheat, ...] = get_args(Cheat)
