"""Every kind of page of the viewer reads as words for a person and fits a narrow window.

The example's pages (experiments, the experiment, every attempt, its layers, the
longitudinal report, objects of each kind, a diff, the refs and a ref) and the attempt page of
a run through the gateway (its model calls), in headless Chromium at 1400 and 500 px: no
table cell or definition shows a Python repr (``None``, ``True``, ``{'``) or a raw JSON value
(``{"``, ``[]``, ``null``) outside a code block, nothing sticks out of the window but inside a
box that scrolls, and the attempt and experiment pages are photographed at both widths.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.view.conftest import serving
from yyb.evidence import names
from yyb.view import urls

WIDTHS = (1400, 500)
# The text of every table cell and definition, without what is inside a code block (pretty
# JSON is meant to read as JSON), the cells nested in it (scanned on their own) and the
# matrix's case column (a case id is a name its author chose, "None" as good as any).
CELLS = """() => [...document.querySelectorAll('td, dd')]
  .filter(cell => !cell.matches('table.matrix td:first-child'))
  .map(cell => {
    const copy = cell.cloneNode(true);
    copy.querySelectorAll('pre, code, td, dd').forEach(inner => inner.remove());
    return copy.textContent.replace(/\\s+/g, ' ').trim();
  })"""
REPRS = (
    r"(^|[\s(=:,])(None|True|False)($|[\s),;.])",  # a Python None or bool standing as a value
    r"\{'|\[\{'|\['",  # a dict or list repr
    r"\{\"|\[\{\"|\[\"|^\[\]$|^\{\}$",  # a JSON map or list
    r"(^|[\s:,])(null|true|false)($|[\s,)])",  # a JSON literal
)
# Each element whose box leaves the window, unless an ancestor clips or scrolls it.
OUTSIDE = """(width) => {
  const scrolled = element => {
    for (let up = element.parentElement; up; up = up.parentElement) {
      if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(up).overflowX)) return true;
    }
    return false;
  };
  const out = [];
  for (const element of document.body.querySelectorAll('*')) {
    const box = element.getBoundingClientRect();
    if (box.width === 0 && box.height === 0) continue;
    if ((box.right > width + 1 || box.left < -1) && !scrolled(element)) {
      out.push(`${element.tagName}.${element.className} ${Math.round(box.left)}..` +
               `${Math.round(box.right)}: ${element.textContent.slice(0, 60)}`);
    }
  }
  return out;
}"""


def example_pages(example) -> dict[str, str]:
    """One path of each kind of page of the example's store (every attempt's)."""
    store = example.store
    terminal = store.objects.get_record(example.run_ref(example.attempts[1], "terminal"))
    links = terminal["links"]
    manifest = store.objects.get_record(links["manifest"])
    pages = {
        "experiments": urls.home(),
        "experiment": urls.plan(example.plan),
        "layers": urls.layers(example.plan),
        "longitudinal": urls.longitudinal(),
        "plan record": urls.obj(example.plan),
        "terminal record": urls.obj(example.run_ref(example.attempts[1], "terminal")),
        "receipt record": urls.obj(links["receipt"]),
        "listing": urls.obj(manifest["links"]["listing"]),
        "blob": urls.obj(links["stdout"]),
        "patch": urls.obj(links["patch"]),
        "diff": urls.diff(links["patch"]),
        "refs": urls.refs(),
        "refs under": urls.refs("refs/runs"),
        "ref": urls.ref(names.report(example.plan)),
        "run ref": urls.ref(names.attempt(example.plan, example.attempts[1], "terminal")),
    }
    for number, attempt in enumerate(example.attempts):
        pages[f"attempt {number}"] = urls.attempt(example.plan, attempt)
    return pages


def reprs(page) -> list[str]:
    """The cells of the open page that show a repr or raw JSON."""
    import re

    return [text for text in page.evaluate(CELLS) if any(re.search(p, text) for p in REPRS)]


def read(browser, served, pages: dict[str, str], width: int, shots: Path | None = None):
    """Open each page at ``width`` px; (the reprs, the overflows) found, by page."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    found, wide = {}, {}
    try:
        for kind, path in pages.items():
            response = page.goto(served.url.rstrip("/") + path)
            assert response.status == 200, (kind, path)
            if bad := reprs(page):
                found[kind] = bad
            scroll = page.evaluate("document.documentElement.scrollWidth")
            inner = page.evaluate("window.innerWidth")
            outside = page.evaluate(OUTSIDE, inner)
            if scroll > inner or outside:
                wide[kind] = [f"scrollWidth {scroll} > {inner}", *outside]
            if shots is not None and kind in ("experiment", "attempt 0", "calls"):
                name = kind.replace(" ", "-")
                page.screenshot(path=str(shots / f"{name}-{width}.png"), full_page=True)
    finally:
        context.close()
    return found, wide


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_of_the_example_reads_as_words_and_fits(browser, example, width, tmp_path):
    shots = Path(os.environ.get("YYB_VIEW_SHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    pages = example_pages(example)
    with serving(example.store_path, [example.public]) as served:
        found, wide = read(browser, served, pages, width, shots)
    assert found == {}
    assert wide == {}
    for kind in ("experiment", "attempt-0"):
        assert (shots / f"{kind}-{width}.png").stat().st_size > 10_000


@pytest.mark.parametrize("width", WIDTHS)
def test_the_model_calls_read_as_words_and_fit(browser, gatewayed, width, tmp_path):
    store_path, plan, attempt = gatewayed
    shots = Path(os.environ.get("YYB_VIEW_SHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    with serving(store_path) as served:
        found, wide = read(browser, served, {"calls": urls.attempt(plan, attempt)}, width, shots)
        page = browser.new_page()
        page.goto(served.url.rstrip("/") + urls.attempt(plan, attempt))
        assert "2 answered" in page.inner_text("main")
        page.close()
    assert found == {}
    assert wide == {}


def test_the_scans_find_what_they_look_for(browser, tmp_path):
    """A page of the reprs the viewer once printed, and a table as wide as an oid printed in
    full three times: the scans name every one (and leave the case id and the code alone)."""
    target = tmp_path / "p.html"
    oid = "0" * 64
    target.write_text(
        "<table class=matrix><tr><td>None</td><td>ok</td></tr></table>"
        "<table><tr><td>code 0, signal None, timed out False</td></tr>"
        "<tr><td>{'a': 1}</td></tr><tr><td>[]</td></tr>"
        '<tr><td>{"disk_full": false}</td></tr><tr><td><pre>{"a": null}</pre></td></tr>'
        f"<tr><td><code>{oid}{oid}{oid}</code></td></tr></table>"
        "<dl><dt>worker</dt><dd>None</dd></dl>"
    )
    page = browser.new_page(viewport={"width": 500, "height": 600})
    page.goto(target.as_uri())
    assert reprs(page) == [
        "code 0, signal None, timed out False",
        "{'a': 1}",
        "[]",
        '{"disk_full": false}',
        "None",
    ]
    assert page.evaluate("document.documentElement.scrollWidth") > 500
    assert any(line.startswith("CODE") for line in page.evaluate(OUTSIDE, 500))
    page.close()
