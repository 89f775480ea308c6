"""``yyb gc`` and ``yyb repack``: objects into packs, durably, while others read and write.

Under the store-wide ``gc`` lock, a repack writes one new pack of the objects it packs, in oid
order: the loose objects whose bytes hash to their names that no pack holds yet, or, when it
consolidates (``repack -a``; ``gc`` once the store would hold more than its pack limit), every
object of every pack and every such loose object, each proved by its hash as it is copied. The
pack and its index are fsynced and renamed into place (the index last: from then on the pack is
part of the store), and the new pack is verified whole; only then are the loose files it holds
removed (their folders fsynced, an emptied one dropped), and only after them the packs it
replaces, each index before its pack, the folder fsynced after each. A loose object that does
not hash to its name is left where it is for ``yyb doctor`` to report; a packed object that does
not stops a consolidation before it writes anything.

A reader that opens a loose file just removed finds it in the new pack (it looks among the
packs, new ones included, after a miss); a reader that has mapped a pack just removed keeps
reading it (the file lives on while mapped), and one that misses looks again and finds the new
pack; a writer whose object is being packed sees it present and writes nothing; an object
written after the listing stays loose. A crash leaves either a pack without its index (not part
of the store; removed by the next gc with the temp files) or objects held twice, loose and
packed or in two packs (the next gc removes the loose copies; the next consolidation, the
redundant packs).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sized
from dataclasses import dataclass

from yyb.errors import LockHeld, UsageError, YybError
from yyb.store import file
from yyb.store.objects import pack
from yyb.store.objects.format import MAX_HEADER, hash_object, parse_header
from yyb.store.refs import packed as packrefs


@dataclass
class Collected:
    packed: int  # objects written to the new pack
    removed: int  # loose files removed (packed now, or already in a pack)
    skipped: list[str]  # loose objects left: unreadable or not hashing to their name
    pack: str | None  # the new pack's path
    packs_removed: int = 0  # packs the new one replaced (a consolidation)


# Told of each phase as it starts, (name, 0, its count or None), then of the objects it has
# done, (name, k, count): "listing" (the loose objects), "packing", "verifying", "removing"
# (the loose files), "packing refs".
Told = Callable[[str, int, "int | None"], None]


def _quiet(phase: str, done: int, total: int | None) -> None:
    """Tells no one."""


PACK_LIMIT_ENV = "YYB_GC_PACK_LIMIT"
PACK_LIMIT_DEFAULT = 50  # packs, as git's gc.autoPackLimit


def gc(store, pack_limit: int = PACK_LIMIT_DEFAULT, told: Told = _quiet) -> Collected:
    """Pack the store's loose objects and remove them (``git gc``, see the module's text),
    then its refs and log heads (``packrefs.pack_refs``);
    when the store would then hold more than ``pack_limit`` packs (0: no limit), pack every
    object into one pack instead and remove the packs it replaces (``git gc --auto``'s
    ``gc.autoPackLimit``). ``told`` hears of each phase and of the objects it has done.

    Raises:
        LockHeld: another gc (or pack-refs) is running. StoreIOError: the file system
        refused. PackError: a consolidation met a packed object that does not hash to its oid
        (nothing changed). CorruptRef: the packed-refs file is malformed (the objects are
        packed; the refs are left as they were).
    """
    with store.exclusive("gc"):
        store.mark_packed()
        done = _repack(store.objects, False, True, pack_limit, told)
        told("packing refs", 0, None)
        packrefs.pack_refs(store)  # and the refs and log heads into packed-refs
        return done


def repack(store, everything: bool = False, delete: bool = False) -> Collected:
    """Write the loose objects no pack holds into a new pack (``git repack``); with
    ``everything``, every object of the store, packed or loose, into one pack (``-a``); with
    ``delete``, then remove the loose files and the packs the new pack makes redundant
    (``-d``). Nothing is written when there is nothing new to pack.

    Raises:
        LockHeld: a gc or repack is running. StoreIOError: the file system refused.
        PackError: a packed object does not hash to its oid (nothing changed).
    """
    with store.exclusive("gc"):
        store.mark_packed()
        return _repack(store.objects, everything=everything, delete=delete, pack_limit=0)


def _repack(
    objects, everything: bool, delete: bool, pack_limit: int, told: Told = _quiet
) -> Collected:
    try:
        file.ensure_dir(objects.pack_folder)
    except OSError as exc:
        raise file.io_error(objects.pack_folder, exc) from exc
    _sweep_temp(objects.pack_folder)
    old = [pack.Pack.open(path) for path in pack.pack_paths(objects.pack_folder)]
    try:
        told("listing", 0, None)
        loose = list(objects.loose_oids())
        told("listing", len(loose), len(loose))
        already = {oid for oid in loose if any(held.find(oid) is not None for held in old)}
        new_loose = len(loose) - len(already)
        if pack_limit and len(old) + (1 if new_loose else 0) > pack_limit:
            everything = True
        if everything and not new_loose and len(old) <= 1:
            everything = False  # one pack already holds everything: nothing to rewrite
        skipped: list[str] = []
        written: list[str] = []
        if everything:
            holder = _holders(old, loose)
            chosen: Sized = holder
            items = _everything(objects, old, holder, skipped, written)
        else:
            chosen = fresh = [o for o in loose if o not in already]
            items = _loose_items(objects, fresh, skipped, written)
        path = pack.write(objects.pack_folder, _counted(items, "packing", chosen, told))
        if path is not None:
            told("verifying", 0, None)
            made = pack.Pack.open(path)
            try:
                made.verify()
            finally:
                made.close()
            objects.packs(rescan=True)  # readers of this process find it from now
        removed = replaced = 0
        if delete:
            packed_loose = set(loose) - set(skipped) if everything else [*already, *written]
            removed = _remove(objects, sorted(packed_loose), told)
            if everything and path is not None:
                replaced = _remove_packs([h.path for h in old if h.path != path])
    finally:
        for held in old:
            held.close()
    return Collected(len(written), removed, skipped, path, replaced)


def _loose_items(
    objects, oids: list[str], skipped: list[str], written: list[str]
) -> Iterator[tuple[str, bytes]]:
    """(oid, stored bytes) of the loose ``oids`` that hash to their names, in order."""
    for oid in oids:
        data = _loose_bytes(objects, oid)
        if data is None:
            skipped.append(oid)
            continue
        written.append(oid)
        yield oid, data


def _counted(
    items: Iterator[tuple[str, bytes]], phase: str, planned: Sized, told: Told
) -> Iterator[tuple[str, bytes]]:
    """``items`` as they are, ``told`` of each one done of the ``planned``."""
    total = len(planned)
    told(phase, 0, total)
    for done, item in enumerate(items, 1):
        yield item
        told(phase, done, total)


def _holders(old: list[pack.Pack], loose: list[str]) -> dict[str, pack.Pack | None]:
    """Every object of ``old`` and ``loose``: the first pack holding it (None: loose only)."""
    holder: dict[str, pack.Pack | None] = {}
    for held in old:
        for oid in held.oids():
            holder.setdefault(oid, held)
    for oid in loose:
        holder.setdefault(oid, None)
    return holder


def _everything(
    objects,
    old: list[pack.Pack],
    holder: dict[str, pack.Pack | None],
    skipped: list[str],
    written: list[str],
) -> Iterator[tuple[str, bytes]]:
    """(oid, stored bytes) of every object ``holder`` names that hashes to its name, in oid
    order; a packed object is proved by its hash as it is copied.

    Raises:
        PackError: no pack holds a copy of an object that hashes to its oid.
    """
    for oid in sorted(holder):
        first = holder[oid]
        if first is None:
            data = _loose_bytes(objects, oid)
            if data is None:
                skipped.append(oid)
                continue
        else:
            data = _packed_bytes(old, first, oid)
        written.append(oid)
        yield oid, data


def _packed_bytes(old: list[pack.Pack], first: pack.Pack, oid: str) -> bytes:
    """The stored bytes of ``oid`` from the first pack whose copy hashes to it."""
    for held in [first, *(h for h in old if h is not first)]:
        try:
            data = held.read(oid)
        except pack.PackError:
            continue
        if data is not None and _hashes_to(data, oid):
            return data
    raise pack.PackError(first.path, f"{oid}: its bytes do not hash to it; nothing was repacked")


def _hashes_to(data: bytes, oid: str) -> bool:
    try:
        kind, size, start = parse_header(data[:MAX_HEADER], oid)
    except YybError:
        return False
    return len(data) - start == size and hash_object(kind, data[start:]) == oid


def _loose_bytes(objects, oid: str) -> bytes | None:
    """The loose file's bytes when they are well-formed and hash to ``oid``, else None."""
    try:
        fd = objects.open_fd(oid)
    except (YybError, OSError):
        return None
    if fd is None:
        return None
    try:
        with os.fdopen(fd, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    return data if _hashes_to(data, oid) else None


def _remove(objects, oids: list[str], told: Told = _quiet) -> int:
    """Remove the loose files of ``oids`` (each held by a pack), fsyncing their folders."""
    folders = set()
    removed = 0
    told("removing", 0, len(oids))
    for done, oid in enumerate(sorted(oids), 1):
        if file.remove(objects.path(oid)):
            removed += 1
            folders.add(os.path.dirname(objects.path(oid)))
        told("removing", done, len(oids))
    for folder in sorted(folders):
        try:
            os.rmdir(folder)  # emptied: a file system never shrinks a folder, so drop it
        except OSError:
            file.fsync_dir(folder)  # still holds objects (or a write in progress)
    if folders:
        file.fsync_dir(objects.folder)
        file.durable_point()
    return removed


def _remove_packs(paths: list[str]) -> int:
    """Remove the packs at ``paths`` (each object of which a newer pack holds): each index
    first, so that a crash leaves a pack without one, which is no part of the store."""
    removed = 0
    for path in paths:
        folder = os.path.dirname(path)
        for name in (path[: -len(".pack")] + ".idx", path):
            file.remove(name)
        file.fsync_dir(folder)
        file.durable_point()
        removed += 1
    return removed


def _sweep_temp(folder: str) -> None:
    """Remove what an interrupted gc left: temp files, and packs without an index."""
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        stem = name[: -len(".pack")] if name.endswith(".pack") else None
        orphan = stem is not None and not os.path.exists(os.path.join(folder, stem + ".idx"))
        if name.startswith(file.TEMP_PREFIX) or orphan:
            file.discard(path)


def count(store) -> dict:
    """Loose and packed objects: counts and bytes (``yyb count-objects``)."""
    objects = store.objects
    loose = list(objects.loose_oids())
    loose_bytes = 0
    for oid in loose:
        try:
            loose_bytes += os.lstat(objects.path(oid)).st_size
        except OSError:
            continue
    packs = packed = pack_bytes = 0
    for path in pack.pack_paths(objects.pack_folder):  # the packs there now, not those mapped
        try:
            held = pack.Pack.open(path)
        except pack.PackError:
            continue  # removed since the listing (a consolidation), or for doctor to report
        try:
            packs += 1
            packed += held.count
            pack_bytes += len(held.data) + len(held.index)
        finally:
            held.close()
    return {
        "loose": len(loose),
        "loose_bytes": loose_bytes,
        "packs": packs,
        "packed": packed,
        "pack_bytes": pack_bytes,
    }


AUTO_ENV = "YYB_GC_AUTO"
AUTO_DEFAULT = 6700  # loose objects, as git's gc.auto


def auto_threshold(environ: dict) -> int:
    """The loose-object count past which ``auto`` packs: ``$YYB_GC_AUTO`` (0: never).

    Raises:
        UsageError: it, or ``$YYB_GC_PACK_LIMIT`` (checked here too, so that one early call
        refuses either before a run), is not a whole number.
    """
    pack_limit(environ)
    return _whole(environ, AUTO_ENV, AUTO_DEFAULT, "a number of loose objects, or 0 for never")


def pack_limit(environ: dict) -> int:
    """The number of packs past which ``gc`` packs everything into one:
    ``$YYB_GC_PACK_LIMIT`` (default 50, as git's gc.autoPackLimit; 0: no limit).

    Raises:
        UsageError: it is not a whole number.
    """
    return _whole(
        environ, PACK_LIMIT_ENV, PACK_LIMIT_DEFAULT, "a number of packs, or 0 for no limit"
    )


def _whole(environ: dict, name: str, default: int, meaning: str) -> int:
    text = environ.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit():
        raise UsageError(f"{name}={text!r}: {meaning}")
    return int(text)


def estimate_loose(store) -> int:
    """About how many loose objects there are: one fan-out folder's files x 256 (git's
    estimate: oids are uniform, and one listing is cheap)."""
    try:
        names = os.listdir(os.path.join(store.objects.folder, "17"))
    except (FileNotFoundError, NotADirectoryError):
        return 0
    return 256 * sum(1 for name in names if len(name) == 62)


def auto(store, environ: dict) -> Collected | None:
    """``gc`` when the loose objects pass the threshold, or the packs the pack limit (packs
    that a fetch wrote), and no other gc runs; else None (``git gc --auto``)."""
    threshold = auto_threshold(environ)
    if threshold == 0 or store.path is None:
        return None
    limit = pack_limit(environ)
    too_many = limit and len(pack.pack_paths(store.objects.pack_folder)) > limit
    if not too_many and estimate_loose(store) <= threshold:
        return None
    try:
        return gc(store, limit)
    except LockHeld:
        return None  # another gc is packing them
