"""Store-wide consistency check: a generator of findings, like ``git fsck``.

Each finding is (level, code, subject, detail). ``error`` findings make ``yyb doctor`` exit 1;
``info`` findings (dangling objects, temp files of interrupted writes, a lock younger than
``LOCK_GRACE_S``) are reported but do not fail the check. The codes are listed in docs/cli.md.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from yyb.errors import (
    CorruptObject,
    CorruptRef,
    InvalidRecord,
    InvalidRefName,
    ObjectMissing,
    YybError,
)
from yyb.store import file, packrefs, schema
from yyb.store.object_store import hash_stream
from yyb.store.objects import MAX_RECORD, OID_HEX, check_record, hash_object, is_oid, split
from yyb.store.objects import check_links as record_links
from yyb.store.refs import LOCK_SUFFIX, REF_UPDATE, check_ref_name
from yyb.store.repo import FOLDERS, FORMAT_FILE, Store

LOCK_GRACE_S = 10.0
RELIST = 3  # times the packs are listed again when a repack removed one being checked


@dataclass(frozen=True)
class Finding:
    level: str  # "error" or "info"
    code: str
    subject: str  # an oid, a ref name or a path relative to the store
    detail: str

    def line(self) -> str:
        return f"{self.level} {self.code} {self.subject}: {self.detail}"

    def as_dict(self) -> dict:
        return {
            "level": self.level,
            "code": self.code,
            "subject": self.subject,
            "detail": self.detail,
        }


def error(code: str, subject: str, detail: str) -> Finding:
    return Finding("error", code, subject, detail)


def info(code: str, subject: str, detail: str) -> Finding:
    return Finding("info", code, subject, detail)


@dataclass
class Inspection:
    """What reading one object found: its problems, and the oids it links (if decodable)."""

    findings: list[Finding]
    kind: str | None = None
    links: tuple[str, ...] = ()
    value: dict | None = None
    proved: bool = False  # the bytes read hash to the oid


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
    small = store.objects._read_small(oid)
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
    from yyb.store import codec

    try:
        value = codec.decode(body, oid)
    except CorruptObject as exc:
        return Inspection([error(exc.code, oid, exc.reason)], kind, proved=True)
    found: list[Finding] = []
    links: tuple[str, ...] = ()
    try:
        version = check_record(value)
        links = tuple(t for targets in record_links(value).values() for t in targets)
    except InvalidRecord as exc:
        return Inspection(
            [error("bad-record", oid, f"{exc.path}: {exc.reason}")], kind, proved=True
        )
    problem = schema.problem(value, version)
    if problem is not None:
        found.append(error("schema", oid, f"{version}: {problem[0]}: {problem[1]}"))
    return Inspection(found, kind, links, value, proved=True)


def check_ref_chain(store: Store, name: str) -> Iterator[tuple[Finding | None, str | None]]:
    """Walk the update chain of ``name`` in ``store`` from its log head (see walk_ref_chain)."""
    try:
        value = store.refs._read(name)
        head = store.refs._read_log_head(name)
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


GC_LOCK = "locks/gc.lock"  # guards no evidence: an interrupted gc leaves it harmless
# Nor does the packed-refs lock: the file it guards is always replaced whole.
HARMLESS_LOCKS = {GC_LOCK: "gc", f"locks/{packrefs.LOCK_NAME}.lock": "pack-refs"}


def _lock_finding(root: str, rel: str, now: float) -> Finding:
    path = os.path.join(root, rel)
    state, holder = file.lock_state(path)
    if state == "abandoned" and rel in HARMLESS_LOCKS:
        what = HARMLESS_LOCKS[rel]
        return info(
            "stale-lock",
            rel,
            f"left by an interrupted {what} (pid {holder['pid']}); the next {what} replaces it",
        )
    if state == "abandoned":
        return error(
            "stale-lock",
            rel,
            f"left by pid {holder['pid']}, which is gone; the next "
            "holder replaces it (a ref update records that in its chain)",
        )
    if state == "held":
        return info("locked", rel, "held by a running yyb process")
    try:
        age = now - os.path.getmtime(path)
    except FileNotFoundError:
        return info("locked", rel, "released while checking")
    if age >= LOCK_GRACE_S:
        return error(
            "stale-lock",
            rel,
            f"a lock of unknown origin, {int(age)} s old; remove it once no yyb process is running",
        )
    return info("locked", rel, "a ref update may be in progress")


def _is_hex_pair(name: str) -> bool:
    return len(name) == 2 and all(c in "0123456789abcdef" for c in name)


def _layout(store: Store) -> Iterator[tuple[str, str]]:
    """On disk: yield ("object", oid) for each object file, and (kind, path) for the rest:
    "symlink" for a symbolic link anywhere (never followed), "temp", "lock", "stray", or
    "not-a-folder" for a file where one of the store's folders belongs."""
    root = store.path
    objects = os.path.join(root, "objects")
    for entry in sorted(os.listdir(root)):
        if os.path.islink(os.path.join(root, entry)):
            yield "symlink", entry
        elif entry.startswith(file.TEMP_PREFIX):
            yield "temp", entry  # of an interrupted write of packed-refs
        elif entry in FOLDERS and not os.path.isdir(os.path.join(root, entry)):
            yield "not-a-folder", entry
        elif entry not in FOLDERS and entry not in (FORMAT_FILE, packrefs.PACKED_REFS):
            yield "stray", entry
    if os.path.isdir(objects) and not os.path.islink(objects):
        yield from _objects_layout(objects)
    for top in ("refs", "logs", "tmp", "locks"):
        yield from _layout_of(root, top)


def _objects_layout(objects: str) -> Iterator[tuple[str, str]]:
    """``_layout`` of ``objects/``: its fan-out folders and ``objects/pack``."""
    for prefix in sorted(os.listdir(objects)):
        folder = os.path.join(objects, prefix)
        if os.path.islink(folder):
            yield "symlink", f"objects/{prefix}"
            continue
        if prefix == "pack" and os.path.isdir(folder):
            yield from _pack_layout(folder)
            continue
        if not (_is_hex_pair(prefix) and os.path.isdir(folder)):
            kind = "temp" if prefix.startswith(file.TEMP_PREFIX) else "stray"
            yield kind, f"objects/{prefix}"
            continue
        with os.scandir(folder) as entries:
            listing = sorted((e.name, e.is_symlink()) for e in entries)
        for name, is_link in listing:
            oid = prefix + name
            if is_link:
                yield "symlink", f"objects/{prefix}/{name}"
            elif len(oid) == OID_HEX and is_oid(oid):
                yield "object", oid
            else:
                kind = "temp" if name.startswith(file.TEMP_PREFIX) else "stray"
                yield kind, f"objects/{prefix}/{name}"


def _pack_layout(folder: str) -> Iterator[tuple[str, str]]:
    """``objects/pack``: ("pack", path) per pack with its index; a pack without one, or a
    temp file, is what an interrupted gc left ("temp"); anything else is "stray"."""
    names = sorted(os.listdir(folder))
    for name in names:
        path = os.path.join(folder, name)
        rel = f"objects/pack/{name}"
        stem, dot, ext = name.rpartition(".")
        if os.path.islink(path):
            yield "symlink", rel
        elif name.startswith(file.TEMP_PREFIX):
            yield "temp", rel
        elif not (stem.startswith("pack-") and is_oid(stem[5:]) and ext in ("pack", "idx")):
            yield "stray", rel
        elif ext == "pack":
            yield ("pack", path) if f"{stem}.idx" in names else ("temp", rel)
        elif f"{stem}.pack" not in names:
            yield "stray", rel


def _layout_of(root: str, top: str) -> Iterator[tuple[str, str]]:
    """The entries below ``refs``, ``logs``, ``tmp`` or ``locks`` that are not refs or logs."""
    for folder, dirs, files in os.walk(os.path.join(root, top)):
        dirs.sort()
        for name in sorted(dirs):
            if os.path.islink(os.path.join(folder, name)):  # os.walk lists it, never enters it
                yield "symlink", _relative(root, folder, name)
        for name in sorted(files):
            rel = _relative(root, folder, name)
            if os.path.islink(os.path.join(folder, name)):
                yield "symlink", rel
            elif top == "tmp" or name.startswith(file.TEMP_PREFIX):
                yield "temp", rel
            elif top == "locks":  # store-wide locks are locks/<one component>.lock
                flat = os.path.dirname(rel) == "locks"
                yield ("lock" if flat and name.endswith(LOCK_SUFFIX) else "stray"), rel
            elif name.endswith(LOCK_SUFFIX):
                yield "lock", rel
            else:
                refname = rel if top == "refs" else rel[len("logs/") :]
                try:
                    ok = check_ref_name(refname) == refname and refname.startswith("refs/")
                except InvalidRefName:
                    ok = False
                if not ok:
                    yield "stray", rel


def _relative(root: str, folder: str, name: str) -> str:
    return os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")


def fsck(store: Store, now: float | None = None) -> Iterator[Finding]:
    """Check the whole store; yield every finding (errors first per object, infos last)."""
    from yyb.store import pack

    now = time.time() if now is None else now
    present: list[str] = []
    loose: set[str] = set()
    checked_blobs: set[str] = set()  # blobs of packs verified whole: nothing more to check
    verified: set[str] = set()
    vanished = False  # a pack listed, then removed by a repack that had written its own first
    if store.path is not None:
        for kind, what in _layout(store):
            if kind == "object":
                present.append(what)
                loose.add(what)
            elif kind == "pack":
                finding, gone = _take_pack(what, present, checked_blobs, verified)
                vanished = vanished or gone
                if finding is not None:
                    yield finding
            elif kind == "stray":
                yield error("stray-file", what, "not part of the store's layout")
            elif kind == "not-a-folder":
                yield error("stray-file", what, "a file stands where a folder belongs")
            elif kind == "symlink":
                yield error(
                    "symlink",
                    what,
                    "a symbolic link; the store never reads or writes through one "
                    "(put the real file or folder in its place, or remove it)",
                )
            elif kind == "temp":
                yield info("temp-file", what, "left by an interrupted write; safe to delete")
            elif kind == "lock":
                yield _lock_finding(store.path, what, now)
        packed_refs = os.path.exists(os.path.join(store.path, packrefs.PACKED_REFS))
        if store.format_version < 2 and (verified or packed_refs):
            yield info(
                "old-format",
                FORMAT_FILE,
                "says yyb-store 1 but the store holds packs or packed refs, which a reader of "
                "version 1 does not see; the next 'yyb gc' marks it yyb-store 2",
            )
        for _ in range(RELIST):
            if not vanished:
                break
            vanished = False  # the repack's own pack was in place before: list again
            for path in pack.pack_paths(os.path.join(store.path, "objects", "pack")):
                if path not in verified:
                    finding, gone = _take_pack(path, present, checked_blobs, verified)
                    vanished = vanished or gone
                    if finding is not None:
                        yield finding
    else:
        present = list(store.objects.iter_oids())
        for name in sorted(getattr(store.refs, "locked", ())):
            yield error("stale-lock", name + LOCK_SUFFIX, "lock held")

    held = Counter(present)  # an object both loose and packed is one object of two copies
    present = sorted(held)
    have = set(present)
    edges: dict[str, tuple[str, ...]] = {}
    for oid in present:
        if oid in checked_blobs and oid not in loose:  # a loose copy is read first: check it
            continue
        seen = inspect(store, oid, every_copy=held[oid] > 1)  # a pack that verifies is whole
        yield from seen.findings
        if seen.links:
            edges[oid] = seen.links
            for target in seen.links:
                if target not in have:
                    yield error("broken-link", oid, f"links {target}, which is missing")

    roots: list[str] = []
    if store.path is not None and (problem := packrefs.check(store.path)) is not None:
        yield error("bad-packed-refs", packrefs.PACKED_REFS, problem)
        # Check what is loose; each ref whose reading needs the packed file is a bad-ref.
        names = sorted(set(store.refs.loose_names()) | set(store.refs.loose_log_names()))
    else:
        names = sorted(set(store.refs.names()) | set(store.refs.log_names()))
    for name in names:
        for finding, _ in check_ref_chain(store, name):
            if finding is not None:
                yield finding
        try:
            value = store.refs._read(name)
            head = store.refs._read_log_head(name)
        except CorruptRef:
            continue
        for root in (value, head):
            if root is not None:
                roots.append(root)
        if value is not None and value not in have:
            yield error("ref-missing-object", name, f"points at {value}, which is missing")

    reachable = reach(roots, edges)
    for oid in present:
        if oid not in reachable:
            yield info("dangling", oid, "not reachable from any ref")


def _take_pack(
    path: str, present: list[str], checked_blobs: set[str], verified: set[str]
) -> tuple[Finding | None, bool]:
    """Verify a pack, adding its oids to ``present`` and its blobs to ``checked_blobs``;
    (its finding, whether it is gone: removed by a repack since it was listed)."""
    packed, blobs, finding = _verify_pack(path)
    present += packed
    checked_blobs |= blobs
    verified.add(path)
    return finding, not os.path.exists(path)


def _verify_pack(path: str) -> tuple[list[str], set[str], Finding | None]:
    """(the oids of a pack that verifies whole, else none; its blobs; the finding when it
    does not verify)."""
    from yyb.store import pack

    rel = "objects/pack/" + os.path.basename(path)
    try:
        held = pack.Pack.open(path)
    except pack.PackError as exc:
        if not (os.path.exists(path) and os.path.exists(path[: -len(".pack")] + ".idx")):
            return [], set(), None  # removed since it was listed: replaced by a repack
        return [], set(), error("bad-pack", rel, exc.reason)
    try:
        blobs = held.verify()
        return list(held.oids()), blobs, None
    except pack.PackError as exc:
        return [], set(), error("bad-pack", rel, exc.reason)
    finally:
        held.close()


def reach(roots: Iterable[str], edges: dict[str, tuple[str, ...]]) -> set[str]:
    """Every oid ``roots`` reach through ``edges`` (oid -> the oids it links to), roots
    included."""
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        stack.extend(edges.get(oid, ()))
    return seen
