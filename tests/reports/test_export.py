"""The report's exports (CSV, Parquet, JUnit), pass@k, yyb.api and yyb compare, on the built-in
example: one run of it, and two more plans of the example that differ in their candidate."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET

import pytest

from tests.reports.conftest import Example, example_runs
from yyb.reports import stats


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Example:
    return example_runs(tmp_path_factory.mktemp("export") / "ex", 3)


@pytest.fixture(scope="module")
def document(example) -> dict:
    shown = example.report("--format", "json")
    assert shown.exit_code == 0, shown.stderr
    return json.loads(shown.stdout)


def test_json_rows_carry_the_attempt_number_cost_verdicts_and_environment(document):
    rows = document["attempts"]
    assert len(rows) == 6
    for model in ("example/fixer", "example/idler"):
        mine = [r for r in rows if r["model"] == model]
        assert sorted(r["number"] for r in mine) == [1, 2, 3]
    for row in rows:
        assert row["candidate_cost"]["completeness"] in ("genuine_zero", "complete")
        assert row["verdicts"] == {"tests": row["verdict"]}
        assert row["environment"] is None and row["tokens"] is None  # the host; no gateway


def test_the_csv_export_has_a_row_per_attempt_with_the_report_s_outcomes(example, document):
    shown = example.report("--format", "csv")
    assert shown.exit_code == 0, shown.stderr
    rows = list(csv.DictReader(io.StringIO(shown.stdout)))
    assert [r["attempt"] for r in rows] == [r["attempt"] for r in document["attempts"]]
    assert [r["outcome"] for r in rows] == [r["outcome"] for r in document["attempts"]]
    assert {r["verdict:tests"] for r in rows} == {"pass", "fail"}
    assert all(r["input_tokens"] == "" for r in rows)  # not metered: empty, never 0
    assert shown.stdout.endswith("\r\n")


def test_the_parquet_export_loads_in_pyarrow_and_pandas_with_typed_columns(
    example, document, tmp_path
):
    pq = pytest.importorskip("pyarrow.parquet")
    pandas = pytest.importorskip("pandas")
    out = tmp_path / "report.parquet"
    written = example.report("--format", "parquet", "--output", str(out))
    assert written.exit_code == 0, written.stderr
    table = pq.read_table(out)
    assert table.num_rows == 6
    assert str(table.schema.field("wall_ms").type) == "int64"
    assert str(table.schema.field("verdict:tests").type) == "string"
    assert table.schema.metadata[b"yyb.plan"].decode() == document["plan"]
    frame = pandas.read_parquet(out)
    resolved = frame[frame.outcome == "resolved"].groupby("model").size().to_dict()
    assert resolved == {"example/fixer": 3}
    again = example.report("--format", "parquet", "--output", str(out))
    assert again.exit_code == 2 and out.stat().st_size == len(out.read_bytes())  # not rewritten


def test_the_junit_export_counts_failures_as_the_report_does(example, document):
    shown = example.report("--format", "junit")
    assert shown.exit_code == 0, shown.stderr
    top = ET.fromstring(shown.stdout_bytes)
    assert top.tag == "testsuites" and top.get("tests") == "6"
    assert top.get("failures") == str(document["totals"]["failed"]) == "3"
    suites = {s.get("name"): s for s in top.findall("testsuite")}
    assert suites["example/fixer"].get("failures") == "0"
    assert len(suites["example/idler"].findall("testcase/failure")) == 3
    junitparser = pytest.importorskip("junitparser")
    parsed = junitparser.JUnitXml.fromstring(shown.stdout)
    cases = [case for suite in parsed for case in suite]
    assert len(cases) == 6
    assert sum(1 for case in cases if not case.is_passed) == 3


def test_a_binary_export_to_a_terminal_and_a_longitudinal_export_are_refused(example):
    refused = example.yyb("report", "--longitudinal", "--format", "csv", "--no-layer")
    assert refused.exit_code == 2
    assert refused.stderr.count("\n") == 1 and "--plan" in refused.stderr


def test_pass_at_k_is_the_unbiased_estimator():
    # Two cases of 3 attempts, one resolved once and one never; one case of a single attempt.
    figures = stats.pass_at_k([(3, 1), (3, 0), (1, 1)])
    assert figures[0] == {"k": 1, "cases": 3, "ppm": 444444}  # (1/3 + 0 + 1) / 3
    assert figures[1] == {"k": 2, "cases": 2, "ppm": 333333}  # (1 - 1/3 + 0) / 2
    assert figures[2] == {"k": 3, "cases": 2, "ppm": 500000}
    assert stats.pass_at_k([(4, 2)])[1]["ppm"] == 833333  # 1 - C(2,2)/C(4,2) = 5/6


def test_the_report_has_pass_at_k_for_repeated_cells(example, document):
    fixer, idler = document["models"]
    assert [e["ppm"] for e in fixer["pass_at_k"]] == [1_000_000] * 3
    assert [e["ppm"] for e in idler["pass_at_k"]] == [0, 0, 0]
    shown = example.report()
    assert "example/fixer: pass@1 100.0% (1 case(s))" in shown.stdout


def test_the_api_returns_records_and_dataframes(example, document):
    from yyb import api

    rows = api.attempts(example.plan, store=example.store)
    assert [r.attempt for r in rows] == [r["attempt"] for r in document["attempts"]]
    assert rows[0].number == 1 and rows[0].verdicts == {"tests": "pass"}
    graded = api.evaluations(document["plan"][:12], store=example.store)
    assert len(graded) == 6 and all(e.current and e.generation == 1 for e in graded)
    assert {e.verdict for e in graded if e.model == "example/idler"} == {"fail"}
    assert api.calls(example.plan, store=example.store) == []  # no gateway in the example
    pytest.importorskip("pandas")
    frame = api.attempts_df(example.plan, store=example.store)
    assert frame.shape[0] == 6 and (frame.outcome == "resolved").sum() == 3
    empty = api.calls_df(example.plan, store=example.store)
    assert empty.shape[0] == 0 and "served_model" in empty.columns


def test_the_api_names_a_missing_plan_as_an_error_not_a_traceback(example):
    from yyb import api
    from yyb.errors import YybError

    with pytest.raises(YybError):
        api.attempts("no-such-plan", store=example.store)


@pytest.fixture(scope="module")
def two_runs(example) -> tuple[str, str]:
    return example.plan_of(":fixer"), example.plan_of(":idler")


def test_compare_of_two_candidates_shows_the_flipped_case_after_the_key_that_differs(
    example, two_runs
):
    first, second = two_runs
    shown = example.yyb("compare", first, second)
    assert shown.exit_code == 0, shown.stderr
    lines = shown.stdout.splitlines()
    differs = next(i for i, line in enumerate(lines) if line.startswith("compatibility keys"))
    assert lines[differs] == "compatibility keys differ: agent.model (1 of 1)"
    assert differs < next(i for i, line in enumerate(lines) if "rate" in line)
    assert "flipped: lost calc-add; gained -" in shown.stdout
    document = json.loads(example.yyb("compare", first, second, "--json").stdout)
    (pair,) = document["pairs"]
    assert (pair["first_model"], pair["second_model"]) == ("example/fixer", "example/idler")
    assert pair["lost"] == ["calc-add"] and pair["gained"] == []
    (case,) = pair["cases"]
    assert case["first"]["verdicts"] == {"pass": 2} and case["second"]["verdicts"] == {"fail": 2}
    assert pair["paired"]["only_first"] == 1
    backwards = json.loads(example.yyb("compare", second, first, "--json").stdout)
    assert backwards["pairs"][0]["gained"] == ["calc-add"]


def test_compare_of_the_same_candidate_pairs_by_model_and_names_the_other(example, two_runs):
    first, _ = two_runs
    document = json.loads(example.yyb("compare", first, example.plan, "--json").stdout)
    assert [p["first_model"] for p in document["pairs"]] == ["example/fixer"]
    assert document["unpaired_models"] == {"first": [], "second": ["example/idler"]}
    assert document["pairs"][0]["cases"][0]["change"] == "same"


def test_compare_refuses_bad_input_in_one_line(example, two_runs):
    first, _ = two_runs
    # The same plan twice, and a plan that is neither a file nor in the store: bad input.
    for args, code in (((first, first), 2), ((first, "no-such-plan"), 2)):
        refused = example.yyb("compare", *args)
        assert refused.exit_code == code, refused.stderr
        assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
