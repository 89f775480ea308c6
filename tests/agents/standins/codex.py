"""A stand-in ``codex``: ``exec --json`` prints JSON Lines events (exec_events.rs), two turns
whose usage is the thread's running total, and a stream error codex recovered from."""

from __future__ import annotations

from common import edit, emit, record

THREAD = "0199a213-81c0-7800-8aa1-bbab2a035a53"


def main() -> int:
    mode = record("codex")
    if mode == "garbage":
        print("error: unexpected argument '--bogus' found")
        return 2
    emit({"type": "thread.started", "thread_id": THREAD})
    emit({"type": "turn.started"})
    emit(
        {
            "type": "item.completed",
            "item": {"id": "item_0", "type": "reasoning", "text": "**Reading calc.sh**"},
        }
    )
    command = {"id": "item_1", "type": "command_execution", "command": "bash -lc 'cat calc.sh'"}
    emit(
        {
            "type": "item.started",
            "item": {
                **command,
                "aggregated_output": "",
                "exit_code": None,
                "status": "in_progress",
            },
        }
    )
    emit(
        {
            "type": "item.completed",
            "item": {
                **command,
                "aggregated_output": "echo $(( $1 - $2 ))\n",
                "exit_code": 0,
                "status": "completed",
            },
        }
    )
    if mode == "failed":
        emit({"type": "error", "message": "stream disconnected before completion"})
        emit(
            {
                "type": "turn.failed",
                "error": {"message": "exceeded retry limit, last status: 429 Too Many Requests"},
            }
        )
        return 1
    edit("codex")
    emit(
        {
            "type": "item.completed",
            "item": {
                "id": "item_2",
                "type": "file_change",
                "changes": [{"path": "calc.sh", "kind": "update"}],
                "status": "completed",
            },
        }
    )
    emit(
        {
            "type": "item.completed",
            "item": {"id": "item_3", "type": "agent_message", "text": "add now adds."},
        }
    )
    emit(
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122},
        }
    )
    emit({"type": "error", "message": "Reconnecting... 1/5"})
    emit({"type": "turn.started"})
    emit(
        {
            "type": "item.completed",
            "item": {"id": "item_4", "type": "agent_message", "text": "Tests pass."},
        }
    )
    emit(
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 50210, "cached_input_tokens": 49152, "output_tokens": 301},
        }
    )
    return 0
