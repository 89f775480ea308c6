"""``yyb gc``: loose objects into a pack, durably, while others read and write.

Under the store-wide ``gc`` lock: every loose object whose bytes hash to its name and that no
pack holds yet is written, in oid order, to a new pack and its index (both fsynced and renamed
into place, the index last: from then on the pack is part of the store); the new pack is
verified whole; only then are the loose files it holds removed, and their folders fsynced. A
loose object that does not hash to its name is left where it is for ``yyb doctor`` to report.

A reader that opens a loose file just removed finds it in the pack (it looks among the packs,
new ones included, after a loose miss); a writer whose object is being packed sees it present
and writes nothing; an object written after the listing stays loose. A crash leaves either a
pack without its index (not part of the store; its temp files are removed by the next gc) or
objects both loose and packed (the next gc removes the loose copies).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from yyb.errors import YybError
from yyb.store import file, pack
from yyb.store.objects import MAX_HEADER, hash_object, parse_header


@dataclass
class Collected:
    packed: int  # objects written to the new pack
    removed: int  # loose files removed (packed now, or already in a pack)
    skipped: list[str]  # loose objects left: unreadable or not hashing to their name
    pack: str | None  # the new pack's path


def gc(store) -> Collected:
    """Pack the store's loose objects (see the module's text).

    Raises:
        LockHeld: another gc is running. StoreIOError: the file system refused.
    """
    objects = store.objects
    with store.exclusive("gc"):
        try:
            file.ensure_dir(objects.pack_folder)
        except OSError as exc:
            raise file.io_error(objects.pack_folder, exc) from exc
        _sweep_temp(objects.pack_folder)
        loose = list(objects.loose_oids())
        already = {oid for oid in loose if objects._in_pack(oid)}
        skipped: list[str] = []
        written: list[str] = []

        def items() -> Iterator[tuple[str, bytes]]:
            for oid in loose:
                if oid in already:
                    continue
                data = _loose_bytes(objects, oid)
                if data is None:
                    skipped.append(oid)
                    continue
                written.append(oid)
                yield oid, data

        path = pack.write(objects.pack_folder, items())
        if path is not None:
            made = pack.Pack.open(path)
            try:
                made.verify()
            finally:
                made.close()
            objects.packs(rescan=True)
        removed = _remove(objects, [*already, *written])
    return Collected(len(written), removed, skipped, path)


def _loose_bytes(objects, oid: str) -> bytes | None:
    """The loose file's bytes when they are well-formed and hash to ``oid``, else None."""
    try:
        fd = objects._open_fd(oid)
    except (YybError, OSError):
        return None
    if fd is None:
        return None
    try:
        with os.fdopen(fd, "rb") as handle:
            data = handle.read()
        kind, size, start = parse_header(data[:MAX_HEADER], oid)
    except (YybError, OSError):
        return None
    if len(data) - start != size or hash_object(kind, data[start:]) != oid:
        return None
    return data


def _remove(objects, oids: list[str]) -> int:
    """Remove the loose files of ``oids`` (each held by a pack), fsyncing their folders."""
    folders = set()
    removed = 0
    for oid in sorted(oids):
        try:
            os.unlink(objects.path(oid))
            removed += 1
            folders.add(os.path.dirname(objects.path(oid)))
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise file.io_error(objects.path(oid), exc) from exc
    for folder in sorted(folders):
        try:
            os.rmdir(folder)  # emptied: a file system never shrinks a folder, so drop it
        except OSError:
            file.fsync_dir(folder)  # still holds objects (or a write in progress)
    if folders:
        file.fsync_dir(objects.folder)
        file.durable_point()
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
    packs = objects.packs(rescan=True)
    return {
        "loose": len(loose),
        "loose_bytes": loose_bytes,
        "packs": len(packs),
        "packed": sum(p.count for p in packs),
        "pack_bytes": sum(
            os.path.getsize(p.path) + os.path.getsize(p.path[:-5] + ".idx") for p in packs
        ),
    }


AUTO_ENV = "YYB_GC_AUTO"
AUTO_DEFAULT = 6700  # loose objects, as git's gc.auto


def auto_threshold(environ: dict) -> int:
    """The loose-object count past which ``auto`` packs: ``$YYB_GC_AUTO`` (0: never).

    Raises:
        UsageError: it is not a whole number.
    """
    from yyb.errors import UsageError

    text = environ.get(AUTO_ENV, "").strip()
    if not text:
        return AUTO_DEFAULT
    if not text.isdigit():
        raise UsageError(f"{AUTO_ENV}={text!r}: a number of loose objects, or 0 for never")
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
    """``gc`` when the loose objects pass the threshold and no other gc runs; else None."""
    from yyb.errors import LockHeld

    threshold = auto_threshold(environ)
    if threshold == 0 or store.path is None or estimate_loose(store) <= threshold:
        return None
    try:
        return gc(store)
    except LockHeld:
        return None  # another gc is packing them
