"""Store-wide consistency check: a generator of findings, like ``git fsck``, in phases.

The phases run in order, each reading what the ones before it listed: the layout (every file
on disk, each pack verified as it is met), the format marker, the packs a repack put in place
meanwhile, every object, every ref and its update chain, and last what no ref reaches.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from yyb.store.fsck.findings import Finding
from yyb.store.fsck.layout import check_format, check_layout, check_memory
from yyb.store.fsck.objects import check_objects
from yyb.store.fsck.packs import Listing, relist_packs
from yyb.store.fsck.reachability import check_reachable
from yyb.store.fsck.refs import check_refs
from yyb.store.repo import Store


def fsck(store: Store, now: float | None = None) -> Iterator[Finding]:
    """Check the whole store; yield every finding (errors first per object, infos last).

    Args:
        store: the store to check, on disk or in memory.
        now: the time locks' ages are measured from (default: the clock's).
    """
    listing = Listing()
    if store.path is not None:
        yield from check_layout(store, time.time() if now is None else now, listing)
        yield from check_format(store, listing)
        yield from relist_packs(store.path, listing)
    else:
        yield from check_memory(store, listing)
    yield from check_objects(store, listing)
    present, roots = sorted(listing.copies), []
    yield from check_refs(store, set(present), roots)
    yield from check_reachable(present, roots, listing.edges)
