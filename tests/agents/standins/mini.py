"""A stand-in ``mini``: runs in yolo mode and writes the trajectory where ``-o`` says, in
mini-SWE-agent's format (agents/default.py serialize, the litellm response kept per message)."""

from __future__ import annotations

import json
import sys

from common import after, edit, record


def response(n: int, prompt: int, completion: int) -> dict:
    return {
        "id": f"msg_01{n}",
        "created": 1764680000 + n,
        "model": "claude-sonnet-4-5-20250929",
        "object": "chat.completion",
        "choices": [
            {
                "finish_reason": "tool_calls",
                "index": 0,
                "message": {"role": "assistant", "content": "..."},
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def main() -> int:
    mode = record("mini")
    argv = sys.argv[1:]
    output = after(argv, "--output")
    if mode == "notraj":
        print("Error: no API key", file=sys.stderr)
        return 1
    edit("mini")
    calls = [(1830, 120), (2410, 95), (2690, 40)]
    messages = [
        {"role": "system", "content": "You are a helpful assistant"},
        {"role": "user", "content": after(argv, "--task")},
    ]
    for n, (prompt, completion) in enumerate(calls):
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "extra": {
                    "actions": [],
                    "response": response(n, prompt, completion),
                    "cost": 0.01,
                    "timestamp": 1764680000.5,
                },
            }
        )
        messages.append({"role": "tool", "content": "<returncode>0</returncode>"})
    status = "LimitsExceeded" if mode == "limits" else "Submitted"
    messages.append(
        {"role": "exit", "content": "", "extra": {"exit_status": status, "submission": ""}}
    )
    trajectory = {
        "info": {
            "model_stats": {
                "instance_cost": 0.0 if mode == "noprice" else 0.0412345,
                "api_calls": len(calls),
            },
            "config": {
                "agent": {"cost_limit": 3.0, "mode": "yolo"},
                "agent_type": "minisweagent.agents.interactive.InteractiveAgent",
            },
            "mini_version": "2.4.6",
            "exit_status": status,
            "submission": "",
        },
        "messages": messages,
        "trajectory_format": "mini-swe-agent-1.1",
    }
    with open(output, "w") as handle:
        json.dump(trajectory, handle, indent=2)
    print(f"Saved trajectory to '{output}'")
    return 0
