"""The packs phase: every pack verified whole, and listed again when a repack removed one
being checked (its own pack was in place before it removed any)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator

from yyb.store.fsck.findings import Finding, error
from yyb.store.objects import pack

RELIST = 3  # times the packs are listed again when a repack removed one being checked


class Listing:
    """What the phases learn of the store's objects, for the phases after them."""

    def __init__(self, present: list[str] | None = None, loose: set[str] | None = None) -> None:
        self.present = [] if present is None else present  # an oid twice: two copies of it
        self.loose = set() if loose is None else loose
        self.checked_blobs: set[str] = set()  # of packs verified: nothing more to do
        self.verified: set[str] = set()  # the paths of the packs taken
        self.vanished = False  # a pack listed, then removed by a repack that wrote its own first
        self.edges: dict[str, tuple[str, ...]] = {}  # oid -> the oids it links
        self.copies: Counter = Counter()  # set by ``oids``

    def oids(self) -> list[str]:
        """Every oid listed, sorted once; ``copies`` then says how many copies of each."""
        self.copies = Counter(self.present)
        return sorted(self.copies)


def take_pack(path: str, listing: Listing) -> Finding | None:
    """Verify a pack, adding its oids and blobs to ``listing``; its finding, if any."""
    packed, blobs, finding = _verify_pack(path)
    listing.present += packed
    listing.checked_blobs |= blobs
    listing.verified.add(path)
    listing.vanished = listing.vanished or not os.path.exists(path)
    return finding


def relist_packs(root: str, listing: Listing) -> Iterator[Finding]:
    """Take the packs a repack put in place while they were being listed and checked."""
    for _ in range(RELIST):
        if not listing.vanished:
            break
        listing.vanished = False  # the repack's own pack was in place before: list again
        for path in pack.pack_paths(os.path.join(root, "objects", "pack")):
            if path not in listing.verified:
                finding = take_pack(path, listing)
                if finding is not None:
                    yield finding


def _verify_pack(path: str) -> tuple[list[str], set[str], Finding | None]:
    """(the oids of a pack that verifies whole, else none; its blobs; the finding when it
    does not verify)."""
    rel = "objects/pack/" + os.path.basename(path)
    try:
        held = pack.Pack.open(path)
    except pack.PackError as exc:
        if not (os.path.exists(path) and os.path.exists(path[: -len(".pack")] + ".idx")):
            return [], set(), None  # removed since it was listed: replaced by a repack
        return [], set(), error("bad-pack", rel, exc.reason)
    try:
        blobs = held.verify()
        return list(held.oids()), blobs, None
    except pack.PackError as exc:
        return [], set(), error("bad-pack", rel, exc.reason)
    finally:
        held.close()
