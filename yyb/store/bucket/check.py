"""``yyb doctor`` against a store in a bucket: its keys, its journal, every pack streamed and
verified whole, then the phases a store on disk is checked by (objects, refs and their update
chains, what no ref reaches), run on the bucket read as a store (view.py).

Each pack is streamed once into a scratch folder, verified as ``verify-pack`` verifies it
(trailers, index, tiling, every object's hash) and dropped before the next, so the disk used
is one pack's size; the records of the packs (never their blobs, which the pack check hashed)
are kept in memory for the phases after, which therefore make no request of their own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from yyb.store.bucket import journal
from yyb.store.bucket.client import Bucket, Location
from yyb.store.bucket.view import open_view, pack_key
from yyb.store.fsck.findings import Finding, error, info
from yyb.store.fsck.objects import check_objects
from yyb.store.fsck.packs import Listing
from yyb.store.fsck.reachability import check_reachable
from yyb.store.fsck.refs import check_refs
from yyb.store.objects import pack
from yyb.store.repo import Store

PACK_FILE = re.compile(r"objects/pack/pack-([0-9a-f]{64})\.(pack|idx)")


class BucketCheck:
    """One check of the store at ``location``; ``view`` is the store as read, once
    ``findings`` has been consumed."""

    def __init__(self, location: Location, scratch: str) -> None:
        self.bucket = Bucket(location)
        self.scratch = scratch
        self.view: Store | None = None
        self.state: journal.State | None = None

    def findings(self) -> Iterator[Finding]:
        """Every finding of the store's own checks.

        Raises:
            NoStore: no store at the location. BucketError: the bucket cannot be read.
        """
        try:
            origin = journal.read_origin(self.bucket)
        except journal.BucketCorrupt as exc:
            yield error("bucket-format", journal.FORMAT_KEY, exc.reason)
            return
        if origin is None:
            raise journal.NoStore(self.bucket.location.url)
        listed: dict[str, set[str]] = {".pack": set(), ".idx": set()}
        numbers, snapshots = [], set()
        for key, _ in self.bucket.list():
            found, commit = PACK_FILE.fullmatch(key), journal.COMMIT_KEY.fullmatch(key)
            snapshot = journal.SNAPSHOT_KEY.fullmatch(key)
            if found:
                listed["." + found[2]].add(found[1])
            elif commit:
                numbers.append(int(commit[1]))
            elif snapshot:
                snapshots.add(int(snapshot[1]))
            elif key != journal.FORMAT_KEY:
                yield error("stray-file", key, "not part of a store in a bucket")
        self.state = journal.State(origin)
        yield from self._replay(sorted(numbers), snapshots)
        yield from self._pack_files(listed)
        view = self.view = open_view(self.bucket, self.state, self.scratch)
        listing = Listing()
        yield from self._stream_packs(view, listing, listed)
        yield from check_objects(view, listing)
        present, roots = sorted(listing.copies), []
        yield from check_refs(view, set(present), roots)
        yield from check_reachable(present, roots, listing.edges)

    def _replay(self, numbers: list[int], snapshots: set[int]) -> Iterator[Finding]:
        """The journal replayed up to its first commit that does not follow (an error), each
        snapshot compared with the replay at its commit."""
        try:
            for number, data in journal.fetched(self.bucket, numbers):
                journal.apply(self.state, number, data)
                if number in snapshots:
                    snapshots.discard(number)
                    key = journal.snapshot_key(number)
                    if self.bucket.get(key) != journal.snapshot_bytes(self.state):
                        detail = f"is not the state the journal replays to at commit {number}"
                        yield error("bucket-snapshot", key, detail)
        except journal.BucketCorrupt as exc:
            yield error("bucket-journal", exc.oid, exc.reason)
            if numbers and numbers[-1] > self.state.number:
                rest = numbers[-1] - self.state.number
                detail = f"{rest} commit(s) from here on are not replayed"
                yield error("bucket-journal", journal.commit_key(self.state.number + 1), detail)
        for number in sorted(n for n in snapshots if n > self.state.number):
            detail = "a snapshot of a commit the journal does not reach"
            yield error("bucket-snapshot", journal.snapshot_key(number), detail)

    def _pack_files(self, listed: dict[str, set[str]]) -> Iterator[Finding]:
        named = set(self.state.packs)
        for trailer in sorted(named - listed[".pack"]):
            yield error("missing-pack", pack_key(trailer), "the journal names it; it is not here")
        for trailer in sorted(named & listed[".pack"] - listed[".idx"]):
            yield error("missing-pack", pack_key(trailer, ".idx"), "the journal names it; not here")
        for trailer in sorted((listed[".pack"] | listed[".idx"]) - named):
            yield info(
                "unreferenced-pack",
                pack_key(trailer),
                "no commit names it (a push that stopped before its commit): not in the store",
            )

    def _stream_packs(
        self, view: Store, listing: Listing, listed: dict[str, set[str]]
    ) -> Iterator[Finding]:
        """Each pack the journal names, streamed, verified whole and dropped: its oids and
        blobs to ``listing``, its records kept. A pack that does not verify holds nothing;
        one not in the bucket (``listed``) was said as missing-pack."""
        objects = view.objects
        for trailer, reason in sorted(objects.unreadable.items()):
            if trailer in listed[".idx"]:
                yield error("bad-pack", pack_key(trailer, ".idx"), reason)
        where: dict[str, str] = {}  # oid -> a pack that verified and holds it
        for trailer in self.state.packs:
            if trailer in objects.unreadable or trailer not in listed[".pack"]:
                continue
            try:
                held = objects.opened(trailer)
                blobs = held.verify()
            except pack.PackError as exc:
                yield error("bad-pack", pack_key(trailer), exc.reason)
                objects.drop(trailer)
                continue
            oids = list(held.oids())
            listing.present += oids
            listing.checked_blobs |= blobs
            for oid in oids:
                if oid not in blobs and oid not in objects.kept:
                    objects.kept[oid] = held.read(oid)
            for oid in oids:
                where.setdefault(oid, trailer)
            objects.drop(trailer)
        objects.where = where
