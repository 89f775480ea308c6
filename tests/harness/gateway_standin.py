"""A stand-in gateway for the gateway port's tests: HTTP/1.1 on a UNIX socket, each request
answered with a JSON echo of what arrived, and the connections open at once counted."""

from __future__ import annotations

import http.server
import json
import os
import socketserver
import threading


class Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60  # a connection that sends nothing is held this long at most

    def setup(self):
        self.server.gateway.entered()
        super().setup()

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.gateway.left()

    def address_string(self) -> str:
        return "gateway"  # a UNIX socket's peer has no address

    def log_message(self, *args) -> None:
        pass

    def do_GET(self):
        self.answer(b"")

    def do_POST(self):
        self.answer(self.rfile.read(int(self.headers.get("Content-Length", "0"))))

    def answer(self, body: bytes) -> None:
        text = json.dumps(
            {
                "method": self.command,
                "path": self.path,
                "host": self.headers.get("Host"),
                "body": body.decode(errors="replace"),
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = 256  # the forwarder never waits for a full backlog: it drops

    def handle_error(self, request, client_address) -> None:
        pass  # a client gone mid-answer (a killed forwarder, a flood closed) is expected


class Gateway:
    """The stand-in, listening at ``path`` until ``close``; ``peak``: the most connections
    it held at once; ``served``: how many it took."""

    def __init__(self, path: str, owner: int | None = None):
        self.path = path
        self._lock = threading.Lock()
        self.open = 0
        self.peak = 0
        self.served = 0
        self.server = Server(path, Echo)
        self.server.gateway = self
        if owner is not None:
            os.chown(path, owner, owner)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def entered(self) -> None:
        with self._lock:
            self.open += 1
            self.served += 1
            self.peak = max(self.peak, self.open)

    def left(self) -> None:
        with self._lock:
            self.open -= 1

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
