"""The built-in example: a repository with a real bug, a case, two stand-in agents, a grader.

Everything is created in one folder: the source repository (a shell calculator whose ``add``
subtracts, a failing test, and a later commit with the fix that no candidate may see), the
configuration, the task file, the stand-in agents (``example/fixer`` fixes the bug,
``example/idler`` does nothing) and the grader (runs the test). The agents follow the
``command`` harness protocol: they receive the model, workspace, envelope channel and prompt
paths, and report through the envelope helper (``yyb-envelope``), which keeps the channel to
itself and writes the ``juno_execution_envelope.v1`` envelope.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess

CALC_BUGGY = "#!/bin/sh\n# add A B: print the sum of two integers\necho $(( $1 - $2 ))\n"
CALC_FIXED = "#!/bin/sh\n# add A B: print the sum of two integers\necho $(( $1 + $2 ))\n"
TEST = """#!/bin/sh
# The failing test: add must add.
got=$(sh ./calc.sh 2 3)
if [ "$got" != 5 ]; then
  echo "FAIL: calc.sh 2 3 printed $got, expected 5"
  exit 1
fi
echo "ok: calc.sh 2 3 = 5"
"""
AGENT = r'''#!/usr/bin/env python3
"""A stand-in harness for the command protocol: MODEL WORKSPACE ENVELOPE PROMPT_FILE.

It reports through the envelope helper every candidate finds on its PATH, yyb-envelope
(docs/adapters.md): the helper takes the envelope channel and keeps it from everything it
starts, runs this program again as the work, and writes the envelope once the work is done,
succeeded when it exits 0."""
import os
import subprocess
import sys

model, workspace, envelope, prompt = sys.argv[1:5]
if os.environ.get("EXAMPLE_AGENT_WORKING") != "1":
    os.environ["EXAMPLE_AGENT_WORKING"] = "1"
    report = ["--provider", "example", "--model", model.removeprefix("example/")]
    report += ["--cost-micros", "0", "--cost-completeness", "genuine_zero"]
    os.execvp("yyb-envelope", ["yyb-envelope", *report, "--", sys.executable, *sys.argv])
os.chdir(workspace)
with open(prompt) as handle:
    sys.stdout.write(f"agent {model} read the prompt: {handle.read(60)}\n")
sys.stdout.flush()
if model == "example/fixer":
    with open("calc.sh") as handle:
        text = handle.read()
    with open("calc.sh", "w") as handle:
        handle.write(text.replace("$1 - $2", "$1 + $2"))
    identity = ["-c", "user.name=agent", "-c", "user.email=agent@example.invalid"]
    subprocess.run(["git", "add", "calc.sh"], check=True)
    subprocess.run(["git", *identity, "commit", "-qm", "fix add"], check=True)
    sys.stdout.write("committed the fix\n")
else:
    sys.stdout.write("looked around, changed nothing\n")
'''
GRADER = r'''#!/usr/bin/env python3
"""The grader: run the case's test in the rebuilt final workspace and answer through the
verdict channel (docs/grading.md). It keeps the channel from the code it tests: it makes itself
non-dumpable and starts the test without the descriptor."""
import ctypes
import json
import os
import subprocess

PR_SET_DUMPABLE = 4
ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
channel = os.fdopen(int(os.environ["YYB_GRADER_OUTPUT_FD"]), "w")
os.set_inheritable(channel.fileno(), False)
done = subprocess.run(["sh", "./test_calc.sh"], capture_output=True, text=True)
first = (done.stdout + done.stderr).splitlines()[:1]
answer = {
    "schema_version": "yylo_benchmark_grader_output.v2",
    "passed": done.returncode == 0,
    "summary": first[0] if first else "",
}
channel.write(json.dumps(answer) + "\n")
channel.close()
'''
TASK = """---
id: calc-add
title: Make add add
tags: [benchmark-case, example]
fields:
  benchmark:
    repository: example
    base_commit: {base}
    case_version: "1"
    category: bugfix
    grader_profile: tests
---
calc.sh is supposed to print the sum of its two arguments, but test_calc.sh fails.
Fix calc.sh so that the test passes.
"""


def git(repo, *args: str, env: dict[str, str] | None = None) -> str:
    """Run git in ``repo`` with a fixed identity (``env`` adds or overrides variables) and
    return its stripped output; a failure raises CalledProcessError."""
    environ = {
        **os.environ,
        "GIT_AUTHOR_NAME": "example",
        "GIT_AUTHOR_EMAIL": "e@example.invalid",
        "GIT_COMMITTER_NAME": "example",
        "GIT_COMMITTER_EMAIL": "e@example.invalid",
        **(env or {}),
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=environ, check=True
    )
    return done.stdout.strip()


def _write(path: str, text: str, executable: bool = False) -> None:
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, 0o755 if executable else 0o644)


def build(root: str) -> dict:
    """Create the example's files under ``root``; return their paths."""
    from yyb import config

    repo = os.path.join(root, "repo")
    tools = os.path.join(root, "tools")
    os.makedirs(repo)
    os.makedirs(tools)
    git(repo, "init", "-q", "-b", "main")
    _write(os.path.join(repo, "calc.sh"), CALC_BUGGY, True)
    _write(os.path.join(repo, "test_calc.sh"), TEST, True)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calculator with a bug")
    base = git(repo, "rev-parse", "HEAD")
    _write(os.path.join(repo, "calc.sh"), CALC_FIXED, True)
    git(repo, "commit", "-qam", "the fix (a future commit no candidate may see)")
    agent = os.path.join(tools, "agent.py")
    # The grader lives apart from the tools the candidate may read: its folder is hidden.
    grader = os.path.join(root, "graders", "grader.py")
    os.makedirs(os.path.dirname(grader))
    _write(agent, AGENT, True)
    _write(grader, GRADER, True)
    with open(grader, "rb") as handle:
        grader_sha = hashlib.sha256(handle.read()).hexdigest()
    data = config.template("example", yylo_version="example")
    data["repositories"] = {"example": "."}
    data["harnesses"] = {
        "candidate": {
            "kind": "command",
            "argv": [agent, "{model}", "{workspace}", "{envelope}", "{prompt_file}"],
        }
    }
    data["evaluators"] = {
        "tests": {
            "kind": "command",
            "grader_id": "example-tests",
            "version": "1",
            "executable": grader,
            "sha256": grader_sha,
            "argv": [],
            "timeout_ms": 60_000,
            "purpose": "correctness",
            # The test belongs to the benchmark: put back as the base has it before grading.
            "protected_paths": ["test_calc.sh"],
        }
    }
    data["models"] = {":fixer": "example/fixer", ":idler": "example/idler"}
    data["attempt_timeout_ms"] = 60_000
    data["tool_policy"] = {"network": "denied", "read_only_paths": [tools]}
    config_path = os.path.join(repo, config.CONFIG_NAME)
    with open(config_path, "w") as handle:
        json.dump(data, handle, indent=2)
    task = os.path.join(root, "task.md")
    _write(task, TASK.format(base=base))
    return {"root": root, "repo": repo, "config": config_path, "task": task, "base": base}
