"""Hostile candidates: forged and retired tokens, another attempt's budget, calls past the
ceiling, floods, a model not planned, and a search of the evidence for the real key."""

from __future__ import annotations

import json
import socket
import threading

from tests.gateway.conftest import ANTHROPIC_KEY, OPENAI_KEY, UnixConnection, request
from yyb.gateway import Limits, records
from yyb.store.objects import codec

CHAT = {"model": "gpt-5", "messages": [{"role": "user", "content": "Fix calc.py."}]}
ANTHROPIC = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": CHAT["messages"]}


def one_call(gateway) -> int:
    """What one CHAT call costs (measured by a probe attempt of its own)."""
    probe = gateway.admit("probe", "openai/gpt-5", None)
    assert request(gateway, "/v1/chat/completions", CHAT, probe).status == 200
    return gateway.retire(probe).spent_micros


def test_a_forged_or_retired_token_is_refused_in_each_providers_shape(gateway, upstream):
    answer = request(gateway, "/v1/chat/completions", CHAT, "yyb-gw-" + "0" * 48)
    assert answer.status == 401
    assert answer.headers["x-should-retry"] == "false"
    error = answer.json()["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", "invalid_api_key")
    answer = request(gateway, "/v1/messages", ANTHROPIC, OPENAI_KEY, anthropic=True)
    assert answer.status == 401
    assert answer.json()["type"] == "error"
    assert answer.json()["error"]["type"] == "authentication_error"
    assert request(gateway, "/v1/chat/completions", CHAT, None).status == 401
    token = gateway.admit("a1", "openai/gpt-5", None)
    assert request(gateway, "/v1/chat/completions", CHAT, token).status == 200
    meter = gateway.retire(token)
    assert request(gateway, "/v1/chat/completions", CHAT, token).status == 401
    assert request(gateway, "/v1/models", None, token, method="GET").status == 401
    assert len(meter.calls) == 1 and gateway.unauthorized == 5
    assert len(upstream.server.requests) == 1


def test_another_attempts_token_spends_only_its_own_budget(gateway, upstream):
    one = one_call(gateway)
    mine = gateway.admit("mine", "openai/gpt-5", one)
    theirs = gateway.admit("theirs", "openai/gpt-5", None)
    for _ in range(3):
        assert request(gateway, "/v1/chat/completions", CHAT, theirs).status == 200
    assert request(gateway, "/v1/chat/completions", CHAT, mine).status == 200
    assert request(gateway, "/v1/chat/completions", CHAT, mine).status == 429
    assert request(gateway, "/v1/chat/completions", CHAT, theirs).status == 200
    mine_meter, theirs_meter = gateway.retire(mine), gateway.retire(theirs)
    assert {c.record.attempt for c in mine_meter.calls} == {"mine"}
    assert {c.record.attempt for c in theirs_meter.calls} == {"theirs"}
    assert (mine_meter.spent_micros, theirs_meter.spent_micros) == (one, 4 * one)
    assert mine_meter.ceiling_reached and not theirs_meter.ceiling_reached


def test_calls_after_the_ceiling_are_refused_and_the_spend_stays_within_one_call(gateway, upstream):
    ceiling = one_call(gateway) + 1  # the second call starts under it and ends over it
    token = gateway.admit("a1", "openai/gpt-5", ceiling)
    statuses = [request(gateway, "/v1/chat/completions", CHAT, token).status for _ in range(5)]
    assert statuses == [200, 200, 429, 429, 429]
    refused = request(gateway, "/v1/chat/completions", CHAT, token)
    error = refused.json()["error"]
    assert (error["type"], error["code"]) == ("insufficient_quota", "yyb_spend_ceiling")
    meter = gateway.retire(token)
    assert len(upstream.server.requests) == 1 + 2
    assert meter.ceiling_reached
    assert ceiling <= meter.spent_micros <= ceiling + max(c.cost_micros for c in meter.calls)
    assert [c.record.outcome for c in meter.calls] == ["answered"] * 2 + ["refused_ceiling"] * 4
    anthropic = gateway.admit("a2", "anthropic/claude-sonnet-4-5", 0)
    answer = request(gateway, "/v1/messages", ANTHROPIC, anthropic, anthropic=True)
    assert answer.status == 400
    assert answer.json()["error"]["type"] == "invalid_request_error"


def test_a_model_not_planned_is_refused_and_recorded(gateway, upstream):
    token = gateway.admit("a1", "openai/gpt-5", None)
    for model in ("gpt-4o", "anthropic/gpt-5", "openai/gpt-5-pro"):
        answer = request(gateway, "/v1/chat/completions", {**CHAT, "model": model}, token)
        assert answer.status == 403
        assert answer.json()["error"]["param"] == "model"
    answer = request(gateway, "/v1/messages", ANTHROPIC, token, anthropic=True)
    assert answer.status == 404  # the openai provider speaks no Messages
    assert request(gateway, "/v1/chat/completions", {**CHAT, "model": "openai/gpt-5"}, token)
    meter = gateway.retire(token)
    assert [c.record.requested_model for c in meter.calls] == [
        "gpt-4o", "anthropic/gpt-5", "openai/gpt-5-pro", "openai/gpt-5",
    ]  # fmt: skip
    assert [c.record.outcome for c in meter.calls][:3] == ["refused_model"] * 3
    assert len(upstream.server.requests) == 1


def _stall(gateway, token: str) -> socket.socket:
    """A connection that announces a body and never sends it: it holds a call slot."""
    port = int(gateway.url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port))
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: 100\r\n\r\n"
    )
    sock.sendall(head.encode())
    return sock


def test_a_flood_stays_bounded_and_other_attempts_are_served(make_gateway, upstream):
    limits = Limits(max_body_bytes=64 * 1024, keep_bytes=4096, per_token_concurrency=3)
    gateway = make_gateway(limits)
    flood = gateway.admit("flood", "openai/gpt-5", None)
    other = gateway.admit("other", "openai/gpt-5", None)
    huge = json.dumps({**CHAT, "padding": "x" * (2 * 1024 * 1024)}).encode()
    statuses: list[int] = []

    def send():
        statuses.append(request(gateway, "/v1/chat/completions", huge, flood).status)

    threads = [threading.Thread(target=send) for _ in range(24)]
    for thread in threads:
        thread.start()
    assert request(gateway, "/v1/chat/completions", CHAT, other).status == 200
    for thread in threads:
        thread.join()
    assert set(statuses) <= {413, 429} and 413 in statuses
    stalled = [_stall(gateway, flood) for _ in range(3)]
    try:
        for _ in range(200):  # until the gateway has read the three heads and holds the slots
            busy = request(gateway, "/v1/chat/completions", CHAT, flood)
            if busy.status == 429:
                break
        assert busy.json()["error"]["code"] == "rate_limit_exceeded"
        assert request(gateway, "/v1/chat/completions", CHAT, other).status == 200
    finally:
        for sock in stalled:
            sock.close()
    meter = gateway.retire(flood, wait_s=2)
    assert len(upstream.server.requests) == 2 + sum(
        1 for c in meter.calls if c.record.outcome == "answered"
    )
    for call in meter.calls:
        assert len(call.request) <= limits.keep_bytes and len(call.response) <= limits.keep_bytes
    sized = [c for c in meter.calls if c.record.outcome == "refused_size"]
    assert sized and all(c.record.request.truncated for c in sized)
    assert all(c.record.request.bytes > limits.max_body_bytes for c in sized)


def test_the_real_keys_are_in_no_call_and_no_record(gateway, upstream):
    tokens = [
        gateway.admit("a1", "openai/gpt-5", 1000),
        gateway.admit("a2", "anthropic/claude-sonnet-4-5", None),
    ]
    for _ in range(2):
        request(gateway, "/v1/chat/completions", {**CHAT, "stream": True}, tokens[0])
        request(gateway, "/v1/chat/completions", {**CHAT, "model": "x"}, tokens[0])
        request(gateway, "/v1/messages", {**ANTHROPIC, "stream": True}, tokens[1], anthropic=True)
        request(gateway, "/v1/messages", ANTHROPIC, tokens[1], anthropic=True)
    assert upstream.keys
    for token in tokens:
        meter = gateway.retire(token)
        assert len(meter.calls) == 4
        kept = repr(meter).encode()
        for kind, body in records(meter):
            kept += body if kind == "blob" else codec.encode(body)
        for secret in (OPENAI_KEY, ANTHROPIC_KEY, *tokens):
            assert secret.encode() not in kept


def on_socket(path, token: str) -> int:
    """The status of one CHAT call with ``token`` through the UNIX socket at ``path``."""
    connection = UnixConnection(path)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    connection.request("POST", "/v1/chat/completions", json.dumps(CHAT).encode(), headers)
    status = connection.getresponse().status
    connection.close()
    return status


def test_a_token_bound_to_its_attempts_socket_is_refused_through_any_other(gateway, upstream):
    """Each attempt's sandbox is shown a socket of its own: a token carried out of one
    sandbox into another (or to the gateway's own socket, or its TCP port) is refused."""
    folder = gateway.socket_path.parent
    a = gateway.admit("a", "openai/gpt-5", None, folder / "a.sock")
    b = gateway.admit("b", "openai/gpt-5", None, folder / "b.sock")
    assert oct((folder / "a.sock").stat().st_mode & 0o777) == "0o600"
    assert on_socket(folder / "a.sock", a) == 200
    assert on_socket(folder / "b.sock", b) == 200
    assert on_socket(folder / "b.sock", a) == 401
    assert on_socket(folder / "a.sock", b) == 401
    assert on_socket(gateway.socket_path, a) == 401
    assert request(gateway, "/v1/chat/completions", CHAT, a).status == 401
    meter = gateway.retire(a)
    assert len(meter.calls) == 1 and not (folder / "a.sock").exists()
    assert on_socket(folder / "b.sock", b) == 200  # the other attempt is unaffected
    assert len(gateway.retire(b).calls) == 2
    assert len(upstream.server.requests) == 3 and gateway.unauthorized == 4


CUT_OFF = r"""
import json, signal, socket, sys, tempfile
from pathlib import Path
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as yyb.cli.main leaves it
sys.path.insert(0, sys.argv[1])
from tests.agents.model_server import Server
from yyb.gateway import Gateway, Provider, Providers
script = {"turns": [], "fallback": {"text": "word " * 20000}}
with Server(script) as server:
    providers = Providers.of(Provider("openai", server.url, "KEY", ("openai",)))
    path = Path(tempfile.mkdtemp(prefix="gw", dir="/tmp")) / "gw.sock"
    with Gateway(providers, None, path, environ={"KEY": "sk-x"}) as gateway:
        for _ in range(int(sys.argv[2])):
            token = gateway.admit("a", "openai/gpt-5")
            body = json.dumps({"model": "gpt-5", "stream": True, "messages": []}).encode()
            client = socket.socket(socket.AF_UNIX)
            client.connect(str(path))
            client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                           b"Authorization: Bearer " + token.encode() + b"\r\n"
                           b"Content-Type: application/json\r\n"
                           b"Content-Length: %d\r\n\r\n" % len(body) + body)
            client.recv(100)
            client.close()  # cut off mid-stream: the gateway's next writes fail
            gateway.retire(token)
print("alive")
"""


def test_a_client_cut_off_mid_stream_never_kills_the_controller():
    """In a process whose SIGPIPE is at its default (the CLI's), a candidate that closes its
    connection mid-answer makes the gateway's writes fail; the process must live on."""
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-c", CUT_OFF, root, "20"], capture_output=True, timeout=120
    )
    assert (done.returncode, done.stdout.strip()) == (0, b"alive"), done.stderr[-2000:]
