"""Loose objects on disk: one file per object at ``objects/<2 hex>/<62 hex>``, holding exactly
its stored bytes (docs/format.md, "Objects").

Every read opens the fan-out folder and then the file relative to it, neither through a
symbolic link (``O_NOFOLLOW``), and never blocks on a FIFO: a link or a special file where an
object belongs is reported as a corrupt object, never followed to bytes that live elsewhere.
"""

from __future__ import annotations

import _thread
import errno
import io
import os
import stat
import time

from yyb.errors import CorruptObject, ObjectMissing, StoreIOError
from yyb.store import file
from yyb.store.objects.format import (
    MAX_HEADER,
    OID_HEX,
    hash_object,
    header,
    loose_path,
    parse_header,
)
from yyb.store.objects.store import (
    STREAM_THRESHOLD,
    ObjectStore,
    hash_stream,
    small_and_well_formed,
)

TYPE_CHECKING = False  # typing is not imported at run time (docs/performance.md)
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import BinaryIO

    from yyb.store.objects import pack


# A fan-out folder that gc emptied may be removed between a writer making it and writing into
# it (a temp file inside keeps it): the writer makes it again, this many times at most.
FOLDER_RETRIES = 3
SETTLED_NS = 2_000_000_000  # a folder unchanged this long before a listing is listed right


class DiskObjects(ObjectStore):
    """Loose objects under ``<root>/objects/<2 hex>/<62 hex>``, each exactly its stored bytes,
    and packs under ``<root>/objects/pack`` (pack.py), read after the loose files: ``yyb gc``
    removes a loose file only once a pack holds it, so a reader that misses it loose looks
    again among the packs, the newest included."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.folder = os.path.join(root, "objects")
        self.pack_folder = os.path.join(self.folder, "pack")
        self._packs: dict[str, pack.Pack] = {}
        self._packs_lock = _thread.allocate_lock()  # threading.Lock
        self._pack_listing: tuple[int, int] | None = None  # (inode, mtime) of a settled listing
        self._folders: dict[str, int] | None = None  # fan-out folders held open (_passing)

    # --- packs ---------------------------------------------------------------------------

    def packs(self, rescan: bool = False) -> list[pack.Pack]:
        """The packs this store reads (opened once; ``rescan`` looks for new ones).

        A rescan lists the pack folder unless it is unchanged since the last listing: same
        inode, same modification time, and that time lay over ``SETTLED_NS`` before the
        listing began (a folder changed within the same clock tick as a listing could show
        the old time after a change, as Git's "racily clean" index entries)."""
        if self._packs and not rescan:
            return list(self._packs.values())
        try:
            folder = os.stat(self.pack_folder)
        except (FileNotFoundError, NotADirectoryError):
            return []
        stamp = (folder.st_ino, folder.st_mtime_ns)
        if self._pack_listing == stamp:
            return list(self._packs.values())
        from yyb.store.objects import pack  # only a store with packs pays for it

        began = time.time_ns()
        with self._packs_lock:
            for _ in range(FOLDER_RETRIES):
                vanished = False
                for path in pack.pack_paths(self.pack_folder):
                    if path not in self._packs:
                        try:
                            self._packs[path] = pack.Pack.open(path)
                        except pack.PackError:
                            if os.path.exists(path) and os.path.exists(path[:-5] + ".idx"):
                                raise  # damaged: for the caller (and doctor) to report
                            vanished = True  # replaced by a repack since the listing
                if not vanished:
                    break  # a repack writes its pack before it removes the old: list again
            settled = began - folder.st_mtime_ns > SETTLED_NS
            self._pack_listing = stamp if settled and not vanished else None
            return list(self._packs.values())

    def stop_helpers(self) -> None:
        """As ``ObjectStore.stop_helpers``: each open pack's."""
        for held in list(self._packs.values()):
            held.stop_helper()

    def _packed(self, oid: str) -> bytes | None:
        """``oid``'s stored bytes from a pack; after a miss, once more with new packs."""
        for rescan in (False, True):
            for held in self.packs(rescan):
                data = held.read(oid)
                if data is not None:
                    return data
        return None

    def _first_pack(self, oid: str) -> bytes | None:
        """``oid``'s bytes from a pack already open, or None (no rescan: the loose lookup
        and a rescan come after)."""
        for held in list(self._packs.values()):
            data = held.read(oid)
            if data is not None:
                return data
        return None

    def begin_blob_bodies(self, oids: list[bytes | None], helper: bool = False) -> tuple:
        """As ``ObjectStore.begin_blob_bodies``: the largest pack begins (its helper, if
        any, works until the finish); the other packs are read at the finish. Loose
        objects and anything else are left to ``get``."""
        found: list[memoryview | None] = [None] * len(oids)
        packs = self.packs()  # opened on the first call
        if not packs:
            return oids, helper, found, None, None
        first = max(packs, key=lambda held: held.count)
        return oids, helper, found, first, first.begin_bodies(oids, found, helper)

    def finish_blob_bodies(self, begun: tuple) -> list[memoryview | None]:
        oids, helper, found, first, ticket = begun
        if first is not None:
            first.finish_bodies(ticket, found)
            for held in self.packs():
                if held is not first:
                    held.blob_bodies(oids, found, helper)
        return found

    def _in_pack(self, oid: str) -> bool:
        """Whether a pack holds ``oid``: the packs open, then any a rescan finds."""
        known = self.packs()
        if any(held.find(oid) is not None for held in known):
            return True
        return any(held.find(oid) is not None for held in self.packs(rescan=True)[len(known) :])

    def loose_oids(self) -> Iterator[str]:
        for prefix in sorted(_hex_dirs(self.folder)):
            for entry in sorted(os.listdir(os.path.join(self.folder, prefix))):
                if len(entry) == OID_HEX - 2 and _is_hex(entry):
                    yield prefix + entry

    def path(self, oid: str) -> str:
        return f"{self.folder}/{oid[:2]}/{oid[2:]}"  # an oid is 64 hex digits: no separators

    def _folder_fd(self, prefix: str, oid: str | None = None) -> int | None:
        """A descriptor of the fan-out folder ``objects/<prefix>``, opened without following a
        symbolic link; None when there is no such folder.

        Raises:
            CorruptObject: the folder is a symbolic link (code ``symlink``).
        """
        path = f"{self.folder}/{prefix}"
        try:
            return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        except NotADirectoryError:
            if os.path.islink(path):
                raise _linked(oid, f"objects/{prefix}") from None
            return None  # a file stands there: no object lies below it

    def open_fd(self, oid: str) -> int | None:
        """A descriptor of ``oid``'s file, opened without following a symbolic link at its
        fan-out folder or at the file, and without blocking on a FIFO; None when absent.

        Raises:
            CorruptObject: a link (code ``symlink``), or no regular file (``malformed``).
        """
        opened = self._open_regular(oid)
        return None if opened is None else opened[0]

    def _passing(self, begins: bool) -> None:
        """Hold each fan-out folder open while a reading pass lasts (one open less a read)."""
        for fd in (self._folders or {}).values():
            os.close(fd)
        self._folders = {} if begins else None

    def _open_regular(self, oid: str) -> tuple[int, int] | None:
        """``open_fd``, and the file's size: (descriptor, size), or None."""
        folders = self._folders
        if folders is not None and oid[:2] in folders:
            # A folder held open for a reading pass may have been dropped (by gc) and made
            # again since: what is not found through it is looked for again afresh.
            found = self._open_in(folders[oid[:2]], oid)
            if found is not None:
                return found
            os.close(folders.pop(oid[:2]))
        folder = self._folder_fd(oid[:2], oid)
        if folder is None:
            return None
        try:
            found = self._open_in(folder, oid)
        finally:
            if folders is None:
                os.close(folder)
            else:
                folders[oid[:2]] = folder
        return found

    def _open_in(self, folder: int, oid: str) -> tuple[int, int] | None:
        try:
            fd = os.open(oid[2:], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _linked(oid, f"objects/{oid[:2]}/{oid[2:]}") from None
            raise
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode):
            return fd, info.st_size
        mode = info.st_mode
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise CorruptObject(oid, "a folder stands where the object file should be", "malformed")
        raise CorruptObject(oid, "not a regular file", "malformed")

    def _open(self, oid: str) -> tuple[BinaryIO, str, int, int] | None:
        """Open an object file and check its header against its length, reading no body.

        Returns (handle positioned at the body, kind, size, header length), or None if absent.

        Raises:
            CorruptObject: a symbolic link, not a regular file, a malformed header, or a
            length mismatch.
        """
        fd = self.open_fd(oid)
        if fd is None:
            return None
        handle = os.fdopen(fd, "rb")
        try:
            actual = os.fstat(handle.fileno()).st_size
            kind, size, start = parse_header(handle.read(MAX_HEADER), oid)
            body = actual - start
            if body < size:
                raise CorruptObject(
                    oid, f"truncated: header declares {size} bytes, {body} present", "truncated"
                )
            if body > size:
                raise CorruptObject(
                    oid,
                    f"{body - size} bytes after the declared {size}-byte body",
                    "trailing-bytes",
                )
            handle.seek(start)
        except BaseException:
            handle.close()
            raise
        return handle, kind, size, start

    def _read(self, oid: str) -> bytes | None:
        if self._packs:  # a packed store: most objects are in a pack, look there first
            packed = self._first_pack(oid)
            if packed is not None:
                return packed
        small = self.read_small(oid)
        if small is not None:
            return small or None
        opened = self._open(oid)
        if opened is None:
            return self._packed(oid)
        handle, kind, size, _ = opened
        with handle:
            return header(kind, size) + handle.read(size)

    def read_small(self, oid: str, limit: int = 1 << 20) -> bytes | None:
        """The whole file in one read when it is at most ``limit`` bytes and well-formed.

        Returns b"" when absent and None when the file needs the careful path (large, or
        anything unusual, which ``_open`` then reports precisely).
        """
        # A pack's entry is well-formed by construction: Pack.read parses its header and
        # returns exactly the header and the body it declares (or raises PackError).
        if self._packs:
            packed = self._first_pack(oid)
            if packed is not None:
                return packed if len(packed) <= limit else None
        try:
            opened = self._open_regular(oid)
        except (CorruptObject, OSError):
            return None
        if opened is None:
            packed = self._packed(oid)
            if packed is None:
                return b""
            return packed if len(packed) <= limit else None
        fd, size = opened
        try:
            if size > limit:
                return None
            # Ask for exactly the file's size (plus one byte to notice growth): a larger
            # request makes every read allocate, and zero, a buffer of that size.
            data = os.read(fd, size + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        return small_and_well_formed(data, oid, limit)

    def contains(self, oid: str) -> bool:
        """Whether ``oid``'s file is a regular file in a real fan-out folder (a link there
        is no object: reading refuses it, and writing the object replaces it)."""
        try:
            folder = os.lstat(os.path.join(self.folder, oid[:2]))
            if stat.S_ISDIR(folder.st_mode) and stat.S_ISREG(os.lstat(self.path(oid)).st_mode):
                return True
        except OSError:
            pass
        return self._in_pack(oid)

    def held_of(self, oids: Iterable[str]) -> set[str]:
        """``contains`` of many oids at once: the packs listed once, each fan-out folder
        looked at once (a link there holds nothing), then one ``lstat`` per loose candidate."""
        packs = self.packs(rescan=True)
        folders: dict[str, bool] = {}
        held = set()
        for oid in oids:
            if any(found.find(oid) is not None for found in packs):
                held.add(oid)
                continue
            prefix = oid[:2]
            if prefix not in folders:
                try:
                    folders[prefix] = stat.S_ISDIR(os.lstat(f"{self.folder}/{prefix}").st_mode)
                except OSError:
                    folders[prefix] = False
            if folders[prefix]:
                try:
                    if stat.S_ISREG(os.lstat(self.path(oid)).st_mode):
                        held.add(oid)
                except OSError:
                    pass
        return held

    def _ensure_folder(self, prefix: str) -> None:
        """Create the fan-out folder ``objects/<prefix>`` if missing; refuse a link there.

        Raises:
            StoreIOError: the file system refused, or a symbolic link stands there.
        """
        subdir = os.path.join(self.folder, prefix)
        try:
            file.ensure_dir(subdir)
        except OSError as exc:
            raise file.io_error(subdir, exc) from exc
        self._refuse_link(prefix)

    def _refuse_link(self, prefix: str) -> None:
        subdir = os.path.join(self.folder, prefix)
        if os.path.islink(subdir):
            raise StoreIOError(
                subdir,
                "a symbolic link stands where a folder of objects belongs; nothing is written "
                "through it (yyb doctor reports it)",
            )

    def _write(self, oid: str, data: bytes) -> None:
        for attempt in range(FOLDER_RETRIES):
            self._ensure_folder(oid[:2])
            try:
                file.write_atomic(self.path(oid), data, mode=0o444)
                return
            except StoreIOError:
                if attempt == FOLDER_RETRIES - 1 or self._has_folder(oid[:2]):
                    raise
                # gc removed the folder, emptied, between making it and writing: again

    def _has_folder(self, prefix: str) -> bool:
        return os.path.isdir(os.path.join(self.folder, prefix))

    def put_many(self, items: list[tuple[str, bytes]]) -> list[str]:
        """Write many objects with the same durability as ``put``, but in batches.

        Every temp file is written and fsynced (from a thread pool, so the file system can
        commit many fsyncs together), then all are renamed into place, then each folder that
        received objects is fsynced once. A failure removes the temp files it made.
        """
        from concurrent.futures import ThreadPoolExecutor

        oids = []
        todo: dict[str, bytes] = {}
        for kind, body in items:
            oid = hash_object(kind, body)
            oids.append(oid)
            if oid not in todo and not self.contains(oid):
                todo[oid] = header(kind, len(body)) + body
        if len(todo) < 8:
            for oid, data in todo.items():
                self._write(oid, data)
            return oids
        prefixes = sorted({oid[:2] for oid in todo})
        try:
            created = False
            for prefix in prefixes:
                try:
                    os.mkdir(os.path.join(self.folder, prefix))
                    created = True
                except FileExistsError:
                    pass
            if created:
                file.fsync_dir(self.folder)  # once for every folder made, not once each
        except OSError as exc:
            raise file.io_error(self.folder, exc) from exc
        for prefix in prefixes:
            self._refuse_link(prefix)
        temps: dict[str, str] = {}
        try:
            with ThreadPoolExecutor(max_workers=32) as pool:
                for oid, tmp in pool.map(self._write_temp, todo.items()):
                    temps[oid] = tmp
            for oid in list(temps):
                os.rename(temps[oid], self.path(oid))
                del temps[oid]
            folders = sorted({os.path.join(self.folder, oid[:2]) for oid in todo})
            with ThreadPoolExecutor(max_workers=32) as pool:
                list(pool.map(file.fsync_dir, folders))
            file.durable_point()
        except OSError as exc:
            raise file.io_error(self.folder, exc) from exc
        finally:
            for tmp in temps.values():
                file.discard(tmp)
        return oids

    def _write_temp(self, item: tuple[str, bytes]) -> tuple[str, str]:
        """Write one object's bytes to a fsynced temp file in its folder; return (oid, path)."""
        import tempfile

        oid, data = item
        for attempt in range(FOLDER_RETRIES):
            try:
                fd, tmp = tempfile.mkstemp(
                    dir=os.path.join(self.folder, oid[:2]), prefix=file.TEMP_PREFIX
                )
                break
            except FileNotFoundError:  # gc removed the emptied folder: make it again
                if attempt == FOLDER_RETRIES - 1:
                    raise
                self._ensure_folder(oid[:2])
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, 0o444)
            os.fsync(fd)
        except OSError:
            os.close(fd)
            os.unlink(tmp)
            raise
        os.close(fd)
        return oid, tmp

    def put_blob_file(self, stream: BinaryIO, size: int, replace: bool = False) -> str:
        """Stream a blob into a temp file while hashing it, then rename it into place."""
        if size <= STREAM_THRESHOLD:
            return super().put_blob_file(stream, size, replace)
        import tempfile

        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=file.TEMP_PREFIX)
            with os.fdopen(fd, "wb", buffering=0) as sink:
                oid = hash_stream("blob", stream, size, sink)
                os.fchmod(sink.fileno(), 0o444)
                os.fsync(sink.fileno())
            if self.contains(oid) and not replace:
                return oid
            for attempt in range(FOLDER_RETRIES):
                self._ensure_folder(oid[:2])
                try:
                    file.commit_temp(tmp, self.path(oid))
                    break
                except StoreIOError:
                    if attempt == FOLDER_RETRIES - 1 or self._has_folder(oid[:2]):
                        raise  # not a folder gc removed under the rename
            tmp = None
            return oid
        except OSError as exc:
            raise file.io_error(tmp or self.folder, exc) from exc
        finally:
            file.discard(tmp)

    def copies(self, oid: str) -> list[str]:
        """As ``ObjectStore.copies``: the loose file (whatever stands at its place: a link
        or an empty file is a copy that does not verify), then each pack that holds it (the
        packs open; after a miss, any new ones). A pack that cannot be opened is left out
        (``yyb doctor`` reports it as ``bad-pack``)."""
        from yyb.store.objects import pack  # as in packs(): a loose-only store never pays

        found = [loose_path(oid)] if os.path.lexists(self.path(oid)) else []
        try:
            known = self.packs()
            held = [p for p in known if p.find(oid) is not None]
            if not held and not found:
                held = [p for p in self.packs(rescan=True)[len(known) :] if p.find(oid) is not None]
        except pack.PackError:
            return found
        return found + [os.path.relpath(p.path, self.root) for p in held]

    def open_copy(self, oid: str, where: str) -> tuple[str, int, BinaryIO]:
        if where == loose_path(oid):
            opened = self._open(oid)
            if opened is None:
                raise ObjectMissing(oid)
            handle, kind, size, _ = opened
            return kind, size, handle
        held = [p for p in self._packs.values() if os.path.relpath(p.path, self.root) == where]
        data = held[0].read(oid) if held else None
        if data is None:
            raise ObjectMissing(oid)
        kind, size, start = parse_header(data[:MAX_HEADER], oid)
        return kind, size, io.BytesIO(data[start:])

    def _open_good(self, oid: str, copies: list[str]) -> tuple[str, int, BinaryIO] | None:
        """The first of several copies whose bytes hash to ``oid``, opened; None if none."""
        for where in copies:
            try:
                kind, size, stream = self.open_copy(oid, where)
                with stream:
                    proved = hash_stream(kind, stream, size) == oid
                if proved:
                    return self.open_copy(oid, where)
            except (CorruptObject, ObjectMissing):
                continue
        return None

    def open_body(self, oid: str) -> tuple[str, int, BinaryIO]:
        """As ``ObjectStore.open_body``; of an object with a loose file and a packed copy, a
        copy whose bytes hash to its oid (each is hashed until one does; when none does, the
        loose file, or the packed copy when the loose file cannot be read)."""
        try:
            opened = self._open(oid)
        except CorruptObject:
            if not self._in_pack(oid):
                raise
            return self._open_good(oid, self.copies(oid)) or self._open_packed(oid)
        if opened is None:
            return self._open_packed(oid)
        if self._in_pack(oid):  # two copies: the one returned must prove itself first
            opened[0].close()
            good = self._open_good(oid, self.copies(oid))
            if good is not None:
                return good
            opened = self._open(oid)
            if opened is None:  # removed by a gc meanwhile: packed
                return self._open_packed(oid)
        handle, kind, size, _ = opened
        return kind, size, handle

    def _open_packed(self, oid: str) -> tuple[str, int, BinaryIO]:
        packed = self._packed(oid)
        if packed is None:
            raise ObjectMissing(oid)
        kind, size, start = parse_header(packed[:MAX_HEADER], oid)
        return kind, size, io.BytesIO(packed[start:])

    def iter_oids(self) -> Iterator[str]:
        packs = self.packs(rescan=True)
        if not packs:
            yield from self.loose_oids()
            return
        found = set(self.loose_oids())
        for held in packs:
            found.update(held.oids())
        yield from sorted(found)

    def with_prefix(self, prefix: str) -> list[str]:
        try:
            folder = self._folder_fd(prefix[:2])
        except CorruptObject:
            return []  # a link: nothing is read through it
        names = []
        if folder is not None:
            try:
                names = os.listdir(folder)
            finally:
                os.close(folder)
        rest = prefix[2:]
        found = [
            prefix[:2] + n
            for n in names
            if n.startswith(rest) and len(n) == OID_HEX - 2 and _is_hex(n)
        ]
        for held in self.packs(rescan=True):
            found += [oid for oid in held.with_prefix(prefix) if oid not in found]
        return found


_HEX = frozenset("0123456789abcdef")


def _is_hex(text: str) -> bool:
    return all(c in _HEX for c in text)


def _hex_dirs(folder: str) -> list[str]:
    """The fan-out folders below ``folder`` (a link to a folder is none: fsck reports it)."""
    try:
        with os.scandir(folder) as entries:
            return [
                e.name
                for e in entries
                if len(e.name) == 2 and _is_hex(e.name) and e.is_dir(follow_symlinks=False)
            ]
    except FileNotFoundError:
        return []


def _linked(oid: str | None, rel: str) -> CorruptObject:
    return CorruptObject(
        oid, f"{rel} is a symbolic link; the store never reads through one", "symlink"
    )
