"""What ``yyb init --harness NAME`` writes for each shipped agent kind: a harness that runs.

Each start names the CLI where ``tools/install_agents.sh`` installs it (docs/agents.md,
"Installing an agent"), the secret its provider needs, one model with the identity rule its
provider calls for (a dated snapshot of the planned id), and a tool policy that shows the
install folder and lets the CLI reach its provider.
"""

from __future__ import annotations

PREFIX = "/opt/yyb-agents"

# kind -> (its CLI below PREFIX, the secret, a model selector and the model's id); every
# model accepts a dated snapshot of its id, as these providers serve them.
STARTS = {
    "claude_code": (
        "node/bin/claude",
        "ANTHROPIC_API_KEY",
        ":sonnet",
        "anthropic/claude-sonnet-4-5",
    ),
    "codex": ("node/bin/codex", "OPENAI_API_KEY", ":codex", "openai/gpt-5-codex"),
    "aider": ("aider/bin/aider", "OPENAI_API_KEY", ":gpt", "openai/gpt-4.1"),
    "mini_swe_agent": ("mini-swe-agent/bin/mini", "OPENAI_API_KEY", ":gpt", "openai/gpt-4.1"),
    "openhands": ("openhands/bin/python", "LLM_API_KEY", ":gpt", "openai/gpt-4.1"),
}


def names() -> list[str]:
    return sorted(STARTS)


def apply(data: dict, kind: str) -> dict:
    """``data`` (a configuration template) with the start of agent ``kind`` as its candidate
    harness, its model and its tool policy."""
    executable, secret, selector, model = STARTS[kind]
    data = dict(data, yylo_version="none")
    data["harnesses"] = {
        kind: {
            "kind": kind,
            "executable": f"{PREFIX}/{executable}",
            "secrets": [secret],
            "prompt": "Fix the issue described below in this repository. Do not ask questions.",
        }
    }
    data["default_candidate_harness"] = kind
    data["models"] = {selector: {"id": model, "accept": ["dated"]}}
    data["tool_policy"] = {"network": "allowed", "read_only_paths": [PREFIX]}
    return data
