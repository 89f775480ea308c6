"""The gateway against the scripted provider: fixtures and raw HTTP clients.

The scripted provider (tests/agents/model_server.py) records credentials only as present; the
``upstream`` fixture also notes each credential value it was sent (outside the record the
provider keeps), so a test can check the upstream saw the real key and never a token.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.agents.model_server import Server
from yyb.gateway import Gateway, Limits, Provider, Providers, price_table

OPENAI_KEY = "sk-proj-REALOPENAIKEY0123456789abcdef"
ANTHROPIC_KEY = "sk-ant-api03-REALANTHROPICKEY0123456789"
ENVIRON = {"YYB_TEST_OPENAI_KEY": OPENAI_KEY, "YYB_TEST_ANTHROPIC_KEY": ANTHROPIC_KEY}
SERVED = "fixer-2025-09-29"
# micro-USD per million tokens: 3 USD in, 15 USD out, 0.30 USD cached.
PRICES = price_table({SERVED: {"input": 3_000_000, "output": 15_000_000, "cached_input": 300_000}})
TEXT = "I will fix the subtraction in add, then run the tests to make sure."
CALL = {"name": "bash", "arguments": {"command": "sed -i 's/a - b/a + b/' calc.py"}}


@dataclass
class Upstream:
    """The scripted provider and the credential values it was sent."""

    server: Server
    keys: list[str] = field(default_factory=list)


def fallback_script(text: str = TEXT) -> dict:
    """A script answering every request the same (a fallback turn and no turns)."""
    return {"turns": [], "fallback": {"text": text, "tool_calls": [CALL]}}


@pytest.fixture
def upstream():
    with Server(fallback_script()) as server:
        provider = server._provider
        original = provider.record
        seen = Upstream(server)

        def record(handler, raw):
            for name in ("authorization", "x-api-key"):
                if handler.headers.get(name):
                    seen.keys.append(handler.headers[name])
            return original(handler, raw)

        provider.record = record
        yield seen


def providers_for(url: str) -> Providers:
    """Both provider kinds at ``url``, their keys in ENVIRON."""
    return Providers.of(
        Provider("openai", url, "YYB_TEST_OPENAI_KEY", ("openai",)),
        Provider("anthropic", url, "YYB_TEST_ANTHROPIC_KEY", ("anthropic",)),
    )


def short_socket(tmp_path: Path) -> Path:
    """A socket path short enough for AF_UNIX (108 bytes) under the test's temp folder."""
    path = tmp_path / "gw.sock"
    if len(str(path)) < 100:
        return path
    import tempfile

    return Path(tempfile.mkdtemp(prefix="gw", dir="/tmp")) / "gw.sock"


@pytest.fixture
def make_gateway(tmp_path, upstream):
    """Start gateways on the scripted provider (stopped at the end)."""
    started = []

    def make(limits: Limits | None = None, **kwargs) -> Gateway:
        socket_path = short_socket(tmp_path / f"g{len(started)}")
        socket_path.parent.mkdir(parents=True, exist_ok=True)
        gateway = Gateway(
            providers_for(upstream.server.url), kwargs.pop("prices", PRICES), socket_path,
            tcp=True, limits=limits or Limits(), environ=ENVIRON, **kwargs,
        )  # fmt: skip
        started.append(gateway.start())
        return gateway

    yield make
    for gateway in started:
        gateway.stop()


@pytest.fixture
def gateway(make_gateway):
    return make_gateway()


class UnixConnection(http.client.HTTPConnection):
    """http.client over a UNIX socket (as the in-sandbox forwarder reaches the gateway)."""

    def __init__(self, path: Path):
        super().__init__("localhost")
        self._path = str(path)

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self._path)


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict
    body: bytes

    def json(self):
        return json.loads(self.body)


def request(
    gateway: Gateway,
    path: str,
    body: dict | bytes | None,
    token: str | None,
    *,
    anthropic: bool = False,
    unix: bool = False,
    method: str = "POST",
) -> Answer:
    """One raw HTTP request to the gateway (TCP, or its UNIX socket)."""
    if unix:
        connection = UnixConnection(gateway.socket_path)
    else:
        connection = http.client.HTTPConnection("127.0.0.1", int(gateway.url.rsplit(":", 1)[1]))
    headers = {"Content-Type": "application/json"}
    if token is not None and anthropic:
        headers |= {"x-api-key": token, "anthropic-version": "2023-06-01"}
    elif token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    connection.request(method, path, data, headers)
    answer = connection.getresponse()
    result = Answer(answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read())
    connection.close()
    return result


def sse_data(body: bytes) -> list:
    """The JSON data of each event of a stream (``[DONE]`` as the string)."""
    out = []
    for event in body.decode().split("\n\n"):
        for line in event.splitlines():
            if line.startswith("data: "):
                text = line[6:]
                out.append(text if text == "[DONE]" else json.loads(text))
    return out


SLOW_HEAD = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
             "model": "slow-2025-01-01", "system_fingerprint": None}  # fmt: skip
SLOW_CHOICE = {"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}
SLOW_FIRST = {**SLOW_HEAD, "choices": [SLOW_CHOICE]}
SLOW_USAGE = {**SLOW_HEAD, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}


@contextlib.contextmanager
def slow_upstream():
    """A Chat Completions upstream that streams its first chunk, then waits for the event it
    yields before the usage chunk and ``[DONE]``: ``(url, release)``."""
    from aiohttp import web

    release = threading.Event()

    async def chat(request):
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(f"data: {json.dumps(SLOW_FIRST)}\n\n".encode())
        await asyncio.get_running_loop().run_in_executor(None, release.wait, 10)
        await response.write(f"data: {json.dumps(SLOW_USAGE)}\n\ndata: [DONE]\n\n".encode())
        return response

    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}", release
    finally:
        release.set()
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
