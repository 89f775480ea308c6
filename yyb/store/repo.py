"""A store: one object database and its refs, on disk or in memory."""

from __future__ import annotations

import os

from yyb.errors import RefNotFound, StoreNotFound, UsageError
from yyb.store import file
from yyb.store.lock import store_lock
from yyb.store.objects.format import OID_HEX, check_prefix, is_oid
from yyb.store.objects.loose import DiskObjects
from yyb.store.objects.store import MemoryObjects, ObjectStore

TYPE_CHECKING = False  # typing is not imported at run time (docs/performance.md)
if TYPE_CHECKING:
    from yyb.store.refs.store import RefStore

FORMAT_FILE = "format"
# The store's remotes: name -> URL (yyb/store/remotes.py); configuration, not evidence.
REMOTES_FILE = "remotes"
# Version 2 may hold packs and packed refs; version 1 (written before them) holds neither and
# is read as it is, and becomes version 2 before its first pack or packed-refs file is written
# (``mark_packed``), so that a yyb that knows only version 1 refuses the store rather than
# missing what those files hold.
FORMAT_VERSION = 2
FORMAT_TEXTS = {version: f"yyb-store {version}\nhash sha256\n" for version in (1, 2)}
FORMAT_TEXT = FORMAT_TEXTS[FORMAT_VERSION]
FOLDERS = ("objects", "refs", "logs", "tmp", "locks", "transparency")
# Caches kept beside the evidence that the layout check does not walk: they hold no object
# and are verified by their owners (``environments/``: built environment trees, checked
# against manifests that are objects; docs/environments.md).
CACHE_FOLDERS = ("environments",)


class Store:
    """An object database with refs. Build one with ``open``, ``init`` or ``memory``."""

    def __init__(self, objects: ObjectStore, refs: RefStore | None, path: str | None = None):
        self.objects = objects
        self._refs = refs  # a disk store's refs are made when first used (``refs``)
        self.path = path
        self.format_version = FORMAT_VERSION

    def mark_packed(self) -> None:
        """Make a version 1 store version 2, before its first pack or packed-refs file is
        written (``FORMAT_VERSION``); nothing for a version 2 store or one in memory.

        Raises:
            StoreIOError: the file system refused.
        """
        if self.path is None or self.format_version >= 2:
            return
        file.write_atomic(os.path.join(self.path, FORMAT_FILE), FORMAT_TEXT.encode("ascii"))
        self.format_version = FORMAT_VERSION

    @property
    def refs(self) -> RefStore:
        """The refs (with their update logs and the transparency log)."""
        if self._refs is None:
            from yyb.store.refs.loose import DiskRefs  # plumbing that names objects never pays

            self._refs = DiskRefs(self.objects, self.path)
        return self._refs

    @classmethod
    def memory(cls) -> Store:
        from yyb.store.refs.store import MemoryRefs  # as DiskRefs: only for those that use refs

        objects = MemoryObjects()
        return cls(objects, MemoryRefs(objects))

    @classmethod
    def open(cls, path: str) -> Store:
        """Open the store at ``path``.

        Raises:
            StoreNotFound: no store there, or one of a format this version does not know.
        """
        marker = os.path.join(path, FORMAT_FILE)
        try:
            with open(marker, encoding="ascii", errors="replace") as handle:
                text = handle.read(256)
        except (FileNotFoundError, NotADirectoryError):
            raise StoreNotFound(path, "not a yyb store (run 'yyb store init')") from None
        versions = {text: version for version, text in FORMAT_TEXTS.items()}
        if text not in versions:
            first = text.splitlines()[0] if text else "(empty)"
            raise StoreNotFound(path, f"unknown store format {first!r}")
        store = cls(DiskObjects(path), None, path)
        store.format_version = versions[text]
        return store

    @classmethod
    def init(cls, path: str) -> tuple[Store, bool]:
        """Create a store at ``path`` (an existing one is opened); return it and whether it is new.

        Raises:
            UsageError: ``path`` exists and is something other than a store or an empty folder.
            StoreIOError: the file system refused.
        """
        path = os.path.abspath(path)
        if os.path.exists(os.path.join(path, FORMAT_FILE)):
            return cls.open(path), False
        if os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
            raise UsageError(f"refusing to create a store in a non-empty folder: {path}")
        try:
            os.makedirs(path, exist_ok=True)
            for folder in FOLDERS:
                file.ensure_dir(os.path.join(path, folder))
        except OSError as exc:
            raise file.io_error(path, exc) from exc
        # The format file is written last: a store exists once it is there.
        file.write_atomic(os.path.join(path, FORMAT_FILE), FORMAT_TEXT.encode("ascii"))
        return cls.open(path), True

    def exclusive(self, name: str, timeout: float = 0.0) -> store_lock:
        """The store-wide lock ``locks/<name>.lock`` (one component, ref-name rules), to hold
        with ``with``; its value is the holder of an abandoned lock this one replaced (a
        crashed process), or None. A store in memory holds nothing.

        Raises:
            InvalidRefName, UsageError: ``name`` cannot name a lock.
            LockHeld: (on entry) another live process holds it past ``timeout`` seconds.
        """
        from yyb.store.refs.names import check_ref_name  # as refs: plumbing on oids never pays

        check_ref_name(name)
        if "/" in name:
            raise UsageError(f"a lock name is one component: {name!r}")
        return store_lock(self.path, name, timeout)

    def rev_parse(self, name: str) -> str:
        """Resolve a full oid, a unique abbreviation (4+ hex digits) or a ref name to an oid.

        An abbreviation is tried before a ref of the same spelling, as Git does.

        Raises:
            InvalidOid, AmbiguousOid, ObjectMissing, RefNotFound, InvalidRefName.
        """
        if is_oid(name):
            return name
        hexlike = 4 <= len(name) < OID_HEX and all(c in "0123456789abcdef" for c in name)
        if hexlike:
            check_prefix(name)
            found = self.objects.with_prefix(name)
            if found:
                return self.objects.resolve(name)
        from yyb.store.refs.names import check_ref_name  # as refs: plumbing on oids never pays

        try:
            value = self.refs.read(check_ref_name(name))
        except UsageError:
            if hexlike:
                raise RefNotFound(name) from None
            raise
        if value is None:
            raise RefNotFound(name)
        return value
