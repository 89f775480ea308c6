"""Many cases on one command line (docs/cli.md, "Many cases"): ``--task`` after a shell glob,
a quoted glob, ``--tasks-from``; and what is refused."""

from __future__ import annotations

import json

import pytest

from tests.calculator import task
from yyb.cli.tasks import spread, task_files
from yyb.errors import UsageError


def test_spread_gives_each_word_after_task_its_own_option():
    assert spread(["--task", "a", "b", "c", "--models", "m"]) == [
        *("--task", "a", "--task", "b", "--task", "c"),
        *("--models", "m"),
    ]
    assert spread(["--models", "m", "--task", "a"]) == ["--models", "m", "--task", "a"]
    assert spread(["--task", "a", "--", "b"]) == ["--task", "a", "--", "b"]
    assert spread(["--task=a", "b"]) == ["--task=a", "b"]  # only the spaced form takes more
    assert spread(["--task"]) == ["--task"]


def test_globs_lists_and_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("b.md", "a.md", "c.txt"):
        (tmp_path / name).write_text("x")
    (tmp_path / "list").write_text("# the cases\nc.txt\n\na.md\n")
    assert task_files(("*.md",), None) == ["a.md", "b.md"]
    assert task_files(("b.md",), "list") == ["b.md", "c.txt", "a.md"]
    assert task_files(("a.md", "*.md"), None) == ["a.md", "b.md"]  # each once
    with pytest.raises(UsageError, match=r"--task \*\.json: the pattern matches no file"):
        task_files(("*.json",), None)
    with pytest.raises(UsageError, match="--tasks-from nothing: No such file"):
        task_files((), "nothing")


def cases(bench, count: int) -> list[str]:
    """``count`` cases of the bench's calculator, each with its own id."""
    paths = []
    for n in range(count):
        path = task(bench.root / "cases" / f"c{n}.md", bench.base)
        path.write_text(path.read_text().replace("id: calc-add", f"id: calc-add-{n}"))
        paths.append(str(path))
    return paths


@pytest.mark.parametrize("how", ["spread", "glob", "list"])
def test_plan_takes_many_cases_as_a_shell_gives_them(bench, how):
    paths = cases(bench, 3)
    (bench.root / "cases.txt").write_text("\n".join(paths) + "\n")
    given = {
        "spread": ["--task", *paths],
        "glob": ["--task", str(bench.root / "cases" / "*.md")],
        "list": ["--tasks-from", str(bench.root / "cases.txt")],
    }[how]
    out = str(bench.root / "plan.json")
    done = bench.yyb("plan", *given, "--models", "stand/fixer", "--output", out, "--json")
    assert done.exit_code == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["attempt_count"] == 3, plan


def test_validate_gold_takes_a_spread_task_list(bench):
    paths = cases(bench, 2)
    done = bench.yyb("validate", "--task", *paths)
    assert done.exit_code == 2 and "give one --task" in done.stderr


def test_a_pattern_that_matches_nothing_is_one_line(bench):
    done = bench.yyb(
        "plan", "--task", str(bench.root / "none" / "*.md"), "--models", "stand/fixer",
        "--output", str(bench.root / "p.json"),
    )  # fmt: skip
    assert done.exit_code == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "matches no file" in done.stderr


def test_run_tells_plain_progress_off_a_terminal_and_json_on_request(bench):
    import json as jsonlib

    plan_file = bench.plan_file(["stand/fixer", "stand/idler"])
    done = bench.yyb("run", "--plan", plan_file, "--progress", "plain")
    assert done.exit_code == 0, done.stderr
    lines = done.stderr.splitlines()
    assert sum(" started #" in line for line in lines) == 2
    assert any(line.startswith("[2/2] #") and "resolved 1" in line for line in lines), lines
    assert "dispatch_count: 2" in done.stdout
    again = bench.yyb("run", "--plan", plan_file, "--json", "--progress", "none")
    events = [jsonlib.loads(line) for line in again.stdout.splitlines()]
    assert [e["event"] for e in events] == ["summary"]  # reused: nothing started or finished
    assert events[-1]["dispatch_count"] == 0
    assert [r["status"] for r in events[-1]["results"]] == ["reused", "reused"]
    assert again.stderr == ""


def test_run_under_a_terminal_redraws_its_status_and_none_says_nothing(bench):
    """Under ``script`` (a pseudo-terminal), auto is live: the status line is redrawn in
    place; ``--progress none`` writes no progress at all."""
    import shlex
    import shutil
    import subprocess

    if shutil.which("script") is None:
        pytest.skip("no script(1) here (util-linux)")
    plan_file = bench.plan_file(["stand/fixer"])
    command = shlex.join(bench.subprocess_argv("run", "--plan", plan_file))
    done = subprocess.run(
        ["script", "-qec", command, "/dev/null"], capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert b"\r\x1b[K[0/1] resolved 0; in flight stand/fixer 1" in done.stdout
    assert b"[1/1] #0 calc-add stand/fixer: resolved" in done.stdout
    other = bench.plan_file(["stand/idler"])
    quiet = bench.yyb("run", "--plan", other, "--progress", "none")
    assert quiet.exit_code == 0 and "[" not in quiet.stderr.replace("[REDACTED", "")
    assert "dispatch_count: 1" in quiet.stdout


def test_gates_fail_a_run_and_a_report_with_exit_3(bench):
    """The fixer resolves, the idler fails: a threshold above one model's rate fails the run
    and the report (exit 3, one line per broken gate); one below passes (exit 0)."""
    plan_file = bench.plan_file(["stand/fixer", "stand/idler"])
    failed = bench.yyb("run", "--plan", plan_file, "--fail-under", "0.5", "--progress", "none")
    assert failed.exit_code == 3, failed.stderr
    assert "gate: stand/idler: the valid resolved rate 0/1 = 0.0000 is under 0.5" in failed.stderr
    assert "stand/fixer" not in failed.stderr
    assert "dispatch_count: 2" in failed.stdout  # the run itself is whole
    passed = bench.yyb("report", "--plan", plan_file, "--no-layer", "--fail-under", "0")
    assert passed.exit_code == 0, passed.stderr
    itt = bench.yyb(
        "report", "--plan", plan_file, "--no-layer", "--rate", "intent-to-treat",
        "--fail-under", "1",
    )  # fmt: skip
    assert itt.exit_code == 3 and "intent-to-treat resolved rate" in itt.stderr
    assert (
        bench.yyb("report", "--plan", plan_file, "--no-layer", "--max-invalid", "0").exit_code == 0
    )
    bad = bench.yyb("report", "--plan", plan_file, "--fail-under", "2")
    assert bad.exit_code == 2


def test_a_gate_counts_invalid_attempts(bench):
    broken = bench.behaviour("broken", "exit 0\n")  # no envelope: a harness failure
    plan_file = bench.plan_file(["stand/fixer", broken])
    done = bench.yyb("run", "--plan", plan_file, "--max-invalid", "0", "--progress", "none")
    assert done.exit_code == 3
    assert "gate: 1 invalid attempt(s), more than the 0 allowed" in done.stderr
    again = bench.yyb("report", "--plan", plan_file, "--no-layer", "--max-invalid", "1")
    assert again.exit_code == 0, again.stderr
