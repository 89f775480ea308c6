"""Reports that invalidity cannot game: intent-to-treat and invalidity rates, their causes, and
the warning on a comparison of models whose invalidity differs."""

from __future__ import annotations

import json

import pytest

from tests.reports.fabricate import Spec, fabricate
from yyb.evidence import invalidity
from yyb.evidence.kinds.report import ReportLayerV3
from yyb.evidence.records import EVALUATION, EVALUATION_PROBLEMS
from yyb.reports import build, layer, render, stats
from yyb.reports.stats import fisher_exact, wilson
from yyb.store import schema

CHEATER, HONEST = "m/cheater", "m/honest"
CASES = [f"c{i}" for i in range(6)]
ATTEMPTS = 3
NO_ENVELOPE = "the harness wrote no execution envelope"


def _place(ordinal: int, models: int) -> tuple[int, int]:
    """(case index, model index) of an attempt: fabricate orders them case, model, attempt."""
    return ordinal // (models * ATTEMPTS), ordinal // ATTEMPTS % models


def self_invalidating(ordinal: int):
    """The honest model resolves cases 0-2 and fails 3-5: 9 of 18. The cheater resolves
    cases 0-1 and one attempt of cases 3-4: 8 of 18, and turns each of its failures into an
    invalid attempt: its harness withholds the envelope (case 2, the second attempt of cases
    3-4), or its code hangs the grader (the third attempt of cases 3-4) or leaves it without
    a verdict (case 5)."""
    case, model = _place(ordinal, 2)
    k = ordinal % ATTEMPTS
    if model == 1:
        return ("resolved", "pass", 1000) if case < 3 else ("grader_failure", "fail", 1000)
    if case < 2 or (case in (3, 4) and k == 0):
        return "resolved", "pass", 1000
    if case == 5:
        return "harness_failure", "invalid", 1000, "no_verdict"
    if case == 2 or k == 1:
        return "harness_failure", None, 1000, NO_ENVELOPE
    return "harness_failure", "invalid", 1000, "timed_out"


def both_sometimes_invalid(ordinal: int):
    """Two models alike: each resolves cases 0-2, fails 3-5, and has an infrastructure
    failure (an attempt closed before its workspace existed, or a grader that could not
    start) in one attempt of a case or two."""
    case, model = _place(ordinal, 2)
    k = ordinal % ATTEMPTS
    if k == 0 and case == 5:
        return "harness_failure", None, 0  # closed early: no execution
    if k == 0 and model == 1 and case == 4:
        return "harness_failure", "invalid", 1000, "not_started"
    return ("resolved", "pass", 1000) if case < 3 else ("grader_failure", "fail", 1000)


def _model(report: dict, name: str) -> dict:
    return next(m for m in report["models"] if m["model"] == name)


@pytest.fixture
def cheated(disk_store):
    spec = Spec([CHEATER, HONEST], CASES, attempts=ATTEMPTS, outcome=self_invalidating)
    plan = fabricate(disk_store, spec)
    report, _ = build.build(disk_store, plan)
    return plan, report


def test_self_invalidation_wins_the_valid_rate_but_not_the_intent_to_treat_rate(cheated):
    _, report = cheated
    assert report["status"] == "complete"
    cheater, honest = _model(report, CHEATER), _model(report, HONEST)
    # The valid resolved rate is gamed: 8/8 against 9/18.
    assert cheater["rate"] == {"numerator": 8, "denominator": 8, "ppm": 1_000_000}
    assert honest["rate"] == {"numerator": 9, "denominator": 18, "ppm": 500_000}
    # Intent to treat counts every attempt with a terminal, an invalid one as not resolved.
    assert cheater["intent_to_treat"] == {
        "rate": {"numerator": 8, "denominator": 18, "ppm": 444_444},
        "interval": wilson(8, 18),
    }
    assert honest["intent_to_treat"] == {"rate": honest["rate"], "interval": honest["interval"]}
    assert cheater["intent_to_treat"]["rate"]["ppm"] < honest["intent_to_treat"]["rate"]["ppm"]
    # Invalidity per model, with its interval, and who could have caused it.
    assert cheater["invalidity"] == {
        "rate": {"numerator": 10, "denominator": 18, "ppm": 555_556},
        "interval": wilson(10, 18),
        "causes": {"candidate": 10, "infrastructure": 0},
    }
    assert honest["invalidity"]["rate"]["numerator"] == 0
    assert honest["invalidity"]["causes"] == {"candidate": 0, "infrastructure": 0}
    assert cheater["terminal_classes"] == {"harness_failure": 10, "resolved": 8}
    by_case = {c["case_id"]: c["invalidity"]["causes"]["candidate"] for c in cheater["cases"]}
    assert by_case == {"c0": 0, "c1": 0, "c2": 3, "c3": 2, "c4": 2, "c5": 3}
    assert report["totals"]["invalidity"]["causes"] == {"candidate": 10, "infrastructure": 0}


def test_the_paired_comparison_warns_when_invalidity_differs(cheated, disk_store):
    plan, report = cheated
    (comparison,) = report["comparisons"]
    assert (comparison["first"], comparison["second"]) == (CHEATER, HONEST)
    # Per case, a majority of valid attempts: the cheater wins cases 3-4 on one valid attempt
    # each, and its all-invalid cases 2 and 5 are left out of the pairing.
    assert (comparison["only_first"], comparison["only_second"]) == (2, 0)
    assert (comparison["cases_paired"], comparison["cases_unpaired"]) == (4, 2)
    test = comparison["invalidity_fisher_exact"]
    assert test == fisher_exact(10, 8, 0, 18)
    assert (test["p_numerator"], test["p_denominator"], test["significant"]) == (13, 37758, True)
    text = render.text(report, layer.unstored(None))
    (warning,) = [line for line in text.splitlines() if "invalidity differs" in line]
    assert warning == (
        "!! invalidity differs: m/cheater 10/18 55.6% [33.7%, 75.4%] vs m/honest 0/18 0.0% "
        "[0.0%, 17.6%] invalid; exact Fisher p = 0.000345 < 0.05: compare their "
        "intent-to-treat rates, not only their valid ones !!"
    )
    header = text.splitlines()[5]
    assert "intent-to-treat rate [95% Wilson]" in header
    assert "invalid by cause" in header
    (row,) = [line for line in text.splitlines() if line.startswith(f"{CHEATER}  (all)")]
    assert "8/18 44.4% [" in row and "10/18 55.6% [" in row and " candidate 10 " in row
    markdown = render.markdown(report, layer.unstored(None))
    assert "> **invalidity differs: m/cheater 10/18" in markdown
    # The stored layer carries the test and the rates, valid against its schema.
    stored = layer.store_layer(disk_store, plan, report)
    value = disk_store.objects.get_record(stored["oid"])
    schema.validate(value, layer.LAYER)
    assert value["report"]["comparisons"][0]["invalidity_fisher_exact"]["significant"] is True
    assert value["report"]["models"][0]["invalidity"]["causes"]["candidate"] == 10


def test_no_warning_when_invalidity_does_not_differ(disk_store):
    spec = Spec([CHEATER, HONEST], CASES, attempts=ATTEMPTS, outcome=both_sometimes_invalid)
    plan = fabricate(disk_store, spec)
    report, _ = build.build(disk_store, plan)
    assert report["status"] == "complete"
    first, second = report["models"]
    assert first["invalidity"]["rate"]["numerator"] == 1
    assert first["invalidity"]["causes"] == {"candidate": 0, "infrastructure": 1}
    assert second["invalidity"]["rate"]["numerator"] == 2
    assert second["invalidity"]["causes"] == {"candidate": 0, "infrastructure": 2}
    assert second["intent_to_treat"]["rate"] == {"numerator": 9, "denominator": 18, "ppm": 500000}
    test = report["comparisons"][0]["invalidity_fisher_exact"]
    assert (test["p_numerator"], test["p_denominator"], test["significant"]) == (1, 1, False)
    for form in (render.text, render.markdown):
        assert "invalidity differs" not in form(report, layer.unstored(None))


def test_the_report_cli_prints_and_records_the_warning(cheated, yyb):
    plan, _ = cheated
    text = yyb("report", "--plan", plan, "--no-layer")
    assert text.exit_code == 0, text.stderr
    assert "!! invalidity differs: m/cheater 10/18 55.6%" in text.stdout
    document = json.loads(yyb("report", "--plan", plan, "--format", "json").stdout)
    assert document["comparisons"][0]["invalidity_fisher_exact"]["significant"] is True
    assert document["models"][1]["intent_to_treat"]["rate"]["ppm"] == 500000


def test_a_v3_layer_written_before_these_figures_still_verifies(cheated, disk_store):
    from yyb.store import fsck

    plan, report = cheated
    older = json.loads(json.dumps(report))
    for comparison in older["comparisons"]:
        del comparison["invalidity_fisher_exact"], comparison["intent_to_treat"]
    models = older["models"]
    for summary in [older["totals"], *models, *[c for m in models for c in m["cases"]]]:
        del summary["intent_to_treat"], summary["invalidity"]
    # As yyb wrote a v3 layer: the report without its attempt rows, the case rows inline.
    value = ReportLayerV3(
        plan=plan,
        grader_version=older["grader_version"],
        status=older["status"],
        report={key: value for key, value in older.items() if key != "attempts"},
        links={"plan": plan},
    ).to_value()
    schema.validate(value, ReportLayerV3.schema_version)
    oid = disk_store.objects.put_record(value)
    disk_store.refs.update(layer.layer_ref(plan), oid, old=None)
    assert not [f for f in fsck.fsck(disk_store) if f.level == "error"]
    # A v4 layer (the case rows in cases records) without them verifies as well.
    cases = layer.put_parts(disk_store, layer.cases_records(plan, older["models"]))
    newer = layer.record(plan, older, [], cases)
    newer["links"]["previous"] = oid
    schema.validate(newer, layer.LAYER)
    disk_store.refs.update(layer.layer_ref(plan), disk_store.objects.put_record(newer), old=oid)
    assert not [f for f in fsck.fsck(disk_store) if f.level == "error"]


# --- the classification, one rule at a time ----------------------------------------------


def facts(**changes) -> dict:
    base = {
        "cancelled": False,
        "timed_out": False,
        "cleanup_confirmed": True,
        "exit_code": 0,
        "signal": None,
        "envelope_problem": None,
        "envelope_status": "succeeded",
    }
    return {**base, **changes}


@pytest.mark.parametrize(
    "terminal_class, execution, cause",
    [
        ("harness_failure", facts(envelope_problem=NO_ENVELOPE), "candidate"),
        ("harness_failure", facts(envelope_problem="identity mismatch"), "candidate"),
        # Cleanup not confirmed decides first (row 4): not the candidate's envelope.
        (
            "harness_failure",
            facts(envelope_problem=NO_ENVELOPE, cleanup_confirmed=False),
            "infrastructure",
        ),
        ("harness_failure", facts(cleanup_confirmed=False), "infrastructure"),
        ("harness_failure", None, "infrastructure"),  # closed before its candidate ran
        ("environment_failure", None, "infrastructure"),
        ("invalid_case", None, "infrastructure"),
        ("cancelled", facts(cancelled=True, envelope_problem=NO_ENVELOPE), "infrastructure"),
    ],
)
def test_the_cause_of_an_invalid_terminal(terminal_class, execution, cause):
    assert invalidity.of_terminal(terminal_class, execution) == cause


def receipt(kind: str = "command", problem: str | None = None, **fields) -> dict:
    value = {"kind": kind, "verdict": "invalid", "required": True, **fields}
    if problem is not None:
        value["problem"] = problem
    return value


@pytest.mark.parametrize(
    "value, cause",
    [
        (receipt(problem="no_verdict"), "candidate"),
        (receipt(problem="timed_out"), "candidate"),
        (receipt(problem="not_started"), "infrastructure"),
        (receipt(problem="interrupted"), "infrastructure"),
        (receipt(problem="cleanup_unconfirmed"), "infrastructure"),
        (receipt(), "infrastructure"),  # recorded before problems were
        (receipt("llm_judge", "no_verdict"), "infrastructure"),  # a judge runs no candidate code
    ],
)
def test_the_cause_of_an_invalid_evaluation(value, cause):
    assert invalidity.of_evaluation(value) == cause


def test_the_cause_of_an_invalid_verdict_is_the_newest_required_generations():
    hung = receipt(problem="timed_out")
    unstarted = receipt(problem="not_started")
    passed = {"kind": "command", "verdict": "pass", "required": True}
    assert invalidity.of_verdict({"tests": [passed, hung]}) == "candidate"
    # A later generation that could not start is the infrastructure's, whatever came before.
    assert invalidity.of_verdict({"tests": [hung, unstarted]}) == "infrastructure"
    # Any invalid profile the candidate could have caused makes it the candidate's.
    assert invalidity.of_verdict({"a": [unstarted], "b": [hung]}) == "candidate"
    # An optional evaluator decides nothing; no required one is the infrastructure's.
    assert invalidity.of_verdict({"a": [unstarted], "b": [{**hung, "required": False}]}) == (
        "infrastructure"
    )
    assert invalidity.of_verdict({}) == "infrastructure"


def test_the_receipt_schema_lists_the_evaluation_problems():
    assert (
        tuple(schema.load_schema(EVALUATION)["properties"]["problem"]["enum"])
        == EVALUATION_PROBLEMS
    )


# --- live runs: what the grader and the harness record ------------------------------------

HANG_THE_TESTS = """
printf '#!/bin/sh\\nsleep 60\\n' > test_calc.sh
commit "the tests now hang whoever runs them"
envelope succeeded
"""


def test_live_runs_record_what_made_them_invalid(bench):
    silent = bench.behaviour("silent", "\necho 'no envelope this time'\n")
    hanger = bench.behaviour("hanger", HANG_THE_TESTS)
    bench.configure({"tests": bench.command("honest", timeout_ms=1500)})
    plan, results = bench.run(["zz/fixer", silent, hanger])
    assert [r.terminal_class for r in results] == ["resolved"] + ["harness_failure"] * 2
    (hung,) = [r for _, r in bench.history(plan, results[2].attempt, "tests")]
    assert (hung["verdict"], hung["problem"]) == ("invalid", "timed_out")
    (passed,) = [r for _, r in bench.history(plan, results[0].attempt, "tests")]
    assert "problem" not in passed
    report, _ = build.build(bench.store, plan.oid)
    assert report["status"] == "complete"
    causes = [m["invalidity"]["causes"] for m in report["models"]]
    assert causes == [
        {"candidate": 0, "infrastructure": 0},
        {"candidate": 1, "infrastructure": 0},  # its harness wrote no envelope
        {"candidate": 1, "infrastructure": 0},  # its code hung the grader
    ]
    # A grader whose pinned bytes changed cannot start: a regrade by it is the infrastructure's.
    bench.grader("honest", "#!/bin/sh\nexit 0\n")
    assert bench.yyb("regrade", "--plan", plan.oid, "--profile", "tests").exit_code == 0
    assert bench.history(plan, results[0].attempt, "tests")[-1][1]["problem"] == "not_started"
    report, _ = build.build(bench.store, plan.oid)
    causes = [m["invalidity"]["causes"] for m in report["models"]]
    assert causes == [
        {"candidate": 0, "infrastructure": 1},
        {"candidate": 1, "infrastructure": 0},
        {"candidate": 0, "infrastructure": 1},
    ]


def test_the_html_page_shows_the_invalidity_test_and_its_warning(cheated):
    pytest.importorskip("matplotlib")
    from yyb.reports import html

    _, report = cheated
    page = html.document(report, layer.unstored(None))
    assert "invalidity: exact Fisher p" in page and "<td>0.000345</td>" in page
    assert "invalidity differs: m/cheater 10/18 55.6%" in page
    assert "intent-to-treat rate [95% Wilson]" in page


# --- the paired comparison on intent-to-treat outcomes ------------------------------------

MANY_CASES = [f"c{i:02d}" for i in range(12)]


def trades_failures_for_invalidity(ordinal: int):
    """One attempt per case, the cheater's first. The honest model resolves cases 0-5 and
    fails 6-11; the cheater resolves cases 6-11 and withholds its envelope on 0-5, where it
    would have failed. Both resolve 6 of 12."""
    case, model = divmod(ordinal, 2)
    if model == 1:
        return ("resolved", "pass", 1000) if case < 6 else ("grader_failure", "fail", 1000)
    if case >= 6:
        return "resolved", "pass", 1000
    return "harness_failure", None, 1000, NO_ENVELOPE


def test_invalidating_failures_does_not_win_the_paired_comparison(disk_store):
    spec = Spec([CHEATER, HONEST], MANY_CASES, outcome=trades_failures_for_invalidity)
    plan = fabricate(disk_store, spec)
    report, _ = build.build(disk_store, plan)
    cheater, honest = _model(report, CHEATER), _model(report, HONEST)
    assert cheater["intent_to_treat"]["rate"] == honest["intent_to_treat"]["rate"]
    (comparison,) = report["comparisons"]
    # On valid attempts only the cheater's invalid cases drop out, and it "wins" 6 to 0.
    assert (comparison["only_first"], comparison["only_second"]) == (6, 0)
    assert (
        comparison["mcnemar_exact"]["p_numerator"] * 32
        == comparison["mcnemar_exact"]["p_denominator"]
    )
    # On intent-to-treat outcomes (invalid is not resolved) every case pairs: 6 each, p = 1.
    itt = comparison["intent_to_treat"]
    assert (itt["cases_paired"], itt["cases_unpaired"]) == (12, 0)
    assert (itt["only_first"], itt["only_second"], itt["both_resolved"], itt["neither"]) == (
        6,
        6,
        0,
        0,
    )
    assert itt["mcnemar_exact"] == stats.mcnemar_exact(6, 6)
    assert (itt["mcnemar_exact"]["p_numerator"], itt["mcnemar_exact"]["p_denominator"]) == (1, 1)
    # The text leads with the intent-to-treat test.
    text = render.text(report, layer.unstored(None)).splitlines()
    first = next(i for i, line in enumerate(text) if f"{CHEATER} vs {HONEST}" in line)
    assert "intent to treat" in text[first] and "p = 1.000000" in text[first]
    assert "valid attempts only" in text[first + 1] and "p = 0.031250" in text[first + 1]
    stored = layer.store_layer(disk_store, plan, report)
    value = disk_store.objects.get_record(stored["oid"])
    schema.validate(value, layer.LAYER)
    assert value["report"]["comparisons"][0]["intent_to_treat"]["only_second"] == 6


def test_the_html_page_leads_with_the_intent_to_treat_pairing(disk_store):
    pytest.importorskip("matplotlib")
    from yyb.reports import html

    spec = Spec([CHEATER, HONEST], MANY_CASES, outcome=trades_failures_for_invalidity)
    report, _ = build.build(disk_store, fabricate(disk_store, spec))
    page = html.document(report, layer.unstored(None))
    first, second = page.index("<td>intent to treat</td>"), page.index("<td>valid only</td>")
    assert first < second and "<td>1.000000 (1/1)</td>" in page[first:second]
