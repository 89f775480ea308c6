"""Refs: names for objects, moved by compare-and-swap, each move appended to a hash chain.

An update takes ``<ref>.lock``, appends a ``yyb_ref_update.v1`` record linking the previous
update of the same ref, points the ref's log head at it, and only then renames the lock onto
the ref. A crash before that rename leaves the lock behind and a log head one update ahead of
the ref. The lock names its holder; once that process is gone the next update of the ref
replaces the lock and says so in its record (``broke_lock``), and links the head that never
took effect as ``discarded``: nothing is broken or dropped without a trace in the chain.

An update may carry work that must be done before its new value is published (``before_move``:
signing the record the ref is to name). It runs once the update is on record and before the
rename, so a crash inside it leaves the update pending (``pending()``): the next writer of the
ref learns from the log head what was being published, finishes that work and then the move.
"""

from __future__ import annotations

import bisect
import contextlib
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator

from yyb.errors import (
    CorruptRef,
    ObjectMissing,
    RefConflict,
    RefLocked,
    RefMismatch,
    RefNotFound,
    UsageError,
)
from yyb.store.log import transparency
from yyb.store.objects.format import check_oid
from yyb.store.objects.store import ObjectStore
from yyb.store.refs.names import LOCK_SUFFIX, check_ref_name

REF_UPDATE = "yyb_ref_update.v1"

# Marks "no expectation" in update(); None means "the ref must not exist".
ANY = object()


class LockHandle:
    """A held ref lock: its file descriptor, and the crashed holder it replaced, if any."""

    __slots__ = ("fd", "broken", "renamed")

    def __init__(self, fd: int | None = None, broken: dict | None = None) -> None:
        self.fd = fd
        self.broken = broken
        self.renamed = False  # the lock file became the ref: its path is no longer ours


class _Memo:
    """What a ``memoized`` pass has read: each ref's value and log head, by (is a log head,
    name), and the ref names of the folders it was given, by folder."""

    __slots__ = ("read", "listed")

    def __init__(self) -> None:
        self.read: dict[tuple[bool, str], str | None] = {}
        self.listed: dict[str, list[str]] = {}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class RefStore(ABC):
    """Common ref behaviour over primitives that subclasses provide."""

    lock_timeout = 1.0

    def __init__(self, objects: ObjectStore, log: transparency.TransparencyLog) -> None:
        self.objects = objects
        self.transparency = log  # every update is a leaf of it (transparency.py)

    # --- primitives -----------------------------------------------------------------------

    @abstractmethod
    def read_full(self, name: str) -> str | None:
        """``read`` of a full name already checked (``refs/...``): the checks' callers skip
        checking it again."""

    @abstractmethod
    def log_head_full(self, name: str) -> str | None:
        """``log_head`` of a full name already checked."""

    @abstractmethod
    def _write_log_head(self, name: str, oid: str) -> None: ...

    @abstractmethod
    def _lock(self, name: str) -> contextlib.AbstractContextManager:
        """Hold ``<ref>.lock`` (created exclusively); yields a handle for ``_commit``."""
        ...

    @abstractmethod
    def _commit(self, name: str, new: str | None, handle: LockHandle) -> None:
        """Publish ``new`` while holding the lock that ``_lock`` yielded as ``handle``."""
        ...

    @abstractmethod
    def _names(self, under: str | None) -> list[str]:
        """``names``, looked up."""

    def names(self, under: str | None = None) -> list[str]:
        """Every ref name, sorted; with ``under`` (a folder such as ``refs/runs/<plan>``),
        only the names inside that folder, found without looking anywhere else (while
        ``memoized`` with that folder or one above it listed, found in that listing)."""
        memo = self._memo
        if memo is None or under is None:
            return self._names(under)
        folder = check_ref_name(under)
        for top, listed in memo.listed.items():
            if folder == top or folder.startswith(top + "/"):
                prefix = folder + "/"
                start = bisect.bisect_left(listed, prefix)
                end = bisect.bisect_left(listed, folder + "0")  # "0" follows "/"
                return listed[start:end]
        return self._names(under)

    @abstractmethod
    def log_names(self) -> list[str]:
        """Every ref name that has an update log, sorted."""
        ...

    # --- behaviour --------------------------------------------------------------------------

    _memo: _Memo | None = None  # while ``memoized``

    @contextlib.contextmanager
    def memoized(self, listed: dict[str, list[str]] | None = None) -> Iterator[None]:
        """Within: ``read`` and ``log_head`` read each ref once and answer from memory after,
        for a pass that only reads and asks twice (a plan's chain checks, then its log's
        audit); ``listed`` maps folders to their ``names``, which then answer ``names`` of
        them and of the folders below them. An update or adoption through this store forgets
        all of it."""
        outer = self._memo
        if outer is None:
            self._memo = _Memo()
        self._memo.listed.update(listed or {})
        try:
            yield
        finally:
            self._memo = outer

    def read(self, name: str) -> str | None:
        """The oid ``name`` points at, or None if the ref does not exist."""
        return self._remembered(False, check_ref_name(name))

    def log_head(self, name: str) -> str | None:
        """The oid of the latest ``yyb_ref_update.v1`` record of ``name``, or None."""
        return self._remembered(True, check_ref_name(name))

    def _remembered(self, head: bool, name: str) -> str | None:
        memo = self._memo
        if memo is None:
            return self.log_head_full(name) if head else self.read_full(name)
        try:
            return memo.read[head, name]
        except KeyError:
            value = self.log_head_full(name) if head else self.read_full(name)
            memo.read[head, name] = value
            return value

    def _forget(self) -> None:
        if self._memo is not None:
            self._memo.read.clear()
            self._memo.listed.clear()

    def update(
        self,
        name: str,
        new: str | None,
        old: object = ANY,
        reason: str = "",
        time_ms: int | None = None,
        before_move: Callable[[], object] | None = None,
    ) -> str:
        """Move ``name`` to ``new`` (None deletes it), appending to its update chain.

        Args:
            name: the ref; ``refs/`` is prefixed when missing.
            new: the target oid, which must exist in the store; None to delete.
            old: the value the ref must hold now (None: must not exist); ANY skips the check.
            reason: a free-text reason kept in the update record.
            time_ms: the update time; now when omitted.
            before_move: called with the ref locked, once this update's record and log head
                are durable and before the ref moves. A crash or an error inside it leaves
                the update pending, the ref unmoved.

        Returns:
            The oid of the ``yyb_ref_update.v1`` record that records this update.

        Raises:
            InvalidRefName, ObjectMissing, RefLocked, RefMismatch, RefNotFound, CorruptRef.
        """
        name = check_ref_name(name)
        if new is not None:
            check_oid(new)
            if not self.objects.contains(new):
                raise ObjectMissing(new)
        if old is not ANY and old is not None:
            check_oid(old)
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in reason):
            raise UsageError("a ref update reason is one line without control characters")
        deleting = self._deleting(name) if new is None else contextlib.nullcontext()
        self._forget()
        with self._lock(name) as handle, deleting:
            with self.transparency.locked() as log:
                self.complete(log)
                current = self.read_full(name)
                if old is not ANY and old != current:
                    raise RefMismatch(name, old, current)
                if new is None and current is None:
                    raise RefNotFound(name)
                previous, discarded = self._chain_parent(name, current)
                record: dict = {
                    "schema_version": REF_UPDATE,
                    "ref": name,
                    "old": current,
                    "new": new,
                    "time_ms": now_ms() if time_ms is None else time_ms,
                    "reason": reason,
                }
                if handle.broken is not None:
                    record["broke_lock"] = handle.broken
                links = {}
                if new is not None:
                    links["target"] = new
                if previous is not None:
                    links["previous"] = previous
                if discarded is not None:
                    links["discarded"] = discarded
                if links:
                    record["links"] = links
                oid = self.objects.put_record(record)
                log.append([(oid, name)])  # durable before the log head names it
                self._write_log_head(name, oid)
            if before_move is not None:
                before_move()
            self._commit(name, new, handle)
        self._forget()
        return oid

    def adopt(self, name: str, log_head: str, old: str | None, old_head: str | None) -> None:
        """Take over an imported update chain: point ``name``'s log head at ``log_head`` and
        the ref at that update's ``new`` value, appending no record of its own.

        Used by bundle imports, whose chains already extend (or start) the local one: the
        caller has checked that ``old_head`` (the local log head, or None) is in the chain.

        Raises:
            RefMismatch: the ref or its log head moved since the caller looked.
            CorruptRef: ``log_head`` is not an update of ``name``.
        """
        name = check_ref_name(name)
        record = self.objects.get_record(log_head)
        new = record.get("new")
        if record.get("schema_version") != REF_UPDATE or record.get("ref") != name or not new:
            raise CorruptRef(name, f"{log_head} is not an update that sets this ref")
        self._forget()
        with self._lock(name) as handle, self.transparency.locked() as log:
            self.complete(log)
            current = self.read_full(name)
            if current != old:
                raise RefMismatch(name, old, current)
            head = self.log_head_full(name)
            if head != old_head:
                raise RefMismatch(f"logs/{name}", old_head, head)
            log.append(self.chain_since(log_head, old_head))
            self._write_log_head(name, log_head)
            self._commit(name, new, handle)
        self._forget()

    def chain_since(self, log_head: str, old_head: str | None) -> list[tuple[str, str]]:
        """The updates of an imported chain that are new here, oldest first: from
        ``log_head`` back to ``old_head``, each discarded update before the one discarding it."""
        found: list[tuple[str, str]] = []
        oid: str | None = log_head
        while oid is not None and oid != old_head:
            record = self.objects.get_record(oid)
            links = record.get("links", {})
            found.append((oid, record["ref"]))
            if links.get("discarded"):
                found.append((links["discarded"], record["ref"]))
            oid = links.get("previous")
        return found[::-1]

    def complete(self, log: transparency.View) -> None:
        """Bring the log and the log heads into agreement before appending: the updates of a
        store made before its log are appended once (oldest first), and a last update whose
        writer died between its leaf and its log head gets that head, as if the writer had
        died one step later (the next update of its ref records it as discarded)."""
        last = log.last()
        if last is None:
            names = self.log_names()
            if names:
                log.append(transparency.ordered(self._chains(names)))
            return
        oid, ref = last
        head = self.log_head_full(ref)
        if head == oid:
            return
        try:
            links = self.objects.get_record(oid).get("links", {})
        except (ObjectMissing, CorruptRef, UsageError):
            return  # not ours to complete: doctor reports it
        if head == (links.get("discarded") or links.get("previous")):
            self._write_log_head(ref, oid)

    def _chains(self, names: list[str]) -> Iterator[list[tuple[int, str, str]]]:
        """Each ref's chain, oldest first, as (time, oid, ref): what a log that starts late
        owes, in the order a replay of it expects."""
        for name in names:
            chain = self.chain_since(self.log_head_full(name), None)
            yield [(self.objects.get_record(oid).get("time_ms", 0), oid, ref) for oid, ref in chain]

    def _chain_parent(self, name: str, current: str | None) -> tuple[str | None, str | None]:
        """(the update the next record links as previous, a log head it discards or None).

        A log head one move ahead of the ref is an update that wrote its record and log head,
        then died before its rename, or a ref set back by hand: either way the move never
        took effect. The next record links that head as ``discarded``, so it stays on record.
        """
        head = self.log_head_full(name)
        if head is None:
            if current is not None:
                raise CorruptRef(name, "the ref exists but has no update log")
            return None, None
        record = self.objects.get_record(head)
        if record.get("new") == current:
            return head, None
        if record.get("old") == current:
            return record.get("links", {}).get("previous"), head
        raise CorruptRef(name, f"its value {current} disagrees with its update log {head}")

    def pending(self, name: str) -> str | None:
        """The target of an update of ``name`` that wrote its record but never reached the
        ref (the writer died before its rename), or None."""
        name = check_ref_name(name)
        head = self.log_head_full(name)
        if head is None:
            return None
        record = self.objects.get_record(head)
        current = self.read_full(name)
        if record.get("new") != current and record.get("old") == current:
            return record.get("new")
        return None

    def _deleting(self, name: str) -> contextlib.AbstractContextManager:
        """Held around a deletion of ``name``, inside its lock (DiskRefs: the packed-refs
        lock, so that the deletion and a pack-refs never interleave)."""
        return contextlib.nullcontext()

    def break_abandoned_lock(self, name: str) -> dict | None:
        """Remove ``<ref>.lock`` if its holder crashed; return that holder (to be recorded)."""
        return None

    def abandoned_lock(self, name: str) -> dict | None:
        """The holder of ``<ref>.lock`` when it crashed holding it (the next update of the ref
        replaces that lock and records it), else None."""
        return None

    def log(self, name: str) -> Iterator[tuple[str, dict]]:
        """Yield (oid, record) of each update of ``name``, newest first (each one verified)."""
        name = check_ref_name(name)
        oid = self.log_head_full(name)
        if oid is None and self.read_full(name) is None:
            raise RefNotFound(name)
        seen = set()
        while oid is not None:
            if oid in seen:
                raise CorruptRef(name, f"its update log loops at {oid}")
            seen.add(oid)
            record = self.objects.get_record(oid)
            yield oid, record
            oid = record.get("links", {}).get("previous")

    def iter_refs(self, pattern: str | None = None) -> Iterator[tuple[str, str]]:
        """Yield (name, oid) for each ref, sorted by name, optionally filtered by ``pattern``.

        A pattern with ``*``, ``?`` or ``[`` is a glob over the full name (or the name after
        ``refs/``) whose wildcards stay within one component; otherwise it matches
        a full name, or whole trailing components (``plans/x`` matches ``refs/plans/x``), or a
        leading folder (``refs/plans`` matches ``refs/plans/x``).
        """
        for name in self.names():
            if pattern is None or self.matches(name, pattern):
                value = self.read_full(name)
                if value is not None:
                    yield name, value

    @staticmethod
    def matches(name: str, pattern: str) -> bool:
        """Whether ref ``name`` matches a show-ref ``pattern`` (see iter_refs)."""
        if any(c in pattern for c in "*?["):
            glob = _glob(pattern)
            return bool(glob.fullmatch(name) or glob.fullmatch(name[len("refs/") :]))
        pattern = pattern.rstrip("/")
        return name == pattern or name.endswith("/" + pattern) or name.startswith(pattern + "/")


def _glob(pattern: str) -> re.Pattern:
    """A glob where ``*`` and ``?`` stay inside one component (they never match ``/``)."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            out.append(
                "[" + ("^" + re.escape(body[1:]) if body[0] == "!" else re.escape(body)) + "]"
            )
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out))


class MemoryRefs(RefStore):
    """The memory twin of loose.DiskRefs."""

    def __init__(self, objects: ObjectStore, log: transparency.MemoryLog | None = None) -> None:
        super().__init__(objects, log or transparency.MemoryLog())
        self.values: dict[str, str] = {}
        self.heads: dict[str, str] = {}
        self.locked: set[str] = set()
        self._mutex = threading.Lock()

    def read_full(self, name: str) -> str | None:
        return self.values.get(name)

    def log_head_full(self, name: str) -> str | None:
        return self.heads.get(name)

    def _write_log_head(self, name: str, oid: str) -> None:
        self.heads[name] = oid

    @contextlib.contextmanager
    def _lock(self, name: str) -> Iterator[LockHandle]:
        with self._mutex:
            for other in list(self.values) + list(self.locked):
                if other.startswith(name + "/") or name.startswith(other + "/"):
                    raise RefConflict(name, other)
            if name in self.locked:
                raise RefLocked(name, name + LOCK_SUFFIX)
            self.locked.add(name)
        try:
            yield LockHandle()
        finally:
            with self._mutex:
                self.locked.discard(name)

    def _commit(self, name: str, new: str | None, handle: LockHandle) -> None:
        if new is None:
            self.values.pop(name, None)
        else:
            self.values[name] = new

    def _names(self, under: str | None) -> list[str]:
        if under is None:
            return sorted(self.values)
        prefix = check_ref_name(under) + "/"
        return sorted(name for name in self.values if name.startswith(prefix))

    def log_names(self) -> list[str]:
        return sorted(self.heads)
