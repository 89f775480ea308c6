"""Stand-in candidates end in the right terminal with the right evidence, leaving nothing running.

Each candidate is a small /bin/sh behaviour run through the command-harness protocol under the
real sandbox and supervisor (``yyb.attempts.run.prepare`` + ``run_plan``).
"""

from __future__ import annotations

import functools
import glob
import os
import stat
import tempfile
import threading
import time

import pytest

from tests.attempts.conftest import wait_for
from yyb.harness import supervise
from yyb.store.objects.format import hash_object

HANGER = """
trap '' TERM INT HUP
echo "hanger started"
sh -c "trap '' TERM; sleep $MARK" &
setsid sh -c "trap '' TERM; sleep $MARK" &
nohup sh -c "trap '' TERM; sleep $MARK" >/dev/null 2>&1 &
( setsid sh -c "trap '' TERM; sleep $MARK & sleep $MARK" & ) &
sleep $MARK
"""


@pytest.fixture
def short_grace(monkeypatch):
    """The supervisor's TERM grace, made short so that hang tests stay fast."""
    monkeypatch.setattr(supervise, "GRACE_MS", 300)
    original = supervise.run

    @functools.wraps(original)
    def run(*args, **kwargs):
        kwargs.setdefault("grace_ms", 300)
        return original(*args, **kwargs)

    monkeypatch.setattr(supervise, "run", run)


def evaluation_of(bench, terminal: dict) -> tuple[dict, dict]:
    """(evaluation receipt, typed result) of the attempt's one generation-1 evaluation."""
    [oid] = terminal["links"]["evaluations"]
    receipt = bench.record(oid)
    return receipt, bench.record(receipt["links"]["result"])


def evidence_of(bench, plan, result) -> dict:
    from yyb.evidence.names import attempt as attempt_ref

    oid = bench.store.refs.read(attempt_ref(plan.oid, result.attempt, "evidence"))
    return bench.record(oid)


def test_fixer_resolves_with_its_patch_and_manifest(bench):
    plan, [result] = bench.run(["stand/fixer"])
    assert (result.terminal_class, result.status) == ("resolved", "ran")
    terminal = bench.terminal(result)
    assert terminal["exit"] == {
        "code": 0,
        "signal": None,
        "timed_out": False,
        "cleanup_confirmed": True,
    }
    assert terminal["identity"] == {
        "requested": "stand/fixer",
        "resolved": "stand/fixer",
        "observed": "stand/fixer",
    }
    assert terminal["candidate_cost"] == {
        "completeness": "genuine_zero",
        "currency": "USD",
        "micros": 0,
    }
    stdout = bench.linked(result, "stdout")
    assert stdout.startswith(b"fixer read the prompt: calc.sh is supposed to print")
    assert b"committed the fix" in stdout
    assert terminal["outputs"]["stdout"] == {
        "bytes": len(stdout),
        "retained": len(stdout),
        "truncated": False,
    }
    patch = bench.linked(result, "patch").decode()
    assert "--- a/calc.sh\n+++ b/calc.sh\n" in patch
    assert "-echo $(( $1 - $2 ))\n+echo $(( $1 + $2 ))\n" in patch
    assert "--- /dev/null\n+++ b/NOTES.md\n" in patch and "+notes of the fixer\n" in patch
    assert "--- a/docs/old.md\n+++ /dev/null\n" in patch
    post = bench.record(terminal["links"]["manifest"])
    assert (post["added"], post["changed"], post["deleted"]) == (
        ["NOTES.md"],
        ["calc.sh"],
        ["docs/old.md"],
    )
    assert post["git"]["readable"] is True and post["git"]["status"] == []
    assert post["git"]["head"]["ref"] == "refs/heads/main"
    listing = bench.record(post["links"]["listing"])
    paths = [entry[0] for entry in listing["entries"]]
    assert paths == ["NOTES.md", "README.md", "calc.sh", "test_calc.sh"]
    calc = dict((p, listing["links"]["files"][i]) for p, _, i in listing["entries"])["calc.sh"]
    assert b"$1 + $2" in bench.body(calc)
    evaluation, result_record = evaluation_of(bench, terminal)
    assert (evaluation["profile"], evaluation["generation"]) == ("tests", 1)
    assert evaluation["verdict"] == "pass" and result_record["exit_code"] == 0
    assert result_record["reason"] == "ok: calc.sh 2 3 = 5"
    envelope = bench.record(terminal["links"]["envelope"])
    assert envelope["started_ms"] == terminal["runtime"]["started_ms"] > 0  # launcher timing
    assert envelope["ended_ms"] == terminal["runtime"]["ended_ms"]
    evidence = evidence_of(bench, plan, result)
    assert evidence["class"] == "resolved"
    assert evidence["links"]["terminal"] == result.terminal
    assert evidence["links"]["patch"] == terminal["links"]["patch"]
    assert bench.doctor_errors() == []


def test_idler_fails_grading_with_an_empty_patch(bench):
    _, [result] = bench.run(["stand/idler"])
    assert result.terminal_class == "grader_failure"
    terminal = bench.terminal(result)
    assert bench.linked(result, "stdout") == b"looked around, changed nothing\n"
    assert bench.linked(result, "patch") == b""
    post = bench.record(terminal["links"]["manifest"])
    assert (post["added"], post["changed"], post["deleted"]) == ([], [], [])
    evaluation, result_record = evaluation_of(bench, terminal)
    assert evaluation["verdict"] == "fail"
    assert result_record["reason"] == "FAIL: calc.sh 2 3 printed -1, expected 5"
    assert bench.doctor_errors() == []


def test_parallel_attempts_each_end_in_their_own_terminal(bench):
    _, results = bench.run(["stand/fixer", "stand/idler"], attempts=2, jobs=2)
    assert [(r.model, r.terminal_class, r.status) for r in results] == [
        ("stand/fixer", "resolved", "ran"),
        ("stand/fixer", "resolved", "ran"),
        ("stand/idler", "grader_failure", "ran"),
        ("stand/idler", "grader_failure", "ran"),
    ]
    assert len({r.terminal for r in results}) == 4
    assert bench.doctor_errors() == []


def test_crasher_killed_by_a_signal_is_a_model_failure(bench):
    model = bench.behaviour(
        "crasher",
        """
envelope failed
echo "about to crash" >&2
kill -SEGV $$
echo "never printed"
""",
    )
    _, [result] = bench.run([model])
    assert result.terminal_class == "model_failure"
    terminal = bench.terminal(result)
    # Killed by SEGV: either the signal itself or the shell convention 128 + 11.
    assert terminal["exit"]["signal"] == 11 or terminal["exit"]["code"] == 139
    assert terminal["exit"]["cleanup_confirmed"] is True
    assert bench.linked(result, "stderr") == b"about to crash\n"
    assert bench.linked(result, "stdout") == b""
    assert "evaluations" not in terminal["links"]  # a failed candidate is not graded
    assert bench.doctor_errors() == []


def test_crasher_without_an_envelope_is_a_harness_failure(bench):
    model = bench.behaviour("crasher", 'echo "giving up" >&2\nexit 3\n')
    _, [result] = bench.run([model])
    assert result.terminal_class == "harness_failure"
    assert "no execution envelope" in result.reason
    terminal = bench.terminal(result)
    assert terminal["exit"]["code"] == 3
    assert "envelope" not in terminal["links"] and "envelope_raw" not in terminal["links"]
    assert terminal["candidate_cost"] == {
        "completeness": "unavailable",
        "currency": "USD",
        "micros": None,
    }
    assert bench.linked(result, "stderr") == b"giving up\n"


def test_failed_envelope_with_exit_0_is_a_model_failure(bench):
    model = bench.behaviour("quitter", "envelope failed\n")
    _, [result] = bench.run([model])
    assert result.terminal_class == "model_failure"
    assert "envelope status failed" in result.reason


def test_hanger_ignoring_term_with_grandchildren_times_out_and_leaves_nothing(bench, short_grace):
    bench.configure(timeout_ms=1500)
    model = bench.behaviour("hanger", HANGER)
    seen: list = []

    def watch():  # record the candidate's processes while they run
        def many():
            found = bench.alive()
            return found if len(found) >= 6 else []

        seen.extend(wait_for(many, timeout=5))

    watcher = threading.Thread(target=watch)
    watcher.start()
    start = time.monotonic()
    _, [result] = bench.run([model])
    elapsed = time.monotonic() - start
    watcher.join()
    assert bench.alive() == []  # checked before anything else: nothing outlived the attempt
    assert len(seen) >= 6, seen  # the grandchildren (one of them in its own session) did run
    assert result.terminal_class == "timeout"
    terminal = bench.terminal(result)
    assert terminal["exit"]["timed_out"] is True
    assert terminal["exit"]["cleanup_confirmed"] is True
    assert terminal["exit"]["code"] != 0
    assert 1500 <= terminal["runtime"]["wall_ms"] < 1500 + 5000
    assert elapsed < 10
    assert bench.linked(result, "stdout") == b"hanger started\n"
    assert "evaluations" not in terminal["links"]
    assert bench.doctor_errors() == []


def test_flooder_output_is_bounded_and_truncation_recorded(bench):
    model = bench.behaviour(
        "flooder",
        """
head -c 3000000 /dev/zero | tr '\\0' x
head -c 1500000 /dev/zero | tr '\\0' y >&2
envelope succeeded
""",
    )
    _, [result] = bench.run([model])
    assert result.terminal_class == "grader_failure"  # flooding is not failing; it fixed nothing
    terminal = bench.terminal(result)
    limit = supervise.OUTPUT_LIMIT
    assert terminal["outputs"]["stdout"] == {
        "bytes": 3_000_000,
        "retained": limit,
        "truncated": True,
    }
    assert terminal["outputs"]["stderr"] == {
        "bytes": 1_500_000,
        "retained": limit,
        "truncated": True,
    }
    assert bench.linked(result, "stdout") == b"x" * limit
    assert bench.linked(result, "stderr") == b"y" * limit
    assert terminal["links"]["stdout"] == hash_object("blob", b"x" * limit)
    assert bench.doctor_errors() == []


def test_fake_envelope_in_the_workspace_is_a_harness_failure(bench):
    model = bench.behaviour(
        "faker",
        """
fake='{"schema_version": "juno_execution_envelope.v1", "provider": "stand", "model": "faker",
 "status": "succeeded", "cost": {"completeness": "genuine_zero", "currency": "USD", "micros": 0},
 "started_ms": 0, "ended_ms": 0, "elapsed_ms": 0}'
mkdir -p .juno_task
printf '%s\\n' "$fake" > envelope.json
printf '%s\\n' "$fake" > .juno_task/envelope.json
printf '%s\\n' "$fake" > juno_execution_envelope.json
sed -i 's/\\$1 - \\$2/$1 + $2/' calc.sh
commit_all "fix and fake"
echo "wrote fake envelopes"
""",
    )
    _, [result] = bench.run([model])
    assert result.terminal_class == "harness_failure"
    assert result.reason == "the harness wrote no execution envelope"
    terminal = bench.terminal(result)
    assert "envelope" not in terminal["links"]
    assert "evaluations" not in terminal["links"]  # a fix without a real envelope is not graded
    post = bench.record(terminal["links"]["manifest"])
    assert post["added"] == [
        ".juno_task/envelope.json",
        "envelope.json",
        "juno_execution_envelope.json",
    ]


@pytest.mark.parametrize(
    "body, needle",
    [
        ("echo 'not json at all' > \"$ENVELOPE\"", "malformed"),
        ('printf \'{"schema_version": "juno_execution_envelope.v1"}\' > "$ENVELOPE"', "invalid"),
        ('printf \'{"schema_version": "other.v1"}\' > "$ENVELOPE"', "not juno_execution"),
        ("envelope succeeded stand someone-else", "observed stand/someone-else"),
        ("envelope succeeded other-vendor", "observed other-vendor/"),
    ],
)
def test_unusable_envelope_is_a_harness_failure(bench, body, needle):
    model = bench.behaviour(
        "enveloper", f"sed -i 's/\\$1 - \\$2/$1 + $2/' calc.sh\ncommit_all\n{body}\n"
    )
    _, [result] = bench.run([model])
    assert result.terminal_class == "harness_failure"
    assert needle in result.reason
    assert "evaluations" not in bench.terminal(result)["links"]
    assert bench.doctor_errors() == []


def test_malformed_envelope_bytes_are_retained(bench):
    model = bench.behaviour("garbler", "echo 'GARBLED ENVELOPE' > \"$ENVELOPE\"\n")
    _, [result] = bench.run([model])
    assert result.terminal_class == "harness_failure"
    assert bench.linked(result, "envelope_raw") == b"GARBLED ENVELOPE\n"


def test_envelope_identity_is_normalized_before_comparison(bench):
    model = bench.behaviour(
        "shouter",
        """
sed -i 's/\\$1 - \\$2/$1 + $2/' calc.sh
commit_all
envelope succeeded " STAND " "stand/SHOUTER"
""",
    )
    _, [result] = bench.run([model])
    assert result.terminal_class == "resolved", result.reason
    assert bench.terminal(result)["identity"]["observed"] == "stand/shouter"


# --- hostile workspaces must still end in a terminal ------------------------------------


def _ends_in_a_terminal(bench, model: str, expected: str) -> None:
    plan = bench.plan([model])
    from yyb.attempts import run as attempts_run

    results = attempts_run.run_plan(bench.context(plan))
    assert [r.terminal_class for r in results] == [expected]
    assert bench.doctor_errors() == []


def test_fixer_that_leaves_its_change_uncommitted_resolves(bench):
    model = bench.behaviour(
        "editor",
        """
sed -i 's/\\$1 - \\$2/$1 + $2/' calc.sh
envelope succeeded
""",
    )
    _ends_in_a_terminal(bench, model, "resolved")


def test_workspace_file_with_a_non_utf8_name_still_ends_in_a_terminal(bench):
    model = bench.behaviour(
        "oddname",
        """
touch "$(printf 'odd\\377name')"
commit_all
envelope succeeded
""",
    )
    _ends_in_a_terminal(bench, model, "grader_failure")


def test_corrupt_git_index_still_ends_in_a_terminal(bench):
    model = bench.behaviour(
        "scrambler",
        """
echo garbage > .git/index
envelope succeeded
""",
    )
    _ends_in_a_terminal(bench, model, "grader_failure")


def test_envelope_path_made_a_directory_is_a_harness_failure(bench):
    model = bench.behaviour("dirmaker", 'mkdir "$ENVELOPE"\n')
    plan = bench.plan([model])
    from yyb.attempts import run as attempts_run

    results = attempts_run.run_plan(bench.context(plan))
    assert [r.terminal_class for r in results] == ["harness_failure"]


def _attempt_folders() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "yyb-run-*", "yyb-attempt-*")))


def _unblock_fifos(until: threading.Thread, seconds: float, roots: set[str]) -> None:
    """Open (and close) for writing every FIFO under ``roots``, until ``until`` ends."""
    deadline = time.monotonic() + seconds
    while until.is_alive() and time.monotonic() < deadline:
        for root in roots:
            for folder, _, files in os.walk(root):
                for name in files:
                    path = os.path.join(folder, name)
                    try:
                        if stat.S_ISFIFO(os.lstat(path).st_mode):
                            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                    except OSError:
                        continue
        time.sleep(0.05)


@pytest.mark.parametrize(
    "script",
    [
        'mkfifo "$ENVELOPE"\n',
        "rm -f .git/index\nmkfifo .git/index\nenvelope succeeded\n",
    ],
    ids=["envelope", "git-index"],
)
def test_fifo_planted_by_the_candidate_does_not_hang_the_run(bench, script):
    from yyb.attempts import run as attempts_run

    model = bench.behaviour("fifo", script)
    plan = bench.plan([model])
    ctx = bench.context(plan)
    outcome: dict = {}

    def run():
        try:
            outcome["results"] = attempts_run.run_plan(ctx)
        except Exception as exc:  # noqa: BLE001 - reported below
            outcome["error"] = exc

    before = _attempt_folders()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=3)
    finished_in_time = not worker.is_alive()
    ours = _attempt_folders() - before
    _unblock_fifos(worker, 10, ours)  # free the worker either way, so nothing stays blocked
    worker.join(timeout=5)
    assert finished_in_time, "yyb run was still blocked 3 s after the candidate exited"
    assert "error" not in outcome, outcome.get("error")
    # A FIFO envelope is no envelope; a FIFO index only makes the Git state unreadable (the
    # worktree, unchanged here, is still the result and is graded).
    expected = "harness_failure" if "ENVELOPE" in script else "grader_failure"
    assert [r.terminal_class for r in outcome["results"]] == [expected]
