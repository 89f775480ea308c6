"""A gateway call's kept bodies read as a conversation (docs/gateway.md, "Transcripts").

The gateway keeps what was asked and answered as bytes (``yyb_gateway_call.v1`` links them);
this reads them back as messages for people and exports: the request's messages (OpenAI Chat
Completions and Responses, Anthropic Messages), and the answer's text and tool calls, from a
JSON body or a server-sent event stream. It never fails on what it cannot read: an unreadable
body gives what could be read, and ``readable`` False.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # as the model wrote them (JSON text, usually)


@dataclass(frozen=True)
class Message:
    """One turn: who said it, its text, the tools it called."""

    role: str
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class Exchange:
    """One call: the messages asked (the system prompt first, when apart), the answer."""

    asked: tuple[Message, ...]
    answer: Message | None
    readable: bool = True
    notes: tuple[str, ...] = field(default_factory=tuple)


def read(api: str, request: bytes, response: bytes, streamed: bool) -> Exchange:
    """The call of ``api`` (``chat_completions``, ``responses``, ``messages``, ...) as messages."""
    asked, ok_in = _asked(api, request)
    if streamed:
        answer, ok_out = _streamed(api, response)
    else:
        answer, ok_out = _answered(api, response)
    return Exchange(tuple(asked), answer, ok_in and ok_out)


def _json(data: bytes):
    try:
        return json.loads(data)
    except ValueError:
        return None


def _text(content) -> str:
    """The text of a content field: a string, or a list of parts (``text`` parts joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, dict):
                value = part.get("text") or part.get("content")
                if isinstance(value, str):
                    texts.append(value)
                elif isinstance(value, list):
                    texts.append(_text(value))
            elif isinstance(part, str):
                texts.append(part)
        return "\n".join(t for t in texts if t)
    return ""


def _blocks_tools(content) -> tuple[ToolCall, ...]:
    """Anthropic ``tool_use`` blocks and Responses ``function_call`` items."""
    if not isinstance(content, list):
        return ()
    return tuple(
        ToolCall(str(b.get("name", "?")), _arguments(b.get("input", b.get("arguments", {}))))
        for b in content
        if isinstance(b, dict) and b.get("type") in ("tool_use", "function_call")
    )


def _arguments(value) -> str:
    """A tool call's arguments as JSON text (Anthropic's are an object; OpenAI's are text)."""
    return value if isinstance(value, str) else json.dumps(value)


def _asked(api: str, request: bytes) -> tuple[list[Message], bool]:
    body = _json(request)
    if not isinstance(body, dict):
        return [], False
    out = []
    if api == "messages" and body.get("system"):
        out.append(Message("system", _text(body["system"])))
    if api == "responses":
        if body.get("instructions"):
            out.append(Message("system", _text(body["instructions"])))
        items = body.get("input")
        if isinstance(items, str):
            return [*out, Message("user", items)], True
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict):
                role = item.get("role") or item.get("type", "?")
                text = _text(item.get("content")) or str(item.get("output", ""))
                out.append(Message(str(role), text, _blocks_tools([item])))
        return out, True
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        calls = tuple(
            ToolCall(str(c["function"].get("name", "?")), str(c["function"].get("arguments")))
            for c in message.get("tool_calls") or []
            if isinstance(c, dict) and isinstance(c.get("function"), dict)
        )
        content = message.get("content")
        out.append(
            Message(str(message.get("role", "?")), _text(content), calls + _blocks_tools(content))
        )
    return out, True


def _answered(api: str, response: bytes) -> tuple[Message | None, bool]:
    body = _json(response)
    if not isinstance(body, dict):
        return None, False
    if api == "chat_completions":
        choices = body.get("choices") or [{}]
        message = choices[0].get("message") or {}
        asked, _ = _asked("chat_completions", json.dumps({"messages": [message]}).encode())
        return (asked[0] if asked else None), True
    if api == "messages":
        content = body.get("content")
        return Message("assistant", _text(content), _blocks_tools(content)), True
    if api == "responses":
        items = body.get("output") or []
        texts = [_text(i.get("content")) for i in items if isinstance(i, dict)]
        return Message("assistant", "\n".join(t for t in texts if t), _blocks_tools(items)), True
    return None, True


def events(stream: bytes) -> list:
    """The JSON data of each server-sent event (``[DONE]`` and unparsable data skipped)."""
    out = []
    text = stream.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    for event in text.split("\n\n"):
        data = "\n".join(
            line[5:].lstrip(" ") for line in event.split("\n") if line.startswith("data:")
        )
        if data and data != "[DONE]":
            value = _json(data.encode())
            if value is not None:
                out.append(value)
    return out


def _streamed(api: str, stream: bytes) -> tuple[Message | None, bool]:
    if api == "chat_completions":
        return _chat_stream(events(stream)), True
    if api == "messages":
        return _messages_stream(events(stream)), True
    if api == "responses":
        for event in events(stream):
            if event.get("type") == "response.completed":
                return _answered("responses", json.dumps(event.get("response", {})).encode())
        return None, False
    return None, True


def _chat_stream(chunks: list) -> Message:
    text, calls = [], {}
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                held = calls.setdefault(call.get("index", 0), ["", ""])
                function = call.get("function") or {}
                held[0] += function.get("name") or ""
                held[1] += function.get("arguments") or ""
    tools = tuple(ToolCall(name or "?", args) for _, (name, args) in sorted(calls.items()))
    return Message("assistant", "".join(text), tools)


def _messages_stream(items: list) -> Message:
    text, blocks = [], {}
    for event in items:
        kind = event.get("type")
        if kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == "tool_use":
                blocks[event.get("index", 0)] = [block.get("name", "?"), ""]
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                text.append(delta.get("text", ""))
            elif delta.get("type") == "input_json_delta" and event.get("index", 0) in blocks:
                blocks[event.get("index", 0)][1] += delta.get("partial_json", "")
    tools = tuple(ToolCall(name, args) for _, (name, args) in sorted(blocks.items()))
    return Message("assistant", "".join(text), tools)
