"""The plumbing's pages: any object by oid (``cat-object -p`` in a page, with its checks), its
raw bytes, a patch as a whole diff, the refs, and one ref with its update chain."""

from __future__ import annotations

import functools
import json
import re
from typing import BinaryIO

from yyb.errors import CorruptObject, YybError
from yyb.evidence import names
from yyb.evidence.records import LISTING
from yyb.store.fsck import check_ref_chain
from yyb.store.objects import codec
from yyb.store.objects.format import is_oid
from yyb.view import diff, status, urls
from yyb.view.chain import NotInStore
from yyb.view.markup import (
    Markup,
    badge,
    el,
    facts,
    join,
    link,
    oid,
    pager,
    pre,
    refname,
    table,
    when,
)
from yyb.view.values import shown, word
from yyb.view.verify import head, signature, verify

SHOW_BLOB = 1 << 20  # bytes of a blob shown on its page; the rest is a download
SHOW_JSON = 4 << 20  # characters of a record's JSON shown on its page
LISTING_PAGE = 1000  # entries of a file listing per page
REFS_PAGE = 500  # refs per page
_QUOTED_OID = re.compile(r'"([0-9a-f]{64})"')


def object_page(store, trusted: list, oid_: str, page: int) -> tuple[str, Markup]:
    check = verify(store, oid_)
    if not check.present:
        raise NotInStore(f"object {oid_} is not in the store")
    sig = signature(store, oid_, trusted)
    shown = head(store, oid_, SHOW_BLOB)
    size = shown[1] if shown else "?"
    body = [
        el("h1", f"{status.kind(check)} ", el("code", oid_)),
        el(
            "p",
            el("button", "copy oid", type="button", class_="copy", data_copy=oid_),
            f" {check.kind or '?'}, {size:,} bytes · " if shown else " ",
            link(urls.raw(oid_), "download the raw body"),
        ),
        table(status.HEADER, [status.cells(check, sig)]),
        status.problems(check),
    ]
    if sig is not None:
        body.append(
            el(
                "p",
                "signatures: ",
                sig.detail,
                " · ",
                link(urls.ref(names.signature(oid_)), "their ref"),
            )
        )
    if check.links:
        body += [el("h2", "Links"), _links(store, check.links)]
    if check.kind == "blob" and shown is not None:
        data, total = shown
        if data.startswith(b"diff --git "):
            body.append(el("p", link(urls.diff(oid_), "show as a diff")))
        body += [el("h2", "Body"), pre(data, SHOW_BLOB, total, urls.raw(oid_))]
    elif isinstance(check.value, dict):
        if check.schema_version == LISTING:
            body += [el("h2", "Files"), _listing(oid_, check.value, page)]
        body += [el("h2", "Record (cat-object -p)"), _json(store, check.value)]
    return f"object {oid_[:12]}", join(body)


def _links(store, links: dict[str, list[str]]) -> Markup:
    rows = []
    for role, targets in links.items():
        for target in targets[:LISTING_PAGE]:
            present = store.objects.contains(target)
            rows.append(
                [role, oid(target), badge("present", "ok") if present else badge("MISSING", "bad")]
            )
        if len(targets) > LISTING_PAGE:
            rows.append([role, f"and {len(targets) - LISTING_PAGE:,} more", ""])
    return table(["role", "object", "in the store"], rows)


def _listing(oid_: str, listing: dict, page: int) -> Markup:
    entries = listing.get("entries") if isinstance(listing.get("entries"), list) else []
    files = (listing.get("links") or {}).get("files") or []
    pages = max(1, -(-len(entries) // LISTING_PAGE))
    rows = []
    for entry in entries[(page - 1) * LISTING_PAGE : page * LISTING_PAGE]:
        if not (isinstance(entry, list) and len(entry) == 3):
            rows.append([shown(entry), "?", "?"])
            continue
        path, mode, index = entry
        blob = files[index] if type(index) is int and 0 <= index < len(files) else None
        rows.append(
            [
                el("code", word(path)),
                f"{mode:o}" if type(mode) is int else word(mode),
                oid(blob) if is_oid(blob) else "?",
            ]
        )
    return join(
        [
            el("p", f"{len(entries):,} files"),
            table(["path", "mode", "blob"], rows),
            pager(lambda n: urls.paged(urls.obj(oid_), n), page, pages),
        ]
    )


def _json(store, value: dict) -> Markup:
    """The record as ``cat-object -p`` prints it, every string that names an object in the
    store made a link to it (the link is built from the matched hex, never from the text)."""
    text = json.dumps(codec.to_json(value), indent=2, ensure_ascii=False)
    cut = len(text) > SHOW_JSON
    text = text[:SHOW_JSON]
    parts: list[object] = []
    last = 0
    for match in _QUOTED_OID.finditer(text):
        target = match.group(1)
        if not store.objects.contains(target):
            continue
        parts += [text[last : match.start(1)], link(urls.obj(target), target)]
        last = match.end(1)
    parts.append(text[last:])
    out = [el("pre", join(parts), class_="text")]
    if cut:
        out.append(el("p", f"showing the first {SHOW_JSON:,} characters"))
    return join(out)


def raw(store, oid_: str) -> tuple[int, BinaryIO]:
    """The body of ``oid_`` as (size, stream positioned at it), proved by its hash first: a
    download is never of bytes that are not the object's. The caller closes the stream.

    Raises:
        NotInStore: no such object. CorruptObject: it fails its checks.
    """
    check = verify(store, oid_)
    if not check.present:
        raise NotInStore(f"object {oid_} is not in the store")
    if check.results["hash"] != "ok":
        raise CorruptObject(oid_, "; ".join(check.problems))
    _, size, stream = store.objects.open_body(oid_)
    return size, stream


def diff_page(store, oid_: str, page: int) -> tuple[str, Markup]:
    """A patch as a diff, a page of files at a time (``diff.pages``), each file's section
    cut where it would not fit a page."""
    check = verify(store, oid_)
    shown = head(store, oid_, diff.LIMIT)
    if not check.present or shown is None:
        raise NotInStore(f"object {oid_} is not in the store")
    if check.kind != "blob":
        raise NotInStore(f"{oid_} is a record, not a patch")
    sections = diff.files(shown[0])
    firsts = diff.pages(sections)
    if page > len(firsts):
        raise NotInStore(f"the diff has {len(firsts)} page(s)")
    ends = [*firsts[1:], len(sections)]
    indexes = range(firsts[page - 1], ends[page - 1])
    listed = []
    for index in indexes:
        added, removed = sections.counts(index)
        name = sections.title(index)
        target = urls.anchor(urls.paged(urls.diff(oid_), page), f"file-{index}")
        listed.append([str(index + 1), link(target, el("code", name)), f"+{added}", f"−{removed}"])
    at = functools.partial(urls.diff, oid_)
    whole = urls.raw(oid_)
    body = [
        el("h1", "Patch ", oid(oid_), " ", status.overall(check)),
        status.problems(check),
        el("p", f"{len(sections):,} file(s), {shown[1]:,} bytes", *_unread(shown, whole)),
        pager(at, page, len(firsts)),
        table(["#", "file", "added", "removed"], listed),
        *(diff.render(sections, i, f"file-{i}", whole) for i in indexes),
        pager(at, page, len(firsts)),
    ]
    return f"diff {oid_[:12]}", join(body)


def _unread(shown: tuple[bytes, int], whole: urls.Url) -> list:
    """What to say of a blob longer than a diff page reads (diff.LIMIT bytes)."""
    if shown[1] <= len(shown[0]):
        return []
    read = len(shown[0])
    return [
        f"; the files of its first {read:,} bytes are shown, the rest in ",
        link(whole, "the whole patch"),
    ]


def refs_page(store, under: str | None, page: int) -> tuple[str, Markup]:
    every = store.refs.names(under=under)
    pages = max(1, -(-len(every) // REFS_PAGE))
    if page > pages:
        raise NotInStore(f"{len(every)} refs: there is no page {page}")
    folders: dict[str, int] = {}
    for name in every:
        top = "/".join(name.split("/")[:2])
        folders[top] = folders.get(top, 0) + 1
    rows = []
    for name in every[(page - 1) * REFS_PAGE : page * REFS_PAGE]:
        value = _read(store, name)
        rows.append([link(urls.ref(name), refname(name)), oid(value) if value else "(deleted)"])
    body = [
        el("h1", f"Refs under {under}" if under else "Refs"),
        el(
            "p",
            *(
                join([link(urls.refs(top), top), f" ({count:,}) "])
                for top, count in sorted(folders.items())
            ),
        ),
        table(["ref", "value"], rows) if rows else el("p", "no ref"),
        pager(lambda n: urls.refs(under, n), page, pages),
    ]
    return "refs", join(body)


def ref_page(store, name: str) -> tuple[str, Markup]:
    """A ref's value and its update chain, newest first, checked by the rules doctor applies
    (``fsck.check_ref_chain``) and each update record verified."""
    value = _read(store, name)
    walked = list(check_ref_chain(store, name))
    findings = [f for f, _ in walked if f is not None]
    updates = [o for f, o in walked if f is None and o is not None]
    if value is None and not updates and not findings:
        raise NotInStore(f"no ref {name}")
    rows = []
    for update_oid in updates:
        check = verify(store, update_oid)
        record = check.value or {}
        links = record.get("links") or {}
        rows.append(
            [
                oid(update_oid),
                status.overall(check),
                when(record.get("time_ms")),
                oid(record["old"]) if is_oid(record.get("old")) else "-",
                oid(record["new"]) if is_oid(record.get("new")) else "(deleted)",
                word(record.get("reason")),
                join(["discarded ", oid(links["discarded"])])
                if is_oid(links.get("discarded"))
                else "",
            ]
        )
    chain = (
        el("p", "update chain valid", class_="banner ok")
        if not findings
        else el("ul", *(el("li", f.line()) for f in findings), class_="banner bad")
    )
    body = [
        el("h1", "Ref ", el("code", name)),
        facts([("value", oid(value) if value else "(none)"), ("updates", str(len(updates)))]),
        chain,
        el("h2", "Update chain, newest first"),
        table(["update", "verified", "time", "old", "new", "reason", ""], rows),
    ]
    return f"ref {name}", join(body)


def find(store, name: str) -> urls.Url:
    """The object page of whatever ``name`` names: a full oid, an abbreviation (4+ hex
    digits) or a ref, as the plumbing resolves names (``Store.rev_parse``).

    Raises:
        UsageError, NotFound: ``name`` names nothing, or several objects.
    """
    found = store.rev_parse(name.strip())
    if not store.objects.contains(found):
        raise NotInStore(f"object {found} is not in the store")
    return urls.obj(found)


def _read(store, name: str) -> str | None:
    try:
        return store.refs.read(name)
    except YybError:
        return None
