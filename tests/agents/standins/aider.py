"""A stand-in ``aider``: ``--message-file`` runs, printing aider's ``Tokens: ... Cost: ...``
lines and writing its analytics log (``--analytics-log``) as aider/analytics.py does."""

from __future__ import annotations

import json
import sys
import time

from common import after, edit, record

SENDS = [  # (prompt_tokens, completion_tokens, cost, total_cost) of two replies
    (2315, 310, 0.011595, 0.011595),
    (12873, 911, 0.052284, 0.063879),
]


def _log(path: str | None, event: str, **properties) -> None:
    if path is None:
        return
    entry = {"event": event, "properties": properties, "user_id": "5e1c", "time": int(time.time())}
    with open(path, "a") as handle:
        json.dump(entry, handle)
        handle.write("\n")


def main() -> int:
    mode = record("aider")
    argv = sys.argv[1:]
    log = None if mode == "nolog" else after(argv, "--analytics-log")
    _log(log, "launched")
    print(f"Aider v0.86.2\nModel: {after(argv, '--model')} with diff edit format")
    print("Git repo: .git with 2 files")
    if mode == "noreply":
        print("litellm.AuthenticationError: AnthropicException - invalid x-api-key")
        _log(log, "exit", reason="Completed --message-file")
        return 0
    edit("aider")
    print("Applied edit to calc.sh")
    for prompt, completion, cost, total in SENDS:
        priced = mode != "noprice"
        _log(
            log,
            "message_send",
            main_model="anthropic/claude-sonnet-4-5",
            edit_format="diff",
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=prompt + completion,
            cost=cost if priced else 0.0,
            total_cost=total if priced else 0.0,
        )
        sent = f"{prompt / 1000:.1f}k" if prompt < 10000 else f"{round(prompt / 1000)}k"
        line = f"Tokens: {sent} sent, {completion} received."
        if priced:
            line += f" Cost: ${cost:.2f} message, ${total:.2f} session."
        print(line)
    _log(log, "exit", reason="Completed --message-file")
    return 0
