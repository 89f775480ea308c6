"""`yyb view`'s pages over HTTP: every page of the example answers, with the security headers,
and reading them changes nothing in the store; only GET and HEAD, from this host's name only;
names are checked; a damaged object shows as failed; the HTML report links into the viewer."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from collections import Counter

import pytest

from tests.conftest import flip_byte
from tests.view.conftest import copy_store, digest, serving
from yyb.view import urls

HREF = re.compile(r'(?:href|src)="([^"]*)"')
SECURITY = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}


def links(body: bytes) -> list[str]:
    return [html.unescape(m) for m in HREF.findall(body.decode("utf-8", "replace"))]


def crawl(served, start: str = "/", limit: int = 2000) -> dict[str, tuple[int, dict, bytes]]:
    """Every page reachable from ``start`` by the pages' own links: path -> response."""
    seen: dict[str, tuple[int, dict, bytes]] = {}
    todo = [start]
    while todo and len(seen) < limit:
        path = todo.pop()
        if path in seen:
            continue
        seen[path] = response = served.get(path)
        if response[1].get("content-type", "").startswith("text/html"):
            todo += [link.split("#")[0] for link in links(response[2]) if link.startswith("/")]
    return seen


def row(page: bytes, role: str) -> str:
    """The chain table's row of ``role`` on an attempt page."""
    found = re.search(rf"<tr><td>{re.escape(role)}</td>.*?</tr>", page.decode())
    assert found, role
    return found.group(0)


def test_every_page_answers_with_the_security_headers_and_changes_nothing(example):
    before = digest(example.store_path)
    with serving(example.store_path, [example.public]) as served:
        pages = crawl(served)
    assert digest(example.store_path) == before
    kinds = Counter(urls.route(path.split("?")[0]).page for path in pages)
    for kind in ("home", "plan", "attempt", "layers", "longitudinal", "object", "raw", "diff"):
        assert kinds[kind], kind
    assert kinds["ref"] and kinds["refs"] and kinds["report"] and kinds["static"] == 3
    assert kinds["attempt"] == len(example.attempts)
    for path, (status, headers, _) in pages.items():
        assert status == 200, path
        csp = SECURITY["content-security-policy"]
        if urls.route(path.split("?")[0]).page == "report":
            csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
            csp += "form-action 'none'; frame-ancestors 'none'"
        assert headers["content-security-policy"] == csp, path
        for name, value in SECURITY.items():
            if name != "content-security-policy":
                assert headers[name] == value, (path, name)


def test_every_object_of_the_example_is_verified_and_signed_where_yyb_signs(example):
    with serving(example.store_path, [example.public]) as served:
        for attempt in example.attempts:
            status, _, page = served.get(urls.attempt(example.plan, attempt))
            assert status == 200
            text = page.decode()
            rows = re.findall(r"<tr><td>[^<]+</td><td><span class=\"oid\">.*?</tr>", text)
            assert len(rows) >= 19
            assert all('<span class="badge ok">verified</span>' in r for r in rows)
            assert "FAILED" not in text
            assert "chain complete" in text
            for role in ("terminal", "evaluation: tests, generation 1"):
                assert "signed: verified" in row(page, role), role
    # Without the key the signatures are shown, unchecked.
    with serving(example.store_path) as served:
        page = served.get(urls.attempt(example.plan, example.attempts[0]))[2]
        assert "signed: unchecked" in row(page, "terminal")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "FOO"])
def test_only_get_and_head_are_answered(example, method):
    with serving(example.store_path) as served:
        status, headers, _ = served.get("/", method)
        assert status == 405 and headers["allow"] == "GET, HEAD"
        assert headers["content-security-policy"] == SECURITY["content-security-policy"]
        get = served.get(urls.plan(example.plan))
        head = served.get(urls.plan(example.plan), "HEAD")
        assert head[0] == 200 and head[2] == b""
        assert head[1]["content-length"] == str(len(get[2]))


def test_a_request_for_another_host_is_refused(example):
    """A page elsewhere that makes its own name resolve to 127.0.0.1 (DNS rebinding) sends
    its own name as Host: refused, so it cannot read the store."""
    with serving(example.store_path) as served:
        port = served.url.rsplit(":", 1)[1].rstrip("/")
        assert served.get("/", host=f"evil.example:{port}")[0] == 403
        assert served.get("/", host="127.0.0.1:1")[0] == 403
        assert served.get("/", host=f"localhost:{port}")[0] == 200


def test_names_are_checked(example):
    attempt = example.attempts[0]
    with serving(example.store_path) as served:
        for path, status in [
            ("/object/xyz", 400),
            ("/object/" + "A" * 64, 400),
            ("/object/" + "0" * 64, 404),
            ("/ref/refs/../format", 400),
            ("/ref/refs/%2e%2e/format", 400),
            ("/ref/refs/plans/nothing", 404),
            ("//example.com/", 404),
            ("/nothing", 404),
            (f"/plan/{attempt}", 404),
            (f"/plan/{example.plan}/attempt/{example.plan}", 404),
            (f"/plan/{example.plan}?page=0", 400),
            (f"/plan/{example.plan}?page=x", 400),
            ("/refs?under=..", 400),
            ("/find?name=a+b", 400),
            ("/find?name=zzzz", 404),
            ("/find?name=" + "0" * 64, 404),
            ("/static/../format", 404),
        ]:
            assert served.get(path)[0] == status, path
        status, headers, _ = served.get(f"/find?name={attempt[:10]}")
        assert status == 303 and headers["location"] == f"/object/{attempt}"


def test_raw_bodies_are_downloads(example):
    stdout = example.store.objects.get_record(example.run_ref(example.attempts[0], "terminal"))[
        "links"
    ]["stdout"]
    with serving(example.store_path) as served:
        status, headers, body = served.get(urls.raw(stdout))
    assert status == 200 and body == example.store.objects.get(stdout).body
    assert headers["content-type"] == "application/octet-stream"
    assert headers["content-disposition"] == f'attachment; filename="{stdout}"'


def test_a_damaged_object_shows_as_failed(example, tmp_path):
    """A byte flipped in a loose object file: its row on the attempt page, its own page and the
    page's banner say FAILED (with what failed), its download is refused; the others stay
    verified."""
    path = copy_store(example.store_path, tmp_path / "store")
    attempt = example.attempts[0]
    terminal = example.store.objects.get_record(example.run_ref(attempt, "terminal"))
    stdout = terminal["links"]["stdout"]
    flip_byte(f"{path}/objects/{stdout[:2]}/{stdout[2:]}")
    with serving(path) as served:
        page = served.get(urls.attempt(example.plan, attempt))[2]
        assert '<span class="badge bad">FAILED</span>' in row(page, "stdout")
        assert "hash-mismatch" in row(page, "stdout")
        assert '<span class="badge ok">verified</span>' in row(page, "terminal")
        assert "1 of " in page.decode() and "objects FAILED verification" in page.decode()
        status, _, own = served.get(urls.obj(stdout))
        assert status == 200 and "FAILED" in own.decode() and "hash-mismatch" in own.decode()
        assert served.get(urls.raw(stdout))[0] == 409


def test_a_damaged_record_fails_its_row_and_the_chain(example, tmp_path):
    path = copy_store(example.store_path, tmp_path / "store")
    attempt = example.attempts[1]
    terminal = example.run_ref(attempt, "terminal")
    flip_byte(f"{path}/objects/{terminal[:2]}/{terminal[2:]}", 40)
    with serving(path) as served:
        page = served.get(urls.attempt(example.plan, attempt))[2]
    assert '<span class="badge bad">FAILED</span>' in row(page, "terminal")
    assert "chain checks FAILED" in page.decode()


def test_a_packed_store_reads_the_same_and_a_damaged_pack_entry_fails(example, tmp_path):
    path = copy_store(example.store_path, tmp_path / "store")
    done = subprocess.run(
        [sys.executable, "-m", "yyb", "--store", path, "gc"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    attempt = example.attempts[0]
    with serving(path, [example.public]) as served:
        page = served.get(urls.attempt(example.plan, attempt))[2].decode()
    assert "FAILED" not in page and "all 20 objects verified" in page
    (pack,) = (tmp_path / "store" / "objects" / "pack").glob("*.pack")
    stdout = example.store.objects.get_record(example.run_ref(attempt, "terminal"))["links"][
        "stdout"
    ]
    data = pack.read_bytes()
    body = example.store.objects.get(stdout).body
    flip_byte(str(pack), data.index(body) + len(body) - 1)
    with serving(path) as served:
        page = served.get(urls.attempt(example.plan, attempt))[2]
    assert '<span class="badge bad">FAILED</span>' in row(page, "stdout")


def test_the_html_report_abbreviates_oids_and_links_into_the_viewer(example, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "report.html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "yyb",
            "--store",
            example.store_path,
            "report",
            "--plan",
            example.plan,
            "--format",
            "html",
            "--no-layer",
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    targets = [t for t in links(page.encode()) if not t.startswith("#")]
    assert targets and all(urls.route(t) is not None for t in targets), targets
    tables = re.sub(r"<[^>]*>", " ", "".join(re.findall(r"<table>.*?</table>", page, re.S)))
    assert not re.search(r"[0-9a-f]{64}", tables), "an oid printed in full in a table"
    for attempt in example.attempts:
        assert f'href="/plan/{example.plan}/attempt/{attempt}"' in page
    with serving(example.store_path) as served:
        for target in set(targets):
            assert served.get(target)[0] == 200, target


def test_layers_over_time_show_displaced_verdicts_and_the_longitudinal_cohorts(example, tmp_path):
    """A later layer whose verdict for attempt 0 differs from the first's (as a regrade would
    leave it): the layers page lists both layers and the verdict it displaced."""
    from yyb.reports import build, layer
    from yyb.store.repo import Store

    path = copy_store(example.store_path, tmp_path / "store")
    store = Store.open(path)
    first = store.refs.read(layer.layer_ref(example.plan))
    report, _ = build.build(store, example.plan)
    report["attempts"][0].update(verdict="fail", outcome="failed")
    stored = layer.store_layer(store, example.plan, report)
    assert stored["previous"] == first
    with serving(path) as served:
        page = served.get(urls.layers(example.plan))[2].decode()
        longitudinal = served.get(urls.longitudinal())[2].decode()
    assert "Displaced verdicts (1)" in page
    assert "fail (was pass)" in page
    assert page.index(stored["oid"][:12]) < page.index(first[:12])
    assert "Cohorts (2)" in longitudinal and f'href="/plan/{example.plan}"' in longitudinal
    assert "Incompatibilities (0)" in longitudinal


def test_the_page_of_a_5000_file_attempt_stays_small(tmp_path_factory):
    """The attempt page of an attempt that left 5,000 files (a 5,002-entry listing, a
    5,000-file patch) lists a first part of each and says how many more: its size, and so its
    time, does not grow with the attempt. The time itself is measured by tools/bench_view.py
    (docs/performance.md), not asserted here: the machines are noisy."""
    from tests.view.conftest import hermetic
    from tests.view.large import build

    root = tmp_path_factory.mktemp("view-large")
    with hermetic(root):
        store_path, plan, attempt, terminal_class = build(str(root / "example"), 5000)
    assert terminal_class == "resolved"
    with serving(store_path) as served:
        status, _, page = served.get(urls.attempt(plan, attempt))
        assert status == 200
    text = page.decode()
    assert "added (5,000)" in text and "and 4,900 more" in text and "4,981 more file(s)" in text
    assert len(page) < 200_000
    assert "FAILED" not in text and "chain complete" in text


CLOSING_CLIENTS = r"""
import signal, socket, sys, threading, time
from yyb.store.repo import Store
from yyb.view import server
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as yyb.cli.main leaves it
store, _ = Store.init(sys.argv[1])
for i in range(300):
    store.refs.update(f"refs/notes/n{i:04d}", store.objects.put("blob", b"x%d" % i), reason="n")
viewer = server.start(store, 0)
threading.Thread(target=viewer.serve_forever, daemon=True).start()
for _ in range(40):
    s = socket.create_connection(("127.0.0.1", viewer.port))
    s.sendall(b"GET /refs HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % viewer.port)
    s.shutdown(socket.SHUT_WR)
    s.close()  # gone before the answer is written
time.sleep(1.0)
s = socket.create_connection(("127.0.0.1", viewer.port))
s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % viewer.port)
print(s.recv(64).split(b"\r\n")[0].decode())
"""


def test_browsers_closing_connections_mid_answer_do_not_end_a_viewer(tmp_path):
    """``yyb.cli.main`` leaves SIGPIPE at its default: a browser gone while its page is written
    must cost that answer only, never the viewer process (a SIGPIPE would end it)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", CLOSING_CLIENTS, str(tmp_path / "store")],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, (done.returncode, done.stderr.decode()[-2000:])
    assert done.stdout.decode().strip() == "HTTP/1.1 200 OK"
