"""The OpenHands adapter: the headless ``openhands.core.main``, its trajectory read into the
envelope.

``python -m openhands.core.main -d WORKSPACE -f TASK_FILE`` runs one task without a user
(its LLM from ``LLM_MODEL``, ``LLM_API_KEY``, ``LLM_BASE_URL``) and, with
``SAVE_TRAJECTORY_PATH`` a folder, saves the trajectory there as ``<session id>.json``: a list
of events whose ``llm_metrics`` (``accumulated_cost`` in USD and ``accumulated_token_usage``)
are the session's totals so far, and whose ``agent_state_changed`` observations say how the
agent ended (``finished``, ``error``, ``stopped``, ...).
"""

from __future__ import annotations

import json
import os
import sys

if __package__:
    from . import adapter, envelope
else:  # run as a script beside adapter.py and envelope.py in the sandbox
    import adapter
    import envelope

EXECUTABLE = "python3"  # the interpreter OpenHands is installed in
MODULE = "openhands.core.main"
SCRATCH: tuple[str, ...] = ()
BUDGET_FLAG = "--max-budget-per-task"
USAGE = ("prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens")
FOLDER = "trajectories"


def plan(invocation: adapter.Invocation, prompt: str, scratch: str) -> adapter.Launch:
    """``PYTHON -m openhands.core.main -d WORKSPACE -f PROMPT_FILE [--max-iterations N]
    [--max-budget-per-task X] ARGS...`` with ``LLM_MODEL``, ``RUNTIME`` (setting ``runtime``,
    default ``local``: the sandbox has no Docker) and ``SAVE_TRAJECTORY_PATH``."""
    argv = [invocation.executable, "-m", MODULE, "-d", invocation.workspace]
    argv += ["-f", invocation.prompt_file]
    iterations = invocation.settings.get("max_iterations")
    if isinstance(iterations, int) and not isinstance(iterations, bool):
        argv += ["--max-iterations", str(iterations)]
    budget = invocation.budget_usd()
    if budget is not None:
        argv += [BUDGET_FLAG, budget]
    folder = os.path.join(scratch, FOLDER)
    os.makedirs(folder)
    env = {
        "LLM_MODEL": invocation.model_argument(keep_provider=True),
        "RUNTIME": str(invocation.settings.get("runtime") or "local"),
        "SAVE_TRAJECTORY_PATH": folder,
    }
    return adapter.Launch([*argv, *invocation.args], env)


def trajectory(scratch: str) -> tuple[str, list]:
    """(session id, events) of the one trajectory OpenHands saved."""
    folder = os.path.join(scratch, FOLDER)
    names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    if len(names) != 1:
        raise adapter.Unparsed(f"expected one trajectory file, found {len(names)}")
    try:
        with open(os.path.join(folder, names[0]), encoding="utf-8") as handle:
            events = json.load(handle)
    except ValueError as exc:
        raise adapter.Unparsed(f"the trajectory is not JSON: {exc}") from None
    if not isinstance(events, list):
        raise adapter.Unparsed("the trajectory is not a list of events")
    return names[0].removesuffix(".json"), [e for e in events if isinstance(e, dict)]


def _metrics(events: list[dict]) -> dict:
    found = [e["llm_metrics"] for e in events if isinstance(e.get("llm_metrics"), dict)]
    return found[-1] if found else {}


def final_state(events: list[dict]) -> str | None:
    """The agent state of the last ``agent_state_changed`` observation."""
    states = [
        (e.get("extras") or {}).get("agent_state")
        for e in events
        if e.get("observation") == "agent_state_changed"
    ]
    return states[-1] if states else None


def observe(
    invocation: adapter.Invocation, completed: envelope.Completed, scratch: str
) -> adapter.Observation:
    """The envelope's fields from the trajectory: the last metrics, the final agent state."""
    session, events = trajectory(scratch)
    metrics = _metrics(events)
    tokens = metrics.get("accumulated_token_usage")
    usage = None
    if isinstance(tokens, dict):
        usage = {
            name: tokens[name]
            for name in USAGE
            if isinstance(tokens.get(name), int) and not isinstance(tokens[name], bool)
        }
    cost, completeness = adapter.reported_cost(metrics.get("accumulated_cost"))
    state = final_state(events)
    succeeded = state == "finished"
    return adapter.Observation(
        succeeded,
        usage=usage,
        cost_usd=cost,
        completeness=completeness,
        session_id=session,
        reason=None if succeeded else f"the OpenHands agent ended in state {state!r}",
    )


def main(argv: list[str] | None = None) -> int:
    """``python3 openhands.py invocation.json``."""
    return adapter.serve(sys.argv[1:] if argv is None else argv, "openhands", plan, observe)


if __name__ == "__main__":
    raise SystemExit(main())
