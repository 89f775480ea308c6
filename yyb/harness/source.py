"""Read-only access to a source repository (pygit2): commits and paths at a commit."""

from __future__ import annotations

import hashlib
import re

from yyb.errors import UsageError

_FULL_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def is_full_commit(text: str) -> bool:
    return isinstance(text, str) and _FULL_COMMIT.fullmatch(text) is not None


def open_repository(path: str):
    """Open the Git repository at ``path`` (pygit2.Repository).

    Raises:
        UsageError: there is no repository there.
    """
    import pygit2

    try:
        return pygit2.Repository(path)
    except (pygit2.GitError, KeyError, ValueError, OSError):
        raise UsageError(f"not a Git repository: {path}") from None


def commit_at(repo, commit_id: str, where: str):
    """The commit ``commit_id`` names in ``repo`` (which must be a full id).

    Raises:
        UsageError: an abbreviated id, or no commit of that id in the repository.
    """
    import pygit2

    if not is_full_commit(commit_id):
        raise UsageError(
            f"{where}: {commit_id!r} is not a full commit id (40 or 64 lowercase "
            "hex digits; abbreviations are refused)"
        )
    try:
        obj = repo.get(commit_id)
    except (ValueError, pygit2.GitError):
        obj = None
    if obj is None or obj.type != pygit2.GIT_OBJECT_COMMIT:
        raise UsageError(f"{where}: commit {commit_id} not found in {repo.workdir or repo.path}")
    return obj


def entry_digest(repo, commit, path: str) -> dict | None:
    """{"path", "kind": "file" | "tree", "sha256"} for ``path`` at ``commit``, or None if absent.

    A file's sha256 is that of its bytes. A tree's is the SHA-256 of the lines
    ``<sha256 of file> <octal mode> <path relative to the tree>\\n`` for every file below it,
    sorted by the UTF-8 bytes of the relative path (symlinks count as files whose bytes are
    their target).
    """
    import pygit2

    clean = path.strip("/")
    try:
        entry = commit.tree[clean] if clean else None
    except KeyError:
        return None
    if entry is None:
        return None
    obj = repo[entry.id]
    if obj.type == pygit2.GIT_OBJECT_BLOB:
        return {"path": clean, "kind": "file", "sha256": hashlib.sha256(obj.data).hexdigest()}
    if obj.type != pygit2.GIT_OBJECT_TREE:
        return None
    lines = []
    for rel, mode, data in _walk(repo, obj, ""):
        lines.append(
            b"%s %o %s\n"
            % (
                hashlib.sha256(data).hexdigest().encode(),
                mode,
                rel.encode("utf-8", "surrogateescape"),
            )
        )
    lines.sort(key=lambda line: line.split(b" ", 2)[2])
    return {"path": clean, "kind": "tree", "sha256": hashlib.sha256(b"".join(lines)).hexdigest()}


def _walk(repo, tree, prefix: str):
    import pygit2

    for entry in tree:
        rel = f"{prefix}{entry.name}"
        obj = repo[entry.id]
        if obj.type == pygit2.GIT_OBJECT_TREE:
            yield from _walk(repo, obj, rel + "/")
        elif obj.type == pygit2.GIT_OBJECT_BLOB:
            yield rel, entry.filemode, obj.data
