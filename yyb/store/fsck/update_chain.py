"""A ref's update chain, checked by every rule of docs/format.md, "Updates and the update
chain", for the store and for bundles alike."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from yyb.errors import CorruptRef, YybError
from yyb.store.fsck.findings import Finding, error
from yyb.store.refs.store import REF_UPDATE
from yyb.store.repo import Store


def check_ref_chain(store: Store, name: str) -> Iterator[tuple[Finding | None, str | None]]:
    """Walk the update chain of ``name`` in ``store`` from its log head (see walk_ref_chain)."""
    try:
        value = store.refs.read_full(name)
        head = store.refs.log_head_full(name)
    except CorruptRef as exc:
        yield error("bad-ref", name, exc.reason), None
        return
    if head is None:
        if value is not None:
            yield (
                error("unlogged-ref", name, "the ref has no update log (written outside yyb?)"),
                None,
            )
        return
    yield from walk_ref_chain(name, value, head, store.objects.get_record)


def walk_ref_chain(
    name: str, value: str | None, head: str, read: Callable[[str], dict]
) -> Iterator[tuple[Finding | None, str | None]]:
    """Check the update chain of ref ``name`` (holding ``value``) from log head ``head``.

    Every rule of docs/format.md, "Updates and the update chain", is checked here, for the
    store and for bundles alike; ``read`` returns the record of an oid or raises YybError.
    Yields (finding, None) for each problem and (None, oid) for each update record visited
    (discarded heads included), newest first, so a caller can also verify those records.
    """
    expected, oid, newest, seen = value, head, True, set()
    while oid is not None:
        if oid in seen:
            yield error("broken-chain", name, f"the update log loops at {oid}"), None
            return
        seen.add(oid)
        yield None, oid
        record, problem = _read_update(name, oid, read)
        if problem is not None:
            yield problem, None
            return
        new, old = record.get("new"), record.get("old")
        links = record.get("links", {})
        if links.get("target") != new:
            detail = "links a target" if new is None else "does not link its new value as target"
            yield error("broken-chain", name, f"update {oid} {detail}"), None
        if new != expected:
            yield _moved_elsewhere(name, oid, new, old, expected, newest), None
        discarded = links.get("discarded")
        if discarded is not None:
            yield None, discarded
            yield from _check_discarded(name, oid, record, discarded, read)
        newest = False
        expected = old
        oid = links.get("previous")
        if oid is None and old is not None:
            yield (
                error(
                    "broken-chain", name, f"the oldest update starts from {old}, not from nothing"
                ),
                None,
            )


def _read_update(name: str, oid: str, read: Callable[[str], dict]) -> tuple[dict, Finding | None]:
    """The update record ``oid`` of ``name``, or a finding saying why it is not one."""
    try:
        record = read(oid)
    except YybError as exc:
        return {}, error("broken-chain", name, f"update record {oid} is unreadable ({exc})")
    if record.get("schema_version") != REF_UPDATE or record.get("ref") != name:
        return record, error(
            "broken-chain",
            name,
            f"{oid} is not an update of this ref "
            f"({record.get('schema_version')} for {record.get('ref')!r})",
        )
    return record, None


def _moved_elsewhere(
    name: str, oid: str, new: str | None, old: str | None, expected: str | None, newest: bool
) -> Finding:
    """The finding for an update whose ``new`` is not the value the chain expects."""
    if newest and old == expected:
        return error(
            "interrupted-update",
            name,
            f"the log head {oid} records a move to {new} that "
            "never reached the ref (the next update rolls it back)",
        )
    if newest:
        return error(
            "ref-log-mismatch",
            name,
            f"the ref holds {expected} but its latest update {oid} says {new}",
        )
    return error(
        "broken-chain",
        name,
        f"update {oid} moved the ref to {new}, but the next update starts from {expected}",
    )


def _check_discarded(
    name: str, oid: str, record: dict, discarded: str, read: Callable[[str], dict]
) -> Iterator[tuple[Finding, None]]:
    """A discarded head must be an update of this ref from the same place as ``record``."""
    lost, problem = _read_update(name, discarded, read)
    same_parent = lost.get("links", {}).get("previous") == record.get("links", {}).get("previous")
    if problem is None and lost.get("old") == record.get("old") and same_parent:
        return
    why = f": {problem.detail}" if problem is not None else ""
    yield (
        error(
            "broken-chain",
            name,
            f"update {oid} discards {discarded}, which did not start from the same place{why}",
        ),
        None,
    )
