"""Packs: many objects in one file, found through a sorted index (docs/format.md, "Packs").

A pack holds objects exactly as loose files hold them (``<kind> <length>\\0<body>``, not
compressed: a packed object's oid is the SHA-256 of the same bytes, and reading one is a slice),
one after another, between a fixed header and a trailer hash::

    pack:  "YYBPACK\\0" | version u32 (1) | count u64 | objects... | SHA-256 of all before
    index: "YYBIDX\\0\\0" | version u32 (1) | count u64 | fan-out 256 x u32 |
           oids (count x 32 bytes, ascending) | offsets (count x u64, into the pack) |
           the pack's trailer (32) | SHA-256 of all before

All integers are big-endian. ``fan-out[b]`` is the number of oids whose first byte is at most
``b``, so the oids starting with byte ``b`` are entries ``fan-out[b-1] .. fan-out[b]``. A pack
is ``objects/pack/pack-<its trailer hex>.pack`` with its index beside it (``.idx``); a pack
without an index is not part of the store (a write cut short).
"""

from __future__ import annotations

import array
import binascii
import bisect
import collections
import hashlib
import itertools
import mmap
import operator
import os
import struct
import sys

from yyb.errors import CorruptObject
from yyb.store import file
from yyb.store.objects.format import MAX_HEADER, header_re, parse_header
from yyb.store.objects.pack_hashing import Prover

TYPE_CHECKING = False  # typing is not imported at run time (docs/performance.md)
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

PACK_MAGIC = b"YYBPACK\0"
INDEX_MAGIC = b"YYBIDX\0\0"
VERSION = 1
HEAD = struct.Struct(">8sIQ")  # magic, version, count
FANOUT = struct.Struct(">256I")
HASH = 32


class PackError(CorruptObject):
    """A pack or an index that does not verify."""

    def __init__(self, path: str, reason: str):
        super().__init__(None, f"{os.path.basename(path)}: {reason}", "malformed")
        self.path = path


def write(folder: str, items: Iterable[tuple[str, bytes]]) -> str | None:
    """Write a pack of ``items`` (oid, stored bytes; strictly ascending by oid) and its index
    into ``folder``, each fsynced and renamed into place (the pack first), the folder fsynced;
    return the pack's path (None when there were no items). Nothing is removed here: the
    caller removes what was packed only once this has returned.

    Raises:
        ValueError: the items are not ascending.
    """
    return _written(folder, lambda out: _fill(out, items))


COPY_PIECE = 1 << 20  # bytes of whole objects copied, proved and written at a time


def write_copy(folder: str, view: memoryview, spans: list[tuple[bytes, int, int]]) -> str:
    """Write a pack of objects that lie one after another in ``view`` (each span its raw oid
    and where its stored bytes start and stop; strictly ascending by oid, each starting where
    the one before stops), as ``write`` does, copying them in pieces of about COPY_PIECE.
    Every object is hashed on the copy that is written, so what lands is exactly what was
    proved, whatever happens to ``view`` meanwhile; the pack's trailer is hashed on the way.

    Raises:
        CorruptObject: an object of the copy does not hash to its oid.
        ValueError: the spans are empty, out of order or not one after another.
    """
    if not spans:
        raise ValueError("a pack needs at least one object")
    return _written(folder, lambda out: _fill_copy(out, view, spans))


Filled = tuple[list[bytes], list[int], bytes]  # a pack's oids, their offsets, its trailer


def _written(folder: str, fill) -> str | None:
    """Make a pack in ``folder``: ``fill`` writes a new temporary file's objects and returns
    what they are (``Filled``; None: there were none, and nothing is kept); the file is then
    sealed with the trailer, indexed and placed (``_place``)."""
    tmp_pack = None
    try:
        fd, tmp_pack = _temp(folder)
        with os.fdopen(fd, "w+b") as out:
            filled = fill(out)
            if filled is None:
                return None
            oids, offsets, trailer = filled
            out.write(trailer)
            out.flush()
            os.fsync(out.fileno())
        placed = _place(folder, tmp_pack, oids, offsets, trailer)
        tmp_pack = None
        return placed
    except OSError as exc:
        raise file.io_error(folder, exc) from exc
    finally:
        file.discard(tmp_pack)


def _fill(out, items: Iterable[tuple[str, bytes]]) -> Filled | None:
    oids: list[bytes] = []
    offsets: list[int] = []
    out.write(HEAD.pack(PACK_MAGIC, VERSION, 0))  # the count is known at the end
    position = HEAD.size
    for oid, data in items:
        key = bytes.fromhex(oid)
        if oids and key <= oids[-1]:
            raise ValueError("pack items must be strictly ascending by oid")
        oids.append(key)
        offsets.append(position)
        out.write(data)
        position += len(data)
    if not oids:
        return None
    out.seek(0)
    out.write(HEAD.pack(PACK_MAGIC, VERSION, len(oids)))
    out.flush()
    digest = hashlib.sha256()
    out.seek(0)
    while chunk := out.read(1 << 20):
        digest.update(chunk)
    return oids, offsets, digest.digest()


def _fill_copy(out, view: memoryview, spans: list[tuple[bytes, int, int]]) -> Filled:
    sha256 = hashlib.sha256
    head = HEAD.pack(PACK_MAGIC, VERSION, len(spans))
    digest = sha256(head)
    out.write(head)
    previous, at, i = b"", spans[0][1], 0
    while i < len(spans):
        j, stop = i, at  # the whole objects of the next piece: i .. j
        while j < len(spans) and (j == i or spans[j][2] - at <= COPY_PIECE):
            raw, start, stop = spans[j]
            if start != (spans[j - 1][2] if j else at) or raw <= previous:
                raise ValueError("spans must be ascending and one after another")
            previous, j = raw, j + 1
        piece = bytes(view[at:stop])
        with memoryview(piece) as copy:
            for raw, start, end in spans[i:j]:
                if sha256(copy[start - at : end - at]).digest() != raw:
                    raise CorruptObject(raw.hex(), "its bytes changed while copied")
        digest.update(piece)
        out.write(piece)
        i, at = j, stop
    base = spans[0][1] - HEAD.size
    return [raw for raw, _, _ in spans], [start - base for _, start, _ in spans], digest.digest()


def _place(folder: str, tmp_pack: str, oids: list[bytes], offsets: list[int], trailer: bytes):
    """Write the index of the sealed pack at ``tmp_pack`` and rename both into place (the pack
    first), the folder fsynced after each; the pack's path. On failure the temporary index is
    removed (the temporary pack is the caller's)."""
    name = os.path.join(folder, f"pack-{trailer.hex()}")
    tmp_index = None
    try:
        fd, tmp_index = _temp(folder)
        with os.fdopen(fd, "wb") as out:
            out.write(_index(oids, offsets, trailer))
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp_pack, 0o444)
        os.chmod(tmp_index, 0o444)
        os.rename(tmp_pack, name + ".pack")
        file.fsync_dir(folder)
        file.durable_point()
        os.rename(tmp_index, name + ".idx")  # the pack is part of the store from here
        tmp_index = None
        file.fsync_dir(folder)
        file.durable_point()
        return name + ".pack"
    finally:
        file.discard(tmp_index)


def _temp(folder: str) -> tuple[int, str]:
    import tempfile

    return tempfile.mkstemp(dir=folder, prefix=file.TEMP_PREFIX)


def _index(oids: list[bytes], offsets: list[int], trailer: bytes) -> bytes:
    counts = [0] * 256
    for oid in oids:
        counts[oid[0]] += 1
    fanout, total = [], 0
    for count in counts:
        total += count
        fanout.append(total)
    body = b"".join(
        [
            HEAD.pack(INDEX_MAGIC, VERSION, len(oids)),
            FANOUT.pack(*fanout),
            *oids,
            struct.pack(f">{len(offsets)}Q", *offsets),
            trailer,
        ]
    )
    return body + hashlib.sha256(body).digest()


# How a pack finds an oid, by the number of lookups this process has made in it: the first
# LIST_AFTER search the mapped index in Python; then its oids are listed in memory and searched
# with bisect (C); past count / TABLE_AFTER lookups (a batch reader reading much of the pack)
# they go into a dict. A single lookup pays for no listing, a batch pays for it once.
LIST_AFTER = 64
TABLE_AFTER = 8
HELPER_AFTER = 256  # keys in one bulk read before a helper is worth its fork
# In bulk reads the dict comes once the lookups pass count / TABLE_AFTER_BULK: it costs about
# as much per entry as listing the index, and a lookup without it is ~30 times a dict's.
TABLE_AFTER_BULK = 50
SHARE_STEP = 0.05  # how fast the helper's share of a bulk read follows which side waits
_DIGEST = operator.methodcaller("digest")


# A bulk read begun (``Pack.begin_bodies``): the oids wanted (``keys``, joined, 32 bytes
# each), where they go in the caller's list (``where``; None: everywhere), how many of their
# bytes the helper has (``split``, the first), and the spans proved here for the rest
# (``starts``, ``stops``). collections' namedtuple, not typing's: plumbing does not import
# typing (docs/performance.md).
Begun = collections.namedtuple("Begun", ["keys", "where", "split", "starts", "stops"])


class Pack:
    """One pack and its index, mapped read-only."""

    def __init__(self, path: str, count: int, index: mmap.mmap, data: mmap.mmap) -> None:
        self.path = path
        self.count = count
        self.index = index
        self.data = data
        self._view = memoryview(data)
        self._lookups = 0
        self._listed: list[bytes] | None = None
        self._offsets: array.array | None = None
        self._table: dict[int, int] | None = None  # oid prefix -> entry (_make_table)
        self._ends: array.array | None = None  # where each entry's bytes end (_stop)
        self._prover: Prover | None = None  # the bulk reader's hashing helper (pack_hashing.py)
        self._forked = False
        self._share = 0.5  # of a bulk read, what the helper proves (adjusted as it goes)

    def __repr__(self) -> str:
        return f"Pack({self.path!r}, {self.count} objects)"

    @classmethod
    def open(cls, path: str) -> Pack:
        """Map a pack and its index, checking their shapes (not every hash: ``verify``).

        Raises:
            PackError: the index or the pack is malformed, or they do not belong together.
        """
        index_path = path[: -len(".pack")] + ".idx"
        try:
            index = _map(index_path)
            data = _map(path)
        except (OSError, ValueError) as exc:
            raise PackError(path, f"cannot be read ({exc})") from None
        count, expected = _index_shape(index, index_path)
        if len(data) < HEAD.size + HASH or data[: len(PACK_MAGIC)] != PACK_MAGIC:
            raise PackError(path, "not a pack")
        if HEAD.unpack_from(data, 0)[2] != count:
            raise PackError(path, "its count is not its index's")
        pack_trailer = index[expected - 2 * HASH : expected - HASH]
        if data[-HASH:] != pack_trailer:
            raise PackError(path, "its trailer is not the one its index names")
        return cls(path, count, index, data)

    def _fanout(self, byte: int) -> tuple[int, int]:
        at = HEAD.size
        hi = struct.unpack_from(">I", self.index, at + 4 * byte)[0]
        lo = struct.unpack_from(">I", self.index, at + 4 * (byte - 1))[0] if byte else 0
        return lo, hi

    def listing(self) -> Iterator[tuple[str, str, int, int]]:
        """Each object's (oid, kind, size, offset), in index order (``verify-pack -v``).

        Raises:
            PackError: an entry whose offset or header does not fit the pack.
        """
        for i in range(self.count):
            oid = self._oid(i).hex()
            _, kind, body, stop = self._span(i, oid)
            yield oid, kind, stop - body, self._offset(i)

    def _oid(self, i: int) -> bytes:
        at = HEAD.size + FANOUT.size + i * HASH
        return self.index[at : at + HASH]

    def _offset(self, i: int) -> int:
        at = HEAD.size + FANOUT.size + self.count * HASH + i * 8
        return struct.unpack_from(">Q", self.index, at)[0]

    def _start(self, i: int) -> int:
        """Entry ``i``'s offset, from memory once the index is listed."""
        return self._offsets[i] if self._offsets is not None else self._offset(i)

    def _stop(self, i: int) -> int:
        """Where entry ``i``'s bytes end in a pack that tiles: the next entry's offset."""
        if self._ends is not None:
            return self._ends[i]
        return self._offset(i + 1) if i + 1 < self.count else len(self.data) - HASH

    def find(self, oid: str) -> int | None:
        """The entry of ``oid`` in the index, or None."""
        return self._find(bytes.fromhex(oid))

    def _find(self, key: bytes) -> int | None:
        table = self._table
        if table is not None:
            at = table.get(int.from_bytes(key[:8], sys.byteorder))
            if at is not None and self._oid(at) == key:
                return at
            return self._search(key)  # absent, or its prefix is shared
        self._lookups += 1
        if self._listed is None and self._lookups > LIST_AFTER:
            self._list()
        listed = self._listed
        if listed is None:
            return self._search(key)
        if self._lookups > max(LIST_AFTER, self.count // TABLE_AFTER):
            self._make_table()
            return self._find(key)
        at = bisect.bisect_left(listed, key)
        return at if at < self.count and listed[at] == key else None

    def _make_table(self) -> None:
        """The dict from each oid's first eight bytes (as a native integer: cheap to hash
        and compare) to its entry. Two oids may share a prefix (it takes 2^32 tries to make
        two): the dict keeps one, and a reader checks the whole oid of what it finds."""
        self._load_offsets()
        start = HEAD.size + FANOUT.size
        oids = self.index[start : start + self.count * HASH]
        self._table = dict(zip(_prefixes(oids), range(self.count), strict=True))

    def _search(self, key: bytes) -> int | None:
        """Binary search of the mapped index, starting from the fan-out table."""
        lo, hi = self._fanout(key[0])
        while lo < hi:
            mid = (lo + hi) // 2
            found = self._oid(mid)
            if found < key:
                lo = mid + 1
            elif found > key:
                hi = mid
            else:
                return mid
        return None

    def _list(self) -> None:
        """Read the index's oids and offsets into memory."""
        start = HEAD.size + FANOUT.size
        self._listed = _split(self.index[start : start + self.count * HASH])
        self._load_offsets()

    def _load_offsets(self) -> None:
        """Read the index's offsets into memory, and where each entry ends (``_stop``)."""
        if self._offsets is not None:
            return
        at = HEAD.size + FANOUT.size + self.count * HASH
        offsets = array.array("Q", self.index[at : at + 8 * self.count])
        if sys.byteorder == "little":
            offsets.byteswap()
        self._offsets = offsets
        self._ends = offsets[1:]
        self._ends.append(len(self.data) - HASH)

    def blob_bodies(self, oids: list[bytes | None], found: list, helper: bool = False) -> None:
        """For each ``oids[i]`` (64 lowercase hex digits; None is skipped) with no ``found[i]``
        yet that is a well-formed blob here whose stored bytes hash to it, set ``found[i]`` to
        its body, a view into the mapped pack (valid until ``close``). Anything else is left
        as it is (absent, a record, or damaged: ``read`` names what is wrong). The batch
        readers' path: one lookup, one header check, one hash and no copy an object, each
        step mapped over the whole list by the interpreter's C loops; with ``helper``, a
        helper process forked for this pack proves a share of the list meanwhile (``pack_hashing``;
        only for a caller with no threads, as a fork needs)."""
        self.finish_bodies(self.begin_bodies(oids, found, helper), found)

    def begin_bodies(self, oids: list[bytes | None], found: list, helper: bool) -> Begun | None:
        """The first half of ``blob_bodies``: hand the helper its share and prove this
        process's. A reader may begin the next list before it finishes this one (the helper
        then works while the reader writes out what it has): ``finish_bodies`` must then be
        called in the same order, with lists ``found`` as they were here."""
        where = None
        if None in oids or found.count(None) != len(found):
            wanted = [o is not None and f is None for o, f in zip(oids, found, strict=True)]
            where = list(itertools.compress(range(len(oids)), wanted))
            oids = list(itertools.compress(oids, wanted))
        if not oids:
            return None
        keys = binascii.unhexlify(b"".join(oids))
        self._lookups += len(oids)
        if len(oids) > LIST_AFTER:
            self._load_offsets()
        bulk = len(oids) >= HELPER_AFTER
        if self._table is None and self._lookups > max(
            LIST_AFTER, self.count // (TABLE_AFTER_BULK if bulk else TABLE_AFTER)
        ):
            self._make_table()
        prover = self._helper() if helper and bulk and self._table is not None else None
        split = HASH * int(len(oids) * self._share) if prover is not None else 0
        if split and not prover.ask(keys[:split]):
            split = 0
        return Begun(keys, where, split, *self._proved_spans(keys[split:]))

    def finish_bodies(self, begun: Begun | None, found: list) -> None:
        """The second half of ``blob_bodies``: the helper's answer, then the bodies."""
        if begun is None:
            return
        starts, stops = begun.starts, begun.stops
        if begun.split:
            prover = self._prover
            if prover.ready():  # it finished first: give it more next time
                self._share = min(self._share + SHARE_STEP, 1 - SHARE_STEP)
            else:
                self._share = max(self._share - SHARE_STEP, SHARE_STEP)
            theirs = prover.answer()
            if theirs is None:  # it died: prove its share here
                theirs = self._proved_spans(begun.keys[: begun.split])
            starts, stops = theirs[0] + starts, theirs[1] + stops
        bodies = map(self._view.__getitem__, map(slice, starts, stops))
        where = begun.where
        if where is None and 0 not in starts:
            found[:] = bodies
            return
        for at, start, body in zip(where or range(len(found)), starts, bodies, strict=True):
            if start:
                found[at] = body

    def _proved_spans(self, keys: bytes) -> tuple[list[int], list[int]]:
        """For each oid of ``keys`` (32 bytes each, one after another), where the body of
        its object starts and stops in the pack, when it is here, a well-formed blob, and its
        bytes hash to it; else 0 and 0. An entry's bytes run from its offset to the next
        entry's (the objects tile the pack in oid order, as the index lists them); whatever
        a damaged index says, a span is given only for bytes that hash to the oid and begin
        with exactly ``blob <the length of the rest>\\0``."""
        count = len(keys) // HASH
        if self._table is not None:
            entries = list(map(self._table.get, _prefixes(keys)))
        else:  # a bulk read searches the mapped index (listing it costs as much as the dict)
            find = self._search if len(keys) >= HASH * HELPER_AFTER else self._find
            entries = list(map(find, _split(keys)))
        present = None
        if None in entries:  # absent (or a prefix shared: ``get`` then finds it)
            present = [entry is not None for entry in entries]
            entries = list(itertools.compress(entries, present))
            keys = b"".join(itertools.compress(_split(keys), present))
        listed = self._offsets is not None  # and so are the ends (_load_offsets)
        starts = list(map(self._offsets.__getitem__ if listed else self._start, entries))
        stops = list(map(self._ends.__getitem__ if listed else self._stop, entries))
        data = self.data
        if entries and max(max(starts), max(stops)) > len(data):  # a damaged index
            return [0] * count, [0] * count  # left to ``read``, which says what is wrong
        hashed = digests(self._view, starts, stops)
        nuls = map(data.find, itertools.repeat(b"\0"), starts, stops)  # -1: none, no blob
        bodies = list(map(operator.add, nuls, itertools.repeat(1)))
        heads = map(data.__getitem__, map(slice, starts, bodies))
        expected = map(b"blob %d\0".__mod__, map(operator.sub, stops, bodies))
        proved = list(map(operator.eq, heads, expected))
        if hashed != keys:  # some entry does not hash to its oid: find which
            proved = list(
                map(operator.and_, proved, map(operator.eq, _split(hashed), _split(keys)))
            )
        if not all(proved):
            bodies = [at if good else 0 for at, good in zip(bodies, proved, strict=True)]
            stops = [at if good else 0 for at, good in zip(stops, proved, strict=True)]
        if present is not None:
            bodies, stops = _spread(bodies, present), _spread(stops, present)
        return bodies, stops

    def _helper(self) -> Prover | None:
        """This pack's helper process, forked on first use; None when there is none to be
        had (then ``blob_bodies`` proves everything in this process)."""
        if self._prover is None and not self._forked:
            self._forked = True  # one helper a pack: one that died is not replaced
            self._prover = Prover.start(self._proved_spans)
        if self._prover is None or not self._prover.open:
            return None
        return self._prover

    def read(self, oid: str) -> bytes | None:
        """The stored bytes of ``oid`` (header and body), or None when it is not here.

        Raises:
            PackError: the entry's header or length does not fit the pack.
        """
        i = self.find(oid)
        if i is None:
            return None
        return self._entry(i, oid)

    def _entry(self, i: int, oid: str) -> bytes:
        start, _, _, stop = self._span(i, oid)
        return bytes(self.data[start:stop])

    def _span(self, i: int, oid: str) -> tuple[int, str, int, int]:
        """Entry ``i``'s (start, kind, body start, end) in the pack."""
        start = self._start(i)
        end = len(self.data) - HASH
        if not HEAD.size <= start < end:
            raise PackError(self.path, f"{oid}: its offset lies outside the pack")
        kind, size, body = parse_header(self.data[start : start + MAX_HEADER], oid)
        body += start
        if body + size > end:
            raise PackError(self.path, f"{oid}: its body runs past the pack")
        return start, kind, body, body + size

    def oids(self) -> Iterator[str]:
        for i in range(self.count):
            yield self._oid(i).hex()

    def with_prefix(self, prefix: str) -> list[str]:
        byte = int(prefix[:2], 16)
        lo, hi = self._fanout(byte)
        return [h for h in (self._oid(i).hex() for i in range(lo, hi)) if h.startswith(prefix)]

    def verify(self) -> set[str]:
        """Check the name and every hash: the file is ``pack-<its trailer in hex>.pack``;
        the index's trailer, the pack's, the order of the oids, and that each object's bytes
        hash to its oid and the objects tile the pack exactly;
        return the oids of its blobs (a blob that hashes right has nothing more to check).

        Raises:
            PackError: the first thing that does not verify.
        """
        if os.path.basename(self.path) != f"pack-{self.data[-HASH:].hex()}.pack":
            raise PackError(self.path, "its name is not pack-<its trailer in hex>.pack")
        body = len(self.index) - HASH
        if hashlib.sha256(self.index[:body]).digest() != self.index[body:]:
            raise PackError(self.path, "its index does not hash to its trailer")
        # The whole pack is hashed on another CPU while its objects are checked here (hashlib
        # lets go of the interpreter for so large a buffer); what is found is raised in the
        # order of the checks, the trailer first.
        whole = _Digest(self._view[:-HASH])
        found = None
        try:
            oids, order, starts, stops = self._layout()
            kinds = self._headers(oids, order, starts, stops)
            if digests(self._view, starts, stops) != b"".join(map(oids.__getitem__, order)):
                for i, start, stop in zip(order, starts, stops, strict=True):
                    if hashlib.sha256(self._view[start:stop]).digest() != oids[i]:
                        raise PackError(self.path, f"{oids[i].hex()}: its bytes do not hash to it")
        except PackError as exc:
            found = exc
        if whole.digest() != self.data[-HASH:]:
            raise PackError(self.path, "it does not hash to its trailer")
        if found is not None:
            raise found
        return {oids[i].hex() for i, kind in zip(order, kinds, strict=True) if kind == b"blob"}

    # ``verify`` works a pass at a time over the whole index with the interpreter's C loops
    # (``map``, ``sorted``, ``digests``): a loop in Python per entry cost doctor 9 us an object.

    def _layout(self) -> tuple[list[bytes], list[int], list[int], list[int]]:
        """The index's oids (checked ascending, and against the fan-out table), and the
        entries in pack order: which entry, where its bytes start and where the next begins."""
        count = self.count
        at = HEAD.size + FANOUT.size
        keys = self.index[at : at + count * HASH]
        oids = _split(keys)
        if not all(map(operator.lt, oids, itertools.islice(oids, 1, None))):
            raise PackError(self.path, "its index is not sorted by oid")
        firsts = collections.Counter(keys[::HASH])
        fanout = tuple(itertools.accumulate(firsts.get(b, 0) for b in range(256)))
        if fanout != FANOUT.unpack_from(self.index, HEAD.size):
            raise PackError(self.path, "its fan-out table disagrees with its oids")
        offsets = struct.unpack_from(f">{count}Q", self.index, at + count * HASH)
        order = sorted(range(count), key=offsets.__getitem__)
        starts = list(map(offsets.__getitem__, order))
        end = len(self.data) - HASH
        if not starts and end != HEAD.size:
            raise PackError(self.path, "bytes lie between its last object and its trailer")
        stops = starts[1:] + [end] if starts else []
        return oids, order, starts, stops

    def _headers(self, oids, order, starts, stops) -> list[bytes]:
        """Each entry's kind, in pack order, once its header is checked to declare exactly
        the bytes up to the next entry (the objects tile the pack)."""
        if starts and starts[0] != HEAD.size:
            raise PackError(self.path, f"{oids[order[0]].hex()}: the objects do not tile the pack")
        ends = list(map(min, map(MAX_HEADER.__add__, starts), stops))
        found = list(map(header_re().match, itertools.repeat(self.data), starts, ends))
        found = [
            m if m is not None and m.end() + int(m[2]) == stop else None
            for m, stop in zip(found, stops, strict=True)
        ]
        if None in found:
            i = order[found.index(None)]
            raise PackError(self.path, f"{oids[i].hex()}: the objects do not tile the pack")
        return [m[1] for m in found]

    def stop_helper(self) -> None:
        """Stop the bulk reads' helper, if one was forked (none is forked again)."""
        self._forked = True
        if self._prover is not None:
            self._prover.close()

    def close(self) -> None:
        self.stop_helper()
        self.index.close()
        self._view.release()
        try:
            self.data.close()
        except BufferError:
            pass  # a body handed out (blob_bodies) is still in use: unmapped when it is freed


class _Digest:
    """The SHA-256 of ``data``, computed by a thread of its own (``digest`` waits for it):
    hashlib releases the interpreter while it hashes a large buffer, so the thread runs on
    another CPU beside the caller. A buffer below WHOLE_IN_THREAD is hashed at once."""

    WHOLE_IN_THREAD = 1 << 20

    def __init__(self, data) -> None:
        self._digest: bytes | None = None
        self._thread = None
        if len(data) < self.WHOLE_IN_THREAD:
            self._digest = hashlib.sha256(data).digest()
            return
        import threading

        self._thread = threading.Thread(target=self._run, args=(data,), daemon=True)
        self._thread.start()

    def _run(self, data) -> None:
        self._digest = hashlib.sha256(data).digest()

    def digest(self) -> bytes:
        if self._thread is not None:
            self._thread.join()
        assert self._digest is not None
        return self._digest


def _split(keys: bytes) -> list[bytes]:
    """Joined oids, one by one."""
    return list(
        map(
            keys.__getitem__,
            map(slice, range(0, len(keys), HASH), range(HASH, len(keys) + HASH, HASH)),
        )
    )


def digests(view: memoryview, starts: list[int], stops: list[int]) -> bytes:
    """The SHA-256 of each ``view[start:stop]``, joined."""
    spans = map(view.__getitem__, map(slice, starts, stops))
    return b"".join(map(_DIGEST, map(hashlib.sha256, spans)))


def _prefixes(keys: bytes) -> list[int]:
    """The first eight bytes of each joined oid, as native integers (the dict's keys)."""
    return memoryview(keys).cast("Q")[:: HASH // 8].tolist()


def _spread(values: list[int], present: list[bool]) -> list[int]:
    """``values`` for the present places, 0 for the others."""
    given = iter(values)
    return [next(given) if here else 0 for here in present]


def _map(path: str) -> mmap.mmap:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)


def pack_paths(folder: str) -> list[str]:
    """Every pack of ``folder`` that has its index (a pack without one is not yet a pack)."""
    try:
        names = set(os.listdir(folder))
    except FileNotFoundError:
        return []
    return sorted(
        os.path.join(folder, name)
        for name in names
        if name.startswith("pack-") and name.endswith(".pack") and name[:-5] + ".idx" in names
    )


def index_oids(data: bytes, where: str) -> tuple[list[str], str]:
    """The oids an index lists, ascending, and the trailer of the pack it names, from the
    index's bytes alone (its shape and its own SHA-256 checked; a store in a bucket reads
    the indexes before any pack).

    Raises:
        PackError: the index is malformed or its checksum does not match.
    """
    count, expected = _index_shape(data, where)
    if hashlib.sha256(data[:-HASH]).digest() != data[-HASH:]:
        raise PackError(where, "its checksum does not match its bytes")
    start = HEAD.size + FANOUT.size
    raw = data[start : start + count * HASH]
    oids = [raw[i : i + HASH].hex() for i in range(0, len(raw), HASH)]
    if any(a >= b for a, b in itertools.pairwise(oids)):
        raise PackError(where, "its oids do not ascend")
    return oids, data[expected - 2 * HASH : expected - HASH].hex()


def _index_shape(index, where: str) -> tuple[int, int]:
    """(the count an index states, the length it must then have), its shape checked.

    Raises:
        PackError: too short, of another magic or version, or of another length.
    """
    if len(index) < HEAD.size + FANOUT.size + 2 * HASH:
        raise PackError(where, "too short to be an index")
    magic, version, count = HEAD.unpack_from(index, 0)
    expected = HEAD.size + FANOUT.size + count * (HASH + 8) + 2 * HASH
    if magic != INDEX_MAGIC or version != VERSION or len(index) != expected:
        raise PackError(where, "not a version 1 index of its length")
    return count, expected
