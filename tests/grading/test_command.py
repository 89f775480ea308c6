"""Command evaluators: pinned bytes fail closed, the output protocol, a rebuilt workspace."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.conftest import flip_byte
from tests.grading.conftest import ALWAYS_PASS, HONEST, sha256, write
from yyb.grading import command, evaluate
from yyb.store import schema

OUTPUT_V2 = "yylo_benchmark_grader_output.v2"
PASSING = '{"schema_version": "yylo_benchmark_grader_output.v2", "passed": true}'


def writing(content: str, then: str = "") -> str:
    """A grader that writes exactly ``content`` (no single quotes) as its output file."""
    return f"#!/bin/sh\nprintf '%s' '{content}' > \"$YYB_GRADER_OUTPUT\"\n{then}\n"


def assert_invalid(bench, plan, result, why: str, ran: bool) -> dict:
    """The attempt's one required evaluation is invalid (unknown quality), its terminal a
    harness failure; ``ran`` says whether the grader ran (an output or a log was kept)."""
    e = bench.evaluation(plan, result, "tests")
    assert e["verdict"] == "invalid"
    assert e["_result"]["verdict"] == "invalid"
    assert e["_result"]["quality"] == "unknown"
    assert why in e["_result"]["reason"], e["_result"]["reason"]
    if not ran:
        assert "output" not in e["links"] and "log" not in e["links"]
        assert e["_result"]["exit_code"] is None
    assert result.terminal_class == "harness_failure", result.reason
    assert "grading was invalid" in result.reason
    return e


def test_an_honest_grader_resolves_a_fix_and_fails_no_fix(bench):
    spec = bench.command("honest")
    bench.configure({"tests": spec})
    plan, (fixer, idler) = bench.run(["zz/fixer", "zz/idler"])
    assert (fixer.terminal_class, idler.terminal_class) == ("resolved", "grader_failure")
    for result, verdict in ((fixer, "pass"), (idler, "fail")):
        e = bench.evaluation(plan, result, "tests")
        assert e["generation"] == 1 and "previous" not in e["links"]
        assert e["verdict"] == verdict and e["_result"]["quality"] == verdict
        assert e["evaluator"] == {
            "id": "grader-honest",
            "version": "1",
            "bytes_sha256": spec["sha256"],
            "model": None,
        }
        assert e["judge_cost"] is None
        assert e["kind"] == "command" and e["purpose"] == "correctness" and e["required"]
        terminal = bench.terminal(result)
        assert terminal["links"]["evaluations"] == [e["_oid"]]
        assert e["links"]["manifest"] == terminal["links"]["manifest"]
        assert (
            schema.problem(
                {k: v for k, v in e.items() if not k.startswith("_")},
                "yylo_benchmark_evaluation.v2",
            )
            is None
        )
        # The four artifacts: the exact input, the exact output, the typed result, the receipt.
        document = json.loads(e["_input"])
        assert schema.problem(document, command.INPUT) is None
        assert document["generation"] == 1 and document["case_id"] == "calc-add"
        output = json.loads(e["_output"])
        assert output["passed"] is (verdict == "pass")
        assert schema.problem(output, OUTPUT_V2) is None
    assert bench.doctor_errors() == []


@pytest.mark.parametrize("change", ["rewritten to always pass", "one byte flipped", "deleted"])
def test_grader_bytes_changed_after_planning_fail_closed(bench, change):
    spec = bench.command("pinned")
    bench.configure({"tests": spec})
    plan = bench.plan(["zz/idler", "zz/fixer"])
    path = Path(spec["executable"])
    if change == "rewritten to always pass":
        path.write_text(ALWAYS_PASS)
    elif change == "one byte flipped":
        flip_byte(str(path), 2)  # "#!/bin/sh" -> a broken shebang
    else:
        path.unlink()
    idler, fixer = bench.execute(plan)
    why = "missing or unreadable" if change == "deleted" else "does not match its bound sha256"
    for result in (idler, fixer):  # never a pass (the idler) and never a fail (the fixer)
        e = assert_invalid(bench, plan, result, why, ran=False)
        assert e["evaluator"]["bytes_sha256"] == spec["sha256"]
    assert bench.doctor_errors() == []


HIDDEN_TEST = """#!/bin/sh
# HIDDEN-TEST: a check the candidate never sees
[ "$(sh ./calc.sh 10 7)" = 17 ]
"""
# Uses every part of the protocol: argv placeholders, environment, input file, assets.
PROTOCOL = r"""#!/bin/sh
assets="$1"; input="$2"; output="$3"
[ "$assets" = "$YYB_GRADER_ASSETS" ] || exit 11
[ "$input" = "$YYB_GRADER_INPUT" ] || exit 12
[ "$output" = "$YYB_GRADER_OUTPUT" ] || exit 13
grep -q "\"workspace\": \"$PWD\"" "$input" || exit 14
grep -q '"generation": 1' "$input" || exit 15
if sh "$assets/hidden_test.sh"; then passed=true; else passed=false; fi
check='{"name": "hidden", "passed": '$passed'}'
printf '{"schema_version": "%s", "passed": %s, "checks": [%s]}\n' \
  yylo_benchmark_grader_output.v2 "$passed" "$check" > "$output"
"""


@pytest.mark.parametrize("change", [None, "tampered", "deleted"])
def test_assets_are_verified_before_use_and_given_to_the_grader(bench, change):
    asset = write(bench.root / "graders" / "hidden_test.sh", HIDDEN_TEST)
    spec = bench.command(
        "protocol",
        PROTOCOL,
        argv=["{assets}", "{input}", "{output}"],
        assets=[{"path": str(asset), "sha256": sha256(asset)}],
    )
    bench.configure({"tests": spec})
    plan = bench.plan(["zz/fixer", "zz/idler"])
    if change == "tampered":
        asset.write_text("#!/bin/sh\nexit 0\n")
    elif change == "deleted":
        asset.unlink()
    fixer, idler = bench.execute(plan)
    if change is None:
        assert (fixer.terminal_class, idler.terminal_class) == ("resolved", "grader_failure")
        e = bench.evaluation(plan, fixer, "tests")
        assert e["_result"]["details"]["checks"] == [{"name": "hidden", "passed": True}]
        return
    why = "missing or unreadable" if change == "deleted" else "does not match its bound sha256"
    for result in (fixer, idler):
        assert_invalid(bench, plan, result, why, ran=False)


# Writes a passing verdict first, then runs past its timeout.
SLOW = writing(PASSING, "sleep 30")


def test_a_grader_that_times_out_is_invalid_even_after_writing_a_pass(bench):
    bench.configure({"tests": bench.command("slow", SLOW, timeout_ms=1500)})
    plan = bench.plan(["zz/fixer"])
    started = time.monotonic()
    (fixer,) = bench.execute(plan)
    assert time.monotonic() - started < 15
    e = assert_invalid(bench, plan, fixer, "timed out", ran=True)
    assert e["_output"] == PASSING.encode()  # retained exactly, but not trusted
    assert 1500 <= e["wall_ms"] < 10_000


CRASHES = {
    "exits 70 with a traceback": "#!/bin/sh\necho 'Traceback: boom' >&2\nexit 70\n",
    "a broken interpreter line": "#!/nonexistent/interpreter\nexit 0\n",
}


@pytest.mark.parametrize("crash", sorted(CRASHES))
def test_a_grader_that_crashes_without_a_verdict_is_invalid(bench, crash):
    bench.configure({"tests": bench.command("crash", CRASHES[crash])})
    plan, (fixer, idler) = bench.run(["zz/fixer", "zz/idler"])
    for result in (fixer, idler):
        e = assert_invalid(bench, plan, result, "grader", ran=True)
        assert e["_result"]["exit_code"] != 0 and "signal" not in e["_result"]
        assert e["problem"] == "no_verdict"
        if crash == "exits 70 with a traceback":
            assert e["_result"]["exit_code"] == 70
            assert b"Traceback: boom" in e["_log"]


KILLED = {
    "killed by SIGSEGV": ("#!/bin/sh\necho 'about to crash' >&2\nkill -SEGV $$\n", 11),
    "killed mid-write": (
        '#!/bin/sh\nprintf \'{"schema_version": "yylo_benchmark_grader_output.v2", "pa\' '
        '> "$YYB_GRADER_OUTPUT"\nkill -KILL $$\n',
        9,
    ),
    "killed after writing a pass": (writing(PASSING, "kill -KILL $$"), 9),
}


@pytest.mark.parametrize("death", sorted(KILLED))
def test_a_grader_killed_by_a_signal_yyb_did_not_send_fails(bench, death):
    """Whatever its channel holds, an evaluator that did not finish cannot pass: the code
    under test would otherwise win by killing it (a fail, not an exclusion)."""
    script, number = KILLED[death]
    bench.configure({"tests": bench.command("killed", script)})
    plan, (fixer, idler) = bench.run(["zz/fixer", "zz/idler"])
    for result in (fixer, idler):
        e = bench.evaluation(plan, result, "tests")
        assert e["verdict"] == "fail" and "problem" not in e
        assert e["_result"]["signal"] == number
        assert f"killed by signal {number}, which yyb did not send" in e["_result"]["reason"]
        assert result.terminal_class == "grader_failure", result.reason


def test_a_pass_needs_exit_status_zero(bench):
    bench.configure({"tests": bench.command("passexit", writing(PASSING, "exit 3"))})
    plan, (fixer,) = bench.run(["zz/fixer"])
    e = bench.evaluation(plan, fixer, "tests")
    assert e["verdict"] == "fail" and e["_result"]["exit_code"] == 3
    assert "answered pass but exited with status 3" in e["_result"]["reason"]


V2 = f'"schema_version": "{OUTPUT_V2}"'
MALFORMED = {
    "prose": "PASSED: all tests look good",
    "no schema_version": '{"passed": true}',
    "another schema_version": V2.replace("v2", "v1").join(["{", ', "passed": true}']),
    "passed as a string": f'{{{V2}, "passed": "true"}}',
    "passed as a number": f'{{{V2}, "passed": 1}}',
    "an unknown field": f'{{{V2}, "passed": true, "score": 1}}',
    "a duplicate key": f'{{{V2}, "passed": false, "passed": true}}',
    "an array": f"[{PASSING}]",
    "trailing prose": PASSING + " and that is final",
    "a float": f'{{{V2}, "passed": true, "checks": [{{"name": "x", "passed": true, '
    '"detail": 1.5}]}',
    "a bad check": f'{{{V2}, "passed": true, "checks": [{{"name": "x"}}]}}',
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_grader_output_is_invalid_and_retained_exactly(bench, kind):
    bench.configure({"tests": bench.command("malformed", writing(MALFORMED[kind]))})
    plan, (fixer,) = bench.run(["zz/fixer"])
    e = assert_invalid(bench, plan, fixer, "grader output", ran=True)
    assert e["_output"] == MALFORMED[kind].encode()
    assert e["_result"]["exit_code"] == 0


def test_grader_output_over_one_mebibyte_is_invalid(bench):
    # Valid JSON whose trailing whitespace makes it too large to trust.
    script = (
        f"#!/bin/sh\n{{ printf '%s' '{PASSING}'; head -c 1100000 /dev/zero | tr '\\0' ' '; }}"
        ' > "$YYB_GRADER_OUTPUT"\n'
    )
    bench.configure({"tests": bench.command("huge", script)})
    plan, (fixer,) = bench.run(["zz/fixer"])
    assert_invalid(bench, plan, fixer, "larger than 1 MiB", ran=True)


SILENT = {
    "prints nothing": "#!/bin/sh\nexit 0\n",
    "opens its channel and writes nothing": "#!/bin/sh\nprintf '' > \"$YYB_GRADER_OUTPUT\"\n",
    "prints PASSED on stdout only": (
        f"#!/bin/sh\necho PASSED\necho '{PASSING}'\necho '{PASSING}' >&2\nexit 0\n"
    ),
}


@pytest.mark.parametrize("kind", sorted(SILENT))
def test_a_grader_that_writes_no_verdict_is_invalid(bench, kind):
    bench.configure({"tests": bench.command("silent", SILENT[kind])})
    plan, (fixer,) = bench.run(["zz/fixer"])
    e = assert_invalid(bench, plan, fixer, "wrote no verdict to its channel", ran=True)
    assert "output" not in e["links"]
    if kind == "prints PASSED on stdout only":
        assert b"PASSED" in e["_log"]


NOT_A_FILE = {
    "a FIFO": 'mkfifo "$YYB_GRADER_OUTPUT"',
    "a folder": 'mkdir "$YYB_GRADER_OUTPUT"',
    "a symlink to a passing verdict": (
        f"printf '%s' '{PASSING}' > \"$HOME/verdict.json\"\n"
        'ln -s "$HOME/verdict.json" "$YYB_GRADER_OUTPUT"'
    ),
}


@pytest.mark.parametrize("kind", sorted(NOT_A_FILE))
def test_grader_output_that_is_not_a_regular_file_is_invalid_and_never_hangs(bench, kind):
    import threading

    bench.configure({"tests": bench.command("odd", f"#!/bin/sh\n{NOT_A_FILE[kind]}\n")})
    plan = bench.plan(["zz/fixer"])
    results = []
    worker = threading.Thread(target=lambda: results.extend(bench.execute(plan)), daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "reading the grader output blocked"
    (fixer,) = results
    e = assert_invalid(bench, plan, fixer, "", ran=True)
    assert PASSING.encode() not in (e["_output"] or b"")


@pytest.mark.parametrize(
    ("passed", "code", "verdict"), [("false", 3, "fail"), ("false", 0, "fail")]
)
def test_the_exit_status_is_recorded_and_a_fail_stays_a_fail(bench, passed, code, verdict):
    script = writing(f'{{"schema_version": "{OUTPUT_V2}", "passed": {passed}}}', f"exit {code}")
    bench.configure({"tests": bench.command("status", script)})
    plan, (fixer,) = bench.run(["zz/fixer"])
    e = bench.evaluation(plan, fixer, "tests")
    assert (e["verdict"], e["_result"]["exit_code"]) == (verdict, code)
    assert fixer.terminal_class == "grader_failure"


# A candidate that fixes nothing but plants passing verdicts everywhere it can reach.
PLANTER = f"""
V='{PASSING}'
printf '%s\\n' "$V" > grader-output.json
printf '%s\\n' "$V" > PASSED
printf 'PASSED\\n' > verdict.txt
mkdir -p out && printf '%s\\n' "$V" > out/grader-output.json
printf '%s\\n' "$V" > .git/grader-output.json
printf '%s\\n' "$V" > "$(dirname "$ENVELOPE")/grader-output.json"
printf '%s\\n' "$PWD" > where.txt
commit "plant verdicts"
echo PASSED
envelope succeeded
"""
# Reports what it sees (its folder, the files there, whether .git exists), then fails.
SNOOP = r"""#!/bin/sh
seen=$(ls -A | grep -v '^.git$' | tr '\n' ' ')
git=absent; [ -e .git ] && git=present
where=$(cat where.txt 2>/dev/null)
head=$(git log --format=%s -1 2>/dev/null)
changed=$(git status --porcelain 2>/dev/null | tr '\n' ',' | tr -d ' ')
planted=absent; [ -e .git/grader-output.json ] && planted=present
summary="pwd=$PWD where=$where git=$git head=$head planted=$planted changed=$changed seen=$seen"
printf '{"schema_version": "yylo_benchmark_grader_output.v2", "passed": false, "summary": "%s"}\n' \
  "$summary" > "$YYB_GRADER_OUTPUT"
"""


@pytest.mark.parametrize(
    ("grader", "terminal", "verdict"),
    [(HONEST, "grader_failure", "fail"), (SILENT["prints nothing"], "harness_failure", "invalid")],
    ids=["honest grader", "grader that writes nothing"],
)
def test_a_planted_verdict_in_the_workspace_never_passes(bench, grader, terminal, verdict):
    model = bench.behaviour("planter", PLANTER)
    bench.configure({"tests": bench.command("g", grader)})
    plan, (planter,) = bench.run([model])
    assert planter.terminal_class == terminal, planter.reason
    e = bench.evaluation(plan, planter, "tests")
    assert e["verdict"] == verdict
    document = json.loads(e["_input"])
    workspace = document["workspace"].rstrip("/") + "/"
    assert not document["output_file"].startswith(workspace)
    # The planted file really was in the candidate's result.
    post = bench.record(bench.terminal(planter)["links"]["manifest"])
    assert "grader-output.json" in post["added"] and "PASSED" in post["added"]


def test_the_grader_sees_a_fresh_rebuild_of_the_final_workspace(bench):
    model = bench.behaviour("planter", PLANTER)
    bench.configure({"tests": bench.command("snoop", SNOOP)})
    plan, (planter,) = bench.run([model])
    e = bench.evaluation(plan, planter, "tests")
    summary = e["_result"]["details"]["summary"]
    fields = dict(part.split("=", 1) for part in summary.split(" ") if "=" in part)
    # Rebuilt from the listing, not the candidate's folder: the .git is a fresh one at the
    # base (nothing the candidate planted in its own), with the candidate's work uncommitted.
    assert fields["git"] == "present" and fields["head"] == "base"
    assert fields["planted"] == "absent"
    assert "Mcalc.sh" not in fields["changed"] and "??where.txt" in fields["changed"]
    assert fields["pwd"] == json.loads(e["_input"])["workspace"]
    assert fields["where"] and fields["where"] != fields["pwd"]
    for name in ("grader-output.json", "PASSED", "calc.sh", "where.txt"):
        assert name in summary
    assert planter.terminal_class == "grader_failure"


def test_grader_files_inside_a_read_only_tool_path_stay_hidden_from_candidates(bench):
    """The grader's executable and assets are masked even inside a folder the tool policy
    exposes read-only to candidates (a read-only bind must not uncover them)."""
    folder = bench.tools / "graders"
    asset = write(folder / "hidden_test.sh", HIDDEN_TEST)
    spec = bench.command(
        "protocol",
        PROTOCOL,
        folder=folder,
        argv=["{assets}", "{input}", "{output}"],
        assets=[{"path": str(asset), "sha256": sha256(asset)}],
    )
    bench.configure({"tests": spec})
    model = bench.behaviour(
        "peeker",
        f"""
cat "{asset}" > peek-asset.txt 2>&1
cat "{spec["executable"]}" > peek-grader.txt 2>&1
commit peek
envelope succeeded
""",
    )
    plan, (peeker,) = bench.run([model])
    patch = bench.body(bench.terminal(peeker)["links"]["patch"])
    assert b"peek-asset.txt" in patch  # the candidate did run and try
    assert b"HIDDEN-TEST" not in patch
    assert b"YYB_GRADER_ASSETS" not in patch


def test_an_evaluation_needs_the_rebuilt_workspace_only(bench, monkeypatch):
    """Once the attempt is retained, the grader runs from the store: the source repository,
    the attempt folders and the agent are gone and it still grades the same result."""
    import shutil

    from yyb.evidence.attempt import AttemptHandle
    from yyb.grading.invocation import Controls
    from yyb.harness.sandbox import protected_roots

    bench.configure({"tests": bench.command("honest")})
    plan, (fixer,) = bench.run(["zz/fixer"])
    shutil.rmtree(bench.repo)
    shutil.rmtree(bench.tools)
    store = bench.store
    evidence = store.refs.read(f"refs/runs/{plan.oid}/{fixer.attempt}/evidence")
    handle = AttemptHandle.read(store, plan.oid, fixer.attempt, plan.experiment)
    truth = evaluate.Truth.retained(store, handle)
    controls = Controls(protected_roots(store.path, None, plan.experiment))
    _, receipt = evaluate.evaluate(store, handle, "tests", truth, ["zz/fixer"], controls)
    assert (receipt["generation"], receipt["verdict"]) == (2, "pass")
    assert receipt["links"]["evidence"] == evidence
    assert os.path.exists(plan.experiment["evaluators"]["catalog"]["tests"]["executable"])


def test_a_grader_workspace_made_deeper_than_any_recursion_limit_is_removed(bench):
    """Code under test runs in the evaluator's workspace and chooses how deep it goes: the
    evaluation still ends with its verdict, and its folder is removed."""
    deep = (
        "#!/bin/sh\n"
        "i=0; while [ $i -lt 1500 ]; do mkdir d && cd d || break; i=$((i+1)); done\n"
        "echo $i > leaf\n"
        f"printf '%s' '{PASSING}' > \"$YYB_GRADER_OUTPUT\"\n"
    )
    # 1,500 mkdirs are 1,500 processes: on a loaded two-core machine they can take longer than
    # the 5 s the other graders get, and a timed-out grader is (rightly) invalid
    bench.configure({"tests": bench.command("deep", deep, timeout_ms=60_000)})
    plan, (fixer,) = bench.run(["zz/fixer"])
    evaluation = bench.evaluation(plan, fixer, "tests")
    assert evaluation["verdict"] == "pass", evaluation
    assert fixer.terminal_class == "resolved"
    from yyb.harness import scratch

    assert [
        name for name in os.listdir(scratch.run_folder()) if name.startswith("yyb-grade-")
    ] == []
