"""The aider adapter: one ``--message-file`` run, its analytics log read into the envelope.

aider prints ``Tokens: 1.2k sent, 345 received. Cost: $0.0012 message, $0.0034 session.``
after each reply, with counts of 1,000 and more rounded (``1.2k``, ``12k``) and costs of a
cent and more rounded to cents. The exact figures are in the events of its analytics log
(``--analytics-log FILE``, with ``--no-analytics`` nothing is sent anywhere): each
``message_send`` event carries ``prompt_tokens``, ``completion_tokens``, ``cost`` and the
session's ``total_cost``. The printed lines are read only when there is no log.
"""

from __future__ import annotations

import os
import re
import sys

if __package__:
    from . import adapter, envelope
else:  # run as a script beside adapter.py and envelope.py in the sandbox
    import adapter
    import envelope

EXECUTABLE = "aider"
# What aider leaves in the workspace (the chat and input histories go to a private folder
# here, unless ARGS name others): the default scratch paths of the kind.
SCRATCH = (".aider.tags.cache.v*", ".aider.chat.history.md", ".aider.input.history")
BUDGET_FLAG = False  # aider has no spend limit of its own
LOG = "analytics.jsonl"
TOKENS = re.compile(
    r"^Tokens: (?P<sent>[\d.]+k?) sent(?:, (?P<write>[\d.]+k?) cache write)?"
    r"(?:, (?P<hit>[\d.]+k?) cache hit)?, (?P<received>[\d.]+k?) received\.",
    re.MULTILINE,
)
COST = re.compile(r"Cost: \$(?P<message>[\d.]+) message, \$(?P<session>[\d.]+) session\.")
DONE = "Completed --message-file"


def plan(invocation: adapter.Invocation, prompt: str, scratch: str) -> adapter.Launch:
    """``aider --model M --message-file PROMPT_FILE --yes-always`` and the flags that keep it
    from the network, the home folder and the workspace's Git history (the final worktree is
    the result: no commits are needed), then ARGS."""
    argv = [invocation.executable, "--model", invocation.model_argument(keep_provider=True)]
    argv += ["--message-file", invocation.prompt_file, "--yes-always"]
    argv += ["--no-auto-commits", "--no-dirty-commits", "--no-gitignore"]
    argv += ["--no-check-update", "--no-show-release-notes", "--no-show-model-warnings"]
    argv += ["--no-analytics", "--analytics-log", os.path.join(scratch, LOG)]
    argv += ["--no-pretty", "--no-stream", "--no-fancy-input", "--no-detect-urls"]
    argv += ["--chat-history-file", os.path.join(scratch, "chat.history.md")]
    argv += ["--input-history-file", os.path.join(scratch, "input.history")]
    return adapter.Launch([*argv, *invocation.args])


def log_events(scratch: str) -> list[dict] | None:
    """The analytics log's events, or None when aider wrote none."""
    try:
        with open(os.path.join(scratch, LOG), "rb") as handle:
            return adapter.json_lines(handle.read())
    except FileNotFoundError:
        return None


def _from_log(events: list[dict]) -> adapter.Observation:
    sends = [e.get("properties") or {} for e in events if e.get("event") == "message_send"]
    usage = {"prompt_tokens": 0, "completion_tokens": 0}
    for properties in sends:
        for name in usage:
            value = properties.get(name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise adapter.Unparsed(f"message_send {name} is not an integer: {value!r}")
            usage[name] += value
    usage["messages"] = len(sends)
    cost, completeness = adapter.reported_cost(sends[-1].get("total_cost") if sends else None)
    exits = [(e.get("properties") or {}).get("reason") for e in events if e.get("event") == "exit"]
    succeeded = bool(sends) and DONE in exits
    reason = None
    if not succeeded:
        ended = f"aider ended: {exits[-1]}" if exits else "aider did not finish its message"
        reason = ended if sends else "aider got no reply"
    return adapter.Observation(
        succeeded,
        usage=usage,
        cost_usd=cost,
        completeness=completeness,
        reason=reason,
    )


def _from_stdout(stdout: bytes) -> adapter.Observation:
    text = stdout.decode("utf-8", "replace")
    lines = list(TOKENS.finditer(text))
    if not lines:
        return adapter.Observation(False, reason="aider got no reply (no Tokens: line)")
    usage = None
    if not any("k" in m["sent"] + m["received"] for m in lines):  # all printed exactly
        usage = {"sent_tokens": sum(int(m["sent"]) for m in lines)}
        usage["received_tokens"] = sum(int(m["received"]) for m in lines)
    costs = list(COST.finditer(text))
    session = costs[-1]["session"] if costs else None
    known = session is not None and float(session) > 0
    # Printed rounded to cents from $0.01 up: a figure, not the exact spend.
    return adapter.Observation(
        True,
        usage=usage,
        cost_usd=session if known else None,
        completeness="partial" if known else None,
    )


def observe(
    invocation: adapter.Invocation, completed: envelope.Completed, scratch: str
) -> adapter.Observation:
    """From the analytics log when aider wrote one, else from its printed lines."""
    events = log_events(scratch)
    if events:
        return _from_log(events)
    return _from_stdout(completed.stdout)


def main(argv: list[str] | None = None) -> int:
    """``python3 aider.py invocation.json``."""
    return adapter.serve(sys.argv[1:] if argv is None else argv, "aider", plan, observe)


if __name__ == "__main__":
    raise SystemExit(main())
