"""Refs on disk: a file per loose ref (``refs/...``, holding ``<oid>\n``) and per log head
(``logs/refs/...``), and the packed-refs file (packed.py), where a loose file wins. The
update protocol they serve is ``store.RefStore``'s."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator

from yyb.errors import CorruptRef, RefConflict, RefLocked, StoreIOError, YybError
from yyb.store import file
from yyb.store.log import transparency
from yyb.store.objects.format import ZERO_OID, is_oid
from yyb.store.objects.store import ObjectStore
from yyb.store.refs.names import LOCK_SUFFIX, check_ref_name
from yyb.store.refs.packed import PackedRefs
from yyb.store.refs.store import LockHandle, RefStore

# How often a writer makes a folder again that pack-refs dropped, emptied, meanwhile (as
# objects/loose.py does for the object folders gc drops).
FOLDER_RETRIES = 3


class DiskRefs(RefStore):
    """Refs as files ``<root>/refs/...`` holding ``<oid>\\n``; log heads under ``<root>/logs``;
    both also packed in ``<root>/packed-refs`` (packed.py), where a loose file wins."""

    packed_lock_timeout = 10.0  # a deletion waits this long for a running pack-refs

    def __init__(self, objects: ObjectStore, root: str) -> None:
        super().__init__(objects, transparency.DiskLog(root))
        self.root = root
        self.packed = PackedRefs(root)

    # A checked ref name is "/"-separated components of [A-Za-z0-9._+=@-]: a relative path.
    def path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def log_path(self, name: str) -> str:
        return f"{self.root}/logs/{name}"

    def _read_oid_file(self, path: str, name: str, what: str) -> str | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a ref file never names another file
                raise CorruptRef(name, f"{what} {path} is a symbolic link") from None
            raise
        try:
            data = os.read(fd, 200)
        except IsADirectoryError:
            return None
        finally:
            os.close(fd)
        text = data.decode("ascii", "replace")
        if not text.endswith("\n") or not is_oid(text[:-1]) or text[:-1] == ZERO_OID:
            raise CorruptRef(name, f"{what} {path} does not hold one object id and a newline")
        return text[:-1]

    def loose_value(self, name: str) -> str | None:
        """The value of ``name``'s loose file, ignoring the packed file."""
        return self._read_oid_file(self.path(name), name, "ref file")

    def loose_head(self, name: str) -> str | None:
        """The log head of ``name``'s loose file, ignoring the packed file."""
        return self._read_oid_file(self.log_path(name), name, "log head")

    # A loose file wins; on a miss, the packed file, looked at again if it changed since
    # (pack-refs writes it before it removes the loose file just missed).
    def read_full(self, name: str) -> str | None:
        value = self._read_oid_file(self.path(name), name, "ref file")
        if value is None and (table := self.packed.table()) is not None:
            return table.value(name)
        return value

    def log_head_full(self, name: str) -> str | None:
        head = self._read_oid_file(self.log_path(name), name, "log head")
        if head is None and (table := self.packed.table()) is not None:
            return table.head(name)
        return head

    def _write_log_head(self, name: str, oid: str) -> None:
        path = self.log_path(name)
        for attempt in range(FOLDER_RETRIES):
            self._make_parents(path, name, os.path.join(self.root, "logs"))
            try:
                file.write_atomic(path, f"{oid}\n".encode("ascii"))
                return
            except StoreIOError:
                if attempt == FOLDER_RETRIES - 1 or os.path.isdir(os.path.dirname(path)):
                    raise
                # pack-refs dropped the folder, emptied, between making it and writing: again

    def _make_parents(self, path: str, name: str, top: str) -> None:
        """Create the folders above ``path`` durably, turning file/folder clashes into errors.

        Other writers may create the same folders at the same time; that is not a clash.
        Nor is pack-refs dropping one: the caller, finding a folder missing, calls again.
        """
        folder = os.path.dirname(path)
        missing = []
        while folder != top and not os.path.isdir(folder):
            missing.append(folder)
            folder = os.path.dirname(folder)
        for folder in reversed(missing):
            try:
                os.mkdir(folder)
            except FileExistsError:
                if not os.path.isdir(folder):
                    raise RefConflict(name, os.path.relpath(folder, os.path.dirname(top))) from None
                continue
            except NotADirectoryError:
                raise RefConflict(
                    name, os.path.relpath(os.path.dirname(folder), os.path.dirname(top))
                ) from None
            except FileNotFoundError:
                return  # pack-refs dropped a parent, emptied, just now: the caller tries again
            except OSError as exc:
                raise file.io_error(folder, exc) from exc
            file.fsync_dir(os.path.dirname(folder))

    @contextlib.contextmanager
    def _lock(self, name: str) -> Iterator[LockHandle]:
        path = self.path(name)
        if os.path.isdir(path):
            raise RefConflict(name, name + "/...")
        table = self.packed.table()
        if table is not None and (other := table.conflict(name)) is not None:
            raise RefConflict(name, other)
        lock = path + LOCK_SUFFIX
        for attempt in range(FOLDER_RETRIES):
            self._make_parents(path, name, os.path.join(self.root, "refs"))
            try:
                fd, broken = file.acquire_lock(lock, self.lock_timeout)
                break
            except FileExistsError:
                raise RefLocked(name, lock) from None
            except FileNotFoundError as exc:
                if attempt == FOLDER_RETRIES - 1:
                    raise file.io_error(lock, exc) from exc
                # pack-refs dropped the folder, emptied, between making it and locking: again
            except OSError as exc:
                raise file.io_error(lock, exc) from exc
        handle = LockHandle(fd, broken)
        try:
            yield handle
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
            # After the rename another writer may already hold a new lock at this path.
            if not handle.renamed:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(lock)

    @contextlib.contextmanager
    def try_lock(self, name: str) -> Iterator[bool]:
        """Hold ``name``'s lock if nobody does (an abandoned lock is left for the ref's next
        update to replace and record); yields whether it is held. For pack-refs."""
        path = self.path(name)
        lock = path + LOCK_SUFFIX
        try:
            self._make_parents(path, name, os.path.join(self.root, "refs"))
            # Checked first: acquire_lock would replace an abandoned lock, whose holder the
            # ref's next update must record (a crash in between is the only way past this).
            if file.lock_state(lock)[0] != "gone":
                raise FileExistsError(lock)
            fd, _ = file.acquire_lock(lock, 0.0)
        except (OSError, YybError):  # held, or a folder that cannot be made: left loose
            yield False
            return
        try:
            yield True
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(lock)

    def _deleting(self, name: str) -> contextlib.AbstractContextManager:
        return self.packed.locked(self.packed_lock_timeout)

    def break_abandoned_lock(self, name: str) -> dict | None:
        return file.break_abandoned(self.path(check_ref_name(name)) + LOCK_SUFFIX)

    def abandoned_lock(self, name: str) -> dict | None:
        state, holder = file.lock_state(self.path(check_ref_name(name)) + LOCK_SUFFIX)
        return holder if state == "abandoned" else None

    def _commit(self, name: str, new: str | None, handle: LockHandle) -> None:
        path = self.path(name)
        lock = path + LOCK_SUFFIX
        try:
            if new is None:
                self.packed.drop_value(name)  # first: a crash leaves the loose file, which wins
                with contextlib.suppress(FileNotFoundError):  # a ref only packed has none
                    os.unlink(path)
            else:
                fd = handle.fd
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{new}\n".encode("ascii"), 0)
                os.fsync(fd)
                os.rename(lock, path)
                handle.renamed = True
            file.fsync_dir(os.path.dirname(path))
            file.durable_point()
        except OSError as exc:
            if exc.errno == errno.EISDIR:
                raise RefConflict(name, name + "/...") from exc
            raise file.io_error(path, exc) from exc

    @staticmethod
    def _walk(folder: str, name: str) -> list[str]:
        """The ref names of the files below ``folder``, which holds the refs of ``name``/."""
        names = []
        stack = [(folder, name)]
        while stack:
            folder, name = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for entry in entries:
                if entry.is_dir():
                    if not entry.is_symlink():  # as os.walk: never descend a link
                        stack.append((entry.path, f"{name}/{entry.name}"))
                elif not entry.name.endswith(LOCK_SUFFIX) and not entry.name.startswith(
                    file.TEMP_PREFIX
                ):
                    names.append(f"{name}/{entry.name}")
        return sorted(names)

    def loose_names(self) -> list[str]:
        """The names of the loose ref files, sorted."""
        return self._walk(self.path("refs"), "refs")

    def loose_log_names(self) -> list[str]:
        """The names of the loose log-head files, sorted."""
        return self._walk(self.log_path("refs"), "refs")

    def _names(self, under: str | None) -> list[str]:
        top = "refs" if under is None else check_ref_name(under)
        loose = self._walk(self.path(top), top)
        table = self.packed.table()
        if table is None:
            return loose
        packed = table.names_under(top + "/")
        return sorted(set(loose).union(packed)) if loose else packed

    def log_names(self) -> list[str]:
        loose = self.loose_log_names()
        table = self.packed.table()
        if table is None:
            return loose
        packed = table.names_under("refs/", heads=True)
        return sorted(set(loose).union(packed)) if loose else packed
