"""A retained patch shown as a diff: one section per file, lines marked added or removed.

The patch is candidate output like any other (its paths and lines are the candidate's), so it
is only ever text: split where a line begins ``diff --git ``, each line escaped. Git writes
``diff --git a/P b/P`` for a changed path P; the title shows P (the whole line when it is not
of that form: a path holding a newline can forge a header line, but only text follows from it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from yyb.harness.patch import MAX_NOTES, MAX_PATCH
from yyb.view.markup import Markup, el, join

_FILE = re.compile(rb"^diff --git ", re.M)
# The most a patch yyb wrote holds (its text, then its notes): what a page reads of one.
LIMIT = MAX_PATCH + MAX_NOTES + (1 << 20)
PREFIX = "diff --git a/"


@dataclass
class Files:
    """Where each file's section of a patch starts and ends (byte offsets)."""

    data: bytes
    starts: list[int]

    def __len__(self) -> int:
        return len(self.starts)

    def section(self, index: int) -> bytes:
        end = self.starts[index + 1] if index + 1 < len(self.starts) else len(self.data)
        return self.data[self.starts[index] : end]


def files(data: bytes) -> Files:
    """The file sections of ``data``; text before the first one (there is none in a patch yyb
    wrote) is a section of its own."""
    starts = [m.start() for m in _FILE.finditer(data)]
    if data and (not starts or starts[0] != 0):
        starts.insert(0, 0)
    return Files(data, starts)


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


def counts(section: bytes) -> tuple[int, int]:
    """(lines added, lines removed) in one file's section, headers left out."""
    added = removed = 0
    in_hunks = False
    for line in section.split(b"\n"):
        if line.startswith(b"@@"):
            in_hunks = True
        elif in_hunks and line.startswith(b"+"):
            added += 1
        elif in_hunks and line.startswith(b"-"):
            removed += 1
    return added, removed


def render(section: bytes, anchor: str) -> Markup:
    """One file's section: its path as a title, then every line, classed by what it is."""
    text = section.decode("utf-8", "replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    spans = []
    in_hunks = False
    for line in lines:
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
    added, removed = counts(section)
    head = el("h3", title(lines[0] if lines else ""), f"  (+{added} −{removed})")
    return el("div", head, el("pre", join(spans)), class_="diff", id=anchor)
