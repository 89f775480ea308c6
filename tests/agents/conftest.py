"""Shared pieces of the real-CLI tests: where the CLIs are installed, a buggy repository."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

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
