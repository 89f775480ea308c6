"""What ``yyb env list``, ``verify`` and ``gc`` see: the built environments of a registry.

Each build is named by ``refs/environments/<spec oid>`` (its environment record) and cached
under ``environments/<spec oid>/`` (cache.py). ``gc`` removes cached trees no ref names (or
whose ref names another build), what crashed builds left in ``environments/tmp/``, and pool
files no tree links any more.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from yyb.errors import YybError
from yyb.harness.environments import build
from yyb.harness.environments.cache import Cache, remove


@dataclass(frozen=True)
class Entry:
    """One built environment: its spec, its record, whether its tree is cached here."""

    spec_oid: str
    oid: str
    record: dict
    cached: bool

    def value(self) -> dict:
        """As ``--json`` prints it."""
        return {
            "name": self.record["name"],
            "kind": self.record["kind"],
            "spec": self.spec_oid,
            "environment": self.oid,
            "manifest_sha256": self.record["manifest_sha256"],
            "file_count": self.record["file_count"],
            "size_bytes": self.record["size_bytes"],
            "cached": self.cached,
        }


def entries(store) -> list[Entry]:
    """Every environment a ref names, by spec oid."""
    cache = Cache(store.path)
    found = []
    for name, oid in store.refs.iter_refs(build.REFS.removeprefix("refs/") + "*"):
        spec_oid = name.rsplit("/", 1)[-1]
        found.append(
            Entry(spec_oid, oid, store.objects.get_record(oid), cache.environment(spec_oid) == oid)
        )
    return sorted(found, key=lambda e: (e.record["name"], e.spec_oid))


def find(store, name: str) -> list[Entry]:
    """The entries ``name`` names: by name, or by a prefix (4 hex or more) of the spec's or
    the environment's oid."""

    def named(entry: Entry) -> bool:
        if name == entry.record["name"]:
            return True
        return len(name) >= 4 and (entry.spec_oid.startswith(name) or entry.oid.startswith(name))

    return [entry for entry in entries(store) if named(entry)]


def verify(store, entry: Entry) -> str | None:
    """Check ``entry``'s cached tree against its manifest, every file; the problem, or None."""
    if not entry.cached:
        return "not built in this registry"
    try:
        build.pinned(store, entry.oid, full=True)
    except YybError as exc:
        return str(exc)
    return None


@dataclass(frozen=True)
class Collected:
    trees: int
    leftovers: int
    pool_files: int
    pool_bytes: int


def gc(store) -> Collected:
    """Remove what no ref needs: unnamed trees, crashed builds' leftovers, unlinked pool files."""
    cache = Cache(store.path)
    named = {e.spec_oid: e.oid for e in entries(store)}
    trees = 0
    for spec_oid in cache.built():
        if named.get(spec_oid) != cache.environment(spec_oid):
            cache.discard(spec_oid)
            trees += 1
    leftovers = 0
    tmp = os.path.join(cache.top, "tmp")
    for name in os.listdir(tmp) if os.path.isdir(tmp) else ():
        remove(os.path.join(tmp, name))
        leftovers += 1
    files, size = cache.sweep_pool()
    return Collected(trees, leftovers, files, size)
