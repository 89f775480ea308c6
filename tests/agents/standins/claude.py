"""A stand-in ``claude``: ``-p ... --output-format json`` prints one result object, as
Claude Code 2.x does (the SDKResultMessage of @anthropic-ai/claude-agent-sdk)."""

from __future__ import annotations

import sys

from common import edit, emit, record

SESSION = "6f1d3c2a-8a55-4d43-9a5e-2f7c1b0e9d41"
MODEL_USAGE = {
    "claude-sonnet-4-5-20250929": {
        "inputTokens": 24,
        "outputTokens": 1544,
        "cacheReadInputTokens": 80131,
        "cacheCreationInputTokens": 12873,
        "webSearchRequests": 0,
        "costUSD": 0.1198,
        "contextWindow": 200000,
        "maxOutputTokens": 64000,
    },
    "claude-haiku-4-5-20251001": {
        "inputTokens": 1520,
        "outputTokens": 60,
        "cacheReadInputTokens": 0,
        "cacheCreationInputTokens": 0,
        "webSearchRequests": 0,
        "costUSD": 0.0036565,
        "contextWindow": 200000,
        "maxOutputTokens": 64000,
    },
}


def result(subtype: str, is_error: bool, text: str) -> dict:
    return {
        "type": "result",
        "subtype": subtype,
        "is_error": is_error,
        "duration_ms": 48211,
        "duration_api_ms": 45120,
        "num_turns": 7,
        "result": text,
        "stop_reason": "end_turn",
        "session_id": SESSION,
        "total_cost_usd": 0.1234565,
        "usage": {
            "input_tokens": 24,
            "cache_creation_input_tokens": 12873,
            "cache_read_input_tokens": 80131,
            "output_tokens": 1544,
            "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
            "service_tier": "standard",
        },
        "modelUsage": MODEL_USAGE,
        "permission_denials": [],
        "uuid": "0b6f3f0e-4d0a-4f7e-9a43-3d1f2b8c7e10",
    }


def main() -> int:
    mode = record("claude")
    if mode == "garbage":
        sys.stdout.write("Error: something went wrong\n")
        return 0
    edit("claude")
    if mode == "budget":
        out = result("error_max_budget_usd", True, "")
        out["errors"] = ["Reached maximum budget ($0.05)"]
        emit(out)
        return 1
    if mode == "api_error":
        emit(result("success", True, "API Error: 401 invalid x-api-key"))
        return 1
    out = result("success", False, "Fixed calc.sh: add now adds.")
    if mode == "nocost":
        del out["total_cost_usd"]
    if mode == "longmodel":  # an id no envelope can hold (1-256 characters)
        out["modelUsage"] = {
            "claude-sonnet-4-5-" + "x" * 300: MODEL_USAGE["claude-sonnet-4-5-20250929"]
        }
    emit(out)
    return 0
