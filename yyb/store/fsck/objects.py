"""The objects phase: every object read and checked on its own (hash, canonical form, links,
schema), and each link to an object the store lacks."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from yyb.errors import CorruptObject, InvalidRecord, ObjectMissing
from yyb.store import schema
from yyb.store.fsck.findings import Finding, error
from yyb.store.fsck.packs import Listing
from yyb.store.objects import codec
from yyb.store.objects.format import MAX_RECORD, checked_record, hash_object, split
from yyb.store.objects.store import hash_stream
from yyb.store.repo import Store


def check_objects(store: Store, listing: Listing) -> Iterator[Finding]:
    """Inspect each object listed (an object both loose and packed is one object of two
    copies), noting in ``listing.edges`` the oids each links to."""
    for oid in listing.oids():
        if oid in listing.checked_blobs and oid not in listing.loose:
            continue  # a blob of a pack verified whole; a loose copy is read first: check it
        seen = inspect(store, oid, every_copy=listing.copies[oid] > 1)
        yield from seen.findings
        if seen.links:
            listing.edges[oid] = seen.links
            for target in seen.links:
                if target not in listing.copies:
                    yield error("broken-link", oid, f"links {target}, which is missing")


class Inspection:
    """What reading one object found: its problems, and the oids it links (if decodable);
    ``proved``: the bytes read hash to the oid."""

    __slots__ = ("findings", "kind", "links", "value", "proved")

    def __init__(
        self,
        findings: list[Finding],
        kind: str | None = None,
        links: tuple[str, ...] = (),
        value: dict | None = None,
        proved: bool = False,
    ) -> None:
        self.findings, self.kind, self.links = findings, kind, links
        self.value, self.proved = value, proved


def inspect(store: Store, oid: str, every_copy: bool = True) -> Inspection:
    """Read ``oid`` and check everything one object can be checked for on its own.

    Every copy of an object held more than once is checked: the object's checks are made on
    a copy that hashes to its oid (the one readers return), and each copy that does not is
    one ``bad-copy`` finding (``every_copy`` false: the caller knows there is one copy to
    check). Memory stays bounded: blobs are hashed as a stream and oversized records are
    refused before their bodies are read.
    """
    copies = store.objects.copies(oid) if every_copy else ()
    if len(copies) > 1:
        return _inspect_copies(store, oid, copies)
    small = store.objects.read_small(oid)
    if small:
        kind, body = split(small, oid)
        return check_body(oid, kind, body)
    return _inspect_opened(oid, store.objects.open_body)


def _inspect_copies(store: Store, oid: str, copies: list[str]) -> Inspection:
    """``inspect`` of an object with several copies: one finding for each bad copy."""
    seen = []
    for where in copies:
        found = _inspect_opened(oid, lambda oid, where=where: store.objects.open_copy(oid, where))
        if not (found.findings and found.findings[0].code == "missing"):  # removed by gc
            seen.append((where, found))
    if not seen:
        return Inspection([error("missing", oid, "object not in the store")])
    good = next((at for at, found in seen if found.proved), None)
    chosen = next(found for at, found in seen if at == (good or seen[0][0]))
    then = f"readers read the copy {good}" if good else "no copy of it verifies"
    bad = []
    for at, found in seen:
        if found is not chosen and not found.proved:
            why = found.findings[0].detail
            bad.append(error("bad-copy", oid, f"the copy {at} does not verify ({why}); {then}"))
    return Inspection(chosen.findings + bad, chosen.kind, chosen.links, chosen.value, chosen.proved)


def _inspect_opened(oid: str, opener: Callable[[str], tuple]) -> Inspection:
    """``inspect`` of the copy ``opener(oid)`` opens: (kind, size, stream at the body)."""
    try:
        kind, size, stream = opener(oid)
    except ObjectMissing:
        return Inspection([error("missing", oid, "object not in the store")])
    except CorruptObject as exc:
        return Inspection([error(exc.code, oid, exc.reason)])
    with stream:
        if kind == "record" and size > MAX_RECORD:
            return Inspection(
                [
                    error(
                        "malformed",
                        oid,
                        f"a {size}-byte record exceeds the {MAX_RECORD}-byte limit",
                    )
                ],
                kind,
            )
        if kind == "blob":
            return check_body(oid, kind, b"", hash_stream(kind, stream, size))
        return check_body(oid, kind, stream.read(size))


def check_body(oid: str, kind: str, body: bytes, got: str | None = None) -> Inspection:
    """Hash, and for a record canonical form, links and schema (``got``: a streamed hash)."""
    got = got or hash_object(kind, body)
    if got != oid:
        return Inspection([error("hash-mismatch", oid, f"stored bytes hash to {got}")], kind)
    if kind == "blob":
        return Inspection([], kind, proved=True)
    try:
        value = codec.decode(body, oid)
    except CorruptObject as exc:
        return Inspection([error(exc.code, oid, exc.reason)], kind, proved=True)
    found: list[Finding] = []
    links: tuple[str, ...] = ()
    try:
        version, linked = checked_record(value)
        links = tuple(t for targets in linked.values() for t in targets)
    except InvalidRecord as exc:
        return Inspection(
            [error("bad-record", oid, f"{exc.path}: {exc.reason}")], kind, proved=True
        )
    problem = schema.problem(value, version)
    if problem is not None:
        found.append(error("schema", oid, f"{version}: {problem[0]}: {problem[1]}"))
    return Inspection(found, kind, links, value, proved=True)
