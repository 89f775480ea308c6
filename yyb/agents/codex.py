"""The Codex adapter: ``codex exec --json``, its JSON Lines events read into the envelope.

Events (codex-rs/exec/src/exec_events.rs): ``thread.started`` (``thread_id``),
``turn.started``, ``item.started`` / ``item.updated`` / ``item.completed``,
``turn.completed`` (``usage``: input, cached input and output tokens, the thread's totals so
far), ``turn.failed`` (``error.message``) and ``error`` (``message``). Codex reports neither a
cost nor the model the provider ran.
"""

from __future__ import annotations

import sys

if __package__:
    from . import adapter, envelope
else:  # run as a script beside adapter.py and envelope.py in the sandbox
    import adapter
    import envelope

EXECUTABLE = "codex"
SCRATCH: tuple[str, ...] = ()
BUDGET_FLAG = False  # codex exec has no spend limit of its own


def plan(invocation: adapter.Invocation, prompt: str, scratch: str) -> adapter.Launch:
    """``codex exec --json --color never --model M --dangerously-bypass-approvals-and-sandbox
    --skip-git-repo-check ARGS... -- PROMPT``: yyb's sandbox is the boundary, Codex's own
    (Landlock, seccomp) would nest inside it."""
    argv = [invocation.executable, "exec", "--json", "--color", "never"]
    argv += ["--model", invocation.model_argument(keep_provider=False)]
    argv += ["--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check"]
    argv += [*invocation.args, "--", prompt]
    return adapter.Launch(argv)


def _usage(event: dict) -> dict[str, int]:
    usage = event.get("usage") if isinstance(event.get("usage"), dict) else {}
    return {
        name: value
        for name, value in usage.items()
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0
    }


def _message(event: dict) -> str:
    error = event.get("error") if event.get("type") == "turn.failed" else event
    text = error.get("message", "") if isinstance(error, dict) else ""
    return " ".join(str(text).split())[:200]


def observe(
    invocation: adapter.Invocation, completed: envelope.Completed, scratch: str
) -> adapter.Observation:
    """The envelope's fields from the event stream: the thread id, the last
    ``turn.completed`` usage (cumulative), failed on ``turn.failed`` or a stream ``error``."""
    events = adapter.json_lines(completed.stdout)
    kinds = [e.get("type") for e in events]
    if "thread.started" not in kinds:
        raise adapter.Unparsed("no thread.started event on stdout")
    thread = next(e.get("thread_id") for e in events if e.get("type") == "thread.started")
    turns = [e for e in events if e.get("type") == "turn.completed"]
    last = max((i for i, e in enumerate(events) if e.get("type") == "turn.completed"), default=-1)
    # A stream error codex recovered from (a retried request) is followed by a completed turn.
    fatal = [
        e for i, e in enumerate(events) if i > last and e.get("type") in ("turn.failed", "error")
    ]
    succeeded = bool(turns) and not fatal
    reason = None
    if not succeeded:
        reason = f"codex: {_message(fatal[-1])}" if fatal else "codex completed no turn"
    return adapter.Observation(
        succeeded,
        usage=_usage(turns[-1]) if turns else None,
        session_id=thread if isinstance(thread, str) else None,
        reason=reason,
    )


def main(argv: list[str] | None = None) -> int:
    """``python3 codex.py invocation.json``."""
    return adapter.serve(sys.argv[1:] if argv is None else argv, "codex", plan, observe)


if __name__ == "__main__":
    raise SystemExit(main())
