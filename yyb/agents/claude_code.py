"""The Claude Code adapter: ``claude -p`` with ``--output-format json``, read into the envelope.

Claude Code prints one result object when the run ends (``type: result``, ``subtype``,
``is_error``, ``session_id``, ``total_cost_usd``, ``usage``, ``modelUsage`` keyed by the model
ids the API reported). docs/adapters.md says how each envelope field is derived.
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

EXECUTABLE = "claude"
SCRATCH: tuple[str, ...] = ()
BUDGET_FLAG = "--max-budget-usd"
# modelUsage's per-model counts -> the envelope's usage names (the API's own snake case).
MODEL_USAGE = {
    "inputTokens": "input_tokens",
    "outputTokens": "output_tokens",
    "cacheReadInputTokens": "cache_read_input_tokens",
    "cacheCreationInputTokens": "cache_creation_input_tokens",
    "webSearchRequests": "web_search_requests",
}
MAIN_USAGE = ("input_tokens", "output_tokens", "cache_read_input_tokens")
MAIN_USAGE += ("cache_creation_input_tokens",)


def plan(invocation: adapter.Invocation, prompt: str, scratch: str) -> adapter.Launch:
    """``claude -p --output-format json --model M --permission-mode bypassPermissions
    [--max-budget-usd X] ARGS... -- PROMPT``."""
    argv = [invocation.executable, "-p", "--output-format", "json"]
    argv += ["--model", invocation.model_argument(keep_provider=False)]
    argv += ["--permission-mode", "bypassPermissions"]
    budget = invocation.budget_usd()
    if budget is not None:
        argv += [BUDGET_FLAG, budget]
    argv += [*invocation.args, "--", prompt]
    # As root, Claude Code refuses bypassPermissions unless told it runs in a sandbox: it does.
    env = {"IS_SANDBOX": "1"} if os.geteuid() == 0 and "IS_SANDBOX" not in os.environ else {}
    return adapter.Launch(argv, env)


def result_object(stdout: bytes) -> dict:
    """The result object: all of stdout, else the last ``type: result`` line (stream-json)."""
    try:
        whole = json.loads(stdout.decode("utf-8", "replace"))
    except ValueError:
        whole = None
    if isinstance(whole, dict) and whole.get("type") == "result":
        return whole
    results = [o for o in adapter.json_lines(stdout) if o.get("type") == "result"]
    if not results:
        raise adapter.Unparsed("no result object (type: result) on stdout")
    return results[-1]


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_of(result: dict) -> dict[str, int]:
    """Token counts summed over ``modelUsage`` (every model call, subagents included), else
    the main loop's ``usage``."""
    per_model = result.get("modelUsage")
    if isinstance(per_model, dict) and per_model:
        totals: dict[str, int] = {}
        for counts in per_model.values():
            for source, name in MODEL_USAGE.items():
                value = _count(counts.get(source)) if isinstance(counts, dict) else None
                if value is not None:
                    totals[name] = totals.get(name, 0) + value
        return totals
    main = result.get("usage") if isinstance(result.get("usage"), dict) else {}
    return {name: main[name] for name in MAIN_USAGE if _count(main.get(name)) is not None}


def reported_model(result: dict, planned: str) -> str | None:
    """The model id the API reported: among ``modelUsage``'s keys those that extend the
    planned name (``claude-sonnet-4-5`` -> ``claude-sonnet-4-5-20250929``), else all of
    them, the one with the most output tokens; None when there is no key."""
    per_model = result.get("modelUsage")
    if not isinstance(per_model, dict) or not per_model:
        return None
    names = [n for n in per_model if isinstance(n, str) and n]
    pool = [n for n in names if n.startswith(planned)] or names

    def weight(name: str) -> int:
        counts = per_model[name] if isinstance(per_model[name], dict) else {}
        return _count(counts.get("outputTokens")) or 0

    return max(pool, key=weight) if pool else None


def _one_line(text: object) -> str:
    return " ".join(str(text).split())[:200]


def observe(
    invocation: adapter.Invocation, completed: envelope.Completed, scratch: str
) -> adapter.Observation:
    """The envelope's fields from Claude Code's result object."""
    result = result_object(completed.stdout)
    succeeded = result.get("subtype") == "success" and result.get("is_error") is False
    usage = usage_of(result)
    # Error results may carry zeroed values: 0 is a figure only for a run that made no call.
    nothing = succeeded and not any(usage.values())
    cost, completeness = adapter.reported_cost(result.get("total_cost_usd"), nothing)
    reason = None
    if not succeeded:
        errors = result.get("errors")
        detail = errors[0] if isinstance(errors, list) and errors else result.get("result", "")
        reason = f"claude reported {result.get('subtype')!s}: {_one_line(detail)}".rstrip(": ")
    session = result.get("session_id")
    return adapter.Observation(
        succeeded,
        model=reported_model(result, invocation.model_argument(keep_provider=False)),
        usage=usage,
        cost_usd=cost,
        completeness=completeness,
        session_id=session if isinstance(session, str) else None,
        reason=reason,
    )


def main(argv: list[str] | None = None) -> int:
    """``python3 claude_code.py invocation.json``."""
    return adapter.serve(sys.argv[1:] if argv is None else argv, "claude_code", plan, observe)


if __name__ == "__main__":
    raise SystemExit(main())
