"""A store in a bucket seen as a ``Store``: its objects read from the bucket's packs, its refs
and its transparency log the journal's replay, so that the checks and the imports written for
a store on disk (bundle verification, ref moves, fsck's phases, the log's audit) run on it
unchanged.

Reading is by whole packs: a pack is streamed into a scratch folder the first time one of its
objects is read (a pack is what one push wrote, so a fetch reads the packs it needs) and can
be dropped again (``doctor`` holds one at a time). The indexes are read first, each checked
against its own checksum, so that which objects the bucket holds is known without a pack.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from yyb.errors import UsageError
from yyb.store.bucket import journal
from yyb.store.bucket.client import Bucket
from yyb.store.log.transparency import MemoryLog
from yyb.store.objects import pack
from yyb.store.objects.store import ObjectStore
from yyb.store.refs.store import MemoryRefs
from yyb.store.repo import Store


def pack_key(trailer: str, suffix: str = ".pack") -> str:
    return f"{journal.PACKS}pack-{trailer}{suffix}"


class BucketObjects(ObjectStore):
    """The objects of the packs a journal names, read from the bucket on demand."""

    def __init__(self, bucket: Bucket, packs: list[str], scratch: str) -> None:
        self.bucket, self.scratch = bucket, scratch
        self.where: dict[str, str] = {}  # oid -> the trailer of the first pack holding it
        self.kept: dict[str, bytes] = {}  # stored bytes held in memory (a check's records)
        self.unreadable: dict[str, str] = {}  # trailer -> why its index cannot be used
        self._open: dict[str, pack.Pack] = {}
        with ThreadPoolExecutor(journal.READERS) as pool:
            indexes = list(pool.map(lambda t: bucket.get(pack_key(t, ".idx")), packs))
        for trailer, data in zip(packs, indexes, strict=True):
            self.add_index(trailer, data)

    def add_index(self, trailer: str, data: bytes | None) -> None:
        """Take the oids of the pack ``trailer`` from its index's bytes (None: absent)."""
        if data is None:
            self.unreadable[trailer] = "its index is not in the bucket"
            return
        try:
            oids, named = pack.index_oids(data, pack_key(trailer, ".idx"))
        except pack.PackError as exc:
            self.unreadable[trailer] = exc.reason
            return
        if named != trailer:
            self.unreadable[trailer] = f"its index names the pack {named}"
            return
        with open(os.path.join(self.scratch, f"pack-{trailer}.idx"), "wb") as out:
            out.write(data)
        for oid in oids:
            self.where.setdefault(oid, trailer)

    def opened(self, trailer: str) -> pack.Pack:
        """The pack ``trailer``, streamed here first if it is not.

        Raises:
            PackError: it is not in the bucket, or does not fit its index.
        """
        held = self._open.get(trailer)
        if held is not None:
            return held
        path = os.path.join(self.scratch, f"pack-{trailer}.pack")
        if not os.path.exists(path) and self.bucket.download(pack_key(trailer), path) is None:
            raise pack.PackError(pack_key(trailer), "it is not in the bucket")
        held = self._open[trailer] = pack.Pack.open(path)
        return held

    def drop(self, trailer: str) -> None:
        """Forget the local copy of a pack (it is streamed again when read again)."""
        held = self._open.pop(trailer, None)
        if held is not None:
            held.close()
        try:
            os.unlink(os.path.join(self.scratch, f"pack-{trailer}.pack"))
        except FileNotFoundError:
            pass

    def close(self) -> None:
        for trailer in list(self._open):
            self._open.pop(trailer).close()

    def _read(self, oid: str) -> bytes | None:
        kept = self.kept.get(oid)
        if kept is not None:
            return kept
        trailer = self.where.get(oid)
        return None if trailer is None else self.opened(trailer).read(oid)

    def _write(self, oid: str, data: bytes) -> None:
        raise UsageError("a store in a bucket is written by yyb push, not directly")

    def contains(self, oid: str) -> bool:
        return oid in self.where

    def copies(self, oid: str) -> list[str]:
        trailer = self.where.get(oid)
        return [pack_key(trailer)] if trailer else []

    def iter_oids(self) -> Iterator[str]:
        return iter(sorted(self.where))

    def with_prefix(self, prefix: str) -> list[str]:
        return sorted(oid for oid in self.where if oid.startswith(prefix))


def open_view(bucket: Bucket, state: journal.State, scratch: str) -> Store:
    """The store ``state`` describes, read from ``bucket`` (``scratch``: a folder for packs)."""
    objects = BucketObjects(bucket, state.packs, scratch)
    log = MemoryLog(state.origin)
    log.append(state.leaves)
    refs = MemoryRefs(objects, log)
    for name, (value, head) in state.refs.items():
        refs.values[name], refs.heads[name] = value, head
    return Store(objects, refs)


@contextmanager
def reading(location, scratch: str) -> Iterator[Store]:
    """The store in the bucket at ``location``, as a ``Store`` (its packs read into
    ``scratch`` as they are needed).

    Raises:
        NoStore, BucketError, BucketCorrupt.
    """
    bucket = Bucket(location)
    view = open_view(bucket, journal.read_state(bucket), scratch)
    try:
        yield view
    finally:
        view.objects.close()
