"""A retained patch shown as a diff: one section per file, lines marked added or removed.

The patch is candidate output like any other (its paths and lines are the candidate's), so it
is only ever text: split where a line begins ``diff --git ``, each line escaped. Git writes
``diff --git a/P b/P`` for a changed path P; the title shows P (the whole line when it is not
of that form: a path holding a newline can forge a header line, but only text follows from it).

What a page shows is bounded, whatever the blob holds: at most PAGE_FILES files, PAGE_TEXT
bytes and PAGE_LINES lines of patch text a page (``pages``), a file longer than that cut with a
line saying so, a title cut to TITLE characters. Escaped, a byte of text becomes at most six
(``&quot;``) and a line adds its element, so a page's HTML stays within a few MiB: measured in
docs/view.md, held by tests/view/test_server.py.
"""

from __future__ import annotations

import array
from dataclasses import dataclass

from yyb.harness.patch import MAX_NOTES, MAX_PATCH
from yyb.view import urls
from yyb.view.markup import Markup, el, join, link

_HEADER = b"\ndiff --git "  # where a file's section begins, but for the first one
# The most a patch yyb wrote holds (its text, then its notes): what a page reads of one.
LIMIT = MAX_PATCH + MAX_NOTES + (1 << 20)
PREFIX = "diff --git a/"
PAGE_FILES = 50  # files a page shows at most
PAGE_TEXT = 1 << 20  # bytes of patch text a page shows at most
PAGE_LINES = 10_000  # lines of patch text a page shows at most
TITLE = 256  # characters of a file's title shown
TITLE_LINE = 16 << 10  # bytes of a section's first line read for its title (two paths fit)


@dataclass
class Files:
    """Where each file's section of a patch starts (byte offsets into ``data``)."""

    data: bytes
    starts: array.array

    def __len__(self) -> int:
        return len(self.starts)

    def bounds(self, index: int) -> tuple[int, int]:
        """The section's start and end in ``data``."""
        end = self.starts[index + 1] if index + 1 < len(self.starts) else len(self.data)
        return self.starts[index], end

    def lines(self, index: int) -> int:
        """How many lines the section has (only the last section can end without a newline:
        every other one ends where a line begins)."""
        start, end = self.bounds(index)
        return self.data.count(b"\n", start, end) + (self.data[end - 1 : end] != b"\n")

    def counts(self, index: int) -> tuple[int, int]:
        """(lines added, lines removed) in the section, headers left out: the lines beginning
        with ``+`` or ``-`` after its first hunk line (``@@``)."""
        start, end = self.bounds(index)
        if self.data.startswith(b"@@", start):
            hunk = start
        else:
            hunk = self.data.find(b"\n@@", start, end)
            if hunk < 0:
                return 0, 0
        return self.data.count(b"\n+", hunk, end), self.data.count(b"\n-", hunk, end)

    def title(self, index: int) -> str:
        """The file's title, from the section's first line, cut to TITLE characters."""
        start, end = self.bounds(index)
        stop = min(end, start + TITLE_LINE)
        newline = self.data.find(b"\n", start, stop)
        first = self.data[start : newline if newline >= 0 else stop]
        name = title(first.decode("utf-8", "replace"))
        return name if len(name) <= TITLE else name[:TITLE] + "…"


def files(data: bytes) -> Files:
    """The file sections of ``data``, each from a line beginning ``diff --git `` to the next;
    text before the first one (there is none in a patch yyb wrote) is a section of its own."""
    if not data:
        return Files(data, array.array("q"))
    starts = array.array("q", [0])
    find, at = data.find, data.find(_HEADER)
    while at >= 0:
        starts.append(at + 1)
        at = find(_HEADER, at + len(_HEADER))
    return Files(data, starts)


def pages(found: Files) -> list[int]:
    """The index of each page's first file: a page takes the next files while it holds fewer
    than PAGE_FILES and they fit in PAGE_TEXT bytes and PAGE_LINES lines; a file that alone
    does not fit has a page of its own, where it is cut."""
    data, starts = found.data, found.starts
    count, last = data.count, len(starts) - 1
    firsts: list[int] = []
    held = text = lines = PAGE_FILES  # as if a page were full: the first file begins one
    ends = [*starts[1:], len(data)] if starts else []
    for index, (start, end) in enumerate(zip(starts, ends, strict=True)):
        size = end - start
        number = count(b"\n", start, end) + (index == last and not data.endswith(b"\n"))
        if held == PAGE_FILES or text + size > PAGE_TEXT or lines + number > PAGE_LINES:
            firsts.append(index)
            held = text = lines = 0
        held, text, lines = held + 1, min(text + size, PAGE_TEXT), min(lines + number, PAGE_LINES)
    return firsts or [0]


def title(first_line: str) -> str:
    """P of ``diff --git a/P b/P``, else the line itself."""
    rest = first_line.removeprefix(PREFIX)
    half = (len(rest) - 3) // 2
    if (
        first_line.startswith(PREFIX)
        and rest[half:].startswith(" b/")
        and rest[half + 3 :] == (rest[:half])
    ):
        return rest[:half]
    return first_line


def render(found: Files, index: int, anchor: str, whole: urls.Url | None = None) -> Markup:
    """One file's section: its title, then its lines (the first PAGE_LINES of its first
    PAGE_TEXT bytes), each classed by what it is; a cut section ends with a line saying how
    much is shown and, when given, a link to the ``whole`` patch."""
    start, end = found.bounds(index)
    shown = found.data[start : min(end, start + PAGE_TEXT)].split(b"\n", PAGE_LINES)
    if len(shown) > PAGE_LINES:
        shown.pop()
    if shown and shown[-1] == b"":
        shown.pop()
    spans = []
    in_hunks = False
    for raw in shown:
        line = raw.decode("utf-8", "replace")
        if line.startswith("@@"):
            in_hunks, kind = True, "hunk"
        elif in_hunks and line.startswith("+"):
            kind = "add"
        elif in_hunks and line.startswith("-"):
            kind = "del"
        elif in_hunks and line.startswith(" "):
            kind = "ctx"
        else:
            kind = "meta"
        spans.append(el("span", line or " ", class_=kind))
    added, removed = found.counts(index)
    head = el("h3", found.title(index), f"  (+{added} −{removed})")
    parts = [head, el("pre", join(spans))]
    total = found.lines(index)
    if len(shown) < total:
        where = [" ", link(whole, "the whole patch")] if whole is not None else []
        cut = f"showing the first {len(shown):,} of {total:,} lines ({end - start:,} bytes);"
        parts.append(el("p", cut, *where, class_="cut"))
    return el("div", *parts, class_="diff", id=anchor)
