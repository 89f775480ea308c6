"""What a ``tests`` evaluator grades: the candidate's listing, the benchmark's paths put back,
the hidden test patch applied on top.

Three kinds of path belong to the benchmark whatever the profile says, besides the profile's
``protected_paths``: every file pytest reads its configuration from (``CONFIGURATION``: a
``pytest.toml`` added beside ``pyproject.toml`` wins over it, and its ``addopts`` can load a
plugin of the candidate's), the file of every listed test (a node id's part before ``::``),
and every path the test patch reads or writes. Each is put back as the base has it
(yyb/evidence/protect.py) before the patch is applied, so the patch always meets the files it
was made against, and nothing the candidate did to a test file, or in place of one, survives.
The patch is applied to the listing (yyb/harness/apply.py), never to a folder a candidate
had. Evidence checks recompute the same listing from the base and final listings, the
profile, the case's lists and its test patch.
"""

from __future__ import annotations

from collections.abc import Callable

from yyb.evidence import protect
from yyb.harness import apply

Entries = dict[str, tuple[int, str]]

# Every file pytest reads configuration from, at any depth (it looks in the folders of its
# arguments and their parents, and takes the first of these names it finds in a folder, in
# this order), and every conftest.py, which it imports as a plugin.
CONFIGURATION = (
    "**/pytest.toml",
    "**/.pytest.toml",
    "**/pytest.ini",
    "**/.pytest.ini",
    "**/pyproject.toml",
    "**/tox.ini",
    "**/setup.cfg",
    "**/conftest.py",
)


def literal(path: str) -> str:
    """A protected-path pattern that names exactly ``path`` (and what lies below it), its
    glob characters matched as themselves."""
    if not any(char in path for char in protect.GLOB):
        return path
    return "".join(f"[{char}]" if char in protect.GLOB else char for char in path)


def test_files(listed: list[str]) -> list[str]:
    """The file of each listed pytest node id (its part before the first ``::``), once each,
    in the order first listed; an id without ``::`` names no file."""
    files = (test.partition("::")[0] for test in listed if "::" in test)
    return list(dict.fromkeys(f for f in files if f))


def patterns(profile_patterns: list[str], test_patch: bytes, listed: list[str]) -> list[str]:
    """Every protected pattern of a ``tests`` evaluation: ``CONFIGURATION``, the profile's,
    and one naming each listed test's file and each path the test patch touches.

    Raises:
        PatchError: the test patch cannot be read.
    """
    literal_paths = [*test_files(listed), *apply.paths(test_patch)]
    return [*CONFIGURATION, *profile_patterns, *(literal(p) for p in literal_paths)]


def graded(
    base: Entries,
    final: Entries,
    profile_patterns: list[str],
    test_patch: bytes,
    listed: list[str],
    read: Callable[[str], bytes],
    put: Callable[[bytes], str],
) -> tuple[Entries, list[str]]:
    """(the entries the tests run on, the protected paths the candidate touched); ``listed``
    holds the case's FAIL_TO_PASS and PASS_TO_PASS ids.

    Raises:
        PatchError: the test patch cannot be read or does not apply to the base's files.
    """
    protected = patterns(profile_patterns, test_patch, listed)
    entries, touched = protect.restore(base, final, protected)
    written = apply.paths(test_patch)
    # A candidate's file where the patch needs a folder (a ``tests`` file when the patch
    # creates ``tests/test_x.py``) makes way, as a displaced path does in protect.restore.
    folders = {"/".join(p.split("/")[:i]) for p in written for i in range(1, p.count("/") + 1)}
    for path in folders & set(entries):
        if entries.pop(path) != base.get(path):
            touched.append(path)
    entries = apply.apply(entries, test_patch, read, put)
    return entries, sorted(set(touched), key=str.encode)
