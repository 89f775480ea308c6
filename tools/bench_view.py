#!/usr/bin/env python3
"""How long `yyb view` takes to open the page of a large attempt, run by hand.

Builds the built-in example with one more stand-in candidate (tests/view/large.py), which
adds --files files (default 5,000) to the workspace besides fixing the bug, runs that one
attempt for real (sandbox, manifest, patch, grading, terminal, evidence, report layer), then
serves the store as `yyb view` does and times, each --repeat times (median and max printed):

  http:    the attempt page's GET, request to last byte (a fresh connection each time);
  pages:   the same for the whole diff's first page and the final listing's object page;
  browser: Chromium (Debian's, through Playwright) opening the attempt page until its load
           event, when both are installed.

Usage: python tools/bench_view.py [--files 5000] [--repeat 7] [--keep DIR]

With --screenshots DIR it instead runs `yyb example` (signed) and writes the screenshots of
docs/view.md into DIR: the experiment, an attempt, a diff and an object page.
Usage: python tools/bench_view.py --screenshots docs/view
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.view import large  # noqa: E402
from tests.view.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from yyb.evidence import names  # noqa: E402


def build(root: str, files: int) -> tuple[str, str, str]:
    """The example with the large candidate, run: (store path, plan oid, attempt oid)."""
    store_path, plan, attempt, terminal_class = large.build(root, files)
    print(f"attempt: {terminal_class}, store {store_path}", file=sys.stderr)
    return store_path, plan, attempt


def timed_get(url: str) -> tuple[float, int]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        body = response.read()
    return time.perf_counter() - start, len(body)


def summary(name: str, times: list[float], size: int | None = None) -> None:
    extra = f", {size:,} bytes" if size is not None else ""
    print(
        f"{name:<28} median {statistics.median(times) * 1000:7.1f} ms, "
        f"max {max(times) * 1000:7.1f} ms ({len(times)} runs{extra})"
    )


def serve(store_path: str, trusted: list | None = None):
    """The viewer of ``store_path`` on a free port, serving from a thread."""
    from yyb.store.repo import Store
    from yyb.view import server

    viewer = server.start(Store.open(store_path), 0, trusted)
    threading.Thread(target=viewer.serve_forever, daemon=True).start()
    return viewer


def measure(store_path: str, plan: str, attempt: str, repeat: int) -> None:
    from yyb.store.repo import Store
    from yyb.view import urls

    store = Store.open(store_path)
    terminal = store.objects.get_record(store.refs.read(names.attempt(plan, attempt, "terminal")))
    manifest = store.objects.get_record(terminal["links"]["manifest"])
    listing = manifest["links"]["listing"]
    entries = len(store.objects.get_record(listing)["entries"])
    print(f"final listing: {entries:,} files; patch: {len(manifest['added']):,} files added")
    viewer = serve(store_path)
    base = viewer.url.rstrip("/")
    pages = {
        "attempt page (http)": urls.attempt(plan, attempt),
        "whole diff, page 1 (http)": urls.diff(terminal["links"]["patch"]),
        "final listing page (http)": urls.obj(listing),
    }
    for name, path in pages.items():
        runs = [timed_get(base + path) for _ in range(repeat)]
        summary(name, [t for t, _ in runs], runs[-1][1])
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("browser: playwright is not installed; skipped")
        return
    if not os.access(CHROMIUM, os.X_OK):
        print(f"browser: no {CHROMIUM}; skipped")
        return
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        times = []
        for _ in range(repeat):
            page = browser.new_page()
            start = time.perf_counter()
            page.goto(base + urls.attempt(plan, attempt), wait_until="load")
            times.append(time.perf_counter() - start)
            page.close()
        browser.close()
    summary("attempt page (browser load)", times)


def screenshots(folder: str, root: str) -> None:
    """The pictures of docs/view.md, from a signed run of `yyb example` under ``root``."""
    from playwright.sync_api import sync_playwright

    from yyb import signing
    from yyb.store.repo import Store
    from yyb.view import urls

    key = os.path.join(root, "signing.key")
    public = signing.generate_key(key)
    env = {**os.environ, signing.KEY_ENV: key}
    command = [sys.executable, "-m", "yyb", "example", "--dir", os.path.join(root, "ex")]
    subprocess.run(command, env=env, check=True, capture_output=True)
    store_path = os.path.join(root, "ex", "store")
    store = Store.open(store_path)
    ((_, plan),) = list(store.refs.iter_refs(names.PLANS))
    attempt = store.objects.get_record(plan)["links"]["attempts"][0]
    terminal_oid = store.refs.read(names.attempt(plan, attempt, "terminal"))
    terminal = store.objects.get_record(terminal_oid)
    base = serve(store_path, [signing.load_public(public)]).url.rstrip("/")
    shots = {
        "experiment.png": (urls.plan(plan), 720),
        "attempt.png": (urls.attempt(plan, attempt), 1100),
        "diff.png": (urls.diff(terminal["links"]["patch"]), 520),
        "object.png": (urls.obj(terminal_oid), 900),
    }
    os.makedirs(folder, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for name, (path, height) in shots.items():
            page = browser.new_page(viewport={"width": 1280, "height": height})
            page.goto(base + path)
            page.screenshot(path=os.path.join(folder, name))
            page.close()
            print(os.path.join(folder, name))
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--keep", metavar="DIR", help="build in DIR (kept) instead of a temp dir")
    parser.add_argument("--screenshots", metavar="DIR")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="yyb-bench-view-") as scratch:
        if args.screenshots:
            screenshots(args.screenshots, scratch)
            return
        root = args.keep or scratch
        start = time.perf_counter()
        store_path, plan, attempt = build(os.path.join(root, "example"), args.files)
        print(f"built and ran the attempt in {time.perf_counter() - start:.1f} s")
        measure(store_path, plan, attempt, args.repeat)


if __name__ == "__main__":
    main()
