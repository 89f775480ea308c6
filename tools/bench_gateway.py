#!/usr/bin/env python3
"""What the model gateway adds to a call, against the same scripted provider direct, in one run.

Starts the scripted provider (tests/agents/model_server.py) on loopback and a gateway in front
of it (yyb/gateway/), admitting the client as a run admits an attempt: a UNIX socket of its
own (as the in-sandbox forwarder reaches it) and each call kept in a store as it ends. One client
(aiohttp, a kept-alive connection each way: TCP direct, the socket through the gateway) then
measures, alternating direct and gateway so that drift in the machine's load falls on both:

  latency:    --calls non-streaming Chat Completions calls each way over one kept-alive
              connection; the median per call of each, and the gateway's added median;
  throughput: --streams streamed Chat Completions answers of --text characters each way
              (the provider sends one SSE event per 24 characters); bytes per second of
              each, and the ratio gateway / direct (1.0: no loss).

Usage: python tools/bench_gateway.py [--calls 400] [--streams 5] [--text 200000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from tests.gateway.conftest import ENVIRON, PRICES, providers_for  # noqa: E402
from yyb.gateway import Gateway  # noqa: E402

# The scripted provider writes an answer's head and body in two sends; with Nagle's algorithm
# on, a client waits for its own delayed ACK (40 ms on Linux) before the body comes, which
# would make the direct baseline 40 ms slower than the provider is (the gateway's own client
# happens not to hit it). The provider runs with it off, so both paths see it as it is.
CHAT = {"model": "gpt-5", "messages": [{"role": "user", "content": "Fix calc.py."}]}


async def timed(session: aiohttp.ClientSession, url: str, body: bytes, headers: dict):
    """One POST: seconds to the last byte, bytes received."""
    start = time.perf_counter()
    async with session.post(url, data=body, headers=headers) as answer:
        data = await answer.read()
        assert answer.status == 200, data[:200]
    return time.perf_counter() - start, len(data)


async def measure(url: str, socket_path: str, token: str, count: int, body: dict) -> list:
    """``count`` pairs of (direct, through the gateway) timings."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    data = json.dumps(body).encode()
    path = "/v1/chat/completions"
    unix = aiohttp.UnixConnector(path=socket_path)
    async with aiohttp.ClientSession() as direct, aiohttp.ClientSession(connector=unix) as via:
        pair = (
            lambda: timed(direct, url + path, data, headers),
            lambda: timed(via, "http://gateway" + path, data, headers),
        )
        await pair[0](), await pair[1]()  # warm both connections
        return [(await pair[0](), await pair[1]()) for _ in range(count)]


def client(url: str, gateway: Gateway, count: int, body: dict, kept: bool = True) -> list:
    """Run ``measure`` in a process of its own, as a candidate in its sandbox would call: the
    gateway is a thread of this (the controller's) process and must not share its
    interpreter lock with the client it serves. ``kept``: each call is kept in a store as it
    ends, as a run keeps it (else the gateway alone)."""
    from yyb.attempts.metering import Journal
    from yyb.store.repo import Store

    # As a run admits an attempt: a socket of its own, each call kept in a store as it ends.
    store, _ = Store.init(tempfile.mkdtemp(prefix="gwb-store-", dir="/tmp"))
    journal = Journal(store, "0" * 64, PRICES)
    attempt = "1" * 64
    own = gateway.socket_path.with_name(gateway.socket_path.stem + f"-{kept}.sock")
    watcher = journal.watcher(attempt, "openai/gpt-5", None) if kept else None
    token = gateway.admit(attempt, "openai/gpt-5", None, own, watcher)
    argv = [url, str(own), token, str(count), json.dumps(body)]
    out = subprocess.run(
        [sys.executable, __file__, "--client", *argv],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    meter = gateway.retire(token)
    journal.close()
    assert all(c.record.outcome == "answered" for c in meter.calls)
    return json.loads(out.stdout)


@contextlib.contextmanager
def provider(script_path: Path, script: dict) -> Iterator[str]:
    """The scripted provider in a process of its own (its Python threads must not share the
    gateway's interpreter lock, as a real provider shares nothing with it): its URL."""
    script_path.write_text(json.dumps(script))
    code = (
        "import sys; from tests.agents import model_server as m; "
        "m.Handler.disable_nagle_algorithm = True; sys.exit(m.main(sys.argv[1:]))"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code, "--script", str(script_path)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        yield process.stdout.readline().strip()
    finally:
        process.terminate()
        process.wait(10)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--client"]:
        url, socket_path, token, count, body = argv[1:]
        pairs = asyncio.run(measure(url, socket_path, token, int(count), json.loads(body)))
        print(json.dumps(pairs))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--streams", type=int, default=5)
    parser.add_argument("--text", type=int, default=200_000)
    args = parser.parse_args(argv)
    script = {"turns": [], "fallback": {"text": "x" * args.text}}
    short = {"turns": [], "fallback": {"text": "The bug is in add."}}
    folder = Path(tempfile.mkdtemp(prefix="gwb", dir="/tmp"))
    results = {}
    for name, turns, count, body in (
        ("latency", short, args.calls, CHAT),
        ("throughput", script, args.streams, {**CHAT, "stream": True}),
    ):
        with provider(folder / f"{name}.json", turns) as url:
            socket_path = folder / f"{name}.sock"
            with Gateway(providers_for(url), PRICES, socket_path, environ=ENVIRON) as gateway:
                results[name] = client(url, gateway, count, body)
                if name == "latency":
                    results["bare"] = client(url, gateway, count, body, kept=False)
    for key, said in (("latency", "kept as a run keeps them"), ("bare", "the gateway alone")):
        direct_ms = statistics.median(d[0] for d, _ in results[key]) * 1000
        gateway_ms = statistics.median(g[0] for _, g in results[key]) * 1000
        added = statistics.median((g[0] - d[0]) * 1000 for d, g in results[key])
        print(f"latency over {args.calls} calls ({said}): direct median {direct_ms:.3f} ms, "
              f"through the gateway {gateway_ms:.3f} ms, added median {added:.3f} ms")  # fmt: skip
    rates = [(d[1] / d[0], g[1] / g[0]) for d, g in results["throughput"]]
    direct_rate = statistics.median(d for d, _ in rates)
    gateway_rate = statistics.median(g for _, g in rates)
    size = results["throughput"][0][0][1]
    print(f"throughput over {args.streams} streams of {size} bytes: direct "
          f"{direct_rate / 1e6:.2f} MB/s, through the gateway {gateway_rate / 1e6:.2f} MB/s, "
          f"ratio {gateway_rate / direct_rate:.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
