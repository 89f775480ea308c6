"""Where a store lives when none is named (outside every repository, keyed by the source), and
where a store may not be: overlapping a repository it records."""

from __future__ import annotations

import hashlib
import os

from yyb.errors import StoreNotFound, StoreOverlapsRepository

TYPE_CHECKING = False  # typing is not imported at run time (docs/performance.md)
if TYPE_CHECKING:
    from collections.abc import Iterable

ENV_STORE = "YYB_STORE"


def find_repository(start: str) -> str | None:
    """The top folder of the Git repository holding ``start`` (a ``.git`` entry), or None."""
    folder = os.path.realpath(start)
    while True:
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def state_home(env: dict) -> str:
    base = env.get("XDG_STATE_HOME")
    if base and os.path.isabs(base):
        return base
    return os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local", "state")


def default_store(cwd: str, env: dict) -> str:
    """The store for the repository around ``cwd``: ``<state>/yyb/stores/<name>-<16 hex>``.

    The hex is the start of the SHA-256 of the repository's real path, so two checkouts of the
    same project keep separate evidence and the store is never inside either.

    Raises:
        StoreNotFound: ``cwd`` is not inside a repository.
    """
    repo = find_repository(cwd)
    if repo is None:
        raise StoreNotFound(cwd, "no store named, and not inside a Git repository", named=False)
    digest = hashlib.sha256(repo.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    name = os.path.basename(repo) or "root"
    return os.path.join(state_home(env), "yyb", "stores", f"{name}-{digest}")


def resolve_store_path(option: str | None, cwd: str, env: dict) -> str:
    """The store a command uses: the one named (``option``), else ``$YYB_STORE``, else the
    default."""
    if option:
        return os.path.abspath(option)
    if env.get(ENV_STORE):
        return os.path.abspath(env[ENV_STORE])
    return default_store(cwd, env)


def check_apart(store: str, repositories: Iterable[str]) -> None:
    """Refuse a store that overlaps one of ``repositories``, comparing real paths.

    Overlap in either direction is refused (docs/cli.md, "Where a store may be"): a store
    inside a repository (or the repository itself) puts hidden evidence in its worktree, where
    a commit hands it to later candidates' snapshots and a clean or checkout destroys it; a
    store around a repository hands the repository (its hidden tests, its history) to whoever
    receives a copy of the store. Symlinks are resolved on both sides, so a link outside that
    points inside is inside; a path that does not exist yet is resolved as far as it exists.

    Raises:
        StoreOverlapsRepository: the first repository the store overlaps.
    """
    real = os.path.realpath(store)
    for repository in repositories:
        repo = os.path.realpath(repository)
        if real == repo:
            relation = "is"
        elif _below(real, repo):
            relation = "is inside"
        elif _below(repo, real):
            relation = "contains"
        else:
            continue
        raise StoreOverlapsRepository(store, real, repo, relation)


def _below(path: str, folder: str) -> bool:
    """Whether real path ``path`` lies strictly below real path ``folder``."""
    return path != folder and os.path.commonpath([path, folder]) == folder
