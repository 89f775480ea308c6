"""What a ``tests`` evaluator grades: the candidate's listing, the benchmark's paths put back,
the hidden test patch applied on top.

Every path the test patch reads or writes belongs to the benchmark as much as the profile's
``protected_paths`` do: each is put back as the base has it (yyb/evidence/protect.py) before
the patch is applied, so the patch always meets the files it was made against, and nothing
the candidate did to a test file, or in place of one, survives. The patch is applied to the
listing (yyb/harness/apply.py), never to a folder a candidate had. Evidence checks recompute
the same listing from the base and final listings, the profile and the case's test patch.
"""

from __future__ import annotations

from collections.abc import Callable

from yyb.evidence import protect
from yyb.harness import apply

Entries = dict[str, tuple[int, str]]


def literal(path: str) -> str:
    """A protected-path pattern that names exactly ``path`` (and what lies below it), its
    glob characters matched as themselves."""
    if not any(char in path for char in protect.GLOB):
        return path
    return "".join(f"[{char}]" if char in protect.GLOB else char for char in path)


def patterns(profile_patterns: list[str], test_patch: bytes) -> list[str]:
    """The profile's patterns and one for each path the test patch touches.

    Raises:
        PatchError: the test patch cannot be read.
    """
    return [*profile_patterns, *(literal(p) for p in apply.paths(test_patch))]


def graded(
    base: Entries,
    final: Entries,
    profile_patterns: list[str],
    test_patch: bytes,
    read: Callable[[str], bytes],
    put: Callable[[bytes], str],
) -> tuple[Entries, list[str]]:
    """(the entries the tests run on, the protected paths the candidate touched).

    Raises:
        PatchError: the test patch cannot be read or does not apply to the base's files.
    """
    entries, touched = protect.restore(base, final, patterns(profile_patterns, test_patch))
    written = apply.paths(test_patch)
    # A candidate's file where the patch needs a folder (a ``tests`` file when the patch
    # creates ``tests/test_x.py``) makes way, as a displaced path does in protect.restore.
    folders = {"/".join(p.split("/")[:i]) for p in written for i in range(1, p.count("/") + 1)}
    for path in folders & set(entries):
        if entries.pop(path) != base.get(path):
            touched.append(path)
    entries = apply.apply(entries, test_patch, read, put)
    return entries, sorted(set(touched), key=str.encode)
