"""Auditing a store against its transparency log (``yyb doctor``, ``yyb verify-log``).

The log holds every update the store ever recorded, so a store that only grew agrees with it:

- every leaf names a ``yyb_ref_update.v1`` record of the ref the leaf names;
- every update in every ref's chain (its log head, and each ``previous`` and ``discarded``
  below) is a leaf: an update that is not was written around the log (forged, or a chain
  rewritten);
- each ref's newest leaf is its log head: otherwise the ref and its log head were set back
  (rolled back, or the update removed). The one exception is the log's very last leaf when its
  writer died before its log head (the next update completes it): noted, not failed;
- the derived subtree hashes agree with the leaves (the root recomputed from scratch).

``audit_leaves`` runs the same checks over leaves read from elsewhere (a checkpoint's
bundled leaves) against the refs of the store at hand.
"""

from __future__ import annotations

from collections.abc import Iterable

from yyb.errors import YybError
from yyb.store import translog
from yyb.store.fsck import Finding, error, info
from yyb.store.refs import REF_UPDATE


def audit(store) -> list[Finding]:
    """What disagrees between the store's refs and its own log."""
    with store.refs.transparency.locked() as log:
        entries = list(log.entries())
        findings = _levels(log, entries)
    return findings + audit_leaves(store, entries, own=True)


def _levels(log: translog.View, entries: list[tuple[str, str]]) -> list[Finding]:
    """Every stored subtree hash against the same computed from the leaves."""
    for k, expected in enumerate(translog.levels_of(entries)):
        try:
            stored = log.level(k)
        except OSError as exc:
            return [error("log-levels", "transparency", f"level {k} cannot be read: {exc}")]
        if stored != b"".join(expected):
            return [
                error(
                    "log-levels",
                    "transparency",
                    f"its level-{k:02d} hashes disagree with its leaves",
                )
            ]
    return []


def audit_leaves(store, entries: Iterable[tuple[str, str]], own: bool = False) -> list[Finding]:
    """Check the store's refs against ``entries`` (oid, ref) in log order. ``own``: they are
    the store's own log, so every chain must be in it and every leaf's record present;
    otherwise (another store's log) only the refs it names are held to it."""
    findings: list[Finding] = []
    newest: dict[str, str] = {}
    logged: set[str] = set()
    last: tuple[str, str] | None = None
    for oid, ref in entries:
        logged.add(oid)
        newest[ref] = oid
        last = (oid, ref)
        try:
            record = store.objects.get_record(oid)
        except YybError as exc:
            if own:
                findings.append(error("log-leaf", oid, f"a leaf of the log ({ref}): {exc}"))
            continue
        if record.get("schema_version") != REF_UPDATE or record.get("ref") != ref:
            findings.append(error("log-leaf", oid, f"a leaf of the log is not an update of {ref}"))
    refs = store.refs
    for ref, oid in sorted(newest.items()):
        head = refs.log_head(ref)
        if head == oid:
            continue
        if last == (oid, ref) and _completable(store, oid, head):
            findings.append(
                info("log-cut-short", ref, f"its update {oid} was cut short before its log head")
            )
            continue
        if head is None:
            if own or _withheld(store, ref):
                findings.append(error("log-ref-missing", ref, f"logged (last {oid}), but gone"))
        elif not own and head not in logged:
            continue  # updated here after the log was taken: checked by its chain below
        else:
            findings.append(
                error(
                    "log-rolled-back",
                    ref,
                    f"its log head {head} is not its newest logged update {oid}",
                )
            )
    names = refs.log_names() if own else [r for r in sorted(newest) if refs.log_head(r)]
    for ref in names:
        findings += _chain(store, ref, logged, newest.get(ref) if not own else None)
    return findings


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


def _chain(store, ref: str, logged: set[str], stop: str | None) -> list[Finding]:
    """Every update of ``ref``'s chain must be logged; with ``stop`` (another store's log),
    the part of the chain below that log's newest update of the ref must be."""
    findings = []
    stack = [store.refs.log_head(ref)]
    seen: set[str] = set()
    reached_stop = stop is None
    while stack:
        oid = stack.pop()
        if oid is None or oid in seen:
            continue
        seen.add(oid)
        if oid == stop:
            reached_stop = True
        try:
            links = store.objects.get_record(oid).get("links", {})
        except YybError:
            continue  # fsck reports what cannot be read
        if oid not in logged and (stop is None or reached_stop):
            findings.append(error("log-unlogged", ref, f"its update {oid} is not in the log"))
        stack += [links.get("previous"), links.get("discarded")]
    if not reached_stop:
        findings.append(
            error("log-rolled-back", ref, f"its chain does not hold its logged update {stop}")
        )
    return findings
