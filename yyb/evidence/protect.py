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

GLOB = ("*", "?", "[")


def matches(path: str, patterns: list[str]) -> bool:
    """Whether ``path`` is protected by one of ``patterns``."""
    for pattern in patterns:
        if any(char in pattern for char in GLOB):
            if fnmatch.fnmatchcase(path, pattern):
                return True
            if pattern.startswith("**/") and fnmatch.fnmatchcase(path, pattern[3:]):
                return True
        else:
            clean = pattern.strip("/")
            if path == clean or path.startswith(clean + "/"):
                return True
    return False


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
    graded = {p: e for p, e in final.items() if not matches(p, patterns)}
    graded.update((p, e) for p, e in base.items() if matches(p, patterns))
    touched = sorted(
        (p for p in set(base) | set(final) if matches(p, patterns) and base.get(p) != final.get(p)),
        key=str.encode,
    )
    # A path of the candidate's that now sits below a restored file, or above one, would make
    # the listing unbuildable: the benchmark's paths win.
    restored = {p for p in graded if matches(p, patterns)}
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
