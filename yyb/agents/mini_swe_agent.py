"""The mini-SWE-agent adapter: ``mini`` in yolo mode, its trajectory file read into the envelope.

``mini -o FILE`` writes the trajectory (``trajectory_format`` ``mini-swe-agent-1.1``):
``info.model_stats`` (``instance_cost`` in USD, ``api_calls``), ``info.exit_status``
(``Submitted`` when the agent finished its task) and ``messages``, whose assistant entries
keep the provider's raw response under ``extra.response`` (its ``model`` and ``usage``).
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

EXECUTABLE = "mini"
SCRATCH: tuple[str, ...] = ()
BUDGET_FLAG = "--cost-limit"
TRAJECTORY = "trajectory.json"
USAGE = ("prompt_tokens", "completion_tokens")


def plan(invocation: adapter.Invocation, prompt: str, scratch: str) -> adapter.Launch:
    """``mini -y --exit-immediately -m M -t PROMPT -o TRAJECTORY [--cost-limit X] ARGS...``,
    with ``MSWEA_CONFIGURED=true`` so that it asks no first-run questions."""
    argv = [invocation.executable, "--yolo", "--exit-immediately"]
    argv += ["--model", invocation.model_argument(keep_provider=True)]
    argv += ["--task", prompt, "--output", os.path.join(scratch, TRAJECTORY)]
    budget = invocation.budget_usd()
    if budget is not None:
        argv += [BUDGET_FLAG, budget]
    return adapter.Launch([*argv, *invocation.args], {"MSWEA_CONFIGURED": "true"})


def trajectory(scratch: str) -> dict:
    """The trajectory mini wrote (after every step, so also when it stopped early)."""
    try:
        with open(os.path.join(scratch, TRAJECTORY), encoding="utf-8") as handle:
            value = json.load(handle)
    except FileNotFoundError:
        raise adapter.Unparsed("mini wrote no trajectory file") from None
    except ValueError as exc:
        raise adapter.Unparsed(f"the trajectory is not JSON: {exc}") from None
    if not isinstance(value, dict) or not isinstance(value.get("info"), dict):
        raise adapter.Unparsed("the trajectory has no info object")
    return value


def _responses(value: dict) -> list[dict]:
    messages = value.get("messages") if isinstance(value.get("messages"), list) else []
    found = []
    for message in messages:
        extra = message.get("extra") if isinstance(message, dict) else None
        response = extra.get("response") if isinstance(extra, dict) else None
        if isinstance(response, dict):
            found.append(response)
    return found


def usage_of(value: dict) -> dict[str, int]:
    """Prompt and completion tokens summed over the responses, and the API call count."""
    usage = {name: 0 for name in USAGE}
    for response in _responses(value):
        counts = response.get("usage") if isinstance(response.get("usage"), dict) else {}
        for name in USAGE:
            count = counts.get(name)
            if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
                usage[name] += count
    stats = value["info"].get("model_stats")
    calls = stats.get("api_calls") if isinstance(stats, dict) else None
    if isinstance(calls, int) and not isinstance(calls, bool) and calls >= 0:
        usage["api_calls"] = calls
    return usage


def observe(
    invocation: adapter.Invocation, completed: envelope.Completed, scratch: str
) -> adapter.Observation:
    """The envelope's fields from the trajectory file."""
    value = trajectory(scratch)
    info = value["info"]
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
    # mini counts 0.0 when it could not price a call (cost_tracking: ignore_errors).
    cost, completeness = adapter.reported_cost(stats.get("instance_cost"))
    models = [r["model"] for r in _responses(value) if isinstance(r.get("model"), str)]
    status = info.get("exit_status")
    succeeded = status == "Submitted"
    return adapter.Observation(
        succeeded,
        model=models[-1] if models and models[-1] else None,
        usage=usage_of(value),
        cost_usd=cost,
        completeness=completeness,
        reason=None if succeeded else f"mini ended with exit status {status!r}",
    )


def main(argv: list[str] | None = None) -> int:
    """``python3 mini_swe_agent.py invocation.json``."""
    argv = sys.argv[1:] if argv is None else argv
    return adapter.serve(argv, "mini_swe_agent", plan, observe)


if __name__ == "__main__":
    raise SystemExit(main())
