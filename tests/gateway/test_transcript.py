"""Each API's kept bodies read back as a conversation (yyb/evidence/transcript.py): calls made
through the gateway to the scripted provider, which answers in the providers' wire formats,
streamed and not; the messages asked, the answer's text and its tool calls come back."""

from __future__ import annotations

import json

import pytest

from tests.gateway.conftest import CALL, TEXT, request
from yyb.evidence import transcript

SYSTEM = "You are a careful engineer."
ASK = "Fix the failing test in calc.py."
TOOL_RESULT = "1 failed"
BODIES = {
    "chat_completions": (
        "/v1/chat/completions",
        "openai/gpt-5",
        {
            "model": "gpt-5",
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": ASK},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "bash", "arguments": "{\"command\": \"pytest\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": TOOL_RESULT},
            ],
        },
    ),
    "messages": (
        "/v1/messages",
        "anthropic/claude-sonnet-4-5",
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "system": SYSTEM,
            "messages": [
                {"role": "user", "content": ASK},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "t1", "name": "bash",
                     "input": {"command": "pytest"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": TOOL_RESULT}]},
            ],
        },
    ),
    "responses": (
        "/v1/responses",
        "openai/gpt-5",
        {"model": "gpt-5", "instructions": SYSTEM, "input": [
            {"role": "user", "content": [{"type": "input_text", "text": ASK}]},
            {"type": "function_call", "call_id": "f1", "name": "bash",
             "arguments": "{\"command\": \"pytest\"}"},
            {"type": "function_call_output", "call_id": "f1", "output": TOOL_RESULT},
        ]},
    ),
}  # fmt: skip


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("api", sorted(BODIES))
def test_each_api_reads_back_as_its_conversation(gateway, upstream, api, stream):
    path, model, body = BODIES[api]
    token = gateway.admit("a1", model, None)
    anthropic = api == "messages"
    answer = request(gateway, path, dict(body, stream=stream), token, anthropic=anthropic)
    assert answer.status == 200
    (call,) = gateway.retire(token).calls
    exchange = transcript.read(call.record.api, call.request, call.response, stream)
    assert exchange.readable
    roles = [m.role for m in exchange.asked]
    texts = [m.text for m in exchange.asked]
    assert roles[0] == "system" and texts[0] == SYSTEM
    assert ASK in texts and any(TOOL_RESULT in t for t in texts)
    assert [c.name for m in exchange.asked for c in m.tool_calls] == ["bash"]
    assert exchange.answer.role == "assistant" and exchange.answer.text == TEXT
    (tool,) = exchange.answer.tool_calls
    assert (tool.name, json.loads(tool.arguments)) == (CALL["name"], CALL["arguments"])


def test_bodies_that_are_not_messages_are_read_as_far_as_they_go():
    broken = transcript.read("chat_completions", b"not json", b'data: {"choices": [', True)
    assert broken.asked == () and not broken.readable
    assert broken.answer.text == "" and broken.answer.tool_calls == ()
    odd = transcript.read("messages", b'{"messages": [7, {"role": "user"}]}', b"[]", False)
    assert [m.role for m in odd.asked] == ["user"] and odd.answer is None
