"""``yyb example --dir D``: interrupted, it says how to resume; run again, it resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from tests.conftest import Yyb, signalled


def test_an_interrupted_example_says_how_to_resume_and_a_rerun_finishes_it(tmp_path):
    root = tmp_path / "ex"
    argv = [sys.executable, "-m", "yyb", "example", "--dir", str(root), "--attempts", "2"]
    with signalled(
        [*argv, "--jobs", "1", "--progress", "plain"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        said = []
        for line in child.stderr:  # plain progress: a line per attempt started and finished
            said.append(line)
            if line.startswith("[1/4] #0 "):
                child.send_signal(signal.SIGINT)
                break
        said.append(child.stderr.read())
        out = child.stdout.read()
        code = child.wait(60)
    assert code == 130, "".join(said)
    hint = (
        f"yyb: interrupted; to resume: yyb example --dir {root} (or yyb --store {root}/store "
        f"--config {root}/repo/yylo-benchmark.config.json run --plan {root}/plan.json)\n"
    )
    assert said[-1].endswith(hint), said
    assert "dispatch_count: " in out and "report (" not in out
    finished = out.count("  ran\n")
    assert 1 <= finished < 4

    again = Yyb(str(root / "store"))("example", "--dir", str(root), "--progress", "none")
    assert again.exit_code == 0, again.stdout + again.stderr
    assert again.stdout.startswith(f"resuming the example in {root}: {finished} of 4 attempts")
    assert again.stdout.count("  reused\n") == finished
    assert f"dispatch_count: {4 - finished}\n" in again.stdout
    assert "report (complete;" in again.stdout and "doctor: 0 problem(s)" in again.stdout
    assert again.stderr == ""


def test_a_folder_that_is_not_an_example_is_refused_with_one_line(tmp_path):
    (tmp_path / "mine.txt").write_text("kept\n")
    done = Yyb(str(tmp_path / "store"))("example", "--dir", str(tmp_path))
    assert done.exit_code == 2
    assert done.stderr == (
        f"yyb: error: --dir {tmp_path} is not empty and holds no example to resume\n"
    )
    assert sorted(os.listdir(tmp_path)) == ["mine.txt"]


def test_a_resumed_example_keeps_its_plan_and_json_is_one_document(tmp_path):
    root = tmp_path / "ex"
    yyb = Yyb(str(root / "store"))
    first = yyb("example", "--dir", str(root), "--attempts", "1", "--json")
    assert first.exit_code == 0, first.stderr
    document = json.loads(first.stdout)  # the one document: no narrative around it
    assert (document["ok"], document["resumed"], document["dispatch_count"]) == (True, 0, 2)
    assert document["report"]["status"] == "complete" and document["resume"] is None
    again = json.loads(yyb("example", "--dir", str(root), "--json").stdout)
    assert (again["resumed"], again["dispatch_count"], again["plan"]) == (2, 0, document["plan"])
    other = yyb("example", "--dir", str(root), "--attempts", "2")
    assert other.exit_code == 2 and other.stderr.count("\n") == 1
    assert "planned with 1 attempt(s) per agent" in other.stderr
    (root / "plan.json").unlink()  # as a run stopped before it wrote its plan leaves it
    stopped = yyb("example", "--dir", str(root))
    assert stopped.exit_code == 2 and "remove the folder and run again" in stopped.stderr
