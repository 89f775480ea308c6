"""verify-chain: everything reachable from one object or ref exists, hashes, decodes, validates."""

from __future__ import annotations

from collections.abc import Iterator

from yyb.errors import CorruptRef, UsageError
from yyb.store.fsck.findings import Finding, error
from yyb.store.fsck.objects import inspect
from yyb.store.fsck.update_chain import check_ref_chain
from yyb.store.log import audit
from yyb.store.objects.format import OID_HEX, is_oid
from yyb.store.refs.names import check_ref_name
from yyb.store.repo import Store

_HEX = frozenset("0123456789abcdef")


def _as_ref(store: Store, name: str) -> str | None:
    """The full ref name if ``name`` is a ref with a value or an update log, else None."""
    if 4 <= len(name) < OID_HEX and set(name) <= _HEX and store.objects.with_prefix(name):
        return None  # an abbreviated oid wins over a ref of the same spelling, as in rev_parse
    try:
        full = check_ref_name(name)
    except UsageError:
        return None
    try:
        exists = store.refs.read_full(full) is not None
    except CorruptRef:
        exists = True
    return full if exists or store.refs.log_head_full(full) is not None else None


def verify_chain(store: Store, name: str) -> Iterator[Finding]:
    """Yield every problem found walking links from ``name`` (an oid, an abbreviation or a ref).

    For a ref, its update chain is checked and walked too, and held to the store's
    transparency log (``audit.audit_refs``: its logged updates replayed, its log head the
    newest of them, every update of its chain logged).

    Raises:
        InvalidOid, AmbiguousOid, InvalidRefName, RefNotFound: ``name`` names nothing.
    """
    yield from verify_many(store, [name])
    ref = None if is_oid(name) else _as_ref(store, name)
    if ref is not None:
        yield from audit.audit_refs(store, [ref])


def verify_many(store: Store, names: list[str], seen: set[str] | None = None) -> Iterator[Finding]:
    """verify_chain over several names, visiting each object once.

    ``seen`` holds objects verified already (by an earlier walk); those the walk verifies are
    added to it.
    """
    roots: list[str] = []
    for name in names:
        ref = None if is_oid(name) else _as_ref(store, name)
        if ref is None:
            roots.append(store.rev_parse(name))
            continue
        for finding, oid in check_ref_chain(store, ref):
            if finding is not None:
                yield finding
            else:
                roots.append(oid)
        try:
            value = store.refs.read_full(ref)
        except CorruptRef:
            value = None  # check_ref_chain has reported it
        if value is not None:
            roots.append(value)
    seen = set() if seen is None else seen
    stack = list(reversed(roots))
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        found = inspect(store, oid)
        yield from found.findings
        for target in found.links:
            if target in seen:
                continue
            if store.objects.contains(target):
                stack.append(target)
            else:
                seen.add(target)
                yield error("broken-link", oid, f"links {target}, which is missing")
