"""Auditing a store against its transparency log (``yyb doctor``, ``yyb verify-log``, and the
refs a report or ``doctor --plan`` reads).

The log holds every update the store ever recorded, in order, so it is replayed ref by ref, in
one pass, each leaf's record read once; a store that only grew agrees with the replay:

- every leaf names a ``yyb_ref_update.v1`` record of the ref the leaf names (``log-leaf``);
- every leaf chains from its ref's previous logged update: its ``previous`` link is that
  update and its ``old`` that update's ``new``; an update that discards that update (a move
  that never took effect) has the discarded one's ``previous`` and ``old`` instead. An update
  from nothing while the log already holds the ref (a second creation; a ref deleted and made
  again links its deletion) is ``log-recreated``; any other break is ``log-unchained``. A leaf
  repeating an update already logged changes nothing (an import cut short and tried again);
- each ref's newest leaf is its log head: otherwise the ref and its log head were set back
  (rolled back, or the update removed). The one exception is the log's very last leaf when its
  writer died before its log head (the next update completes it): noted, not failed. The ref
  holds what that update moved it to (``log-ref-value``; or, the move never having taken
  effect, what it moved it from);
- every update in every ref's chain (its log head, and each ``previous`` and ``discarded``
  below) is a leaf: an update that is not was written around the log (forged, or a chain
  rewritten). The replay proved the logged part, so a walk stops at the first logged update;
- the stored subtree hashes agree with the leaves (``log-levels``), and ``transparency/``
  holds only the log's files (``log-stray-file``).

``audit_leaves`` runs the same checks over leaves read from elsewhere (a checkpoint's
bundled leaves) against the refs of the store at hand; ``audit_refs`` over the leaves of some
refs only. Nothing here writes: a check reads the log as it stands.
"""

from __future__ import annotations

import os
import re
from collections import namedtuple
from collections.abc import Iterable, Iterator

from yyb.errors import YybError
from yyb.store import fanout, file
from yyb.store.fsck.findings import Finding, error, info
from yyb.store.log import transparency
from yyb.store.refs.store import REF_UPDATE

LOG_FILES = ("leaves", "origin", "state", "lock")
LEVEL_FILE = re.compile(r"level-[0-9]{2}")
MAX_LEVELS = 64  # a log of 2^64 leaves is beyond any store


def audit(store) -> list[Finding]:
    """What disagrees between the store's refs and its own log."""
    with store.refs.transparency.reading() as log:
        entries = list(log.entries())
        findings = _levels(log)
    findings += _layout(store)
    return findings + audit_leaves(store, entries, own=True)


class Scope(namedtuple("Scope", "refs by_ref last listed")):
    """What auditing some refs against the store's own log needs, read once: ``refs``, the
    refs that are one of the folders or lie below one (and those the log names there);
    ``by_ref``, each one's leaves in log order; ``last``, the log's last leaf; ``listed``,
    each folder's ref names (``refs.names``)."""

    __slots__ = ()


def scope(store, folders: Iterable[str]) -> Scope:
    """The ``Scope`` of the refs that are one of ``folders`` or lie below one: one search of
    the log; its other leaves are only searched, never parsed."""
    tops = list(dict.fromkeys(folders))
    with store.refs.transparency.reading() as log:
        entries = list(log.under(tops))
        last = log.last()
    listed = {top: store.refs.names(under=top) for top in tops}
    names: set[str] = set(tops)  # a top that is no ref has no head: nothing to walk
    for below in listed.values():
        names.update(below)
    by_ref: dict[str, list[tuple[str, str]]] = {}
    for oid, ref in entries:
        by_ref.setdefault(ref, []).append((oid, ref))
    return Scope(sorted(names | set(by_ref)), by_ref, last, listed)


def audit_refs(store, folders: Iterable[str]) -> list[Finding]:
    """The refs that are one of ``folders`` or lie below one, held to the store's own log:
    the leaves that name them replayed, their log heads and values checked against those
    leaves, their chains' updates required to be leaves (in parts, by worker processes for
    many refs)."""
    found = scope(store, folders)
    parts = fanout.map_chunks(audit_scoped, (store, found), found.refs, scale=5)
    return [finding for part in parts for finding in part]


def audit_scoped(store, found: Scope, refs: list[str]) -> list[Finding]:
    """``audit_leaves`` for some of a scope's refs (each ref's replay needs only its own
    leaves), so that the refs of a large experiment are audited in parts."""
    entries = [entry for ref in refs for entry in found.by_ref.get(ref, ())]
    return audit_leaves(store, entries, own=True, names=refs, last=found.last)


def _levels(log: transparency.View) -> list[Finding]:
    """Every stored subtree hash against the same computed from the leaves. Fewer stored
    than computed is a writer that died before hashing its leaves (the next one does):
    noted. More, or others, is an error."""
    for k in range(MAX_LEVELS):
        try:
            stored = log.stored_level(k)
        except OSError as exc:
            return [error("log-levels", transparency.FOLDER, f"level {k} cannot be read: {exc}")]
        computed = log.level(k)
        if stored == computed:
            continue
        name = f"{transparency.FOLDER}/level-{k:02d}"
        if len(stored) % transparency.HASH == 0 and computed.startswith(stored):
            behind = (len(computed) - len(stored)) // transparency.HASH
            return [info("log-levels-behind", name, f"{behind} hash(es) short of its leaves")]
        if len(stored) % transparency.HASH == 0 and stored.startswith(computed):
            extra = (len(stored) - len(computed)) // transparency.HASH
            detail = f"{extra} hash(es) beyond its leaves: leaves were removed after being hashed"
        else:
            detail = "its hashes disagree with its leaves"
        return [error("log-levels", transparency.FOLDER, f"level-{k:02d}: {detail}")]
    return []


def _layout(store) -> list[Finding]:
    """Anything in ``transparency/`` but the log's files, and temp files left there."""
    if store.path is None:
        return []
    folder = os.path.join(store.path, transparency.FOLDER)
    if os.path.islink(folder) or not os.path.isdir(folder):
        return []  # fsck reports a folder that is a link, or missing
    findings = []
    for name in sorted(os.listdir(folder)):
        rel = f"{transparency.FOLDER}/{name}"
        path = os.path.join(folder, name)
        if os.path.islink(path):
            findings.append(error("symlink", rel, "a symbolic link in the log's folder"))
        elif name.startswith(file.TEMP_PREFIX):
            findings.append(info("temp-file", rel, "left by an interrupted write; safe to delete"))
        elif not os.path.isfile(path) or not (name in LOG_FILES or LEVEL_FILE.fullmatch(name)):
            findings.append(error("log-stray-file", rel, "not one of the log's files"))
    return findings


# What the replay knows of one ref: its newest logged update ``oid`` and that update's
# ``record`` (None when the record cannot be read, or is no update of the ref).
_Logged = namedtuple("_Logged", "oid record")


def replay(store, entries: Iterable[tuple[str, str]], own: bool) -> tuple[list, dict, set]:
    """Replay ``entries`` (oid, ref) per ref: (findings, ref -> its newest ``_Logged``, the
    oids of every leaf). ``own``: the store's own log, whose every leaf's record must be here;
    otherwise a record missing here is passed over."""
    findings: list[Finding] = []
    newest: dict[str, _Logged] = {}
    logged: set[str] = set()
    for oid, ref in entries:
        if oid in logged:
            continue  # a repeat: changes nothing
        logged.add(oid)
        record = None
        try:  # proved by its hash; fsck proves its form
            record = store.objects.read_record(oid)
        except YybError as exc:
            if own:
                findings.append(error("log-leaf", oid, f"a leaf of the log ({ref}): {exc}"))
        if record is not None and (
            record.get("schema_version") != REF_UPDATE or record.get("ref") != ref
        ):
            findings.append(error("log-leaf", oid, f"a leaf of the log is not an update of {ref}"))
            record = None
        if record is not None and (problem := _chains(ref, oid, record, newest.get(ref))):
            findings.append(problem)
        newest[ref] = _Logged(oid, record)
    return findings, newest, logged


_UNKNOWN = object()


def _chains(ref: str, oid: str, record: dict, before: _Logged | None) -> Finding | None:
    """Why update ``oid`` does not follow ``before``, its ref's previous logged update."""
    links = record.get("links", {})
    previous, discarded, old = links.get("previous"), links.get("discarded"), record.get("old")
    if before is None:
        if previous is None and discarded is None and old is None:
            return None
        return error("log-unchained", ref, f"its first logged update {oid} is not from nothing")
    if discarded is not None:
        if discarded != before.oid:
            return error(
                "log-unchained",
                ref,
                f"update {oid} discards {discarded}, not its previous logged update {before.oid}",
            )
        if before.record is None:
            return None
        parent = before.record.get("links", {}).get("previous")
        expected: object = before.record.get("old")
    else:
        parent = before.oid
        expected = before.record.get("new") if before.record is not None else _UNKNOWN
    if previous != parent and previous is None and old is None:
        return error(
            "log-recreated",
            ref,
            f"update {oid} creates the ref from nothing, but the log already holds its "
            f"update {before.oid}",
        )
    if previous != parent:
        return error(
            "log-unchained",
            ref,
            f"update {oid} follows {previous}, not its previous logged update {parent}",
        )
    if expected is not _UNKNOWN and old != expected:
        return error(
            "log-unchained",
            ref,
            f"update {oid} moves the ref from {old}, but the log left it at {expected}",
        )
    return None


def audit_leaves(
    store,
    entries: Iterable[tuple[str, str]],
    own: bool = False,
    names: list[str] | None = None,
    last: tuple[str, str] | None = None,
) -> list[Finding]:
    """Check the store's refs against ``entries`` (oid, ref) in log order. ``own``: they are
    the store's own log, so every chain must be in it and every leaf's record present;
    otherwise (another store's log) only the refs it names are held to it. ``names``: the
    refs whose chains must be logged (default: every ref with a log head, when ``own``);
    ``last``: the log's last leaf, when ``entries`` are not the whole log."""
    entries = list(entries)
    findings, newest, logged = replay(store, entries, own)
    if last is None and entries:
        last = entries[-1]
    heads = _Heads(store.refs)
    for ref, latest in sorted(newest.items()):
        findings += _agreement(store, ref, latest, heads, own, logged, last)
    if names is None:
        names = store.refs.log_names() if own else [r for r in sorted(newest) if heads[r]]
    for ref in names:
        stop = newest[ref].oid if not own and ref in newest else None
        findings += _chain(store, ref, heads[ref], logged, stop)
    return findings


class _Heads(dict):
    """Each ref's log head, read once (None also when it cannot be read: fsck reports it)."""

    def __init__(self, refs) -> None:
        super().__init__()
        self.refs = refs

    def __missing__(self, ref: str) -> str | None:
        try:
            head = self.refs.log_head(ref)
        except YybError:
            head = None
        self[ref] = head
        return head


def _agreement(
    store, ref: str, latest: _Logged, heads: _Heads, own: bool, logged: set, last
) -> list[Finding]:
    """The ref's log head and value against its newest logged update ``latest``."""
    oid = latest.oid
    try:
        head, value = heads[ref], store.refs.read(ref)
    except YybError:
        return []  # fsck reports a ref file that cannot be read
    if head == oid:
        record = latest.record
        if record is None or value in (record.get("new"), record.get("old")):
            return []  # a move that never took effect is fsck's interrupted-update
        return [
            error(
                "log-ref-value",
                ref,
                f"it holds {value}, but its newest logged update {oid} moved it to "
                f"{record.get('new')}",
            )
        ]
    if last == (oid, ref) and _completable(store, oid, head):
        return [info("log-cut-short", ref, f"its update {oid} was cut short before its log head")]
    if head is None:
        if own or _withheld(store, ref):
            return [error("log-ref-missing", ref, f"logged (last {oid}), but gone")]
        return []
    if not own and head not in logged:
        return []  # updated here after the log was taken: checked by its chain
    return [
        error("log-rolled-back", ref, f"its log head {head} is not its newest logged update {oid}")
    ]


def _withheld(store, ref: str) -> bool:
    """Whether a ref another store's log names, absent here, was left out of what was sent:
    the signatures of an object that is here."""
    signed = ref.removeprefix("refs/signatures/")
    return signed != ref and store.objects.contains(signed)


def _completable(store, oid: str, head: str | None) -> bool:
    try:
        links = store.objects.get_record(oid).get("links", {})
    except YybError:
        return False
    return head == (links.get("discarded") or links.get("previous"))


def _chain(store, ref: str, head: str | None, logged: set[str], stop: str | None) -> list:
    """Every update of ``ref``'s chain, from its log ``head`` down to the logged ones, must be
    logged; with ``stop`` (another store's log: the ref may have moved on since), the chain
    must reach that log's newest update of the ref before any other logged one."""
    findings = []
    seen: set[str] = set()
    for oid in _unlogged(store, [head], logged, seen):
        if stop is None:
            findings.append(error("log-unlogged", ref, f"its update {oid} is not in the log"))
    if stop is not None and stop not in seen:
        findings.append(
            error("log-rolled-back", ref, f"its chain does not hold its logged update {stop}")
        )
    return findings


def _unlogged(store, stack: list, logged: set[str], seen: set[str]) -> Iterator[str]:
    """The updates reached from ``stack`` through ``previous`` and ``discarded`` links that
    are not ``logged``; a logged one is added to ``seen`` and not walked below."""
    while stack:
        oid = stack.pop()
        if oid is None or oid in seen:
            continue
        seen.add(oid)
        if oid in logged:
            continue  # the replay proved what lies below
        try:
            links = store.objects.get_record(oid).get("links", {})
        except YybError:
            continue  # fsck reports what cannot be read
        yield oid
        stack += [links.get("previous"), links.get("discarded")]
