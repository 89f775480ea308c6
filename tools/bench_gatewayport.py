#!/usr/bin/env python3
"""What the gateway port's forwarder (yyb/harness/forwarder.py) costs, run by hand.

A sandboxed client talks to a UNIX socket server on the host in the two ways a candidate can
reach it: through the forwarder at 127.0.0.1:PORT, and directly at /run/yyb/gateway.sock;
and, as the baseline of what TCP on loopback costs alone, to the same server run inside the
sandbox at 127.0.0.1:PORT+1. Measured in one sandboxed run, the ways taken in turn --runs
times: a download and an upload of --mib MiB (MB/s, median) and a 64-byte round trip
(microseconds, median of --trips). Prints each way and the forwarder's ratio to the others.
Usage: python tools/bench_gatewayport.py [--runs 5] [--mib 256] [--trips 2000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import tempfile
import threading

from yyb.harness import gatewayport, sandbox

PORT = 8088
# The server's side of the protocol, run on the host (the gateway) and, for the baseline, in
# the sandbox: D + size -> that many bytes; U + bytes to the end -> their count; P -> echo.
SERVER = r"""
import socket, struct
def answer(conn):
    kind = conn.recv(1)
    if kind == b"D":
        want = struct.unpack("!Q", conn.recv(8))[0]
        for _ in range(want >> 20):
            conn.sendall(bytes(1 << 20))
    elif kind == b"U":
        total = 0
        while chunk := conn.recv(1 << 20):
            total += len(chunk)
        conn.sendall(struct.pack("!Q", total))
    elif kind == b"P":
        while chunk := conn.recv(64):
            conn.sendall(chunk)
    conn.close()
"""
PROTOCOL: dict = {}
exec(SERVER, PROTOCOL)  # the host's copy of answer()
CLIENT = (
    SERVER
    + r"""
import os, socket, statistics, struct, sys, time
port, size, runs, trips = (int(word) for word in sys.argv[1:5])
def direct():
    s = socket.socket(socket.AF_UNIX)
    s.connect("/run/yyb/gateway.sock")
    return s
local = socket.create_server(("127.0.0.1", port + 1))
if os.fork() == 0:
    while True:
        conn, _ = local.accept()
        if os.fork() == 0:
            answer(conn)
            os._exit(0)
        conn.close()
ways = {
    "forwarder": lambda: socket.create_connection(("127.0.0.1", port)),
    "direct": direct,
    "tcp-only": lambda: socket.create_connection(("127.0.0.1", port + 1)),
}
buffer = bytearray(1 << 20)
block = bytes(1 << 20)
found = {name: ([], [], []) for name in ways}
for _ in range(runs):
    for name, way in ways.items():
        down, up, trip = found[name]
        s = way()
        start = time.perf_counter()
        s.sendall(b"D" + struct.pack("!Q", size))
        got = 0
        while True:
            n = s.recv_into(buffer)
            if not n:
                break
            got += n
        down.append(got / (time.perf_counter() - start) / 1e6)
        s.close()
        s = way()
        start = time.perf_counter()
        s.sendall(b"U")
        for _ in range(size // len(block)):
            s.sendall(block)
        s.shutdown(socket.SHUT_WR)
        s.recv(8)
        up.append(size / (time.perf_counter() - start) / 1e6)
        s.close()
        s = way()
        s.sendall(b"P")
        for _ in range(trips // runs):
            start = time.perf_counter()
            s.sendall(b"x" * 64)
            got = 0
            while got < 64:
                got += len(s.recv(64 - got))
            trip.append((time.perf_counter() - start) * 1e6)
        s.close()
for name, (down, up, trip) in found.items():
    print(name, statistics.median(down), statistics.median(up), statistics.median(trip))
"""
)


def serve(server: socket.socket) -> None:
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        threading.Thread(target=PROTOCOL["answer"], args=(conn,), daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--trips", type=int, default=2000)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="yyb-bench-port-", dir="/var/tmp")
    os.chmod(folder, 0o755)
    try:
        path = os.path.join(folder, "gateway.sock")
        server = socket.socket(socket.AF_UNIX)
        server.bind(path)
        server.listen(64)
        threading.Thread(target=serve, args=(server,), daemon=True).start()
        work = os.path.join(folder, "work")
        os.mkdir(work)
        sandbox.hand_over(work)
        box = sandbox.Sandbox(writable=[work], cwd=work, gateway=gatewayport.Port(path, PORT))
        size = args.mib << 20
        words = [str(PORT), str(size), str(args.runs), str(args.trips)]
        outcome, _ = box.run(
            ["/usr/bin/python3", "-c", CLIENT, *words], {"PATH": "/usr/bin:/bin"}, 600_000
        )
        if outcome.exit_code != 0:
            raise SystemExit(outcome.stderr.data.decode(errors="replace"))
        found = {}
        for line in outcome.stdout.data.decode().splitlines():
            name, *numbers = line.split()
            found[name] = [float(number) for number in numbers]
        print(f"{args.mib} MiB x {args.runs}, {args.trips} round trips of 64 bytes")
        for name, (down, up, trip) in found.items():
            print(
                f"{name:10} download {down:8.0f} MB/s  upload {up:8.0f} MB/s  trip {trip:6.0f} us"
            )
        (fd, fu, ft) = found["forwarder"]
        for other in ("direct", "tcp-only"):
            od, ou, ot = found[other]
            print(
                f"forwarder/{other}: download {fd / od:.2f}, upload {fu / ou:.2f},",
                f"trip +{ft - ot:.0f} us",
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
