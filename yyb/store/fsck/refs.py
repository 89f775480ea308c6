"""The refs phase: each ref's update chain, and the object each ref names."""

from __future__ import annotations

from collections.abc import Iterator

from yyb.errors import CorruptRef
from yyb.store.fsck.findings import Finding, error
from yyb.store.fsck.update_chain import check_ref_chain
from yyb.store.refs import packed as packrefs
from yyb.store.repo import Store


def check_refs(store: Store, have: set[str], roots: list[str]) -> Iterator[Finding]:
    """Check every ref and log head, adding to ``roots`` the oids they name (``have``: the
    oids the store holds)."""
    if store.path is not None and (problem := packrefs.check(store.path)) is not None:
        yield error("bad-packed-refs", packrefs.PACKED_REFS, problem)
        # Check what is loose; each ref whose reading needs the packed file is a bad-ref.
        names = sorted(set(store.refs.loose_names()) | set(store.refs.loose_log_names()))
    else:
        names = sorted(set(store.refs.names()) | set(store.refs.log_names()))
    for name in names:
        for finding, _ in check_ref_chain(store, name):
            if finding is not None:
                yield finding
        try:
            value = store.refs.read_full(name)
            head = store.refs.log_head_full(name)
        except CorruptRef:
            continue
        roots.extend(root for root in (value, head) if root is not None)
        if value is not None and value not in have:
            yield error("ref-missing-object", name, f"points at {value}, which is missing")
