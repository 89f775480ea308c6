"""`yyb view`'s attempt page of a judged attempt: every generation of every LLM-judge profile
with its judge payload and output linked, its verdict, its judge cost with its completeness,
the attempt's judge cost summed as the report sums it (unknown costs stay unknown), every
object of the chain verified; and a judge whose answer is made of ``<script>`` and
``javascript:`` payloads, which stay text, over HTTP and in a browser.

The attempt is a real one (tests/grading's bench: a sandboxed stand-in candidate, an honest
grader, stand-in judges following docs/grading.md's judge protocol), rejudged once.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass

import pytest

from tests.grading.conftest import JUDGE_HEAD, Bench, build_bench
from tests.view.conftest import digest, hermetic, serving
from tests.view.test_browser import PAYLOADS, Watch, inert
from tests.view.test_server import links, row
from yyb.evidence import names
from yyb.view import urls

# A judge that fails the patch (optional, so the attempt still resolves) with a hostile reason:
# the answer and the reason are retained in the evaluation's output.
REASON = " ".join(PAYLOADS)
HOSTILE_JUDGE = (
    JUDGE_HEAD + "envelope\necho '" + json.dumps({"verdict": "fail", "reason": REASON}) + "'\n"
)
# A judge whose envelope does not know what it cost.
UNKNOWN = '{"completeness": "unavailable", "currency": "USD", "micros": null}'
QUIET_JUDGE = JUDGE_HEAD + f"envelope succeeded '{UNKNOWN}'\necho '{{\"verdict\": \"pass\"}}'\n"


@dataclass
class Judged:
    bench: Bench
    plan: str
    attempt: str
    # profile -> [(receipt oid, receipt)], oldest generation first, read from the store
    histories: dict[str, list[tuple[str, dict]]]


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> Judged:
    """One fixer attempt graded by the honest grader (``tests``), the hostile judge (``judge``,
    optional, then rejudged: two generations) and the quiet judge (``quiet``)."""
    root = tmp_path_factory.mktemp("view-judged")
    with hermetic(root):
        bench = build_bench(root / "bench")
        bench.configure(
            {
                "tests": bench.command("honest"),
                "judge": bench.judge("hostile", HOSTILE_JUDGE, required=False),
                "quiet": bench.judge("quiet", QUIET_JUDGE),
            },
            defaults=["judge", "quiet"],
        )
        plan, (fixer,) = bench.run(["zz/fixer"])
        (rejudged,) = bench.reevaluate(plan, "judge", "rejudge")
    assert fixer.terminal_class == "resolved", fixer.reason
    assert (rejudged.generation, rejudged.verdict, rejudged.current) == (2, "fail", "pass")
    histories = {p: bench.history(plan, fixer.attempt, p) for p in ("judge", "quiet", "tests")}
    assert [len(h) for h in histories.values()] == [2, 1, 1]
    for _, receipt in histories["judge"] + histories["quiet"]:
        assert receipt["kind"] == "llm_judge" and "output" in receipt["links"]
    return Judged(bench, plan.oid, fixer.attempt, histories)


def linked(oid: str) -> str:
    """A pattern for ``oid`` shown abbreviated and linked to its object page."""
    return rf'<a href="{re.escape(urls.obj(oid))}"[^>]*><code>{oid[:12]}</code></a>'


def section(text: str, start: str, end: str) -> str:
    """The part of ``text`` from ``start`` up to ``end`` (or the end)."""
    assert start in text, start
    at = text.index(start)
    stop = text.find(end, at + len(start))
    return text[at:stop] if stop >= 0 else text[at:]


def generations(text: str) -> dict[tuple[str, int], str]:
    """The Evaluations section, one block per generation: (profile, number) -> its HTML."""
    evaluations = section(text, "<h2>Evaluations</h2>", "<h2>Run refs</h2>")
    heads = list(re.finditer(r"<h3>(\w+), generation (\d+): ", evaluations))
    blocks = {}
    for at, head in enumerate(heads):
        end = heads[at + 1].start() if at + 1 < len(heads) else len(evaluations)
        blocks[head.group(1), int(head.group(2))] = evaluations[head.start() : end]
    return blocks


def fact(block: str, name: str) -> str:
    """The value cell of the facts row ``name`` in ``block``."""
    found = re.search(rf"<tr><th>{re.escape(name)}</th><td>(.*?)</td></tr>", block)
    assert found, name
    return found.group(1)


def test_the_judge_generations_are_listed_linked_verified_and_costed(judged):
    before = digest(judged.bench.store_path)
    with serving(judged.bench.store_path) as served:
        status, _, page = served.get(urls.attempt(judged.plan, judged.attempt))
    assert digest(judged.bench.store_path) == before
    assert status == 200
    text = page.decode()

    # Every object of the chain verified, the chain complete.
    rows = re.findall(r"<tr><td>[^<]+</td><td><span class=\"oid\">.*?</tr>", text)
    assert rows and all('<span class="badge ok">verified</span>' in r for r in rows)
    assert f"all {len(rows)} objects verified" in text
    assert "FAILED" not in text and "chain complete" in text

    # Each judge generation in the chain: its receipt, payload (input), output and result rows,
    # each linked and verified; the judge intent too.
    for profile in ("judge", "quiet"):
        for number, (oid, receipt) in enumerate(judged.histories[profile], start=1):
            shown = row(page, f"evaluation: {profile}, generation {number}")
            assert re.search(linked(oid), shown) and "verified" in shown
            for role in ("input", "output", "result"):
                shown = row(page, f"{role} ({profile} #{number})")
                assert re.search(linked(receipt["links"][role]), shown), (profile, number, role)
                assert '<span class="badge ok">verified</span>' in shown
        intent = judged.bench.store.refs.read(
            names.judge_intent(judged.plan, judged.attempt, profile)
        )
        assert re.search(linked(intent), row(page, f"judge intent ({profile})"))

    # The Evaluations section: each judge generation with its verdict, evaluator, judge cost
    # (with its completeness), its judge payload and its output, each linked, shown as text.
    blocks = generations(text)
    assert sorted(blocks) == [("judge", 1), ("judge", 2), ("quiet", 1), ("tests", 1)]
    expected = {
        "judge": ("warn", "fail", "optional", "$0.001500 (complete)"),
        "quiet": ("ok", "pass", "required", "unavailable"),
    }
    for profile, (state, verdict, required, spent) in expected.items():
        for number, (oid, receipt) in enumerate(judged.histories[profile], start=1):
            block = blocks[profile, number]
            heading = block[: block.index("</h3>")]
            assert f'<span class="badge {state}">{verdict}</span>' in heading, (profile, number)
            assert re.search(linked(oid), heading)
            assert fact(block, "evaluator") == f"{profile}@1 (llm_judge, quality, {required})"
            assert fact(block, "judge cost") == html.escape(spent)
            assert "grader input" not in block
            payload = section(block, "<h3>judge payload</h3>", "<h3>")
            assert re.match(
                r'<h3>judge payload</h3><p><span class="oid">' + linked(receipt["links"]["input"]),
                payload,
            )
            assert "# Rubric\nDoes calc add?" in payload and "+echo $(( $1 + $2 ))" in payload
            output = section(block, "<h3>output</h3>", "<h3>")
            assert re.match(
                r'<h3>output</h3><p><span class="oid">' + linked(receipt["links"]["output"]), output
            )
            assert html.escape(f'"verdict": "{verdict}"') in output
    assert "<h3>grader input</h3>" in blocks["tests", 1]
    assert fact(blocks["tests", 1], "judge cost") == "-"

    # The outcome: the judge costs summed over every generation as the report sums them (two
    # complete, one unavailable: a lower bound, never a made-up total), and the total.
    outcome = section(text, "<h2>Outcome</h2>", "<h2>")
    assert fact(outcome, "candidate cost") == "$0.000000 (genuine_zero)"
    assert fact(outcome, "judge cost") == html.escape(">=$0.003000 (partial)")
    assert fact(outcome, "total cost") == html.escape(">=$0.003000 (partial)")
    assert fact(outcome, "current verdict").startswith('<span class="badge ok">pass</span>')


def test_a_hostile_judge_answer_stays_text(judged):
    """The judge's answer (its reason and its raw stdout, in the output) reaches the attempt
    page and the output's object page escaped, never as a tag or a link."""
    outputs = [r["links"]["output"] for _, r in judged.histories["judge"]]
    with serving(judged.bench.store_path) as served:
        pages = [served.get(urls.attempt(judged.plan, judged.attempt))]
        pages += [served.get(urls.obj(oid)) for oid in outputs]
    for status, headers, page in pages:
        assert status == 200
        assert "script-src 'self'" in headers["content-security-policy"]
        text = page.decode()
        for payload in PAYLOADS:
            assert html.escape(payload) in text, payload
        assert (
            "<script>alert" not in text and "<img" not in text and "onerror=alert(3)>" not in text
        )
        assert all(target.startswith("/") for target in links(page)), links(page)
    attempt = generations(pages[0][2].decode())
    for number in (1, 2):
        output = section(attempt["judge", number], "<h3>output</h3>", "<h3>")
        escaped = html.escape(json.dumps(REASON))
        assert f"&quot;reason&quot;: {escaped}" in output, number


def test_the_judged_attempt_in_a_browser(browser, judged):
    """In Chromium: nothing runs but the viewer's own script, the payloads read as text, the
    verdicts show, and the judge payload's link opens its object."""
    with serving(judged.bench.store_path) as served:
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        page = context.new_page()
        watch = Watch(page)
        page.goto(served.url.rstrip("/") + urls.attempt(judged.plan, judged.attempt))
        assert inert(page, served.url) == []
        assert page.locator("main img, main script, main iframe").count() == 0
        main = page.inner_text("main")
        for payload in PAYLOADS:
            assert payload in main, payload
        chain = page.locator("table.chain")
        rows = chain.locator("tr").count() - 1
        verified = chain.locator("span.badge.ok", has_text=re.compile("^verified$"))
        assert rows >= 28 and verified.count() == rows
        for number in (1, 2):
            heading = page.locator("h3", has_text=f"judge, generation {number}:")
            assert heading.locator("span.badge").first.inner_text() == "fail"
        assert (
            page.locator("h3", has_text="quiet, generation 1:")
            .locator("span.badge")
            .first.inner_text()
            == "pass"
        )
        assert page.locator("h3:text-is('judge payload')").count() == 3
        # The first judge payload's link opens the payload's own page, verified.
        payload = judged.histories["judge"][0][1]["links"]["input"]
        page.locator("h3:text-is('judge payload') + p a.oid").first.click()
        page.wait_for_url(served.url.rstrip("/") + urls.obj(payload))
        assert payload in page.inner_text("h1")
        assert "Does calc add?" in page.inner_text("main")
        assert inert(page, served.url) == []
        context.close()
    assert watch.events == []
