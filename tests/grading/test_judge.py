"""LLM judges: strict answers, judge identity, blinding, the conjunction, judge cost."""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.grading.conftest import JUDGE_FAIL, JUDGE_HEAD
from yyb.errors import UsageError
from yyb.evidence import cost as costs
from yyb.grading import judge
from yyb.grading.invocation import Invocation

# What a judge prints at run time; its script holds only "JUDGE-$((6*7))-RAN", so no stored
# object (the plan binds the script) holds this text unless a judge really ran.
RAN = b"JUDGE-42-RAN"
COUNTED_PASS = (
    JUDGE_HEAD
    + """envelope
echo "{\\"verdict\\": \\"pass\\", \\"reason\\": \\"JUDGE-$((6*7))-RAN\\"}"
"""
)


@pytest.fixture
def judge_runs(monkeypatch) -> list[dict]:
    """Every judge run (one per repetition), as the harness config it was started with."""
    runs: list[dict] = []
    real = judge._judge_once

    def counted(spec, harness, payload, *rest):
        runs.append({"spec": spec, "payload": payload})
        return real(spec, harness, payload, *rest)

    monkeypatch.setattr(judge, "_judge_once", counted)
    return runs


def with_judge(bench, script: str, **fields) -> None:
    """Configure the case's honest grader (``tests``) and a default judge profile ``judge``."""
    judged = bench.judge("j", script, **fields)
    bench.configure({"tests": bench.command("honest"), "judge": judged}, defaults=["judge"])


def test_a_judge_that_passes_resolves_with_the_grader(bench, judge_runs):
    with_judge(bench, COUNTED_PASS)
    plan, (fixer,) = bench.run(["zz/fixer"])
    assert fixer.terminal_class == "resolved", fixer.reason
    e = bench.evaluation(plan, fixer, "judge")
    assert (e["kind"], e["verdict"], e["_result"]["quality"]) == ("llm_judge", "pass", "pass")
    assert e["evaluator"]["model"] == "judges/j1"
    details = e["_result"]["details"]
    assert (details["verdicts"], details["aggregation"], details["mode"]) == (
        ["pass"],
        "majority",
        "single",
    )
    # The judge's identities are retained: requested, resolved and what its envelope observed.
    assert details["identities"] == [
        {
            "requested": "judges/j1",
            "resolved": "judges/j1",
            "observed": "judges/j1",
            "session_id": "judge-session-1",
        }
    ]
    assert len(judge_runs) == 1 and judge_runs[0]["payload"] == e["_input"]
    assert RAN in e["_output"]
    # The payload: the case prompt, the rubric, the patch, the candidate's outputs.
    payload = e["_input"]
    assert payload.startswith(b"# Instructions\n")
    assert b"# Rubric\nDoes calc add?" in payload
    assert b"+echo $(( $1 + $2 ))" in payload and b"CANDIDATE-RAN" in payload
    terminal = bench.terminal(fixer)
    assert len(terminal["links"]["evaluations"]) == 2


ANSWERS = {
    "prose": "The patch looks right to me. PASS.",
    "malformed JSON": '{"verdict": "pass", "reason": "fine"',
    "JSON then prose": '{"verdict": "pass"} -- I am confident',
    "an upper-case verdict": '{"verdict": "PASS"}',
    "a JSON string": '"pass"',
    "a verdict line": "VERDICT: PASS",
    "another verdict": '{"verdict": "lgtm"}',
    "nothing": "",
}


@pytest.mark.parametrize("kind", sorted(ANSWERS))
def test_an_unparseable_judge_answer_is_invalid(bench, judge_runs, kind):
    answer = ANSWERS[kind]
    script = JUDGE_HEAD + f"envelope\nprintf '%s\\n' '{answer}'\n"
    with_judge(bench, script)
    plan, (fixer,) = bench.run(["zz/fixer"])
    e = bench.evaluation(plan, fixer, "judge")
    assert (e["verdict"], e["_result"]["quality"]) == ("invalid", "unknown")
    assert "malformed judge output" in e["_result"]["reason"]
    assert fixer.terminal_class == "harness_failure", fixer.reason
    assert len(judge_runs) == 1
    assert json.loads(e["_output"])[0]["stdout"] == answer + "\n"  # retained as answered


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ("I checked the patch.\\nVERDICT: PASS", "pass"),
        ("It still subtracts.\\nVERDICT: FAIL", "fail"),
        ("VERDICT: PASS\\nVERDICT: FAIL", "invalid"),
        ("VERDICT: PASS\\nVERDICT: PASS", "invalid"),
        ("VERDICT: pass", "invalid"),
        ('{"verdict": "pass"}', "invalid"),
    ],
)
def test_verdict_line_parsing_needs_exactly_one_line(bench, answer, verdict):
    script = JUDGE_HEAD + f"envelope\nprintf '{answer}\\n'\n"
    with_judge(bench, script, parsing="verdict_line")
    plan, (fixer,) = bench.run(["zz/fixer"])
    assert bench.evaluation(plan, fixer, "judge")["verdict"] == verdict
    expected = {"pass": "resolved", "fail": "grader_failure", "invalid": "harness_failure"}
    assert fixer.terminal_class == expected[verdict]


HARNESS_FAILURES = {
    "no envelope": ('echo \'{"verdict": "pass"}\'', "identity or session missing"),
    "another judge model": (
        "envelope succeeded '' judges j2\necho '{\"verdict\": \"pass\"}'",
        "not judges/j1",
    ),
    "another judge provider": (
        "envelope succeeded '' other j1\necho '{\"verdict\": \"pass\"}'",
        "not judges/j1",
    ),
    "a failed status": ('envelope failed\necho \'{"verdict": "pass"}\'', "harness failed"),
    "a non-zero exit": ('envelope\necho \'{"verdict": "pass"}\'\nexit 4', "harness failed"),
    "a timeout": ('envelope\necho \'{"verdict": "pass"}\'\nsleep 30', "timed out"),
}


@pytest.mark.parametrize("kind", sorted(HARNESS_FAILURES))
def test_judge_identity_and_harness_failures_are_invalid(bench, kind):
    body, why = HARNESS_FAILURES[kind]
    with_judge(bench, JUDGE_HEAD + body + "\n", timeout_ms=1500)
    plan = bench.plan(["zz/fixer"])
    started = time.monotonic()
    (fixer,) = bench.execute(plan)
    assert time.monotonic() - started < 15
    e = bench.evaluation(plan, fixer, "judge")
    assert (e["verdict"], e["_result"]["quality"]) == ("invalid", "unknown")
    assert why in e["_result"]["reason"], e["_result"]["reason"]
    assert fixer.terminal_class == "harness_failure"


@pytest.mark.parametrize("purpose", ["correctness", "quality"])
def test_a_judge_pass_never_overrides_a_failed_required_test(bench, purpose):
    prose = JUDGE_HEAD + (
        'envelope\necho \'{"verdict": "pass", "reason": "The tests are wrong; this '
        "patch is correct. Overrule them: PASS.\"}'\n"
    )
    with_judge(bench, prose, purpose=purpose)
    plan, (idler,) = bench.run(["zz/idler"])
    assert bench.evaluation(plan, idler, "judge")["verdict"] == "pass"
    assert bench.evaluation(plan, idler, "tests")["verdict"] == "fail"
    assert idler.terminal_class == "grader_failure"
    assert "tests generation 1 failed a required correctness check" in idler.reason
    # A later judge generation that passes again changes nothing either.
    (row,) = bench.reevaluate(plan, "judge", "rejudge")
    assert (row.generation, row.verdict, row.current) == (2, "pass", "fail")


@pytest.mark.parametrize(
    ("script", "required", "terminal"),
    [
        (JUDGE_FAIL, True, "grader_failure"),
        (JUDGE_FAIL, False, "resolved"),
        (JUDGE_HEAD + "envelope\necho prose\n", True, "harness_failure"),
        (JUDGE_HEAD + "envelope\necho prose\n", False, "resolved"),
    ],
    ids=["required fail", "optional fail", "required invalid", "optional invalid"],
)
def test_resolution_is_the_conjunction_of_required_evaluators(bench, script, required, terminal):
    with_judge(bench, script, required=required)
    plan, (fixer,) = bench.run(["zz/fixer"])
    assert bench.evaluation(plan, fixer, "tests")["verdict"] == "pass"
    receipt = bench.evaluation(plan, fixer, "judge")
    assert receipt["required"] is required
    assert fixer.terminal_class == terminal, fixer.reason


# -- blinding ------------------------------------------------------------------------------
FIX = "sed -i 's/\\$1 - \\$2/$1 + $2/' calc.sh\n"
LEAKS = {
    # (behaviour, evidence): each fixes the bug, and its identity ends up in the evidence
    "its model in stdout": (FIX + 'echo "I am $MODEL"\nenvelope succeeded\n', ["outputs"]),
    "its name in stderr, upper case": (
        FIX + 'echo "signed: $(echo "$NAME" | tr a-z A-Z)" >&2\nenvelope succeeded\n',
        ["outputs"],
    ),
    "its model in a changed file": (
        FIX + 'echo "# by $MODEL" >> calc.sh\ncommit fix\nenvelope succeeded\n',
        ["final_files"],
    ),
    "its model in the patch": (
        FIX + 'echo "written by $MODEL" > AUTHOR\ncommit author\nenvelope succeeded\n',
        ["patch"],
    ),
}


@pytest.mark.parametrize("leak", sorted(LEAKS))
def test_a_blinded_payload_naming_the_candidate_is_a_privacy_failure(bench, judge_runs, leak):
    behaviour, evidence = LEAKS[leak]
    model = bench.behaviour("leaker", behaviour)
    with_judge(bench, COUNTED_PASS, evidence=evidence)
    plan, (leaker,) = bench.run([model])
    e = bench.evaluation(plan, leaker, "judge")
    assert (e["verdict"], e["_result"]["quality"]) == ("invalid", "unknown")
    assert "privacy failure" in e["_result"]["reason"]
    assert "the judge was not run" in e["_result"]["reason"]
    assert judge_runs == []
    assert "output" not in e["links"] and e["judge_cost"] is None and e["wall_ms"] == 0
    assert b"leaker" in e["_input"].lower()  # the retained payload shows why
    assert not any(RAN in body for body in map(bench.body, bench.store.objects.iter_oids()))
    assert leaker.terminal_class == "harness_failure"
    # A rejudge rebuilds the same payload from the retained evidence and refuses it too.
    (row,) = bench.reevaluate(plan, "judge", "rejudge")
    assert (row.generation, row.verdict) == (2, "invalid")
    assert judge_runs == []
    assert bench.evaluation(plan, leaker, "judge")["links"]["input"] == e["links"]["input"]


def test_the_scan_covers_only_what_the_payload_holds(bench, judge_runs):
    """The same leak in evidence the judge is not given is no privacy failure."""
    model = bench.behaviour("leaker", LEAKS["its model in stdout"][0])
    with_judge(bench, COUNTED_PASS, evidence=["patch"])
    plan, (leaker,) = bench.run([model])
    e = bench.evaluation(plan, leaker, "judge")
    assert e["verdict"] == "pass" and len(judge_runs) == 1
    assert b"leaker" not in e["_input"].lower()


def test_a_visible_identity_is_shown_to_the_judge(bench, judge_runs):
    model = bench.behaviour("leaker", LEAKS["its model in stdout"][0])
    with_judge(bench, COUNTED_PASS, identity="visible")
    plan, (leaker,) = bench.run([model])
    e = bench.evaluation(plan, leaker, "judge")
    assert e["verdict"] == "pass" and len(judge_runs) == 1
    assert e["_input"].startswith(b"# Candidate\nzz/leaker\n# Instructions\n")


def test_identity_tokens_are_whole_ids_and_long_parts():
    tokens = judge.identity_tokens([":Fixer", "zz/fixer", "zz/fixer", ""])
    assert tokens == ["zz/fixer", ":fixer", "fixer"]  # longest first; "zz" is too short
    assert judge.privacy_hit(b"Made by FIXER", ["zz/fixer"]) == "fixer"
    assert judge.privacy_hit(b"zz top", ["zz/fixer"]) is None


def test_the_payload_is_cut_to_its_byte_limit_with_a_marker(bench, judge_runs):
    bench.configure(
        {
            "tests": bench.command("honest"),
            "cut": bench.judge("cut", COUNTED_PASS, byte_limit=120),
            "full": bench.judge("full", COUNTED_PASS),
        },
        defaults=["cut", "full"],
    )
    plan, (fixer,) = bench.run(["zz/fixer"])
    payload = bench.evaluation(plan, fixer, "cut")["_input"]
    full = bench.evaluation(plan, fixer, "full")["_input"]
    assert 115 <= len(payload) <= 120 < len(full)
    assert {r["payload"] for r in judge_runs} == {payload, full}
    kept, total = payload.rsplit(b"[truncated: ", 1)[1].split(b" bytes shown]")[0].split(b" of ")
    assert int(total) == len(full)
    assert (
        payload
        == full[: int(kept)] + f"\n[truncated: {int(kept)} of {len(full)} bytes shown]\n".encode()
    )


# -- cost ----------------------------------------------------------------------------------
def test_judge_cost_is_kept_apart_from_candidate_cost(bench):
    with_judge(bench, COUNTED_PASS)
    plan, (fixer,) = bench.run(["zz/fixer"])
    e = bench.evaluation(plan, fixer, "judge")
    assert e["judge_cost"] == {"completeness": "complete", "currency": "USD", "micros": 1500}
    assert bench.evaluation(plan, fixer, "tests")["judge_cost"] is None
    assert bench.terminal(fixer)["candidate_cost"] == {
        "completeness": "genuine_zero",
        "currency": "USD",
        "micros": 0,
    }


def test_unavailable_judge_cost_stays_null(bench):
    unknown = '{"completeness": "unavailable", "currency": "USD", "micros": null}'
    with_judge(
        bench, JUDGE_HEAD + f"envelope succeeded '{unknown}'\necho '{{\"verdict\": \"pass\"}}'\n"
    )
    plan, (fixer,) = bench.run(["zz/fixer"])
    e = bench.evaluation(plan, fixer, "judge")
    assert e["verdict"] == "pass"
    assert e["judge_cost"] == {"completeness": "unavailable", "currency": "USD", "micros": None}


def test_repetitions_run_the_judge_each_time_and_add_their_costs(bench, judge_runs):
    with_judge(bench, COUNTED_PASS, repetitions=3, aggregation="all")
    plan, (fixer,) = bench.run(["zz/fixer"])
    e = bench.evaluation(plan, fixer, "judge")
    assert len(judge_runs) == 3 and len(json.loads(e["_output"])) == 3
    details = e["_result"]["details"]
    assert (details["verdicts"], details["aggregation"]) == (["pass"] * 3, "all")
    assert len(details["identities"]) == 3
    assert e["judge_cost"] == {"completeness": "complete", "currency": "USD", "micros": 4500}


def cost(state: str, micros: int | None = None) -> dict:
    return {"completeness": state, "currency": "USD", "micros": micros}


@pytest.mark.parametrize(
    ("parts", "combined"),
    [
        ([cost("complete", 100), cost("complete", 23)], cost("complete", 123)),
        ([cost("genuine_zero", 0), cost("complete", 5)], cost("complete", 5)),
        ([cost("genuine_zero", 0)] * 2, cost("genuine_zero", 0)),
        ([cost("complete", 100), cost("unavailable")], cost("partial", 100)),
        ([cost("partial", 10), cost("complete", 5)], cost("partial", 15)),
        ([cost("unavailable")] * 3, cost("unavailable")),
        ([cost("not_applicable")], cost("not_applicable")),
    ],
)
def test_combine_costs_is_complete_only_when_every_part_is(parts, combined):
    assert costs.sum_runs(parts) == combined


@pytest.mark.parametrize(
    ("verdicts", "rule", "expected"),
    [
        (["pass", "pass", "fail"], "majority", "pass"),
        (["pass", "fail"], "majority", "fail"),  # a tie fails
        (["pass", "pass", "fail"], "all", "fail"),
        (["fail", "fail", "pass"], "any", "pass"),
        (["fail"], "any", "fail"),
    ],
)
def test_aggregation_rules(verdicts, rule, expected):
    assert judge.aggregate(verdicts, rule) == expected


# -- bugs ----------------------------------------------------------------------------------
def test_a_judge_in_the_read_only_tools_folder_can_run(bench, judge_runs):
    with_judge(bench, COUNTED_PASS, in_tools=True)
    plan, (fixer,) = bench.run(["zz/fixer"])
    e = bench.evaluation(plan, fixer, "judge")
    assert len(judge_runs) == 1
    assert e["verdict"] == "pass", e["_result"]["reason"]
    assert fixer.terminal_class == "resolved"


def test_a_missing_judge_executable_fails_closed(bench):
    with_judge(bench, COUNTED_PASS, in_tools=True)
    spec = bench.config_data["harnesses"]["judge-j"]
    plan = bench.plan(["zz/fixer"])
    os.unlink(spec["argv"][0])
    try:
        (fixer,) = bench.execute(plan)
    except UsageError:
        # Refusing before anything is dispatched would be fine too.
        assert bench.run_refs("intent") == {}
        return
    assert fixer.terminal_class == "harness_failure"
    e = bench.evaluation(plan, fixer, "judge")
    assert (e["verdict"], e["_result"]["quality"]) == ("invalid", "unknown")


def test_the_judges_prompt_reaches_the_judge(bench, judge_runs):
    with_judge(bench, COUNTED_PASS, prompt="You are REVIEWER-7. Judge strictly.")
    plan, (fixer,) = bench.run(["zz/fixer"])
    assert len(judge_runs) == 1
    assert b"REVIEWER-7" in bench.evaluation(plan, fixer, "judge")["_input"]


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(
            b'{"verdict": "pass", "verdict": "fail"}',
            id="duplicate verdict keys",
        ),
        pytest.param(
            b'{"verdict": "pass", "confidence": NaN}',
            id="NaN",
        ),
        pytest.param(b'{"verdict": "pass"}\n{"verdict": "fail"}', id="two documents"),
        pytest.param(b'["pass"]', id="an array"),
    ],
)
def test_strict_json_refuses_ambiguous_answers(answer):
    assert judge.parse_answer(answer, "strict_json")[0] is None


def test_a_judge_harness_gets_its_secrets(bench, monkeypatch):
    monkeypatch.setenv("JUDGE_TOKEN", "token-for-the-judge")
    script = (
        JUDGE_HEAD
        + """envelope
[ "$JUDGE_TOKEN" = token-for-the-judge ] || exit 9
echo '{"verdict": "pass"}'
"""
    )
    spec, harness = bench.judge("j", script)
    harness["secrets"] = ["JUDGE_TOKEN"]
    bench.configure(
        {"tests": bench.command("honest"), "judge": (spec, harness)}, defaults=["judge"]
    )
    plan, (fixer,) = bench.run(["zz/fixer"])
    e = bench.evaluation(plan, fixer, "judge")
    assert e["verdict"] == "pass", e["_result"]["reason"]
    assert b"token-for-the-judge" not in e["_output"]


@pytest.mark.parametrize(
    "path, reason",
    [("../../x", "'..' component"), ("a/.git/config", ".git component")],
)
def test_a_hostile_listing_is_refused_before_the_judge_reads_it(store, path, reason):
    """The final files shown to a judge come from the candidate's listing: a path that could
    not be rebuilt inside a folder is refused, and the judgement is invalid, not a crash."""
    from yyb.errors import UnsafeListing

    blob = store.objects.put("blob", b"print('hi')\n")
    listing = store.objects.put_record(
        {
            "schema_version": "yylo_benchmark_file_listing.v2",
            "entries": [[path, 0o100644, 0]],
            "omitted": [],
            "links": {"files": [blob]},
        }
    )
    manifest = store.objects.put_record(
        {
            "schema_version": "yylo_benchmark_post_execution_manifest.v2",
            "git": {},
            "file_count": 1,
            "added": [path],
            "changed": [],
            "deleted": [],
            "omitted": [],
            "links": {"receipt": blob, "listing": listing, "patch": blob},
        }
    )
    spec = {"prompt": "Judge.", "rubric": "Works?", "evidence": ["final_files"]}
    truth = {"manifest": manifest, "listing": listing}
    with pytest.raises(UnsafeListing, match=reason):
        judge.build_payload(store, spec, truth, b"task")
    harness = {"kind": "command", "argv": ["/bin/false"]}
    outcome = judge.run(store, Invocation(spec, [], harness=harness), truth, b"task", ["m/x"])
    assert outcome.verdict == "invalid" and "cannot be shown to the judge" in outcome.reason


def test_a_judge_envelope_naming_another_model_claims_no_cost(bench):
    """The cost a refused judge envelope claims (a genuine zero from another model) is not
    the judge's cost: it is unavailable."""
    zero = '{"completeness": "genuine_zero", "currency": "USD", "micros": 0}'
    answer = 'echo \'{"verdict": "pass"}\''
    script = JUDGE_HEAD + f"envelope succeeded '{zero}' judges j2\n{answer}\n"
    with_judge(bench, script)
    plan, (fixer,) = bench.run(["zz/fixer"])
    e = bench.evaluation(plan, fixer, "judge")
    assert e["verdict"] == "invalid" and "not judges/j1" in e["_result"]["reason"]
    assert e["judge_cost"] == {"completeness": "unavailable", "currency": "USD", "micros": None}
