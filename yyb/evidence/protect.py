"""Protected paths: the files that belong to the benchmark, not to the candidate.

A grader that runs the candidate's test suite as the candidate left it can be fooled by the
suite itself: a ``conftest.py`` that turns failures into passes, a ``pytest.skip`` added to a
failing test, a deleted test file. An evaluator profile names the paths it owns
(``protected_paths``); before it grades, each of them is put back as the base commit has it
(restored if changed or deleted, removed if the candidate added it), so that the workspace the
grader sees is the candidate's everywhere else and the benchmark's there. Which protected paths
the candidate touched is kept in the evaluation receipt.

A pattern is a path relative to the repository, ``/``-separated:

- without a glob character it names that path and everything below it (``tests`` or
  ``tests/``: the folder; ``setup.cfg``: the file);
- with one (``*``, ``?``, ``[``) it is matched against the whole path, ``*`` matching any
  characters, ``/`` included; a pattern that starts with ``**/`` also matches at the top
  (``**/conftest.py`` names every ``conftest.py``).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from functools import lru_cache

GLOB = ("*", "?", "[")


def matches(path: str, patterns: list[str]) -> bool:
    """Whether ``path`` is protected by one of ``patterns``."""
    return matcher(tuple(patterns))(path)


@lru_cache(maxsize=64)
def matcher(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    """One compiled test for all of ``patterns`` (the rules above): a listing of thousands of
    paths is matched once per path, not once per path and pattern (5,000 paths against five
    patterns: 190 ms pattern by pattern, a few ms at once; docs/performance.md)."""
    parts = []
    for pattern in patterns:
        if any(char in pattern for char in GLOB):
            parts.append(fnmatch.translate(pattern))
            if pattern.startswith("**/"):
                parts.append(fnmatch.translate(pattern[3:]))
        else:
            parts.append(r"(?s:" + re.escape(pattern.strip("/")) + r"(?:/.*)?)\Z")
    if not parts:
        return lambda path: False
    compiled = re.compile("|".join(f"(?:{part})" for part in parts))
    return lambda path: compiled.match(path) is not None


def restore(
    base: dict[str, tuple[int, str]], final: dict[str, tuple[int, str]], patterns: list[str]
) -> tuple[dict[str, tuple[int, str]], list[str]]:
    """(the entries to grade, the protected paths the candidate touched).

    The entries are ``final``'s, except that every protected path is as ``base`` has it:
    present with its base mode and blob, or absent. A candidate's file in the place of a
    protected folder (or a folder in the place of a protected file) goes with it, so the
    result is always a listing that can be rebuilt.
    """
    if not patterns:
        return dict(final), []
    match = matcher(tuple(patterns))
    protected = {p for p in base.keys() | final.keys() if match(p)}
    graded = {p: e for p, e in final.items() if p not in protected}
    graded.update((p, e) for p, e in base.items() if p in protected)
    touched = sorted((p for p in protected if base.get(p) != final.get(p)), key=str.encode)
    # A path of the candidate's that now sits below a restored file, or above one, would make
    # the listing unbuildable: the benchmark's paths win.
    restored = {p for p in graded if p in protected}
    folders = {"/".join(p.split("/")[:i]) for p in restored for i in range(1, p.count("/") + 1)}
    for path in list(graded):
        if path in restored:
            continue
        parts = path.split("/")
        above = any("/".join(parts[:i]) in restored for i in range(1, len(parts)))
        if above or path in folders:
            del graded[path]
            touched.append(path)
    return graded, sorted(set(touched), key=str.encode)
