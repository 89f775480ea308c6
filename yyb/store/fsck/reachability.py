"""The reachability phase: what no ref reaches is dangling (kept, reported as info)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from yyb.store.fsck.findings import Finding, info


def check_reachable(
    present: list[str], roots: list[str], edges: dict[str, tuple[str, ...]]
) -> Iterator[Finding]:
    """An ``info`` finding for each oid of ``present`` that ``roots`` do not reach."""
    reachable = reach(roots, edges)
    for oid in present:
        if oid not in reachable:
            yield info("dangling", oid, "not reachable from any ref")


def reach(roots: Iterable[str], edges: dict[str, tuple[str, ...]]) -> set[str]:
    """Every oid ``roots`` reach through ``edges`` (oid -> the oids it links to), roots
    included."""
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        stack.extend(edges.get(oid, ()))
    return seen
