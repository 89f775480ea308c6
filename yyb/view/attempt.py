"""The attempt page: one attempt's chain, every object verified, and what the candidate did.

Sections, top to bottom: the outcome (class, reason, current verdict, identities, runtime,
cost with its completeness), the chain (every object with its checks and signature), stdout
and stderr, the envelope, the model calls (of a gateway plan), the patch as a diff with the
files changed, the workspace, every evaluation generation (grader input or judge payload,
output, per-test results, log), and the run refs. Long parts are cut (``SHOW_*``) with a link
to their whole on their own page, so a 5,000-file attempt opens as fast as a small one
(docs/view.md, "Performance").
"""

from __future__ import annotations

from yyb.evidence import cost
from yyb.evidence.verdict import conclude
from yyb.view import calls, chain, diff, status, urls
from yyb.view.markup import (
    Markup,
    badge,
    el,
    facts,
    join,
    link,
    oid,
    pre,
    refname,
    table,
    usd,
    when,
)
from yyb.view.values import EMPTY, sentence, shown, word
from yyb.view.verify import head

SHOW_OUTPUT = 64 << 10  # bytes of stdout, stderr, grader input, output and log shown inline
SHOW_DIFF_FILES = 20  # files of the patch shown inline; the diff page shows every one
SHOW_DIFF_BYTES = 256 << 10  # nor more than this much of it
SHOW_PATHS = 100  # paths of each list (added, changed, deleted, the final listing) shown


def page(store, trusted: list, plan_oid: str, attempt_oid: str) -> tuple[str, Markup]:
    found = chain.read(store, plan_oid, attempt_oid, trusted)
    attempt = found.role("attempt plan")
    value = attempt.value if attempt else {}
    model = (value.get("model") or {}).get("resolved", "?")
    title = f"attempt {value.get('ordinal', '?')} · {model} · {value.get('case_id') or '-'}"
    retried = (value.get("links") or {}).get("retry_of")
    body = [
        el("p", link(urls.plan(plan_oid), "experiment ", el("code", plan_oid[:12]))),
        el("h1", title, " ", badge("attempt", "info"), " ", oid(attempt_oid)),
        *([el("p", "a retry of attempt ", oid(retried))] if isinstance(retried, str) else []),
        banner(found),
        el("h2", "Outcome"),
        outcome(found),
        el("h2", "Evidence chain"),
        table(
            status.ROW_HEADER,
            (status.row(p.role, p.check, p.signature) for p in found.parts),
            class_="chain",
        ),
        el("h2", "Candidate output"),
        outputs(store, found),
        el("h2", "Envelope"),
        envelope(store, found),
        *(
            [el("h2", "Model calls"), calls.section(store, found)]
            if calls.meter_of(found) is not None
            else []
        ),
        el("h2", "Patch"),
        patch(store, found),
        el("h2", "Workspace"),
        workspace(found),
        el("h2", "Evaluations"),
        evaluations(store, found),
        el("h2", "Run refs"),
        table(
            ["ref", "value"],
            ([link(urls.ref(name), refname(name)), oid(v) if v else "-"] for name, v in found.refs),
        ),
    ]
    return title, join(body)


def banner(found: chain.AttemptChain) -> Markup:
    """Whether the chain is complete (``yyb doctor --plan``'s checks) and every object on the
    page verified; what failed, when something did."""
    parts = [status.summary([p.check for p in found.parts])]
    if found.complete:
        parts.append(el("p", "chain complete: every check of 'yyb doctor --plan' passed"))
    errors = [f for f in found.findings if f.level == "error"]
    if errors or not found.complete:
        items = [el("li", f"{f.code}: {f.detail}") for f in errors]
        parts.append(
            el("div", el("p", "chain checks FAILED:"), el("ul", *items), class_="banner bad")
        )
    return join(parts)


def _profile_histories(found: chain.AttemptChain) -> dict[str, list[dict]]:
    histories: dict[str, list[dict]] = {}
    for generation in found.generations:
        histories.setdefault(generation.profile, []).append(generation.receipt.value)
    return histories


def outcome(found: chain.AttemptChain) -> Markup:
    terminal = found.role("terminal")
    if terminal is None:
        return el("p", "no terminal: the attempt was never closed (see the chain checks)")
    t = terminal.value
    histories = _profile_histories(found)
    try:
        verdict, why = conclude(histories) if histories else ("-", "not graded")
    except (KeyError, TypeError):
        verdict, why = "?", "an evaluation receipt lacks what the verdict needs"
    identity = t.get("identity") or {}
    runtime = t.get("runtime") or {}
    exit_ = t.get("exit") or {}
    judges = [g.receipt.value.get("judge_cost") for g in found.generations]
    candidate = t.get("candidate_cost")
    rows = [
        ("terminal class", badge(word(t.get("class")), _class_state(t.get("class")))),
        ("reason", t.get("reason", "")),
        ("current verdict", join([badge(word(verdict), _verdict_state(verdict)), " ", why])),
        (
            "identity",
            sentence(*((k, identity.get(k)) for k in ("requested", "resolved", "observed"))),
        ),
        (
            "exit",
            sentence(
                ("code", exit_.get("code")),
                ("signal", exit_.get("signal")),
                ("timed out", exit_.get("timed_out")),
                ("cleanup confirmed", exit_.get("cleanup_confirmed")),
            ),
        ),
        (
            "runtime",
            f"{word(runtime.get('wall_ms'))} ms wall, {when(runtime.get('started_ms'))}"
            f" to {when(runtime.get('ended_ms'))}",
        ),
        ("resources", shown(runtime.get("resources"))),
        ("candidate cost", usd(candidate)),
    ]
    if _is_costs([candidate, *judges]):
        # As the report adds them: each side summed (a genuine zero is complete), then both.
        judge = cost.sum_costs(judges)
        total = cost.combine(cost.sum_costs([candidate]), judge)
        rows += [("judge cost", usd(judge)), ("total cost", usd(total))]
    if t.get("spend"):
        rows.append(("spend", shown(t["spend"])))
    return facts(rows)


def _is_costs(parts: list) -> bool:
    return all(
        p is None or (isinstance(p, dict) and "completeness" in p and "micros" in p) for p in parts
    ) and isinstance(parts[0], dict)


def _class_state(cls: object) -> str:
    if cls == "resolved":
        return "ok"
    if cls in ("model_failure", "grader_failure", "safety_failure", "timeout"):
        return "warn"
    return "bad"


def _verdict_state(verdict: str) -> str:
    return {"pass": "ok", "fail": "warn", "safety": "warn"}.get(verdict, "bad")


def _field(key: str, value: object) -> Markup | str:
    """An envelope field for a person: a cost with its completeness, a time as a time."""
    if key == "cost" and isinstance(value, dict) and "completeness" in value:
        return usd(value)
    if key in ("started_ms", "ended_ms") and type(value) is int:
        return when(value)
    return shown(value)


def blob(store, part: chain.Part | None, limit: int = SHOW_OUTPUT) -> Markup:
    """A blob's text, its oid and status first; cut at ``limit`` bytes."""
    if part is None:
        return el("p", "not retained")
    shown = head(store, part.oid, limit)
    if shown is None:
        return join(
            [el("p", oid(part.oid), " ", status.overall(part.check)), status.problems(part.check)]
        )
    data, size = shown
    return join(
        [
            el("p", oid(part.oid), " ", status.overall(part.check), f" {size:,} bytes"),
            status.problems(part.check),
            pre(data, limit, size, urls.obj(part.oid)),
        ]
    )


def outputs(store, found: chain.AttemptChain) -> Markup:
    terminal = found.role("terminal")
    sizes = (terminal.value if terminal else {}).get("outputs") or {}
    parts = []
    for role in ("stdout", "stderr"):
        kept = sizes.get(role) or {}
        note = (
            f" ({word(kept.get('bytes'))} bytes written, {word(kept.get('retained'))} retained"
            + (", TRUNCATED" if kept.get("truncated") else "")
            + ")"
            if kept
            else ""
        )
        parts += [el("h3", role, note), blob(store, found.role(role))]
    return join(parts)


def envelope(store, found: chain.AttemptChain) -> Markup:
    part = found.role("envelope")
    if part is None:
        raw = found.role("envelope (raw bytes)")
        if raw is None:
            return el("p", "no envelope retained")
        return join([el("p", "the envelope was unusable; its raw bytes:"), blob(store, raw)])
    rows = [(key, _field(key, value)) for key, value in sorted(part.value.items())]
    return join([el("p", oid(part.oid), " ", status.overall(part.check)), facts(rows)])


def patch(store, found: chain.AttemptChain) -> Markup:
    manifest = found.role("post-execution manifest")
    part = found.role("patch")
    out = []
    if manifest is not None:
        for change in ("added", "changed", "deleted"):
            paths = manifest.value.get(change) or []
            out.append(el("h3", f"{change} ({len(paths):,})"))
            out.append(_paths(paths, urls.obj(manifest.oid)))
    if part is None:
        return join([*out, el("p", "no patch retained")])
    shown = head(store, part.oid, diff.LIMIT)
    if shown is None:
        return join([*out, el("p", oid(part.oid), " ", status.overall(part.check))])
    sections = diff.files(shown[0])
    out.append(
        el(
            "p",
            "patch ",
            oid(part.oid),
            " ",
            status.overall(part.check),
            f" {shown[1]:,} bytes, {len(sections):,} file(s): ",
            link(urls.diff(part.oid), "the whole diff"),
        )
    )
    out.append(status.problems(part.check))
    size = 0
    for index in range(len(sections)):
        start, end = sections.bounds(index)
        size += end - start
        if index >= SHOW_DIFF_FILES or size > SHOW_DIFF_BYTES and index:
            rest = len(sections) - index
            out.append(el("p", f"{rest:,} more file(s): ", link(urls.diff(part.oid), "see them")))
            break
        out.append(diff.render(sections, index, f"file-{index}", urls.diff(part.oid)))
    return join(out)


def _paths(paths: list, more: urls.Url) -> Markup:
    if not paths:
        return el("p", "none")
    shown = el("ul", *(el("li", el("code", path)) for path in paths[:SHOW_PATHS]))
    if len(paths) <= SHOW_PATHS:
        return shown
    return join([shown, el("p", f"and {len(paths) - SHOW_PATHS:,} more: ", link(more, "all"))])


def workspace(found: chain.AttemptChain) -> Markup:
    receipt = found.role("workspace receipt")
    manifest = found.role("post-execution manifest")
    listing = found.role("final listing")
    if receipt is None:
        return el("p", "no workspace: the attempt closed before one existed")
    r = receipt.value
    sandbox = r.get("sandbox") or {}
    rows = [
        ("base commit", r.get("base_commit", "-")),
        ("snapshot", f"commit {r.get('snapshot_commit', '-')}, tree {r.get('snapshot_tree', '-')}"),
        ("files at the start", word(r.get("file_count"))),
        ("excluded paths", shown(r.get("excluded_paths") or [])),
        ("scratch paths", shown(r.get("scratch_paths") or [])),
        ("executor", shown(r.get("executor"))),
        ("sandbox", sentence(("kind", sandbox.get("kind")), ("network", sandbox.get("network")))),
        ("sandbox limits", shown(sandbox.get("limits"))),
        ("sandbox verified", "; ".join(map(str, sandbox.get("verified") or [])) or EMPTY),
    ]
    if manifest is not None:
        m = manifest.value
        git = m.get("git") or {}
        rows += [
            ("files at the end", word(m.get("file_count"))),
            ("omitted", shown(m.get("omitted"))),
            ("git head", shown(git.get("head"))),
            ("git status", shown(git.get("status"))),
        ]
    out = [facts(rows)]
    if listing is not None:
        entries = listing.value.get("entries") or []
        out.append(el("h3", f"final listing ({len(entries):,} files) ", oid(listing.oid)))
        out.append(
            _paths([e[0] for e in entries if isinstance(e, list) and e], urls.obj(listing.oid))
        )
    aside = (manifest.value.get("links") or {}).get("scratch") if manifest is not None else None
    if isinstance(aside, str):
        paths = [str(path) for path in manifest.value.get("scratch") or []]
        out.append(el("h3", f"set aside as scratch, not graded ({len(paths):,}) ", oid(aside)))
        out.append(_paths(paths, urls.obj(aside)))
    return join(out)


def evaluations(store, found: chain.AttemptChain) -> Markup:
    if not found.generations:
        return el("p", "no evaluation")
    out = []
    for generation in found.generations:
        r = generation.receipt.value
        evaluator = r.get("evaluator") or {}
        judge = r.get("kind") == "llm_judge"
        out.append(
            el(
                "h3",
                f"{generation.profile}, generation {generation.number}: ",
                badge(word(r.get("verdict")), _verdict_state(str(r.get("verdict")))),
                " ",
                oid(generation.receipt.oid),
                " ",
                status.overall(generation.receipt.check),
            )
        )
        rows = [
            (
                "evaluator",
                f"{word(evaluator.get('id'))}@{word(evaluator.get('version'))} "
                f"({word(r.get('kind'))}, {word(r.get('purpose'))}, "
                f"{'required' if r.get('required') else 'optional'})",
            ),
            ("wall time", f"{word(r.get('wall_ms'))} ms"),
            ("judge cost", usd(r.get("judge_cost"))),
        ]
        if r.get("problem"):
            rows.append(("problem", shown(r["problem"])))
        if r.get("protected"):
            rows.append(("protected paths put back", ", ".join(map(str, r["protected"]))))
        result = generation.parts.get("result")
        if result is not None:
            reason = word(result.value.get("reason"))
            rows.append(("result", join([reason, " ", oid(result.oid)])))
        out.append(facts(rows))
        if result is not None:
            out.append(_details(result.value.get("details")))
        labels = {
            "input": "judge payload" if judge else "grader input",
            "output": "output",
            "log": "log",
        }
        for role, label in labels.items():
            if role in generation.parts:
                out += [el("h3", label), blob(store, generation.parts[role])]
    return join(out)


def _details(details: object) -> Markup:
    """A result's details: per-test results as a table, anything else as JSON."""
    if not isinstance(details, dict):
        return Markup("")
    out = []
    checks = details.get("checks")
    if isinstance(checks, list) and checks:
        rows = [
            [
                word(c.get("name")),
                word(c.get("list")),
                badge("pass", "ok") if c.get("passed") else badge("FAIL", "bad"),
                word(c.get("detail")),
            ]
            for c in checks
            if isinstance(c, dict)
        ]
        out.append(table(["test", "list", "result", "detail"], rows))
    rest = {k: v for k, v in details.items() if k != "checks"}
    if rest:
        out.append(shown(rest))
    return join(out)
