"""Every ref name yyb writes, in one place (docs/format.md lists them for auditors).

```
refs/plans/<plan>                                  the experiment plan (names itself)
refs/grants/<plan>                                 the spend grant of a live run
refs/reports/<plan>                                per-experiment report layers
refs/reports/longitudinal                          longitudinal report layers
refs/cases/<case id>                               a validated case record
refs/validations/<case id>                         the newest gold validation of a case
refs/runs/<plan>/<attempt>/<leaf>                  intent, execution, terminal, evidence
refs/runs/<plan>/<attempt>/evaluations/<profile>   the newest evaluation generation
refs/runs/<plan>/<attempt>/judge-intents/<profile> the newest judge dispatch intent
refs/runs/<plan>/<attempt>/calls                   the attempt's gateway meter, as its calls end
refs/runs/<plan>/passes/<profile>                  a regrade or rejudge pass in progress
refs/signatures/<oid>                              the signatures of one object
refs/governed/<plan>/plan                          a governed workflow plan (names itself)
refs/governed/<plan>/authorization                 its production authorization
refs/governed/<plan>/<step attempt>/<leaf>         a step attempt's intent and terminal
refs/governed/<plan>/<step attempt>/judgements/<profile>  its newest judgement generation
refs/release-readiness/latest                      the newest release-readiness receipt
refs/release-readiness/<receipt>/receipt           a receipt (names itself)
refs/release-readiness/<receipt>/runs/<part>       the plan whose attempts its checks ran
refs/transparency/checkpoint                       the newest checkpoint of the store's log
                                                   (named in yyb/store/log/checkpoint.py: REF)
```
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time (docs/performance.md)
if TYPE_CHECKING:
    from typing import Literal

    Leaf = Literal["intent", "execution", "terminal", "evidence"]
    GovernedLeaf = Literal["intent", "terminal"]

# An attempt's leaves (``Leaf``). Each of these refs is written once, from nothing, by
# compare-and-swap; never moved after.
LEAVES: tuple[Leaf, ...] = ("intent", "execution", "terminal", "evidence")

PLANS = "refs/plans"
RUNS = "refs/runs"
REPORTS = "refs/reports"
SIGNATURES = "refs/signatures"
LONGITUDINAL = "refs/reports/longitudinal"
GOVERNED = "refs/governed"
READINESS = "refs/release-readiness"
READINESS_LATEST = "refs/release-readiness/latest"

# A governed step's leaves (``GovernedLeaf``): intent moves (by compare-and-swap) to each new
# dispatch of the step; terminal is written once.
GOVERNED_LEAVES: tuple[GovernedLeaf, ...] = ("intent", "terminal")


def plan(plan_oid: str) -> str:
    return f"{PLANS}/{plan_oid}"


def grant(plan_oid: str) -> str:
    return f"refs/grants/{plan_oid}"


def report(plan_oid: str) -> str:
    return f"{REPORTS}/{plan_oid}"


def case(case_id: str) -> str:
    return f"refs/cases/{case_id}"


def validation(case_id: str) -> str:
    """The newest gold validation of a case (its ref log keeps every earlier one)."""
    return f"refs/validations/{case_id}"


def runs(plan_oid: str) -> str:
    """The folder of every run ref of one experiment."""
    return f"{RUNS}/{plan_oid}"


def attempt_folder(plan_oid: str, attempt_oid: str) -> str:
    return f"{RUNS}/{plan_oid}/{attempt_oid}"


def attempt(plan_oid: str, attempt_oid: str, leaf: Leaf) -> str:
    return f"{RUNS}/{plan_oid}/{attempt_oid}/{leaf}"


def evaluations(plan_oid: str, attempt_oid: str) -> str:
    """The folder of an attempt's evaluation refs, one per profile."""
    return f"{RUNS}/{plan_oid}/{attempt_oid}/evaluations"


def evaluation(plan_oid: str, attempt_oid: str, profile: str) -> str:
    return f"{RUNS}/{plan_oid}/{attempt_oid}/evaluations/{profile}"


def calls(plan_oid: str, attempt_oid: str) -> str:
    """The attempt's gateway meter (docs/gateway.md, "In a run"): moved by compare-and-swap
    to a meter of its calls so far as each one ends, then to the final one."""
    return f"{RUNS}/{plan_oid}/{attempt_oid}/calls"


def judge_intent(plan_oid: str, attempt_oid: str, profile: str) -> str:
    """The intent written before a judge of ``profile`` is dispatched for the attempt."""
    return f"{RUNS}/{plan_oid}/{attempt_oid}/judge-intents/{profile}"


def reevaluation_pass(plan_oid: str, profile: str) -> str:
    return f"{RUNS}/{plan_oid}/passes/{profile}"


def signature(oid: str) -> str:
    return f"{SIGNATURES}/{oid}"


def governed_plan(plan_oid: str) -> str:
    return f"{GOVERNED}/{plan_oid}/plan"


def governed_authorization(plan_oid: str) -> str:
    return f"{GOVERNED}/{plan_oid}/authorization"


def governed_step(plan_oid: str, attempt_oid: str, leaf: GovernedLeaf) -> str:
    return f"{GOVERNED}/{plan_oid}/{attempt_oid}/{leaf}"


def governed_judgement(plan_oid: str, attempt_oid: str, profile: str) -> str:
    return f"{GOVERNED}/{plan_oid}/{attempt_oid}/judgements/{profile}"


def readiness_receipt(receipt_oid: str) -> str:
    return f"{READINESS}/{receipt_oid}/receipt"


def readiness_runs(receipt_oid: str) -> str:
    """The folder of the refs naming the plans a receipt's checks ran (one per part)."""
    return f"{READINESS}/{receipt_oid}/runs"


def readiness_run(receipt_oid: str, part: str) -> str:
    return f"{READINESS}/{receipt_oid}/runs/{part}"


def experiment(plan_oid: str) -> list[str]:
    """The ref names and folders that belong to one experiment (for bundles and listings):
    its plan, grant and report layers, and every run ref; for a governed experiment, every
    ref under ``refs/governed/<plan>``."""
    return [
        plan(plan_oid),
        grant(plan_oid),
        report(plan_oid),
        runs(plan_oid) + "/",
        f"{GOVERNED}/{plan_oid}/",
    ]
