"""The viewer's bounds against a hostile store: a patch blob far larger than a page shows
renders within a fixed multiple of what a page may show (its files paginated, a long file cut
with a notice), and concurrent heavy pages are limited (the excess gets 503 and Retry-After)."""

from __future__ import annotations

import re
import threading
import time

import pytest

from yyb.store.repo import Store
from yyb.view import diff, objects, server, urls

LINE = re.compile(r'<span class="(?:add|del|ctx|hunk|meta)">')
PORT = 8000
HOST = f"127.0.0.1:{PORT}"


QUOTED_LINES, SHORT_LINES = 20_000, 200_000


def hostile_patch() -> bytes:
    """What a hostile candidate's patch can hold: a file whose header line is 1 MiB, one of
    4 MiB of lines of quotes (a byte of ``"`` becomes six of HTML), one of 200,000 one-byte
    lines (each line becomes an element), then three small files."""
    long_header = b"diff --git a/" + b"p" * (1 << 20) + b" b/x\n@@ -1 +1 @@\n+x\n"
    quoted = b"diff --git a/q b/q\n@@ -1 +1 @@\n" + (b"+" + b'"' * 200 + b"\n") * QUOTED_LINES
    short = b"diff --git a/s b/s\n@@ -1 +1 @@\n" + b"+\n" * SHORT_LINES
    small = b"".join(b"diff --git a/f%d b/f%d\n@@ -1 +1 @@\n-a\n+b\n" % (i, i) for i in range(3))
    return long_header + quoted + short + small


def page_bound() -> int:
    """The most HTML a diff page may take: six bytes a byte of text, an element a line, a
    table row and a title a file, and the page around them."""
    per_file = 12 * diff.TITLE + 2000
    return 6 * diff.PAGE_TEXT + 40 * diff.PAGE_LINES + diff.PAGE_FILES * per_file + 50_000


@pytest.fixture
def patch_store(tmp_path):
    store, _ = Store.init(str(tmp_path / "store"))
    data = hostile_patch()
    return store, store.objects.put("blob", data), len(data)


def test_a_huge_patch_renders_within_a_multiple_of_what_a_page_shows(patch_store):
    store, blob, size = patch_store
    viewer = server.Viewer(store)
    pages = []
    for number in range(1, 8):
        response = viewer.respond("GET", f"/diff/{blob}?page={number}", HOST, PORT)
        if response.status == 404:
            break
        assert response.status == 200
        pages.append(response.body.decode())
    assert len(pages) == 4  # the long header, the quoted file, the short lines, the small ones
    assert size > 5 << 20
    for page in pages:
        assert len(page.encode()) <= page_bound()
    titles = re.findall(r"<h3>(.*?)  \(", pages[0]) + re.findall(
        r"<code>(diff --git a/p*…)</code>", pages[0]
    )
    assert titles == ["diff --git a/" + "p" * (diff.TITLE - 13) + "…"] * 2
    cuts = [re.findall(r"showing the first ([\d,]+) of ([\d,]+) lines", page) for page in pages]
    numbers = [[(int(a.replace(",", "")), int(b.replace(",", ""))) for a, b in c] for c in cuts]
    assert numbers[:3] == [
        [(1, 3)],
        [(len(LINE.findall(pages[1])), 2 + QUOTED_LINES)],
        [(diff.PAGE_LINES, 2 + SHORT_LINES)],
    ]
    assert pages[1].count("&quot;") <= diff.PAGE_TEXT
    assert f'href="{urls.raw(blob)}"' in pages[1]
    assert all(f"<code>f{i}</code>" in pages[3] for i in range(3))
    assert "showing the first" not in pages[3]


@pytest.mark.parametrize(
    ("data", "files"),
    [(b"", 0), (b"x", 1), (b"text before a file\ndiff --git a/x b/x\n+y", 2)],
)
def test_a_small_or_empty_patch_is_one_page(tmp_path, data, files):
    store, _ = Store.init(str(tmp_path / "store"))
    blob = store.objects.put("blob", data)
    response = server.Viewer(store).respond("GET", f"/diff/{blob}", HOST, PORT)
    assert response.status == 200
    assert f"{files} file(s), {len(data)} bytes".encode() in response.body
    assert b"showing the first" not in response.body and b"page 1 of" not in response.body


def test_concurrent_heavy_pages_are_limited_and_the_excess_told_to_retry(patch_store, monkeypatch):
    store, blob, _ = patch_store
    viewer = server.Viewer(store)
    viewer.busy_wait = 0.2  # seconds a request waits for a turn before it is answered 503
    release, lock = threading.Event(), threading.Lock()
    running = {"now": 0, "most": 0}
    real = objects.diff_page

    def slow(*args):
        with lock:
            running["now"] += 1
            running["most"] = max(running["most"], running["now"])
        release.wait(10)
        with lock:
            running["now"] -= 1
        return real(*args)

    monkeypatch.setattr(objects, "diff_page", slow)
    answers = []
    threads = [
        threading.Thread(
            target=lambda: answers.append(viewer.respond("GET", f"/diff/{blob}", HOST, PORT))
        )
        for _ in range(server.HEAVY_PAGES + 3)
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while len(answers) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)  # the excess is answered without waiting for the pages in progress
    busy = [a for a in answers if a.status == 503]
    release.set()
    for thread in threads:
        thread.join(10)
    assert len(busy) == 3 and running["most"] == server.HEAVY_PAGES
    assert all(a.headers.get("Retry-After") == "1" for a in busy)
    assert sorted(a.status for a in answers) == [200] * server.HEAVY_PAGES + [503] * 3
    light = viewer.respond("GET", "/static/view.css", HOST, PORT)
    assert light.status == 200
