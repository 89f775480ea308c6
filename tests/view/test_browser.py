"""`yyb view` in a real browser (headless Chromium, driven by Playwright): the example's pages
as a person reads them, a damaged object failing in the page, and candidates whose stdout,
file names, patch, grader log and envelope are made of ``<script>`` and ``javascript:``
payloads, which must stay text: no dialog, no console error, no script but the viewer's own,
no link that leaves the viewer, and the store unchanged after every page was opened."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.attempts.conftest import build_bench
from tests.conftest import flip_byte
from tests.view.conftest import copy_store, digest, hermetic, serving
from yyb.view import urls

# A grader that keeps a log (its stdout: the test's own output) besides its verdict.
LOGGING_GRADER = """#!/bin/sh
# the calc tests, logged
if out=$(sh ./test_calc.sh 2>&1); then passed=true; else passed=false; fi
printf 'grader log: %s\\n' "$out"
summary=$(printf '%s' "$out" | head -n 1 | tr -d '"\\\\')
format='{"schema_version": "yylo_benchmark_grader_output.v2", "passed": %s, "summary": "%s"}'
printf "$format\\n" "$passed" "$summary" > "$YYB_GRADER_OUTPUT"
"""
# Every payload a candidate leaves somewhere: stdout, stderr, file names and contents, the test
# it rewrites (so the grader's log and summary carry it), its envelope's free strings.
HOSTILE = """
echo '<script>alert(1)</script>'
echo 'javascript:alert(2)'
echo '<img src=x onerror=alert(3)>' >&2
printf 'x\\n' > '<img src=x onerror=alert(3)>.txt'
printf 'y\\n' > 'javascript:alert(4)'
printf '<script>alert(5)</script>\\n<a href="javascript:alert(5)">x</a>\\n' > 'notes.html'
cat > test_calc.sh <<'END'
#!/bin/sh
echo '<script>alert(9)</script> javascript:alert(10)'
exit 1
END
commit_all
envelope succeeded stand "$NAME" \
  '"session_id": "<script>alert(6)</script>", "usage": {"<img src=x onerror=alert(7)>": 1}'
"""
# An envelope whose model is a payload: an identity mismatch (harness_failure), still shown.
FORGER = """
echo 'javascript:alert(11)'
envelope succeeded stand '<script>alert(12)</script>javascript:alert(13)'
"""
PAYLOADS = ("<script>alert(1)</script>", "javascript:alert(2)", "<img src=x onerror=alert(3)>")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A store holding one attempt of each hostile candidate, graded by a logging grader."""
    root = tmp_path_factory.mktemp("view-hostile")
    with hermetic(root):
        bench = build_bench(root / "bench")
        bench.configure(grader=LOGGING_GRADER)
        models = [bench.behaviour("hostile", HOSTILE), bench.behaviour("forger", FORGER)]
        plan, results = bench.run(models)
    assert [r.terminal_class for r in results] == ["grader_failure", "harness_failure"]
    return bench, plan


class Watch:
    """What a page must never do: open a dialog, log a console error, throw."""

    def __init__(self, page):
        self.events: list[str] = []
        page.on("dialog", lambda d: (self.events.append(f"dialog {d.message}"), d.dismiss()))
        page.on("pageerror", lambda e: self.events.append(f"pageerror {e}"))
        page.on(
            "console",
            lambda m: m.type == "error" and self.events.append(f"console {m.text}"),
        )


def inert(page, base: str) -> list[str]:
    """What is wrong with the open page: a script other than the viewer's own, a link or form
    leading out of the viewer, an inline event handler."""
    wrong = []
    scripts = page.eval_on_selector_all("script", "els => els.map(e => e.src)")
    if scripts != [base + "static/view.js"]:
        wrong.append(f"scripts {scripts}")
    for target in page.eval_on_selector_all(
        "a[href], form[action]", "els => els.map(e => e.href || e.action)"
    ):
        if not target.startswith(base):
            wrong.append(f"link {target}")
    handlers = page.evaluate(
        "() => [...document.querySelectorAll('*')].flatMap(e => [...e.attributes]"
        ".filter(a => a.name.startsWith('on')).map(a => e.tagName + ' ' + a.name))"
    )
    wrong += [f"handler {h}" for h in handlers]
    return wrong


def visit_all(browser, served, start: str = "/") -> tuple[list[str], list[str]]:
    """Open every page reachable from ``start`` by the pages' links; (pages, problems)."""
    context = browser.new_context()
    page = context.new_page()
    watch = Watch(page)
    seen, todo, wrong = [], [served.url.rstrip("/") + start], []
    try:
        while todo:
            url = todo.pop().split("#")[0]
            if url in seen or "/raw/" in url:
                continue
            seen.append(url)
            page.goto(url)
            wrong += [f"{url}: {w}" for w in inert(page, served.url)]
            for target in page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"):
                if target.startswith(served.url) and target.split("#")[0] not in seen:
                    todo.append(target)
    finally:
        context.close()
    return seen, wrong + watch.events


def test_the_example_reads_as_a_person_reads_it(browser, example):
    with serving(example.store_path, [example.public]) as served:
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        page = context.new_page()
        watch = Watch(page)
        page.goto(served.url)
        page.click(f"a[href='{urls.plan(example.plan)}']")
        assert page.inner_text("h1").startswith("Experiment")
        assert "example/fixer" in page.inner_text("table.matrix")
        page.click("table.matrix a.chip >> nth=0")
        assert "attempt 0 · example/fixer" in page.inner_text("h1")
        chain = page.locator("table.chain")
        rows = chain.locator("tr").count() - 1
        assert rows >= 19
        verified = chain.locator("span.badge.ok", has_text=re.compile("^verified$"))
        assert verified.count() == rows
        assert chain.locator("text=FAILED").count() == 0
        assert "signed: verified" in chain.locator("tr", has_text="terminal").first.inner_text()
        # The diff, and the page fits the window: no oid printed in full runs off its edge.
        added = page.locator(".diff span.add").all_inner_texts()
        assert added == ["+echo $(( $1 + $2 ))"]
        assert page.evaluate("document.documentElement.scrollWidth") <= 1400
        # The whole diff on its own page; any object by its oid.
        page.click("text=the whole diff")
        assert page.locator(".diff span.del").all_inner_texts() == ["-echo $(( $1 - $2 ))"]
        page.fill("input[name=name]", example.attempts[0][:8])
        page.press("input[name=name]", "Enter")
        assert example.attempts[0] in page.inner_text("h1")
        assert page.locator("span.badge.ok", has_text="verified").count() == 1
        context.close()
    assert watch.events == []


def test_a_damaged_object_fails_in_the_page(browser, example, tmp_path):
    path = copy_store(example.store_path, tmp_path / "store")
    attempt = example.attempts[1]  # a fixer's: its patch is not the empty blob
    patch = example.store.objects.get_record(example.run_ref(attempt, "terminal"))["links"]["patch"]
    receipt = example.store.objects.get_record(example.run_ref(attempt, "terminal"))["links"][
        "receipt"
    ]
    for oid in (patch, receipt):
        flip_byte(f"{path}/objects/{oid[:2]}/{oid[2:]}")
    with serving(path) as served:
        page = browser.new_page()
        page.goto(served.url.rstrip("/") + urls.attempt(example.plan, attempt))
        for role in ("patch", "workspace receipt"):
            row = page.locator("tr", has=page.locator(f"td:text-is('{role}')"))
            assert "FAILED" in row.inner_text() and "hash-mismatch" in row.inner_text()
        banner = page.inner_text("p.banner.bad")
        assert "objects FAILED verification" in banner
        assert patch[:12] in banner and receipt[:12] in banner
        assert "chain checks FAILED" in page.inner_text("main")
        page.close()


def test_hostile_candidates_stay_inert(browser, hostile):
    bench, plan = hostile
    before = digest(bench.store_path)
    with serving(bench.store_path) as served:
        pages, problems = visit_all(browser, served)
        assert problems == []
        assert len(pages) > 50
        # The payloads are on the pages, as text.
        page = browser.new_page()
        watch = Watch(page)
        hostile_attempt, forger_attempt = plan.attempt_oids
        page.goto(served.url.rstrip("/") + urls.attempt(plan.oid, hostile_attempt))
        text = page.inner_text("main")
        for payload in PAYLOADS:
            assert payload in text
        assert "javascript:alert(4)" in text and "<script>alert(6)</script>" in text
        assert "grader log: <script>alert(9)</script> javascript:alert(10)" in text
        page.goto(served.url.rstrip("/") + urls.attempt(plan.oid, forger_attempt))
        assert "<script>alert(12)</script>javascript:alert(13)" in page.inner_text("main")
        page.close()
        assert watch.events == []
    assert digest(bench.store_path) == before


def test_the_scan_finds_what_it_looks_for(browser, tmp_path):
    """The checks above fail where they must: a page with a script of its own, an outside
    link and an inline handler is caught, and so is a dialog."""
    target = Path(tmp_path / "p.html")
    target.write_text(
        "<script src='x.js'></script><a href='javascript:alert(1)'>x</a>"
        "<img src=x onerror=alert(2)>"
    )
    page = browser.new_page()
    watch = Watch(page)
    page.goto(target.as_uri())
    page.wait_for_timeout(200)
    base = target.parent.as_uri() + "/"
    wrong = inert(page, base)
    assert any(w.startswith("scripts") for w in wrong)
    assert any(w.startswith("link javascript:") for w in wrong)
    assert any(w.startswith("handler IMG onerror") for w in wrong)
    assert any(e.startswith("dialog") for e in watch.events)
    page.close()
