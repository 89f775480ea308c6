"""The gateway's own answers, in the error shape of the provider the client speaks to.

OpenAI: ``{"error": {"message", "type", "param", "code"}}``; Anthropic: ``{"type": "error",
"error": {"type", "message"}}``. Every refusal carries ``x-should-retry: false``, which the
official SDKs honour, so a refused call is not retried into the same refusal. The table is
docs/gateway.md's ("Errors").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

Reason = Literal[
    "unauthorized", "model", "ceiling", "too_large", "busy", "unanswered", "upstream", "not_found"
]


@dataclass(frozen=True)
class Shape:
    """One refusal's status and its fields in each provider's vocabulary."""

    status: int
    openai_type: str
    openai_code: str
    anthropic_status: int
    anthropic_type: str
    message: str


SHAPES: dict[Reason, Shape] = {
    "unauthorized": Shape(
        401,
        "invalid_request_error",
        "invalid_api_key",
        401,
        "authentication_error",
        "invalid API key: not a token this gateway admitted, or one retired",
    ),
    "model": Shape(
        403,
        "invalid_request_error",
        "yyb_model_not_planned",
        403,
        "permission_error",
        "this attempt may call only its planned model",
    ),
    # OpenAI's own out-of-credit answer is 429 insufficient_quota; Anthropic's is 400
    # invalid_request_error ("credit balance is too low"), which its SDK does not retry.
    "ceiling": Shape(
        429,
        "insufficient_quota",
        "yyb_spend_ceiling",
        400,
        "invalid_request_error",
        "the attempt's spend ceiling is reached",
    ),
    "too_large": Shape(
        413,
        "invalid_request_error",
        "request_too_large",
        413,
        "request_too_large",
        "request body too large",
    ),
    "busy": Shape(
        429,
        "requests",
        "rate_limit_exceeded",
        429,
        "rate_limit_error",
        "too many concurrent requests for this token",
    ),
    "unanswered": Shape(
        502,
        "server_error",
        "yyb_unanswered",
        502,
        "api_error",
        "replay holds no recorded answer to this request",
    ),
    "upstream": Shape(
        502,
        "server_error",
        "yyb_upstream_unreachable",
        502,
        "api_error",
        "the upstream provider could not be reached",
    ),
    "not_found": Shape(
        404,
        "invalid_request_error",
        "unknown_url",
        404,
        "not_found_error",
        "the gateway does not serve this path",
    ),
}


def refusal(reason: Reason, kind: str, detail: str | None = None) -> tuple[int, bytes]:
    """The status and JSON body refusing a call for ``reason``, in ``kind``'s shape."""
    shape = SHAPES[reason]
    message = f"{shape.message}: {detail}" if detail else shape.message
    if kind == "anthropic":
        body = {"type": "error", "error": {"type": shape.anthropic_type, "message": message}}
        return shape.anthropic_status, json.dumps(body).encode()
    param = "model" if reason == "model" else None
    error = {"message": message, "type": shape.openai_type, "param": param}
    error["code"] = shape.openai_code
    return shape.status, json.dumps({"error": error}).encode()
