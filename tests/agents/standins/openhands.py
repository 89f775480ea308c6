"""A stand-in Python with OpenHands: ``-m openhands.core.main -d DIR -f FILE`` runs and saves
the trajectory into the folder SAVE_TRAJECTORY_PATH names as ``<sid>.json`` (core/main.py),
its events serialized as events/serialization does (``llm_metrics`` from Metrics.get)."""

from __future__ import annotations

import json
import os
import sys

from common import edit, record

LOG = "INFO - [Agent Controller default] Setting agent(CodeActAgent) state"
SID = "b2d1e0c4a7f34c1e9f0a5d6c7b8e9f01"


def metrics(cost: float, prompt: int, completion: int) -> dict:
    usage = {
        "model": os.environ.get("LLM_MODEL"),
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cache_read_tokens": 4096,
        "cache_write_tokens": 1024,
        "context_window": 200000,
        "per_turn_token": prompt + completion,
        "response_id": "",
    }
    return {
        "accumulated_cost": cost,
        "max_budget_per_task": None,
        "accumulated_token_usage": usage,
        "costs": [],
        "response_latencies": [],
        "token_usages": [usage],
    }


def state(n: int, value: str) -> dict:
    return {
        "id": n,
        "timestamp": "2026-12-02T13:40:00",
        "source": "environment",
        "message": "",
        "observation": "agent_state_changed",
        "content": "",
        "extras": {"agent_state": value, "reason": ""},
    }


def main() -> int:
    mode = record("openhands")
    if sys.argv[1:3] != ["-m", "openhands.core.main"]:
        print("No module named openhands", file=sys.stderr)
        return 1
    print(f"{LOG} from loading to running")
    edit("openhands")
    print(f"{LOG} from running to finished")
    cost = 0.0 if mode == "noprice" else 0.0213
    events = [
        {
            "id": 0,
            "timestamp": "2026-12-02T13:39:58",
            "source": "user",
            "message": "task",
            "action": "message",
            "args": {"content": "task", "image_urls": None, "wait_for_response": False},
        },
        state(1, "running"),
        {
            "id": 2,
            "timestamp": "2026-12-02T13:39:59",
            "source": "agent",
            "message": "Running command: cat calc.sh",
            "action": "run",
            "args": {"command": "cat calc.sh"},
            "llm_metrics": metrics(cost / 2, 5210, 312),
        },
        {
            "id": 3,
            "timestamp": "2026-12-02T13:40:00",
            "source": "agent",
            "message": "done",
            "action": "finish",
            "args": {"final_thought": "add now adds"},
            "llm_metrics": metrics(cost, 11020, 520),
        },
        state(4, "error" if mode == "error" else "finished"),
    ]
    folder = os.environ["SAVE_TRAJECTORY_PATH"]
    with open(os.path.join(folder, SID + ".json"), "w") as handle:
        json.dump(events, handle, indent=4)
    return 0
