"""Real agent CLIs, run directly (outside yyb) against the scripted provider: each makes the
real edit to a buggy repository, and its real output is what the adapters' stand-ins copy.

Deep: the CLIs come from tools/install_agents.sh (minutes, the package registries). With
``YYB_AGENT_FIXTURES=1`` each test rewrites its fixture under tests/data/agents/ (the temp
paths and the port replaced by fixed marks); otherwise it checks that the fixture still has
the shape of what the CLI printed now.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.agents.conftest import (
    CALC_FIXED,
    EXECUTABLES,
    SUBMIT,
    TASK,
    bash_turns,
    needs,
    search_replace,
)
from tests.agents.model_server import Server

pytestmark = pytest.mark.deep
FIXTURES = Path(__file__).parent.parent / "data" / "agents"
REWRITE = os.environ.get("YYB_AGENT_FIXTURES") == "1"
SED = "sed -i 's/a - b/a + b/' calc.py"


def run(name: str, args: list[str], repo: Path, env: dict[str, str]) -> str:
    """Run the CLI ``name`` in ``repo`` with only ``env`` (and PATH) in its environment, no
    standard input; return its stdout. A non-zero exit fails the test with its stderr."""
    home = repo.parent / "home"
    home.mkdir(exist_ok=True)
    path = f"{EXECUTABLES[name].parent}:/usr/bin:/bin"
    done = subprocess.run(
        [str(EXECUTABLES[name]), *args],
        cwd=repo,
        env={"PATH": path, "HOME": str(home), "LANG": "C.UTF-8", **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def normalized(text: str, repo: Path, server: Server) -> str:
    """``text`` with the test's temp folders and the server's port replaced by fixed marks."""
    text = text.replace(str(repo.parent / "home"), "/home/agent")
    text = text.replace(str(repo.parent), "/work")
    # Claude Code names its project folder by the path, every other character a dash.
    text = text.replace(re.sub("[^A-Za-z0-9]", "-", str(repo.parent)), "-work")
    return text.replace(server.url, "http://127.0.0.1:PORT")


def fixture(name: str, text: str) -> str:
    """The fixture ``name``: rewritten from ``text`` with YYB_AGENT_FIXTURES=1, else read."""
    path = FIXTURES / name
    if REWRITE:
        FIXTURES.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path.read_text()


def event_types(jsonl: str) -> list[str]:
    """The ``type`` of every JSON line (Claude Code's stream-json, Codex's --json)."""
    return [json.loads(line)["type"] for line in jsonl.splitlines() if line.strip()]


@needs("mini")
def test_mini_swe_agent_fixes_the_bug_through_tool_calls(buggy_repo, model_metadata):
    turns = bash_turns("cat calc.py", SED, SUBMIT)
    trajectory = buggy_repo.parent / "trajectory.json"
    with Server(turns) as server:
        env = {
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": server.url + "/v1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_MODEL_REGISTRY_PATH": str(model_metadata),
            "MSWEA_CONFIGURED": "true",  # no first-run setup prompt
        }
        args = ["-y", "--exit-immediately", "-m", "openai/fixer", "-t", TASK]
        stdout = run("mini", [*args, "-o", str(trajectory)], buggy_repo, env)
        requests = server.completions()
        saved = normalized(stdout, buggy_repo, server)
        recorded = normalized(trajectory.read_text(), buggy_repo, server)
    assert (buggy_repo / "calc.py").read_text() == CALC_FIXED
    assert len(requests) == 3 and not server.script.turns
    assert {r.body["model"] for r in requests} == {"fixer"}
    assert requests[0].body["tools"][0]["function"]["name"] == "bash"
    assert requests[0].headers["authorization"] == "<redacted>"
    data = json.loads(recorded)
    assert data["info"]["exit_status"] == "Submitted"
    assert data["info"]["model_stats"]["api_calls"] == 3
    assert data["info"]["model_stats"]["instance_cost"] > 0
    assert data["messages"][-1]["role"] == "exit"
    steps = re.compile(r"^mini-swe-agent \(step \d+, \$[\d.]+\):$", re.M)
    assert len(steps.findall(saved)) == 3
    assert len(steps.findall(fixture("mini-stdout.txt", saved))) == 3
    kept = json.loads(fixture("mini-trajectory.json", recorded))
    assert [m["role"] for m in kept["messages"]] == [m["role"] for m in data["messages"]]


@needs("aider")
def test_aider_applies_a_search_replace_block_and_commits(buggy_repo, model_metadata):
    block = "The bug is in `add`: it subtracts.\n\n" + search_replace(
        "calc.py", "python", "    return a - b", "    return a + b"
    )
    turns = [{"text": block}, {"text": "fix: make add add"}]  # the edit, the commit message
    with Server(turns) as server:
        env = {
            "OPENAI_API_KEY": "sk-test",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "GIT_AUTHOR_NAME": "aider",
            "GIT_AUTHOR_EMAIL": "aider@example.invalid",
            "GIT_COMMITTER_NAME": "aider",
            "GIT_COMMITTER_EMAIL": "aider@example.invalid",
        }
        args = [
            *("--message", TASK, "--yes-always", "--model", "openai/fixer"),
            *("--openai-api-base", server.url + "/v1", "--edit-format", "diff"),
            *("--model-metadata-file", str(model_metadata), "--map-tokens", "0"),
            *("--no-check-update", "--no-show-release-notes", "--analytics-disable"),
            *("--no-pretty", "--no-gitignore", "calc.py"),
        ]
        stdout = run("aider", args, buggy_repo, env)
        requests = server.completions()
        saved = normalized(stdout, buggy_repo, server)
    assert (buggy_repo / "calc.py").read_text() == CALC_FIXED
    log = subprocess.run(
        ["git", "log", "--format=%s"], cwd=buggy_repo, capture_output=True, text=True
    ).stdout
    assert log.splitlines() == ["fix: make add add", "init"]
    assert len(requests) == 2 and requests[0].body["stream"] is True
    assert TASK in json.dumps(requests[0].body["messages"])
    for text in (saved, fixture("aider-stdout.txt", saved)):
        assert "Applied edit to calc.py" in text
        assert re.search(r"^Tokens: .* sent, .* received\. Cost: \$", text, re.M)


@needs("claude")
def test_claude_code_runs_a_bash_tool_use_and_reports_a_result(buggy_repo):
    turns = [
        {
            "text": "I'll fix add.",
            "tool_calls": [
                {"name": "Bash", "arguments": {"command": SED, "description": "Make add add"}}
            ],
        },  # fmt: skip
        {"text": "Fixed: add now adds."},
    ]
    with Server(turns) as server:
        env = {
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "ANTHROPIC_BASE_URL": server.url,
            "IS_SANDBOX": "1",  # root may skip permissions only in a sandbox
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        args = ["-p", TASK, "--output-format", "stream-json", "--verbose"]
        args += ["--dangerously-skip-permissions", "--model", "fixer"]
        stdout = run("claude", args, buggy_repo, env)
        requests = server.completions()
        saved = normalized(stdout, buggy_repo, server)
    assert (buggy_repo / "calc.py").read_text() == CALC_FIXED
    assert not server.script.turns
    assert all(r.path.startswith("/v1/messages") for r in requests)
    assert requests[0].headers["x-api-key"] == "<redacted>"
    result = json.loads(saved.splitlines()[-1])
    assert result["type"] == "result" and result["subtype"] == "success"
    assert result["result"] == "Fixed: add now adds."
    assert result["usage"]["output_tokens"] > 0
    assert event_types(saved)[0] == "system"
    assert event_types(fixture("claude-stdout.txt", saved)) == event_types(saved)


@needs("codex")
def test_codex_runs_an_exec_command_call_through_the_responses_api(buggy_repo):
    turns = [
        {
            "text": "I'll fix add.",
            "tool_calls": [{"name": "exec_command", "arguments": {"cmd": SED}}],
        },  # fmt: skip
        {"text": "Fixed: add now adds."},
    ]
    with Server(turns) as server:
        provider = (
            f'model_providers.yyb={{name="yyb", base_url="{server.url}/v1", '
            'env_key="OPENAI_API_KEY", wire_api="responses"}'
        )
        args = ["exec", "--json", "--skip-git-repo-check", "-m", "fixer"]
        args += ["--dangerously-bypass-approvals-and-sandbox"]
        args += ["-c", "model_provider=yyb", "-c", provider, TASK]
        stdout = run("codex", args, buggy_repo, {"OPENAI_API_KEY": "sk-test"})
        requests = server.completions()
        saved = normalized(stdout, buggy_repo, server)
    assert (buggy_repo / "calc.py").read_text() == CALC_FIXED
    assert [r.path for r in requests] == ["/v1/responses"] * 2
    assert requests[0].body["stream"] is True
    types = event_types(saved)
    assert types[0] == "thread.started" and types[-1] == "turn.completed"
    last = json.loads(saved.splitlines()[-1])
    assert last["usage"]["output_tokens"] > 0
    assert event_types(fixture("codex-stdout.txt", saved)) == types
