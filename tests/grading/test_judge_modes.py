"""Judges as evidence: the reference mode with pinned reference material, settings that
reach the judge, a session every judge must name, identities retained, a pinned judge
program; each tried the way it could go wrong."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.grading.conftest import JUDGE_HEAD, write
from tests.grading.test_judge import COUNTED_PASS, judge_runs, with_judge  # noqa: F401
from yyb.errors import UsageError

# Passes only when the payload carries the reference answer under its heading.
REFERENCE_JUDGE = (
    JUDGE_HEAD
    + """envelope
if grep -q "^# Reference$" "$PAYLOAD" && grep -q "EXPECTED-SUM-5" "$PAYLOAD"
then v=pass; else v=fail; fi
echo "{\\"verdict\\": \\"$v\\", \\"reason\\": \\"compared with the reference\\"}"
"""
)
# Passes only when its settings arrive, both by environment and by argument.
SETTINGS_JUDGE = (
    JUDGE_HEAD
    + """envelope
if grep -q '"temperature_milli": 0' "$YYB_JUDGE_SETTINGS_FILE" && [ -f "$5" ] \\
   && grep -q '"style": "terse"' "$5"; then v=pass; else v=fail; fi
echo "{\\"verdict\\": \\"$v\\", \\"reason\\": \\"settings\\"}"
"""
)
NO_SESSION = (
    JUDGE_HEAD
    + """SESSION=""; envelope
echo '{"verdict": "pass", "reason": "no session"}'
"""
)


def refused_plan(bench):
    """``yyb plan`` of the bench's case; the refused configuration must leave no plan."""
    out = bench.root / "never.json"
    done = bench.yyb(
        "plan", "--task", str(bench.task_path), "--models", "zz/fixer", "--output", str(out)
    )
    assert not out.exists()
    return done


def reference(bench, text: str = "EXPECTED-SUM-5\n") -> dict:
    path = write(bench.root / "hidden" / "reference.txt", text)
    return {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def test_a_reference_judge_sees_the_pinned_reference_and_the_receipt_names_it(bench):
    asset = reference(bench)
    with_judge(bench, REFERENCE_JUDGE, mode="reference", assets=[asset])
    # The candidate looks for the reference answer: it is hidden from it.
    model = bench.behaviour(
        "peeker",
        f"""cat '{asset["path"]}' >/dev/null 2>&1 && echo "SAW THE REFERENCE"
sed -i 's/\\$1 - \\$2/$1 + $2/' calc.sh
commit "fix add"
envelope succeeded
""",
    )
    plan, (result,) = bench.run([model])
    e = bench.evaluation(plan, result, "judge")
    assert e["verdict"] == "pass", e["_result"]["reason"]
    assert e["_result"]["details"]["references"] == [asset]
    assert b"EXPECTED-SUM-5" in e["_input"]
    assert b"SAW THE REFERENCE" not in bench.body(bench.terminal(result)["links"]["stdout"])


def test_reference_material_changed_after_planning_fails_closed(bench, judge_runs):  # noqa: F811
    asset = reference(bench)
    with_judge(bench, REFERENCE_JUDGE, mode="reference", assets=[asset])
    plan = bench.plan(["zz/fixer"])
    write(bench.root / "hidden" / "reference.txt", "EXPECTED-SUM-6\n")
    (result,) = bench.execute(plan)
    e = bench.evaluation(plan, result, "judge")
    assert e["verdict"] == "invalid" and "does not match its bound sha256" in e["_result"]["reason"]
    assert judge_runs == []


def test_a_reference_judge_without_reference_material_is_refused(bench):
    for fields, message in (
        ({"mode": "reference"}, "needs its reference material"),
        ({"assets": [reference(bench)]}, "set mode to reference"),
    ):
        with_judge(bench, REFERENCE_JUDGE, **fields)
        done = refused_plan(bench)
        assert done.exit_code == 2 and message in done.stderr, done.stderr


def test_settings_reach_the_judge(bench):
    spec, harness = bench.judge(
        "s", SETTINGS_JUDGE, settings={"temperature_milli": 0, "style": "terse"}
    )
    harness["argv"].append("{settings_file}")
    bench.configure(
        {"tests": bench.command("honest"), "judge": (spec, harness)}, defaults=["judge"]
    )
    plan, (result,) = bench.run(["zz/fixer"])
    e = bench.evaluation(plan, result, "judge")
    assert e["verdict"] == "pass", e["_output"]


def test_a_judge_that_names_no_session_is_invalid(bench):
    with_judge(bench, NO_SESSION)
    plan, (result,) = bench.run(["zz/fixer"])
    e = bench.evaluation(plan, result, "judge")
    assert e["verdict"] == "invalid" and "session" in e["_result"]["reason"]
    assert result.terminal_class != "resolved"
    (answer,) = json.loads(e["_output"])
    assert answer["identity"]["observed"] == "judges/j1" and not answer["identity"]["session_id"]


def pinned_judge(bench, script: str):
    """A judge program pinned by sha256 (outside every tool folder), run as {judge}."""
    path = write(bench.root / "judges" / "pinned.sh", script, executable=True)
    spec, harness = bench.judge(
        "p", "", executable=str(path), sha256=hashlib.sha256(path.read_bytes()).hexdigest()
    )
    harness["argv"] = ["{judge}", "{model}", "{workspace}", "{envelope}", "{prompt_file}"]
    bench.configure(
        {"tests": bench.command("honest"), "judge": (spec, harness)}, defaults=["judge"]
    )
    return path


def test_a_pinned_judge_program_runs_from_its_verified_copy(bench):
    pinned_judge(bench, REFERENCE_JUDGE.replace("EXPECTED-SUM-5", "# Task"))
    plan, (result,) = bench.run(["zz/fixer"])
    e = bench.evaluation(plan, result, "judge")
    assert e["verdict"] in ("pass", "fail") and e["_result"].get("problem") is None, e["_output"]


def test_a_judge_program_changed_after_planning_fails_closed(bench, judge_runs):  # noqa: F811
    path = pinned_judge(bench, REFERENCE_JUDGE)
    plan = bench.plan(["zz/fixer"])
    path.write_text(path.read_text() + "\n# changed\n")
    # A run refuses before dispatching any candidate.
    with pytest.raises(UsageError, match="pinned executable"):
        bench.execute(plan)
    assert judge_runs == [] and not bench.run_refs("intent")
    # Restored, the run goes; changed again, a rejudge appends an invalid generation.
    path.write_text(REFERENCE_JUDGE)
    (result,) = bench.execute(plan)
    assert len(judge_runs) == 1
    path.write_text(path.read_text() + "\n# changed again\n")
    bench.reevaluate(plan, "judge", "rejudge")
    e = bench.evaluation(plan, result, "judge")
    assert (e["generation"], e["verdict"], e["problem"]) == (2, "invalid", "not_started")
    assert "pinned executable" in e["_result"]["reason"] and len(judge_runs) == 1


# Takes its time, so that its controller can be killed while it judges.
SLOW_JUDGE = (
    JUDGE_HEAD
    + """sleep 30; envelope
echo '{"verdict": "pass", "reason": "slow"}'
"""
)


def test_a_judge_cut_short_by_a_crash_is_not_dispatched_again(bench, judge_runs):  # noqa: F811
    import os
    import signal
    import subprocess
    import sys
    import time

    from yyb.evidence import names

    with_judge(bench, SLOW_JUDGE)
    plan = bench.plan(["zz/fixer"])
    (attempt,) = plan.attempt_oids
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "yyb",
            "--store",
            bench.store_path,
            "--config",
            str(bench.config_path),
            "run",
            "--plan",
            bench.plan_file(plan),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    intent = os.path.join(bench.store_path, names.judge_intent(plan.oid, attempt, "judge"))
    deadline = time.monotonic() + 60
    while not os.path.exists(intent):
        assert time.monotonic() < deadline and run.poll() is None, "the judge never started"
        time.sleep(0.05)
    time.sleep(0.5)  # the judge is running now
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    done = bench.yyb("recover", "--plan", bench.plan_file(plan))
    assert done.exit_code == 0, done.stderr
    assert judge_runs == []  # recovery graded, but never dispatched the judge again
    e = bench.evaluation(plan, type("R", (), {"attempt": attempt, "ordinal": 0})(), "judge")
    assert (e["verdict"], e["problem"]) == ("invalid", "interrupted")
    assert "not dispatched again" in e["_result"]["reason"]


# A pairwise stand-in: the side whose patch makes add add is better; neither or both: a tie.
PAIRWISE_JUDGE = (
    JUDGE_HEAD
    + """envelope
python3 - "$PAYLOAD" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
a, _, b = text.partition("# Candidate B")
fixed = lambda part: "+ $2" in part.split("# Candidate A", 1)[-1]
wins = {side for side, part in (("A", a), ("B", b)) if fixed(part)}
print(json.dumps({"winner": wins.pop() if len(wins) == 1 else "tie", "reason": "compared"}))
PY
"""
)


def pairwise_profile(bench, baseline: str = "zz/idler", **fields) -> None:
    judged = bench.judge(
        "pw",
        PAIRWISE_JUDGE,
        mode="pairwise",
        baseline=baseline,
        required=False,
        repetitions=3,
        evidence=["patch"],
        **fields,
    )
    bench.configure({"tests": bench.command("honest"), "pairwise": judged}, defaults=["pairwise"])


def test_pairwise_judges_each_attempt_against_its_baseline_partner(bench):
    from yyb.grading import pairwise

    pairwise_profile(bench)
    plan, results = bench.run(["zz/idler", "zz/fixer"])  # the baseline's attempts run first
    by_model = {r.model: r for r in results}
    fixer = bench.evaluation(plan, by_model["zz/fixer"], "pairwise")
    assert fixer["verdict"] == "pass", fixer["_result"]["reason"]
    pair = fixer["_result"]["details"]["pairwise"]
    assert (pair["baseline"], pair["partner"], pair["outcome"]) == (
        "zz/idler",
        by_model["zz/idler"].attempt,
        "win",
    )
    # Each repetition shows both orders, the first drawn from a seed anyone can derive again.
    seed = "/".join([plan.oid, by_model["zz/fixer"].attempt, "pairwise", "1"])
    shown = [(r["seed"], tuple(o["side"] for o in r["orders"])) for r in pair["repetitions"]]
    assert shown == [pairwise.orders(seed, n) for n in range(3)]
    assert all(o["result"] == "win" for r in pair["repetitions"] for o in r["orders"])
    # The stand-in judge reads the work, not the position: consistent in every repetition.
    assert (pair["half_points"], pair["of_half_points"], pair["consistent_repetitions"]) == (
        12,
        12,
        3,
    )
    assert b"# Candidate A" in fixer["_input"] and b"fixer" not in fixer["_input"]
    baseline = bench.evaluation(plan, by_model["zz/idler"], "pairwise")
    assert (
        baseline["verdict"] == "invalid" and "not judged against" in baseline["_result"]["reason"]
    )
    # Not required: the comparison decides nothing about either attempt's resolution.
    assert by_model["zz/fixer"].terminal_class == "resolved"
    # The report counts it beside the paired comparison, in the text and in the layer.
    text = bench.yyb("report", "--plan", bench.plan_file(plan))
    assert "zz/fixer vs zz/idler (pairwise): 1 win, 0 tie, 0 loss, 0 invalid" in text.stdout
    value = json.loads(
        bench.yyb(
            "report", "--plan", bench.plan_file(plan), "--format", "json", "--no-layer"
        ).stdout
    )
    import importlib.util

    if importlib.util.find_spec("matplotlib") is not None:  # the html format needs it
        plan_file = bench.plan_file(plan)
        html = bench.yyb("report", "--plan", plan_file, "--format", "html", "--no-layer")
        assert html.exit_code == 0 and "<h2>Pairwise judging</h2>" in html.stdout
    (row,) = value["pairwise"]
    assert (row["wins"], row["win_rate"]["ppm"], row["interval"]["method"]) == (
        1,
        1_000_000,
        "wilson",
    )
    assert (row["score"]["ppm"], row["position_consistency"]["rate"]["ppm"]) == (10**6, 10**6)


def test_a_partner_not_yet_concluded_is_judged_on_rejudge(bench):
    pairwise_profile(bench)
    plan, results = bench.run(["zz/fixer", "zz/idler"])  # the baseline's attempt runs after
    fixer = next(r for r in results if r.model == "zz/fixer")
    first = bench.evaluation(plan, fixer, "pairwise")
    assert first["verdict"] == "invalid" and "no terminal yet" in first["_result"]["reason"]
    bench.reevaluate(plan, "pairwise", "rejudge")
    second = bench.evaluation(plan, fixer, "pairwise")
    assert (second["generation"], second["verdict"]) == (2, "pass")


def test_a_partner_that_failed_as_a_harness_gives_no_pair(bench):
    pairwise_profile(bench, baseline="zz/mute")
    mute = bench.behaviour("mute", "echo nothing to say\n")  # writes no envelope
    plan, results = bench.run([mute, "zz/fixer"])
    fixer = next(r for r in results if r.model == "zz/fixer")
    e = bench.evaluation(plan, fixer, "pairwise")
    assert e["verdict"] == "invalid" and "ended harness_failure" in e["_result"]["reason"]


def test_a_pairwise_profile_must_be_complete(bench):
    for fields, message in (
        ({"mode": "pairwise", "required": False}, "pairwise needs the baseline model"),
        ({"mode": "pairwise", "baseline": "zz/idler"}, "pairwise needs false"),
        (
            {
                "mode": "pairwise",
                "baseline": "zz/idler",
                "required": False,
                "parsing": "verdict_line",
            },
            "pairwise needs strict_json",
        ),
        ({"baseline": "zz/idler"}, "a baseline is for mode pairwise"),
    ):
        with_judge(bench, PAIRWISE_JUDGE, **fields)
        done = refused_plan(bench)
        assert done.exit_code == 2 and message in done.stderr, (fields, done.stderr)


@pytest.mark.parametrize(
    ("rule", "expected"), [("majority", "pass"), ("all", "fail"), ("any", "pass")]
)
def test_mixed_repetitions_aggregate_by_their_rule(bench, monkeypatch, rule, expected):
    """Three real judge runs whose answers come out pass, fail, pass (the stand-in judge
    always passes; the third-party answer is replaced after the run, as a judge that changes
    its mind would give it)."""
    from yyb.grading import judge

    answers = iter(["pass", "fail", "pass"])
    real = judge._judge_once

    def changing(*args):
        answer = real(*args)
        answer["verdict"] = next(answers)
        return answer

    monkeypatch.setattr(judge, "_judge_once", changing)
    with_judge(
        bench, REFERENCE_JUDGE.replace("EXPECTED-SUM-5", "# Task"), repetitions=3, aggregation=rule
    )
    plan, (result,) = bench.run(["zz/fixer"])
    e = bench.evaluation(plan, result, "judge")
    assert e["_result"]["details"]["verdicts"] == ["pass", "fail", "pass"]
    assert e["verdict"] == expected


def test_a_candidate_that_names_the_baseline_in_its_work_is_not_judged(bench, judge_runs):  # noqa: F811
    """Blinding holds for both sides: a candidate whose patch names its rival (the baseline's
    model) would let the judge tell the two apart; the judge is not run."""
    pairwise_profile(bench)
    model = bench.behaviour(
        "namer",
        """sed -i 's/\\$1 - \\$2/$1 + $2/' calc.sh
echo "# better than idler" >> calc.sh
commit "fix add, and say so"
envelope succeeded
""",
    )
    plan, results = bench.run(["zz/idler", model])
    namer = next(r for r in results if r.model == model)
    e = bench.evaluation(plan, namer, "pairwise")
    assert e["verdict"] == "invalid" and "privacy failure" in e["_result"]["reason"]
    assert "'idler'" in e["_result"]["reason"]
    assert judge_runs == []  # no repetition was dispatched
