"""Shared pieces of the agent tests: a shipped adapter run as the sandbox runs it (its
program copied into a folder, a real pipe as its envelope channel, a stand-in CLI from
tests/agents/standins/), and, for the real-CLI tests, where the CLIs are installed and a
buggy repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from yyb.agents import program

STANDINS = Path(__file__).parent / "standins"
# kind -> the stand-in module and the name it is installed under.
STANDIN = {
    "claude_code": ("claude", "claude"),
    "codex": ("codex", "codex"),
    "aider": ("aider", "aider"),
    "mini_swe_agent": ("mini", "mini"),
    "openhands": ("openhands", "python-openhands"),
}
PLANNED = {
    "claude_code": "anthropic/claude-sonnet-4-5",
    "codex": "openai/gpt-5-codex",
    "aider": "anthropic/claude-sonnet-4-5",
    "mini_swe_agent": "anthropic/claude-sonnet-4-5",
    "openhands": "anthropic/claude-sonnet-4-5",
}
PROMPT = "Fix calc.sh so that add adds.\n"


@dataclass
class Run:
    code: int
    envelope: dict | None
    stdout: str
    stderr: str
    record: dict | None
    workspace: Path


def read_pipe(read: int) -> bytes:
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    return b"".join(chunks)


class Adapters:
    """Installs stand-ins under ``bin/`` and runs ``python3 -E -s <kind>.py invocation.json``."""

    def __init__(self, root: Path):
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir()
        for module, name in STANDIN.values():
            path = self.bin / name
            path.write_text(
                f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(STANDINS)!r})\n"
                f"import {module}\nsys.exit({module}.main())\n"
            )
            path.chmod(0o755)

    def run(self, kind: str, mode: str = "ok", prompt: str = PROMPT, **fields) -> Run:
        folder = self.root / f"run-{len(list(self.root.iterdir()))}"
        agent, workspace = folder / "agent", folder / "workspace"
        agent.mkdir(parents=True)
        workspace.mkdir()
        (workspace / "calc.sh").write_text("#!/bin/sh\necho $(( $1 - $2 ))\n")
        for name, data in program(kind):
            (agent / name).write_bytes(data)
        (folder / "prompt.md").write_text(prompt)
        invocation = {
            "schema_version": "yyb_agent_invocation.v1",
            "kind": kind,
            "model": PLANNED[kind],
            "prompt_file": str(folder / "prompt.md"),
            "workspace": str(workspace),
            "executable": str(self.bin / STANDIN[kind][1]),
            "args": [],
            "settings": {},
            "ceiling_micros": None,
            "timeout_ms": 60000,
            **fields,
        }
        (agent / "invocation.json").write_text(json.dumps(invocation))
        read, write = os.pipe()
        record = folder / "record.json"
        env = {
            **os.environ,
            "PATH": f"{self.bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "YYB_ENVELOPE_FD": str(write),
            "STANDIN_PIPE": os.readlink(f"/proc/self/fd/{write}"),
            "STANDIN_RECORD": str(record),
            "STANDIN_MODE": mode,
        }
        process = subprocess.Popen(
            [sys.executable, "-E", "-s", str(agent / f"{kind}.py"), str(agent / "invocation.json")],
            cwd=workspace,
            env=env,
            pass_fds=(write,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        os.close(write)
        data = read_pipe(read)
        out, err = process.communicate(timeout=60)
        return Run(
            process.returncode,
            json.loads(data) if data else None,
            out.decode(),
            err.decode(),
            json.loads(record.read_text()) if record.exists() else None,
            workspace,
        )


@pytest.fixture
def adapters(tmp_path: Path) -> Adapters:
    return Adapters(tmp_path)


# Where tools/install_agents.sh puts the CLIs; YYB_AGENTS names another prefix.
AGENTS = Path(os.environ.get("YYB_AGENTS", "/opt/yyb-agents"))
EXECUTABLES = {
    "mini": AGENTS / "mini-swe-agent/bin/mini",
    "aider": AGENTS / "aider/bin/aider",
    "claude": AGENTS / "node/bin/claude",
    "codex": AGENTS / "node/bin/codex",
}
CALC_BUGGY = "def add(a, b):\n    return a - b\n"
CALC_FIXED = "def add(a, b):\n    return a + b\n"
TASK = "calc.py: add(2, 3) returns -1 instead of 5. Make add add."
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # mini-swe-agent's last command
# litellm's model-cost format, read by mini-swe-agent (LITELLM_MODEL_REGISTRY_PATH) and by
# aider (--model-metadata-file), so that both report a cost for the scripted model.
MODEL_METADATA = {
    "openai/fixer": {
        "max_tokens": 8192,
        "max_input_tokens": 128000,
        "max_output_tokens": 8192,
        "input_cost_per_token": 0.000001,
        "output_cost_per_token": 0.000004,
        "litellm_provider": "openai",
        "mode": "chat",
        "supports_function_calling": True,
    }
}


def installed(name: str) -> bool:
    """Whether the CLI ``name`` (a key of EXECUTABLES) is installed and executable."""
    return os.access(EXECUTABLES[name], os.X_OK)


def needs(name: str) -> pytest.MarkDecorator:
    """Skip a test when the CLI ``name`` is not installed, naming the installer."""
    return pytest.mark.skipif(
        not installed(name),
        reason=f"{EXECUTABLES[name]} is not installed: run tools/install_agents.sh --node",
    )


@pytest.fixture
def buggy_repo(tmp_path) -> Path:
    """A git repository whose calc.py subtracts in ``add``, committed."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text(CALC_BUGGY)
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "calc.py"], cwd=repo, check=True)
    subprocess.run(["git", *identity, "commit", "-qm", "init"], cwd=repo, check=True)
    return repo


@pytest.fixture
def model_metadata(tmp_path) -> Path:
    """MODEL_METADATA in a file."""
    path = tmp_path / "model-metadata.json"
    path.write_text(json.dumps(MODEL_METADATA))
    return path


def bash_turns(*commands: str) -> list[dict]:
    """One ``bash`` tool call a turn, as mini-swe-agent v2's tool-calling prompt asks."""
    return [
        {
            "text": f"Step {n}: `{command}`.",
            "tool_calls": [{"name": "bash", "arguments": {"command": command}}],
        }
        for n, command in enumerate(commands, 1)
    ]


def search_replace(path: str, language: str, old: str, new: str) -> str:
    """An answer in aider's ``diff`` edit format: one SEARCH/REPLACE block for ``path``."""
    return f"{path}\n```{language}\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n```\n"
