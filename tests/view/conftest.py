"""Stores to view (the built-in example, signed; a bench of hostile candidates), a viewer
serving one in a thread, and a headless Chromium driven by Playwright.

The stores are built once per session or module: building runs real sandboxed attempts, and
nothing a test does through the viewer may change them (tests/view/test_server.py proves it).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.agents.model_server import Server
from tests.attempts.conftest import build_bench
from tests.attempts.test_gateway_run import gateway_bench, run, script
from tests.conftest import MACHINE_VARIABLES
from yyb import signing
from yyb.evidence import names
from yyb.store.repo import Store

CHROMIUM = "/usr/bin/chromium"
# What makes Chromium start as root on a closed network, quietly: no sandbox of its own (root),
# no GPU, nothing fetched in the background.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextlib.contextmanager
def hermetic(root: Path) -> Iterator[None]:
    """What tests/conftest.py's ``hermetic`` does for one test, for a fixture that outlives
    one: a private HOME, XDG folders and temp folder, no store or key of the machine's."""
    with pytest.MonkeyPatch.context() as patch:
        home = root / "home"
        for sub in (".config", ".local/state", ".local/share", ".cache", "tmp"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        patch.setenv("HOME", str(home))
        patch.setenv("TMPDIR", str(home / "tmp"))
        patch.setattr(tempfile, "tempdir", None)
        for name, sub in (
            ("XDG_CONFIG_HOME", ".config"),
            ("XDG_STATE_HOME", ".local/state"),
            ("XDG_DATA_HOME", ".local/share"),
            ("XDG_CACHE_HOME", ".cache"),
        ):
            patch.setenv(name, str(home / sub))
        for name in MACHINE_VARIABLES:
            patch.delenv(name, raising=False)
        patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        patch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
        yield


@dataclass
class Example:
    """The store `yyb example` built, signed by ``public``'s key."""

    store_path: str
    plan: str
    attempts: list[str]
    public: str

    @property
    def store(self) -> Store:
        return Store.open(self.store_path)

    def run_ref(self, attempt: str, leaf: names.Leaf) -> str:
        return self.store.refs.read(names.attempt(self.plan, attempt, leaf))


@pytest.fixture(scope="session")
def example(tmp_path_factory) -> Example:
    """`yyb example` run for real (a subprocess), every terminal, evaluation and report layer
    signed; then a longitudinal layer, so that every page has something to show."""
    root = tmp_path_factory.mktemp("view-example")
    with hermetic(root):
        key = str(root / "signing.key")
        public = signing.generate_key(key)
        env = {**os.environ, signing.KEY_ENV: key}
        done = subprocess.run(
            [sys.executable, "-m", "yyb", "example", "--dir", str(root / "ex")],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        store_path = str(root / "ex" / "store")
        longitudinal = subprocess.run(
            [sys.executable, "-m", "yyb", "--store", store_path, "report", "--longitudinal"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert longitudinal.returncode == 0, longitudinal.stderr
    store = Store.open(store_path)
    (plan,) = [oid for _, oid in store.refs.iter_refs(names.PLANS)]
    attempts = store.objects.get_record(plan)["links"]["attempts"]
    return Example(store_path, plan, attempts, public)


@pytest.fixture(scope="session")
def gatewayed(tmp_path_factory):
    """A store holding one attempt whose candidate called its model twice through the
    gateway (tests/attempts/test_gateway_run.py's stand-in client and provider): (store
    path, plan oid, attempt oid)."""
    root = tmp_path_factory.mktemp("view-gateway")

    def build():
        with hermetic(root), Server(script()) as provider:
            bench = build_bench(root / "bench")
            plan = bench.plan([gateway_bench(bench, provider)])
            (result,) = run(bench, plan)
        return bench, plan, result

    # In a thread of its own: the gateway runs an event loop, and Playwright's runs here. A
    # gateway off the main thread needs SIGPIPE ignored already (an in-process CLI test of
    # this worker may have set it to its default): ignored here, as the gateway would.
    before = signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            bench, plan, result = pool.submit(build).result()
    finally:
        signal.signal(signal.SIGPIPE, before)
    assert result.terminal_class == "resolved", result.reason
    return bench.store_path, plan.oid, result.attempt


@dataclass
class Served:
    """A viewer serving a store in a thread of the test process."""

    url: str  # http://127.0.0.1:PORT/
    store_path: str

    def get(self, path: str, method: str = "GET", host: str | None = None):
        """(status, headers, body) of one request (no redirect followed)."""
        import http.client
        from urllib.parse import urlsplit

        where = urlsplit(self.url)
        connection = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
        headers = {"Host": host} if host is not None else {}
        connection.request(method, path, headers=headers)
        response = connection.getresponse()
        body = response.read()
        connection.close()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, body


@contextlib.contextmanager
def serving(store_path: str, trusted: list[str] = ()) -> Iterator[Served]:
    """``yyb view``'s server on a free port of 127.0.0.1, in a thread, for the block."""
    from yyb.view import server

    keys = [signing.load_public(k) for k in trusted]
    viewer = server.start(Store.open(store_path), 0, keys)
    thread = threading.Thread(target=viewer.serve_forever, daemon=True)
    thread.start()
    try:
        yield Served(viewer.url, store_path)
    finally:
        viewer.shutdown()
        viewer.server_close()
        thread.join(5)


def digest(root: str) -> str:
    """SHA-256 over the whole tree at ``root``: every path, its type, mode and bytes (folders
    included, so a file or folder created, removed or changed anywhere changes it)."""
    h = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(root)):
        for name in sorted(dirs) + sorted(files):
            path = os.path.join(folder, name)
            info = os.lstat(path)
            h.update(f"{os.path.relpath(path, root)}\0{info.st_mode:o}\0".encode())
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as handle:
                    h.update(hashlib.sha256(handle.read()).digest())
    return h.hexdigest()


def copy_store(source: str, dest: Path) -> str:
    """A copy of the store at ``source`` (to damage), its path."""
    shutil.copytree(source, dest, symlinks=True)
    return str(dest)


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium (Debian's) driven by Playwright, one per module; the test is
    skipped, saying why, when either is missing."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the browser tests need playwright (pip install playwright)"
    )
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"the browser tests need Chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()
