"""The layout phase: every file of a store on disk is an object, a pack, a ref, a log head or
a lock where the layout puts one (docs/format.md); anything else is a finding."""

from __future__ import annotations

import os
from collections.abc import Iterator

from yyb.errors import InvalidRefName
from yyb.store import file
from yyb.store.fsck.findings import Finding, error, info
from yyb.store.fsck.packs import Listing, take_pack
from yyb.store.objects.format import OID_HEX, is_oid
from yyb.store.refs import packed as packrefs
from yyb.store.refs.names import LOCK_SUFFIX, check_ref_name
from yyb.store.repo import CACHE_FOLDERS, FOLDERS, FORMAT_FILE, REMOTES_FILE, Store

GC_LOCK = "locks/gc.lock"  # guards no evidence: an interrupted gc leaves it harmless
# Nor does the packed-refs lock: the file it guards is always replaced whole.
HARMLESS_LOCKS = {GC_LOCK: "gc", f"locks/{packrefs.LOCK_NAME}.lock": "pack-refs"}
LOCK_GRACE_S = 10.0


def lock_finding(root: str, rel: str, now: float) -> Finding:
    """What the lock file ``rel`` of the store at ``root`` is at ``now``: held, in progress,
    or stale (an error unless it guards no evidence)."""
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


def layout(store: Store) -> Iterator[tuple[str, str]]:
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
        elif entry in CACHE_FOLDERS and os.path.isdir(os.path.join(root, entry)):
            continue  # a cache its owner verifies (store/repo.py, CACHE_FOLDERS)
        elif entry not in (*FOLDERS, FORMAT_FILE, packrefs.PACKED_REFS, REMOTES_FILE):
            yield "stray", entry
    if os.path.isdir(objects) and not os.path.islink(objects):
        yield from _objects_layout(objects)
    for top in ("refs", "logs", "tmp", "locks"):
        yield from _layout_of(root, top)


def _objects_layout(objects: str) -> Iterator[tuple[str, str]]:
    """``layout`` of ``objects/``: its fan-out folders and ``objects/pack``."""
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


def check_layout(store: Store, now: float, listing: Listing) -> Iterator[Finding]:
    """The layout phase: list the store's files, taking each object into ``listing`` and
    verifying each pack; a finding for each file that is not where the layout has it."""
    for kind, what in layout(store):
        if kind == "object":
            listing.present.append(what)
            listing.loose.add(what)
        elif kind == "pack":
            finding = take_pack(what, listing)
            if finding is not None:
                yield finding
        elif kind in PLACED:
            code, detail = PLACED[kind]
            yield error(code, what, detail)
        elif kind == "temp":
            yield info("temp-file", what, "left by an interrupted write; safe to delete")
        elif kind == "lock":
            yield lock_finding(store.path, what, now)


# The layout's entries that are errors: (code, detail) of each.
PLACED = {
    "stray": ("stray-file", "not part of the store's layout"),
    "not-a-folder": ("stray-file", "a file stands where a folder belongs"),
    "symlink": (
        "symlink",
        "a symbolic link; the store never reads or writes through one "
        "(put the real file or folder in its place, or remove it)",
    ),
}


def check_format(store: Store, listing: Listing) -> Iterator[Finding]:
    """A store marked version 1 that holds packs or packed refs (which version 1 never sees)."""
    packed_refs = os.path.exists(os.path.join(store.path, packrefs.PACKED_REFS))
    if store.format_version < 2 and (listing.verified or packed_refs):
        yield info(
            "old-format",
            FORMAT_FILE,
            "says yyb-store 1 but the store holds packs or packed refs, which a reader of "
            "version 1 does not see; the next 'yyb gc' marks it yyb-store 2",
        )


def check_memory(store: Store, listing: Listing) -> Iterator[Finding]:
    """The layout phase of a store in memory: its objects, and each ref lock held."""
    listing.present = list(store.objects.iter_oids())
    for name in sorted(getattr(store.refs, "locked", ())):
        yield error("stale-lock", name + LOCK_SUFFIX, "lock held")
