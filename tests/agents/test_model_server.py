"""The scripted model provider speaks each provider's wire format exactly."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agents.model_server import PIECE, REDACTED, Server

HERE = Path(__file__).parent
CALL = {"name": "bash", "arguments": {"command": "sed -i 's/a - b/a + b/' calc.py"}}
LONG = "The bug is in add: it subtracts where it should add, so I will fix it."


def post(server: Server, path: str, body: dict, headers: dict | None = None):
    """POST ``body`` as JSON; return the response and its whole (de-chunked) body."""
    connection = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
    connection.request(
        "POST",
        path,
        json.dumps(body),
        {"Content-Type": "application/json", **(headers or {})},
    )
    answer = connection.getresponse()
    data = answer.read()
    connection.close()
    return answer, data


def sse_events(data: bytes) -> list[tuple[str | None, str]]:
    """Split an event stream into (event name, data) pairs, checking its framing: every
    event ends with a blank line, every line is ``event: `` or ``data: ``, one data line."""
    text = data.decode()
    assert text.endswith("\n\n")
    events = []
    for block in text[:-2].split("\n\n"):
        name, payload = None, None
        for line in block.split("\n"):
            field, sep, value = line.partition(": ")
            assert sep and field in ("event", "data"), line
            if field == "event":
                assert name is None
                name = value
            else:
                assert payload is None
                payload = value
        assert payload is not None
        events.append((name, payload))
    return events


def test_a_chat_completion_answers_the_turn_with_the_served_model():
    turns = [{"text": "hello"}, {"text": LONG, "tool_calls": [CALL]}]
    with Server(turns) as server:
        body = {"model": "fixer", "messages": [{"role": "user", "content": "hi"}]}
        answer, data = post(server, "/v1/chat/completions", body)
        first = json.loads(data)
        _, data = post(server, "/v1/chat/completions", body)
        second = json.loads(data)
    assert answer.status == 200
    assert answer.getheader("Content-Type") == "application/json"
    assert first["object"] == "chat.completion"
    assert first["model"] == "fixer-2025-09-29"
    assert first["choices"][0]["message"] == {
        "role": "assistant",
        "content": "hello",
        "refusal": None,
    }
    assert first["choices"][0]["finish_reason"] == "stop"
    usage = first["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    choice = second["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["type"] == "function"
    assert call["function"]["name"] == "bash"
    assert json.loads(call["function"]["arguments"]) == CALL["arguments"]


def test_a_streamed_chat_completion_is_sse_chunks_then_usage_then_done():
    with Server([{"text": LONG, "tool_calls": [CALL]}]) as server:
        body = {
            "model": "fixer",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        answer, data = post(server, "/chat/completions", body)
    assert answer.status == 200
    assert answer.getheader("Transfer-Encoding") == "chunked"
    assert answer.getheader("Content-Type").startswith("text/event-stream")
    events = sse_events(data)
    assert all(name is None for name, _ in events)
    assert events[-1][1] == "[DONE]"
    chunks = [json.loads(payload) for _, payload in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert {c["model"] for c in chunks} == {"fixer-2025-09-29"}
    assert len({c["id"] for c in chunks}) == 1
    *choices, usage = chunks
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] > 0
    deltas = [c["choices"][0]["delta"] for c in choices]
    assert deltas[0]["role"] == "assistant"
    text = "".join(d.get("content") or "" for d in deltas)
    assert text == LONG and len(LONG) > PIECE  # joined from several pieces
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert calls[0]["id"] and calls[0]["function"]["name"] == "bash"
    arguments = "".join(c["function"]["arguments"] for c in calls)
    assert json.loads(arguments) == CALL["arguments"]
    assert choices[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_a_streamed_chat_completion_without_include_usage_has_no_usage_chunk():
    with Server([{"text": "hi"}]) as server:
        body = {"model": "fixer", "messages": [], "stream": True}
        _, data = post(server, "/v1/chat/completions", body)
    chunks = [json.loads(p) for _, p in sse_events(data)[:-1]]
    assert all(c["choices"] and "usage" not in c for c in chunks)


def test_models_lists_the_served_model():
    with Server([]) as server:
        connection = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
        connection.request("GET", "/v1/models")
        listing = json.loads(connection.getresponse().read())
        connection.close()
    assert listing["object"] == "list"
    assert [m["id"] for m in listing["data"]] == ["fixer-2025-09-29"]


def test_a_message_answers_text_and_tool_use_blocks():
    script = {"served_model": "fixer-20250929", "turns": [{"text": "ok", "tool_calls": [CALL]}]}
    with Server(script) as server:
        body = {"model": "fixer", "max_tokens": 64, "messages": [{"role": "user", "content": "x"}]}
        _, data = post(server, "/v1/messages", body, {"x-api-key": "sk-ant-secret"})
        recorded = server.requests
    whole = json.loads(data)
    assert whole["type"] == "message" and whole["model"] == "fixer-20250929"
    text, tool = whole["content"]
    assert text == {"type": "text", "text": "ok"}
    assert tool["type"] == "tool_use" and tool["id"].startswith("toolu_")
    assert tool["input"] == CALL["arguments"]
    assert whole["stop_reason"] == "tool_use"
    assert whole["usage"]["input_tokens"] > 0 and whole["usage"]["output_tokens"] > 0
    assert recorded[0].headers["x-api-key"] == REDACTED
    assert recorded[0].body == body


def test_a_streamed_message_is_the_documented_event_sequence():
    with Server([{"text": LONG, "tool_calls": [CALL]}]) as server:
        body = {"model": "fixer", "max_tokens": 64, "messages": [], "stream": True}
        answer, data = post(server, "/v1/messages?beta=true", body)
    assert answer.getheader("Transfer-Encoding") == "chunked"
    events = sse_events(data)
    payloads = [json.loads(p) for _, p in events]
    assert [name for name, _ in events] == [p["type"] for p in payloads]
    kinds = [p["type"] for p in payloads]
    text_deltas = -(-len(LONG) // PIECE)
    json_deltas = -(-len(json.dumps(CALL["arguments"])) // PIECE)
    assert kinds == [
        "message_start",
        "content_block_start",
        "ping",
        *["content_block_delta"] * text_deltas,
        "content_block_stop",
        "content_block_start",
        *["content_block_delta"] * json_deltas,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start = payloads[0]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert start["model"] == "fixer-2025-09-29"
    deltas = [p for p in payloads if p["type"] == "content_block_delta"]
    assert "".join(d["delta"]["text"] for d in deltas if d["index"] == 0) == LONG
    partial = "".join(d["delta"]["partial_json"] for d in deltas if d["index"] == 1)
    assert json.loads(partial) == CALL["arguments"]
    opening = [p for p in payloads if p["type"] == "content_block_start"][1]
    assert opening["content_block"]["input"] == {}
    assert payloads[-2]["delta"]["stop_reason"] == "tool_use"
    assert payloads[-2]["usage"]["output_tokens"] > 0


def test_count_tokens_answers_a_count_and_takes_no_turn():
    with Server([{"text": "kept"}]) as server:
        body = {"model": "fixer", "messages": [{"role": "user", "content": "count me"}]}
        _, data = post(server, "/v1/messages/count_tokens", body)
        assert [t.text for t in server.script.turns] == ["kept"]
    assert json.loads(data)["input_tokens"] > 0


def test_a_streamed_response_numbers_its_events_and_completes_with_usage():
    with Server([{"text": LONG, "tool_calls": [CALL]}]) as server:
        body = {"model": "fixer", "input": "fix it", "stream": True}
        _, data = post(server, "/v1/responses", body)
    events = sse_events(data)
    payloads = [json.loads(p) for _, p in events]
    assert [name for name, _ in events] == [p["type"] for p in payloads]
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    kinds = [p["type"] for p in payloads]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert kinds.count("response.output_item.added") == 2
    assert kinds.count("response.output_item.done") == 2
    text = "".join(p["delta"] for p in payloads if p["type"] == "response.output_text.delta")
    assert text == LONG
    done = payloads[-1]["response"]
    assert done["status"] == "completed" and done["model"] == "fixer-2025-09-29"
    message, call = done["output"]
    assert message["content"][0]["text"] == LONG
    assert call["type"] == "function_call" and call["name"] == "bash"
    assert json.loads(call["arguments"]) == CALL["arguments"]
    usage = done["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def test_a_turn_with_when_waits_for_a_matching_request():
    script = {"turns": [{"text": "the fix", "when": "calc.py"}], "fallback": {"text": "title"}}
    with Server(script) as server:
        side = {"model": "fixer", "messages": [{"role": "user", "content": "name this chat"}]}
        main = {"model": "fixer", "messages": [{"role": "user", "content": "fix calc.py"}]}
        texts = [
            json.loads(post(server, "/v1/chat/completions", body)[1])["choices"][0]["message"][
                "content"
            ]
            for body in (side, main, main)
        ]
        assert len(server.completions()) == 3
    assert texts == ["title", "the fix", "title"]


def test_credentials_are_recorded_as_redacted():
    with Server([{"text": "hi"}]) as server:
        post(server, "/v1/chat/completions", {"messages": []}, {"Authorization": "Bearer sk-1"})
        (request,) = server.requests
    assert request.headers["authorization"] == REDACTED
    assert "sk-1" not in json.dumps(request.__dict__)


def test_an_unknown_route_is_a_json_404():
    with Server([]) as server:
        answer, data = post(server, "/v1/embeddings", {"input": "x"})
    assert answer.status == 404
    assert "error" in json.loads(data)


def test_the_command_line_prints_its_url_and_logs_requests(tmp_path):
    script, log = tmp_path / "script.json", tmp_path / "requests.jsonl"
    script.write_text(json.dumps([{"text": "from a file"}]))
    command = [sys.executable, str(HERE / "model_server.py"), "--script", str(script)]
    server = subprocess.Popen(
        [*command, "--log", str(log), "--served-model", "other-1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = server.stdout.readline().strip()
        host, port = url.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port))
        connection.request("POST", "/v1/chat/completions", json.dumps({"messages": []}))
        answer = json.loads(connection.getresponse().read())
        connection.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert answer["model"] == "other-1"
    assert answer["choices"][0]["message"]["content"] == "from a file"
    (line,) = log.read_text().splitlines()
    assert json.loads(line)["path"] == "/v1/chat/completions"


def test_the_real_openai_client_reads_every_format():
    openai = pytest.importorskip("openai")
    turns = [{"text": LONG, "tool_calls": [CALL]}, {"text": "plain"}, {"text": LONG}]
    with Server(turns) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test")
        messages = [{"role": "user", "content": "hi"}]
        with client.chat.completions.stream(
            model="fixer", messages=messages, stream_options={"include_usage": True}
        ) as stream:
            streamed = stream.get_final_completion()
        whole = client.chat.completions.create(model="fixer", messages=messages)
        with client.responses.stream(model="fixer", input="hi") as stream:
            responded = stream.get_final_response()
        models = [m.id for m in client.models.list()]
    message = streamed.choices[0].message
    assert message.content == LONG and streamed.usage.total_tokens > 0
    assert json.loads(message.tool_calls[0].function.arguments) == CALL["arguments"]
    assert streamed.model == whole.model == responded.model == "fixer-2025-09-29"
    assert whole.choices[0].message.content == "plain"
    assert responded.output_text == LONG and responded.usage.output_tokens > 0
    assert models == ["fixer-2025-09-29"]


def test_the_real_anthropic_client_reads_every_format():
    anthropic = pytest.importorskip("anthropic")
    with Server([{"text": LONG, "tool_calls": [CALL]}, {"text": "plain"}]) as server:
        client = anthropic.Anthropic(base_url=server.url, api_key="sk-ant-test")
        messages = [{"role": "user", "content": "hi"}]
        with client.messages.stream(model="fixer", max_tokens=64, messages=messages) as stream:
            streamed = stream.get_final_message()
        whole = client.messages.create(model="fixer", max_tokens=64, messages=messages)
        counted = client.messages.count_tokens(model="fixer", messages=messages)
    text, tool = streamed.content
    assert text.text == LONG and tool.name == "bash" and tool.input == CALL["arguments"]
    assert streamed.stop_reason == "tool_use" and streamed.usage.output_tokens > 0
    assert streamed.model == whole.model == "fixer-2025-09-29"
    assert whole.content[0].text == "plain"
    assert counted.input_tokens > 0
