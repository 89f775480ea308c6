#!/usr/bin/env python3
"""A scripted model provider on loopback, answering in the providers' real wire formats.

Real agent CLIs (mini-swe-agent and aider through litellm, Claude Code, Codex) talk to it as
they would to OpenAI or Anthropic, with no network: each completion request takes the next
turn of a script, and every request is recorded (path, headers with credentials redacted,
JSON body) for the test to assert on. Endpoints, with or without the ``/v1`` prefix:

- ``POST /v1/chat/completions`` (OpenAI Chat Completions; ``stream: true`` gives SSE
  ``data:`` chunks ending ``data: [DONE]``, usage in a last chunk with no choices when
  ``stream_options.include_usage`` is set), ``GET /v1/models``;
- ``POST /v1/messages`` (Anthropic Messages, streaming as message_start, content_block_start,
  ping, content_block_delta, content_block_stop, message_delta with usage, message_stop) and
  ``POST /v1/messages/count_tokens``;
- ``POST /v1/responses`` (OpenAI Responses, as Codex CLI streams it).

A script is a list of turns, or a map ``{"turns": [...], "served_model": ..., "fallback":
{...}}``. A turn is ``{"text": str, "tool_calls": [{"name": str, "arguments": {...}}],
"when": str}``: ``when`` (optional) is a string the request's body must contain for the turn
to be taken; a request that does not match the next turn, or comes after the last, gets the
fallback turn and consumes nothing. Streamed responses use chunked transfer encoding, as the
real services do.

Run alone: ``python3 tests/agents/model_server.py --script FILE [--port N]``; it prints its
URL on one line and serves until interrupted (``--log FILE`` appends each request as a line
of JSON).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SERVED_MODEL = "fixer-2025-09-29"
FALLBACK = {"text": "I have nothing more to do."}
# Headers whose values are credentials: recorded as present, never by value.
SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "cookie"})
REDACTED = "<redacted>"
# Streamed text goes out in pieces of this many characters, so clients must join deltas.
PIECE = 24


@dataclass(frozen=True)
class Request:
    """One request the server received.

    Attributes:
        method: ``GET`` or ``POST``.
        path: the request path as sent (query included).
        headers: lower-cased names; credential values replaced by ``<redacted>``.
        body: the parsed JSON body, or None for none or one that is not JSON.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: object


@dataclass(frozen=True)
class Turn:
    """One scripted answer: text and/or tool calls (``{"name", "arguments", "id"}``)."""

    text: str = ""
    tool_calls: tuple[dict, ...] = ()
    when: str | None = None

    @classmethod
    def parse(cls, data: dict) -> Turn:
        """A turn from its JSON form; unknown keys are a mistake in the script."""
        unknown = set(data) - {"text", "tool_calls", "when"}
        if unknown:
            raise ValueError(f"unknown keys in a turn: {sorted(unknown)}")
        calls = tuple(
            {"name": c["name"], "arguments": c.get("arguments", {}), "id": c.get("id")}
            for c in data.get("tool_calls", ())
        )
        return cls(text=data.get("text", ""), tool_calls=calls, when=data.get("when"))


@dataclass
class Script:
    """The turns still to answer, the served model id and the fallback; thread-safe."""

    turns: list[Turn]
    served_model: str = SERVED_MODEL
    fallback: Turn = field(default_factory=lambda: Turn.parse(FALLBACK))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def parse(cls, data: list | dict) -> Script:
        """A script from its JSON form: a list of turns or a map with ``turns``."""
        if isinstance(data, list):
            data = {"turns": data}
        return cls(
            turns=[Turn.parse(t) for t in data.get("turns", ())],
            served_model=data.get("served_model", SERVED_MODEL),
            fallback=Turn.parse(data.get("fallback", FALLBACK)),
        )

    def take(self, raw_body: bytes) -> Turn:
        """The next turn if the request matches it (consumed), else the fallback."""
        with self._lock:
            if self.turns:
                turn = self.turns[0]
                if turn.when is None or turn.when.encode() in raw_body:
                    return self.turns.pop(0)
            return self.fallback


def tokens(value: object) -> int:
    """A deterministic stand-in token count: a quarter of the JSON's length, at least 1."""
    return max(1, len(json.dumps(value)) // 4)


def pieces(text: str) -> list[str]:
    """``text`` in PIECE-sized parts (none for the empty string)."""
    return [text[i : i + PIECE] for i in range(0, len(text), PIECE)]


class Counter:
    """Ids unique within one server: ``prefix`` then a running number."""

    def __init__(self) -> None:
        self._next = 0
        self._lock = threading.Lock()

    def __call__(self, prefix: str) -> str:
        with self._lock:
            self._next += 1
            return f"{prefix}{self._next:08d}"


# -- OpenAI Chat Completions ---------------------------------------------------------------


def chat_tool_calls(turn: Turn, new_id: Counter) -> list[dict]:
    """The turn's tool calls as Chat Completions ``tool_calls`` entries."""
    return [
        {
            "id": call["id"] or new_id("call_"),
            "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
        }
        for call in turn.tool_calls
    ]


def chat_usage(body: dict, turn: Turn) -> dict:
    """Chat Completions usage for answering ``turn`` to ``body``."""
    prompt = tokens(body.get("messages", []))
    completion = tokens([turn.text, list(turn.tool_calls)])
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }


def chat_completion(body: dict, turn: Turn, model: str, new_id: Counter) -> dict:
    """A non-streaming ``chat.completion`` object."""
    calls = chat_tool_calls(turn, new_id)
    message = {"role": "assistant", "content": turn.text or None, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": chat_usage(body, turn),
        "system_fingerprint": None,
    }


def chat_chunks(body: dict, turn: Turn, model: str, new_id: Counter) -> Iterator[dict]:
    """The ``chat.completion.chunk`` objects of a streamed answer, in order."""
    head = {
        "id": new_id("chatcmpl-"),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
    }

    def chunk(delta: dict, finish: str | None = None) -> dict:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**head, "choices": [choice]}

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    for part in pieces(turn.text):
        yield chunk({"content": part})
    calls = chat_tool_calls(turn, new_id)
    for index, call in enumerate(calls):
        opening = {**call, "function": {"name": call["function"]["name"], "arguments": ""}}
        yield chunk({"tool_calls": [{"index": index, **opening}]})
        for part in pieces(call["function"]["arguments"]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
    yield chunk({}, "tool_calls" if calls else "stop")
    if (body.get("stream_options") or {}).get("include_usage"):
        yield {**head, "choices": [], "usage": chat_usage(body, turn)}


# -- Anthropic Messages ----------------------------------------------------------------------


def message_blocks(turn: Turn, new_id: Counter) -> list[dict]:
    """The turn as Messages content blocks: a text block, then tool_use blocks."""
    blocks: list[dict] = [{"type": "text", "text": turn.text}] if turn.text else []
    for call in turn.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": call["id"] or new_id("toolu_"),
                "name": call["name"],
                "input": call["arguments"],
            }
        )
    return blocks


def messages_usage(body: dict, output: int) -> dict:
    """Messages usage: input counted from the request's system, messages and tools."""
    counted = [body.get("system"), body.get("messages"), body.get("tools")]
    return {
        "input_tokens": tokens(counted),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output,
    }


def message(body: dict, turn: Turn, model: str, new_id: Counter) -> dict:
    """A non-streaming Messages ``message`` object."""
    blocks = message_blocks(turn, new_id)
    return {
        "id": new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": "tool_use" if turn.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": messages_usage(body, tokens(blocks)),
    }


def message_events(body: dict, turn: Turn, model: str, new_id: Counter) -> Iterator[dict]:
    """The events of a streamed Messages answer, in order (each has its ``type``)."""
    whole = message(body, turn, model, new_id)
    start = {**whole, "content": [], "stop_reason": None}
    start["usage"] = {**whole["usage"], "output_tokens": 1}
    yield {"type": "message_start", "message": start}
    for index, block in enumerate(whole["content"]):
        if block["type"] == "text":
            opening, deltas = (
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": part} for part in pieces(block["text"])],
            )
        else:
            opening = {**block, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": part}
                for part in pieces(json.dumps(block["input"]))
            ]
        yield {"type": "content_block_start", "index": index, "content_block": opening}
        if index == 0:
            yield {"type": "ping"}
        for delta in deltas:
            yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": whole["usage"]["output_tokens"]},
    }
    yield {"type": "message_stop"}


# -- OpenAI Responses ------------------------------------------------------------------------


def response_items(turn: Turn, new_id: Counter) -> list[dict]:
    """The turn as Responses output items: a message, then function_call items."""
    items: list[dict] = []
    if turn.text:
        items.append(
            {
                "id": new_id("msg_"),
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
            }
        )
    for call in turn.tool_calls:
        items.append(
            {
                "id": new_id("fc_"),
                "type": "function_call",
                "status": "completed",
                "call_id": call["id"] or new_id("call_"),
                "name": call["name"],
                "arguments": json.dumps(call["arguments"]),
            }
        )
    return items


def response(body: dict, turn: Turn, model: str, new_id: Counter) -> dict:
    """A completed Responses ``response`` object."""
    items = response_items(turn, new_id)
    used_in, used_out = tokens([body.get("instructions"), body.get("input")]), tokens(items)
    return {
        "id": new_id("resp_"),
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": model,
        "output": items,
        "parallel_tool_calls": True,
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools", []),
        "usage": {
            "input_tokens": used_in,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": used_out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": used_in + used_out,
        },
    }


def item_events(index: int, item: dict) -> Iterator[dict]:
    """The events that stream one output item, from added to done (no sequence numbers)."""
    if item["type"] == "message":
        text = item["content"][0]["text"]
        yield {"type": "response.output_item.added", "output_index": index,
               "item": {**item, "status": "in_progress", "content": []}}  # fmt: skip
        where = {"item_id": item["id"], "output_index": index, "content_index": 0}
        empty = {"type": "output_text", "text": "", "annotations": []}
        yield {"type": "response.content_part.added", **where, "part": empty}
        for part in pieces(text):
            yield {"type": "response.output_text.delta", **where, "delta": part}
        yield {"type": "response.output_text.done", **where, "text": text}
        yield {"type": "response.content_part.done", **where, "part": item["content"][0]}
    else:
        yield {"type": "response.output_item.added", "output_index": index,
               "item": {**item, "status": "in_progress", "arguments": ""}}  # fmt: skip
        where = {"item_id": item["id"], "output_index": index}
        for part in pieces(item["arguments"]):
            yield {"type": "response.function_call_arguments.delta", **where, "delta": part}
        yield {"type": "response.function_call_arguments.done", **where,
               "arguments": item["arguments"]}  # fmt: skip
    yield {"type": "response.output_item.done", "output_index": index, "item": item}


def response_events(body: dict, turn: Turn, model: str, new_id: Counter) -> Iterator[dict]:
    """The events of a streamed Responses answer, numbered by ``sequence_number``."""
    whole = response(body, turn, model, new_id)
    opening = {**whole, "status": "in_progress", "output": [], "usage": None}

    def events() -> Iterator[dict]:
        yield {"type": "response.created", "response": opening}
        yield {"type": "response.in_progress", "response": opening}
        for index, item in enumerate(whole["output"]):
            yield from item_events(index, item)
        yield {"type": "response.completed", "response": whole}

    for number, event in enumerate(events()):
        yield {**event, "sequence_number": number}


# -- HTTP ------------------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    """Routes each request to its provider format; the server holds script and record."""

    protocol_version = "HTTP/1.1"
    server: Provider

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        """Quiet: the record of requests is the log."""

    def do_GET(self) -> None:  # noqa: N802
        self.server.record(self, b"")
        route = self.path.split("?")[0].removeprefix("/v1")
        if route == "/models":
            model = {"id": self.server.script.served_model, "object": "model",
                     "created": 1759104000, "owned_by": "yyb-tests"}  # fmt: skip
            self.answer_json({"object": "list", "data": [model]})
        elif route.startswith("/models/"):
            self.answer_json({"id": route.removeprefix("/models/"), "object": "model",
                              "created": 1759104000, "owned_by": "yyb-tests"})  # fmt: skip
        else:
            self.not_found()

    def do_POST(self) -> None:  # noqa: N802
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = self.server.record(self, raw)
        route = self.path.split("?")[0].removeprefix("/v1")
        if not isinstance(body, dict):
            self.answer_json({"error": {"message": "expected a JSON object"}}, 400)
            return
        if route == "/messages/count_tokens":
            self.answer_json({"input_tokens": messages_usage(body, 0)["input_tokens"]})
            return
        formats = {
            "/chat/completions": (chat_completion, chat_chunks, False),
            "/messages": (message, message_events, True),
            "/responses": (response, response_events, True),
        }
        if route not in formats:
            self.not_found()
            return
        whole, streamed, named = formats[route]
        turn = self.server.script.take(raw)
        model, new_id = self.server.script.served_model, self.server.new_id
        if body.get("stream"):
            self.answer_stream(streamed(body, turn, model, new_id), named)
        else:
            self.answer_json(whole(body, turn, model, new_id))

    def not_found(self) -> None:
        self.answer_json({"error": {"message": f"no route {self.path}"}}, 404)

    def answer_json(self, value: object, status: int = 200) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def answer_stream(self, events: Iterator[dict], named: bool) -> None:
        """Server-sent events, one per chunk of a chunked body: ``event:`` lines for the
        formats that name their events (Messages, Responses), ``data: [DONE]`` for Chat."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in events:
            line = f"data: {json.dumps(event)}\n\n"
            self.write_chunk((f"event: {event['type']}\n" if named else "") + line)
        if not named:
            self.write_chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def write_chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


class Provider(ThreadingHTTPServer):
    """The HTTP server: its script, its id counter and its record of requests."""

    daemon_threads = True

    def __init__(self, port: int, script: Script, log: Path | None = None) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.script = script
        self.new_id = Counter()
        self.requests: list[Request] = []
        self._log = log
        self._lock = threading.Lock()

    def record(self, handler: Handler, raw: bytes) -> object:
        """Keep one request (credentials redacted) and return its parsed body."""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {
            name.lower(): REDACTED if name.lower() in SECRET_HEADERS else value
            for name, value in handler.headers.items()
        }
        request = Request(handler.command, handler.path, headers, body)
        with self._lock:
            self.requests.append(request)
            if self._log is not None:
                with self._log.open("a") as handle:
                    handle.write(json.dumps(request.__dict__) + "\n")
        return body


class Server:
    """The provider on 127.0.0.1 in a background thread, as a context manager.

    Args:
        script: a Script, or its JSON form (a list of turns or a map with ``turns``).
        port: 0 for a free port chosen by the system.
        log: a file to append every request to as a line of JSON.
    """

    def __init__(self, script: Script | list | dict, port: int = 0, log: Path | None = None):
        parsed = script if isinstance(script, Script) else Script.parse(script)
        self._provider = Provider(port, parsed, log)
        # A short poll: leaving the context takes at most that long.
        self._thread = threading.Thread(
            target=self._provider.serve_forever, args=(0.05,), daemon=True
        )

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, without ``/v1``."""
        return f"http://127.0.0.1:{self._provider.server_address[1]}"

    @property
    def requests(self) -> list[Request]:
        """A copy of the requests received so far, in order."""
        with self._provider._lock:
            return list(self._provider.requests)

    @property
    def script(self) -> Script:
        """The script, with the turns still to be answered."""
        return self._provider.script

    def completions(self) -> list[Request]:
        """The requests that took (or would have taken) a turn: every completion request."""
        ends = ("/chat/completions", "/messages", "/responses")
        return [
            r for r in self.requests if r.method == "POST" and r.path.split("?")[0].endswith(ends)
        ]

    def __enter__(self) -> Server:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._provider.shutdown()
        self._provider.server_close()
        self._thread.join()


def main(argv: list[str] | None = None) -> int:
    """Serve a script file until interrupted, printing the URL first."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", type=Path, required=True, help="a JSON script file")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--served-model", help="the model id the answers name")
    parser.add_argument("--log", type=Path, help="append each request here as JSON")
    args = parser.parse_args(argv)
    script = Script.parse(json.loads(args.script.read_text()))
    if args.served_model:
        script.served_model = args.served_model
    with Server(script, args.port, args.log) as server:
        print(server.url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
