"""Bundles: refs, their update chains and every object they reach, in one self-checking file.

The format is specified in docs/format.md ("Bundles"); ``reader`` reads its bytes
(``pack_form`` the pack form's objects). This module writes bundles, verifies one on its own
(every record, every link, every ref's update chain by the same rules as ``fsck``, whatever
the form), and imports one into a store.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import mmap
import os
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from yyb.errors import (
    CorruptBundle,
    CorruptObject,
    CorruptRef,
    LockHeld,
    NotFastForward,
    ObjectMissing,
    RefNotFound,
    UsageError,
)
from yyb.store import file
from yyb.store.bundle import pack_form
from yyb.store.bundle.entry import SPILL, Entry
from yyb.store.bundle.reader import (
    CAPABILITIES,
    CHUNK,
    VERSION,
    Header,
    Reader,
    render_header,
)
from yyb.store.fsck.objects import check_body, inspect
from yyb.store.fsck.update_chain import walk_ref_chain
from yyb.store.log import checkpoint
from yyb.store.objects import pack
from yyb.store.objects.format import header as stored_header
from yyb.store.objects.format import loose_path, split
from yyb.store.objects.loose import DiskObjects
from yyb.store.refs.names import check_ref_name
from yyb.store.refs.store import REF_UPDATE
from yyb.store.repo import Store


@dataclass
class Summary:
    """What a verified bundle holds."""

    header: Header
    objects: int
    # ref -> the update records of its bundled chain, newest first (discarded heads included)
    chains: dict[str, list[str]]
    oids: list[str] = field(default_factory=list)  # every object it holds
    # a pack-form bundle's objects as they lie in its file (raw oid, where the stored bytes
    # start and stop), ascending; None for the frame form
    spans: list[tuple[bytes, int, int]] | None = None


# --- writing --------------------------------------------------------------------------------


def ref_tips(store: Store, names: list[str], version: int = VERSION) -> Header:
    """The refs to bundle: each name's full ref, its value and its log head, for a bundle of
    format ``version`` (2, a pack; 1, a zlib frame per object, for older readers).

    Raises:
        InvalidRefName, RefNotFound: a name that is no ref with a value.
        CorruptRef: a ref without an update log (a bundle carries every ref's chain).
    """
    refs, logs = {}, {}
    for name in names:
        full = check_ref_name(name)
        value = store.refs.read(full)
        if value is None:
            raise RefNotFound(full)
        head = store.refs.log_head(full)
        if head is None:
            raise CorruptRef(full, "it has no update log, so it cannot be bundled")
        refs[full], logs[full] = value, head
    return Header(CAPABILITIES[version], refs, logs, version)


def _reachable(store: Store, header: Header) -> list[str]:
    """Every oid reachable from the refs and log heads, each checked as fsck checks it (a
    copy that does not verify beside one that does is read past, as every reader does)."""
    seen: set[str] = set()
    stack = sorted(set(header.refs.values()) | set(header.logs.values()))
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        stack.extend(t for t in checked_links(store, oid) if t not in seen)
    return sorted(seen)


def checked_links(store: Store, oid: str) -> tuple[str, ...]:
    """The links of ``oid`` once it is checked as fsck checks it (a copy that does not verify
    beside one that does is read past, as every reader does).

    Raises:
        ObjectMissing, CorruptObject: the store cannot supply it intact.
    """
    found = inspect(store, oid)
    for finding in found.findings:
        if finding.code == "bad-copy" and found.proved:
            continue
        if finding.code == "missing":
            raise ObjectMissing(oid)
        raise CorruptObject(oid, finding.detail, finding.code)
    return found.links


def checked_and_sized(store: Store, oid: str) -> tuple[tuple[str, ...], int]:
    """``checked_links`` of ``oid`` and the length of its stored bytes (header and body), for
    a transfer that states a bundle's size before writing it. A small object whose first copy
    proves clean is checked on that copy alone; anything else is checked as fsck checks it.

    Raises:
        ObjectMissing, CorruptObject: the store cannot supply it intact.
    """
    small = store.objects.read_small(oid)
    if small:  # well-formed: its header and length agree
        if small.startswith(b"blob ") and hashlib.sha256(small).hexdigest() == oid:
            return (), len(small)  # a blob is proved by its hash alone
        kind, body = split(small, oid)
        found = check_body(oid, kind, body)
        if not found.findings:
            return found.links, len(small)
    links = checked_links(store, oid)
    kind, size, stream = store.objects.open_body(oid)
    stream.close()
    return links, len(stored_header(kind, size)) + size


class _HashingWriter:
    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.digest = hashlib.sha256()

    def write(self, data: bytes) -> None:
        self.digest.update(data)
        self.handle.write(data)


def create(
    store: Store,
    path: str,
    header: Header,
    oids: list[str] | None = None,
    durable: bool = True,
) -> int:
    """Write a bundle of ``header``'s refs to ``path`` (which must not exist), in the form of
    ``header.version``: every object they reach, or only ``oids`` (a thin bundle, for a
    store that holds the rest: yyb/store/transfer.py). ``durable`` false: a scratch file,
    read once and removed (a transfer's), which is not fsynced.

    Returns the number of objects written. A failure leaves no file at ``path``.

    Raises:
        UsageError: ``path`` exists. ObjectMissing, CorruptObject: the store cannot supply
        an intact object. StoreIOError: the file system refused.
    """
    if os.path.lexists(path):
        raise UsageError(f"refusing to overwrite {path}")
    oids = _reachable(store, header) if oids is None else sorted(oids)
    folder = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=file.TEMP_PREFIX)
        with os.fdopen(fd, "wb") as handle:
            if header.version == 1:
                _write_frames(store, handle, header, oids)
            else:
                pack_form.write(store, handle, render_header(header), oids)
            handle.flush()
            os.fchmod(handle.fileno(), 0o644)
            if durable:
                os.fsync(handle.fileno())
        try:
            os.link(tmp, path)  # never replaces an existing file, unlike rename
        except FileExistsError:
            raise UsageError(f"refusing to overwrite {path}") from None
        if durable:
            file.fsync_dir(folder)
    except OSError as exc:
        raise file.io_error(path, exc) from exc
    finally:
        file.discard(tmp)
    return len(oids)


def _write_frames(store: Store, handle: BinaryIO, header: Header, oids: list[str]) -> None:
    out = _HashingWriter(handle)
    out.write(render_header(header))
    for oid in oids:
        _write_object(store, out, oid)
    out.write(b"end %d\n" % len(oids))
    handle.write(out.digest.digest())


def _write_object(store: Store, out: _HashingWriter, oid: str) -> None:
    kind, size, stream = store.objects.open_body(oid)
    with stream:
        head = b"%s %d\x00" % (kind.encode(), size)
        length = len(head) + size
        squeeze = zlib.compressobj(6)
        digest = hashlib.sha256(head)
        if size <= SPILL:
            body = stream.read(size)
            digest.update(body)
            packed = squeeze.compress(head) + squeeze.compress(body) + squeeze.flush()
            _check_read(oid, digest, len(body), size)
            out.write(b"%s %d %d\n" % (oid.encode(), length, len(packed)))
            out.write(packed)
            return
        with tempfile.TemporaryFile() as spill:
            spill.write(squeeze.compress(head))
            read = 0
            while chunk := stream.read(min(CHUNK, size - read)):
                read += len(chunk)
                digest.update(chunk)
                spill.write(squeeze.compress(chunk))
            spill.write(squeeze.flush())
            _check_read(oid, digest, read, size)
            out.write(b"%s %d %d\n" % (oid.encode(), length, spill.tell()))
            spill.seek(0)
            while chunk := spill.read(CHUNK):
                out.write(chunk)


def _check_read(oid: str, digest, got: int, size: int) -> None:
    """The object changed or was damaged between the reachability walk and now."""
    if got != size or digest.hexdigest() != oid:
        raise CorruptObject(oid, "changed while it was being bundled")


# --- verifying ------------------------------------------------------------------------------


def read_header(path: str) -> Header:
    """The header of the bundle at ``path`` (nothing else is checked)."""
    with Reader(path) as reader:
        return reader.header()


def verify(path: str, held: Store | None = None) -> Summary:
    """Check a bundle on its own: trailer, every object, every record, every link, each chain.

    With ``held`` (a thin bundle for that store, yyb/store/transfer.py) a link or a chain's
    update may resolve in the store instead: an object the store holds is not followed
    further (a store holds what its objects link).

    Raises:
        InvalidBundle (exit 2), CorruptBundle (exit 1): the first problem found.
    """
    present: set[str] = set()
    links: dict[str, tuple[str, ...]] = {}
    updates: dict[str, dict] = {}
    versions: dict[str, str] = {}  # the schema_version of every other record
    with Reader(path) as reader:
        header = reader.header()
        for entry in reader.objects():
            present.add(entry.oid)
            if entry.kind != "record":
                continue
            found = check_body(entry.oid, "record", entry.body(), entry.oid)
            for finding in found.findings:
                raise reader.fail(f"{finding.code}: {finding.detail}", entry.oid, finding.code)
            if found.links:
                links[entry.oid] = found.links
            version = found.value["schema_version"]
            if version == REF_UPDATE:
                updates[entry.oid] = found.value
            else:
                versions[entry.oid] = version
        spans = reader.spans
    reached = _check_links(path, header, present, links, held)

    def read(oid: str) -> dict:
        if oid in updates:
            return updates[oid]
        if oid in versions:
            return {"schema_version": versions[oid]}
        if oid in present:
            raise CorruptObject(oid, "expected a record, found a blob")
        if held is not None and held.objects.contains(oid):
            return held.objects.get_record(oid)
        raise ObjectMissing(oid)

    chains = {name: _check_chain(path, name, header, read) for name in header.refs}
    unreached = sorted(present - reached)
    if unreached:  # what a bundle carries is exactly what its refs and log heads reach
        raise CorruptBundle(
            path,
            "nothing in the bundle reaches it from a ref or a log head",
            unreached[0],
            "unreachable",
        )
    return Summary(header, len(present), chains, sorted(present), spans)


def _check_links(
    path: str, header: Header, present: set[str], links: dict, held: Store | None = None
) -> set[str]:
    """Everything the refs and log heads reach is in the bundle (or, thin, in ``held``);
    return what they reach in the bundle."""
    roots = sorted(set(header.refs.values()) | set(header.logs.values()))
    seen: set[str] = set()
    stack = [(oid, None) for oid in roots]
    while stack:
        oid, parent = stack.pop()
        if oid in seen:
            continue
        if oid not in present and held is not None and held.objects.contains(oid):
            continue
        seen.add(oid)
        if oid not in present:
            if parent is None:
                raise CorruptBundle(
                    path, "a ref names it but it is not in the bundle", oid, "missing"
                )
            raise CorruptBundle(path, f"linked by {parent} but not in the bundle", oid, "missing")
        stack.extend((t, oid) for t in links.get(oid, ()) if t not in seen)
    return seen


def _check_chain(path: str, name: str, header: Header, read) -> list[str]:
    """The update records of ``name``'s bundled chain, newest first, checked as fsck checks a
    store's chains (docs/format.md, "Updates and the update chain")."""
    chain: list[str] = []
    for finding, oid in walk_ref_chain(name, header.refs[name], header.logs[name], read):
        if finding is not None:
            raise CorruptBundle(
                path, f"ref {name}: {finding.code}: {finding.detail}", None, "chain"
            )
        chain.append(oid)
    return chain


# --- importing ------------------------------------------------------------------------------


@dataclass
class Move:
    """What an import does to one ref: ``how`` is adopt, update or none."""

    ref: str
    old: str | None
    new: str
    how: str
    old_head: str | None = None


def plan_moves(store: Store, summary: Summary, force: bool) -> list[Move]:
    """Decide every ref move before anything is written.

    A ref is adopted with its bundled chain when it is new or the bundled chain contains the
    store's log head (a fast-forward); it is left alone when it already holds the value;
    anything else is refused unless ``force``, which appends an ordinary update instead.

    Raises:
        NotFastForward: a ref whose move is not a fast-forward, without ``force``.
    """
    moves = []
    for name, new in sorted(summary.header.refs.items()):
        current = store.refs.read(name)
        head = store.refs.log_head(name)
        chain = summary.chains[name]
        if current == new and head == summary.header.logs[name]:
            how = "none"
        elif head in chain or (head is None and current is None):
            how = "adopt"
        elif current == new:
            how = "none"  # the same value reached by another history: nothing to move
        elif current is None or force:
            how = "update"
        else:
            raise NotFastForward(name, current, new)
        moves.append(Move(name, current, new, how, head))
    return moves


@dataclass
class Replaced:
    """A local copy of an object that did not verify (``copy``, a path relative to the store)
    for which an import wrote the bundle's bytes as the object's loose file: over that copy
    when it was the loose file, else beside it (a damaged pack is left for ``doctor``)."""

    oid: str
    copy: str


@dataclass
class Imported:
    """What an import did: each ref's move, and each local copy it stood a good one in for."""

    moves: list[Move]
    replaced: list[Replaced]


def unbundle(store: Store, path: str, force: bool = False, thin: bool = False) -> Imported:
    """Import a bundle: verify all of it, decide every ref move, write objects, move refs.

    Nothing is written unless the whole bundle verifies and every ref move is allowed. An
    object the store holds already is written again when a local copy of it does not hold
    exactly the bundle's bytes (``Replaced``); one whose copies all do is skipped.

    A bundle that carries a checkpoint of the transparency log (``checkpoint.REF``) into a
    store holding an older one of the same log must carry a log that extends it. ``thin``:
    the bundle carries only what the store lacks (``verify`` with the store).

    Raises:
        InvalidBundle, CorruptBundle, NotFastForward, RefMismatch, StoreIOError,
        NotExtended (and UsageError for a malformed checkpoint).
    """
    summary = verify(path, store if thin else None)
    moves = plan_moves(store, summary, force)
    replaced: list[Replaced] = []
    with Reader(path) as reader:
        if reader.header() != summary.header:
            raise reader.fail("the file changed while it was being imported")
        held = store.objects.held_of(summary.oids)
        if not _land_copied(store, reader, summary, held):
            _land(store, _fresh(store, reader, reader.objects(private=True), replaced, held))
    incoming = summary.header.refs.get(checkpoint.REF)
    if incoming is not None:
        checkpoint.guard(store, incoming)  # before any ref moves
    for move in moves:
        if move.how == "adopt":
            store.refs.adopt(move.ref, summary.header.logs[move.ref], move.old, move.old_head)
        elif move.how == "update":
            store.refs.update(move.ref, move.new, old=move.old, reason=f"unbundle {path}")
    return Imported(moves, replaced)


# Fewer new objects than this are written loose; more become one pack (Git's
# transfer.unpackLimit is 100 too): a pack is written at about 1 µs an object, a loose object
# costs a file, a rename and its share of the fsyncs (docs/performance.md, "Bundles").
UNPACK_LIMIT = 100
LOOSE_BATCH = 256


@dataclass
class _Fresh:
    """An object of the bundle that the store lacks, its stored bytes a private copy."""

    oid: str
    kind: str
    stored: bytes
    start: int  # where the body begins


def _fresh(
    store: Store,
    reader: Reader,
    entries: Iterator[Entry],
    replaced: list[Replaced],
    held: set[str],
) -> Iterator[_Fresh]:
    """The objects of the bundle that the store lacks, ascending by oid; a large blob is
    streamed into the store loose here instead (it is one file whatever the form), and so is
    an object that has a local copy that does not verify, over it (``replaced`` says which;
    ``held``: the bundle's oids the store held before the import)."""
    objects = store.objects
    for entry in entries:
        bad = _bad_copies(objects, entry) if entry.oid in held else None
        if bad == []:
            continue  # every local copy holds the bundle's bytes
        if entry.spill is not None and entry.kind == "blob":
            entry.spill.seek(entry.start)
            got = objects.put_blob_file(entry.spill, entry.size, replace=bad is not None)
            if got != entry.oid:
                raise reader.fail("the file changed while it was being imported", entry.oid)
        else:
            stored = entry.stored()
            if stored is None:
                stored = b"%s %d\x00" % (entry.kind.encode(), entry.size) + entry.body()
            if bad is None:
                yield _Fresh(entry.oid, entry.kind, stored, len(stored) - entry.size)
            else:
                objects.replace(entry.oid, stored)
        replaced += [Replaced(entry.oid, copy) for copy in bad or ()]


def _bad_copies(objects, entry: Entry) -> list[str]:
    """The local copies of ``entry``'s object that do not hold exactly its stored bytes;
    none when the loose copy does (readers read it, and a damaged pack cannot be rewritten)."""
    bad, loose_good = [], False
    for where in objects.copies(entry.oid):
        same = _same_bytes(objects, entry, where)
        if same is False:
            bad.append(where)
        loose_good = loose_good or (same and where == loose_path(entry.oid))
    return [] if loose_good else bad


def _same_bytes(objects, entry: Entry, where: str) -> bool | None:
    """Whether the copy at ``where`` holds exactly ``entry``'s stored bytes (compared, not
    hashed: the entry's are proved); None when the copy is gone (a gc packed it meanwhile)."""
    try:
        kind, size, stream = objects.open_copy(entry.oid, where)
    except ObjectMissing:
        return None
    except CorruptObject:
        return False
    with stream:
        if (kind, size) != (entry.kind, entry.size):
            return False
        if entry.spill is None:
            return stream.read(size) == entry.body()
        entry.spill.seek(entry.start)
        left = size
        while left:
            n = min(CHUNK, left)
            if stream.read(n) != entry.spill.read(n):
                return False
            left -= n
        return True


def _land(store: Store, fresh: Iterator[_Fresh]) -> None:
    """Write the new objects: one pack when there are many and the store keeps packs (under
    the ``gc`` lock, whose sweep removes other writers' temp files; when a gc holds it, the
    objects go loose), else loose in batches. Either way the iterator's end, which checks the
    trailer again, comes before the last objects land: a pack is renamed into place only
    once it has been consumed whole."""
    first = list(itertools.islice(fresh, UNPACK_LIMIT))
    rest = itertools.chain(first, fresh)
    objects = store.objects
    with contextlib.ExitStack() as stack:
        if len(first) == UNPACK_LIMIT and isinstance(objects, DiskObjects):
            try:
                stack.enter_context(store.exclusive("gc"))
            except LockHeld:
                pass  # a gc is running: write loose, which needs no lock
            else:
                store.mark_packed()
                try:
                    file.ensure_dir(objects.pack_folder)
                except OSError as exc:
                    raise file.io_error(objects.pack_folder, exc) from exc
                pack.write(objects.pack_folder, ((f.oid, f.stored) for f in rest))
                objects.packs(rescan=True)
                return
    if len(first) < UNPACK_LIMIT:  # all of them, in memory: each after what it links
        rest = iter(_dependencies_first(first))
    for batch in _batched(rest, LOOSE_BATCH):
        objects.put_many([(f.kind, f.stored[f.start :]) for f in batch])


def _land_copied(store: Store, reader: Reader, summary: Summary, held: set[str]) -> bool:
    """Write a pack-form bundle's objects as one pack copied from the file in large pieces
    (``pack.write_copy``: each object proved again on the copy written), when the store
    lacks every one of them, they are many, none is large (a large blob is stored loose) and
    no gc holds the lock; whether it did (else nothing was written)."""
    spans, objects = summary.spans, store.objects
    if spans is None or held or len(spans) < UNPACK_LIMIT or not isinstance(objects, DiskObjects):
        return False
    if any(stop - start > SPILL for _, start, stop in spans):
        return False
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(store.exclusive("gc"))
        except LockHeld:
            return False
        store.mark_packed()
        try:
            file.ensure_dir(objects.pack_folder)
            mapped = stack.enter_context(
                mmap.mmap(reader.handle.fileno(), 0, access=mmap.ACCESS_READ)
            )
        except (OSError, ValueError) as exc:
            raise file.io_error(objects.pack_folder, exc) from exc
        view = stack.enter_context(memoryview(mapped))
        try:
            pack.write_copy(objects.pack_folder, view, spans)
        except CorruptObject as exc:
            raise reader.fail("the file changed while it was being imported", exc.oid) from None
    objects.packs(rescan=True)
    return True


def _dependencies_first(fresh: list[_Fresh]) -> list[_Fresh]:
    """``fresh`` ordered so that every object comes after the ones among them it links: an
    import cut short then leaves no record without what it links, so that a store holding an
    object holds everything it reaches (what a transfer's negotiation relies on)."""
    from yyb.store.objects import codec
    from yyb.store.objects.format import check_links

    by_oid = {f.oid: f for f in fresh}
    ordered: list[_Fresh] = []
    placed: set[str] = set()
    for first in fresh:
        stack = [(first.oid, False)]
        while stack:
            oid, expanded = stack.pop()
            if oid in placed:
                continue
            if expanded:
                placed.add(oid)
                ordered.append(by_oid[oid])
                continue
            stack.append((oid, True))
            item = by_oid[oid]
            if item.kind == "record":
                value = codec.decode(item.stored[item.start :])
                for targets in check_links(value, oid).values():
                    stack.extend((t, False) for t in targets if t in by_oid and t not in placed)
    return ordered


def _batched(items: Iterable, size: int) -> Iterator[list]:
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch
