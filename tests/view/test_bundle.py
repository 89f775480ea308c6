"""`yyb view --bundle DIR --plan PLAN`: one plan's pages as files that open without a server.

The example's plan bundled and opened over file:// in headless Chromium: every link of every
page leads to a file of the bundle (no http link, no missing file), the stylesheet and the
script load under the page's own policy, the index is the experiment page with every attempt,
and each page says when it was verified. A bundle of a damaged store shows the damage as it
was when written; a gateway plan's bundle holds its calls; a folder that is not free is
refused in one line, exit 2, with nothing written.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.conftest import flip_byte, run_yyb
from tests.view.conftest import copy_store
from tests.view.test_browser import PAYLOADS, Watch, hostile  # noqa: F401 (a fixture)
from yyb.errors import YybError
from yyb.evidence.records import GATEWAY_CALL
from yyb.store.repo import Store

NOTE = re.compile(r"verified when written, at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z")


def bundle(store_path: str, folder: Path, plan: str, *more: str):
    return run_yyb("--store", store_path, "view", "--bundle", str(folder), "--plan", plan, *more)


@pytest.fixture(scope="module")
def bundled(example, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("view-bundle") / "bundle"
    done = bundle(example.store_path, folder, example.plan, "--trusted-key", example.public)
    assert done.returncode == 0, done.stderr.decode()
    line = done.stdout.decode()
    assert line.startswith("yyb view: wrote ") and f"open {folder}/index.html" in line
    assert done.stderr == b""
    return folder


def walk(browser, folder: Path) -> tuple[dict[str, str], list[str]]:
    """Open ``index.html`` and every page its links reach; (file -> main text, problems)."""
    base = folder.as_uri() + "/"
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    watch = Watch(page)
    seen: dict[str, str] = {}
    todo, wrong = [base + "index.html"], []
    try:
        while todo:
            url = todo.pop().split("#")[0]
            if url in seen:
                continue
            page.goto(url)
            seen[url] = page.inner_text("main")
            colour = "getComputedStyle(document.querySelector('header')).backgroundColor"
            if page.evaluate(colour) != "rgb(36, 41, 47)":
                wrong.append(f"{url}: no stylesheet")
            targets = page.eval_on_selector_all(
                "a[href], link[href], script[src], form[action]",
                "els => els.map(e => e.href || e.src || e.action)",
            )
            scripts = page.eval_on_selector_all("script", "els => els.map(e => e.src)")
            if scripts != [base + "static/view.js"]:
                wrong.append(f"{url}: scripts {scripts}")
            for target in targets:
                where = target.split("#")[0]
                if not where.startswith(base):
                    wrong.append(f"{url}: a link out of the bundle: {target}")
                elif not Path(where.removeprefix("file://")).is_file():
                    wrong.append(f"{url}: a link to no file: {target}")
                elif where.endswith(".html") and where not in seen:
                    todo.append(where)
    finally:
        context.close()
    return seen, wrong + watch.events


def test_the_bundle_opens_from_files_and_every_link_leads_into_it(browser, example, bundled):
    seen, wrong = walk(browser, bundled)
    assert wrong == []
    written = {p.as_uri() for p in bundled.rglob("*.html")}
    assert set(seen) == written  # every page is reachable from the index, and no other
    index = seen[(bundled / "index.html").as_uri()]
    assert index.startswith("verified when written") and "Experiment" in index
    assert f"re-verify with yyb doctor --plan {example.plan}" in index
    assert all(NOTE.search(text) for text in seen.values())
    for attempt in example.attempts:
        assert (bundled / "attempt" / f"{attempt}.html").is_file()
    assert (bundled / "plan" / "layers.html").is_file()
    assert {p.name for p in (bundled / "static").iterdir()} == {"view.css", "view.js", "icon.svg"}


def test_the_index_is_the_experiment_page_with_every_attempt(browser, example, bundled):
    page = browser.new_page()
    page.goto((bundled / "index.html").as_uri())
    chips = page.locator("table.matrix a.chip")
    assert chips.count() == len(example.attempts)
    facts = page.locator("table.facts tr", has=page.locator("th:text-is('attempts')"))
    attempts = facts.inner_text()
    assert attempts.split()[1] == str(len(example.attempts))
    chips.nth(0).click()
    assert page.url.startswith(bundled.as_uri() + "/attempt/")
    assert "attempt 0 · example/fixer" in page.inner_text("h1")
    assert page.locator("table.chain span.badge.ok", has_text="verified").count() >= 19
    assert "signed: verified" in page.inner_text("table.chain")
    # What is not in the bundle is text, not a link: the run refs, the search box.
    assert page.locator("a", has_text="refs/runs/").count() == 0
    assert "refs/runs/" in page.inner_text("main")
    assert page.locator("input").count() == 0
    page.close()


def test_a_bundle_of_hostile_candidates_stays_inert(browser, hostile, tmp_path):  # noqa: F811
    bench, plan = hostile
    done = bundle(bench.store_path, tmp_path / "bundle", plan.oid)
    assert done.returncode == 0, done.stderr.decode()
    seen, wrong = walk(browser, tmp_path / "bundle")
    assert wrong == []  # no dialog, no console error, no script but the bundle's own
    page = seen[(tmp_path / "bundle" / "attempt" / f"{plan.attempt_oids[0]}.html").as_uri()]
    for payload in PAYLOADS:
        assert payload in page


def test_the_verification_is_the_one_made_when_written(example, tmp_path):
    path = copy_store(example.store_path, tmp_path / "store")
    attempt = example.attempts[0]
    terminal = example.store.objects.get_record(example.run_ref(attempt, "terminal"))
    stdout = terminal["links"]["stdout"]
    flip_byte(f"{path}/objects/{stdout[:2]}/{stdout[2:]}")
    done = bundle(path, tmp_path / "bundle", example.plan)
    assert done.returncode == 0, done.stderr.decode()
    page = (tmp_path / "bundle" / "attempt" / f"{attempt}.html").read_text()
    assert "1 of 20 objects FAILED verification" in page and "hash-mismatch" in page
    assert "FAILED" in (tmp_path / "bundle" / "object" / f"{stdout}.html").read_text()


def test_a_gateway_plan_bundles_its_calls(gatewayed, tmp_path):
    store_path, plan, attempt = gatewayed
    done = bundle(store_path, tmp_path / "bundle", plan)
    assert done.returncode == 0, done.stderr.decode()
    store = Store.open(store_path)
    objects = tmp_path / "bundle" / "object"
    calls = []
    for page in objects.iterdir():
        try:
            value = store.objects.read_record(page.name.removesuffix(".html"))
        except YybError:
            continue  # a blob
        if value.get("schema_version") == GATEWAY_CALL:
            calls.append(value)
            for body in value["links"].values():
                assert (objects / f"{body}.html").is_file()
    assert len(calls) == 2
    page = (tmp_path / "bundle" / "attempt" / f"{attempt}.html").read_text()
    assert "Model calls" in page and "2 answered" in page


@pytest.mark.parametrize("what", ["a file in it", "a file", "no plan", "no folder", "a port"])
def test_a_folder_that_is_not_free_is_refused_and_nothing_is_written(example, tmp_path, what):
    folder = tmp_path / "out"
    args = [example.plan]
    if what == "a file in it":
        folder.mkdir()
        (folder / "keep.txt").write_text("mine\n")
    elif what == "a file":
        folder.write_text("mine\n")
    before = sorted(os.listdir(tmp_path))
    if what == "no plan":
        done = run_yyb("--store", example.store_path, "view", "--bundle", str(folder))
    elif what == "no folder":
        done = run_yyb("--store", example.store_path, "view", "--plan", example.plan)
    elif what == "a port":
        done = bundle(example.store_path, folder, example.plan, "--port", "8000")
    else:
        done = bundle(example.store_path, folder, *args)
    assert done.returncode == 2 and done.stdout == b""
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("yyb: error: "), lines
    assert sorted(os.listdir(tmp_path)) == before  # no bundle, no scratch folder beside it
    if what == "a file in it":
        assert os.listdir(folder) == ["keep.txt"] and "not an empty folder" in lines[0]


def test_an_empty_folder_is_filled_and_a_plan_that_is_not_one_is_refused(example, tmp_path):
    (tmp_path / "empty").mkdir()
    done = bundle(example.store_path, tmp_path / "empty", example.plan)
    assert done.returncode == 0, done.stderr.decode()
    assert (tmp_path / "empty" / "index.html").is_file()
    done = bundle(example.store_path, tmp_path / "other", example.attempts[0])
    assert done.returncode == 1 and len(done.stderr.decode().splitlines()) == 1
    assert "not an experiment plan" in done.stderr.decode()
    assert sorted(os.listdir(tmp_path)) == ["empty"]
