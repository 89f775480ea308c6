#!/usr/bin/env python3
"""Read and SHA-256 every object, ref and log of a store: the floor a report is measured against.

How fast one Python process can just read everything a store holds and hash every object,
written with the standard library only (no yyb imports), independently of the store code:

- loose objects ``objects/<2 hex>/<62 hex>``, each hashed whole (its stored bytes are
  ``<kind> <length>\\0<body>`` and the oid is their SHA-256);
- packs ``objects/pack/pack-<hex>.pack`` with their ``.idx`` (a pack without an index is not
  part of the store): the index gives each object's oid and offset, the object's header its
  length, and the slice of the pack at that offset is hashed (docs/format.md, "Packs");
- every ref file under ``refs/``, the ``packed-refs`` file (one line per ref: value, log head,
  name), every log-head file under ``logs/`` and every file of ``transparency/``.

It prints the counts (objects, object bytes, refs, log files) and its wall time, and exits 1
if any object does not hash to its oid or cannot be parsed.
Usage: python tools/floor_read_hash.py STORE
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
import sys
import time

HEX = set("0123456789abcdef")
PACK_HEAD = struct.Struct(">8sIQ")  # magic, version, count
INDEX_HEAD = struct.Struct(">8sIQ")
PACK_MAGIC = b"YYBPACK\0"
INDEX_MAGIC = b"YYBIDX\0\0"
FANOUT_BYTES = 256 * 4
MAX_HEADER = 32
BIG = 16 << 20  # loose objects larger than this are hashed in pieces of this size


def floor(store_path: str) -> dict:
    """Read and hash everything in the store at ``store_path``; return what was read:
    objects, object_bytes, loose, packed, packs, refs, ref_files, packed_refs_lines,
    log_files, log_bytes, mismatches (a list of (oid, where, why)) and seconds."""
    started = time.perf_counter()
    out = {
        "objects": 0,
        "object_bytes": 0,
        "loose": 0,
        "packed": 0,
        "packs": 0,
        "refs": 0,
        "ref_files": 0,
        "packed_refs_lines": 0,
        "log_files": 0,
        "log_bytes": 0,
        "mismatches": [],
    }
    objects = os.path.join(store_path, "objects")
    _loose(objects, out)
    _packs(os.path.join(objects, "pack"), out)
    names = set()
    _walk_files(os.path.join(store_path, "refs"), "refs", out, "ref", names)
    _packed_refs(os.path.join(store_path, "packed-refs"), out, names)
    out["refs"] = len(names)
    _walk_files(os.path.join(store_path, "logs"), "logs", out, "log", None)
    _walk_files(os.path.join(store_path, "transparency"), "transparency", out, "log", None)
    out["seconds"] = time.perf_counter() - started
    return out


def _loose(objects: str, out: dict) -> None:
    sha256 = hashlib.sha256
    mismatches = out["mismatches"]
    count = total = 0
    try:
        fanouts = sorted(os.listdir(objects))
    except FileNotFoundError:
        return
    for fan in fanouts:
        if len(fan) != 2 or not set(fan) <= HEX:
            continue
        folder = os.path.join(objects, fan)
        try:
            dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            for name in os.listdir(dir_fd):
                if len(name) != 62 or name.startswith(".tmp-"):
                    continue
                oid = fan + name
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
                try:
                    size = os.fstat(fd).st_size
                    if size <= BIG:
                        data = os.read(fd, size + 1)
                        while len(data) <= size:  # a short read: read on to end of file
                            more = os.read(fd, size + 1 - len(data))
                            if not more:
                                break
                            data += more
                        digest = sha256(data).hexdigest()
                        length = len(data)
                    else:
                        hasher = sha256()
                        length = 0
                        while piece := os.read(fd, BIG):
                            hasher.update(piece)
                            length += len(piece)
                        digest = hasher.hexdigest()
                finally:
                    os.close(fd)
                count += 1
                total += length
                if digest != oid:
                    mismatches.append((oid, f"objects/{fan}/{name}", f"hashes to {digest}"))
        finally:
            os.close(dir_fd)
    out["loose"] += count
    out["objects"] += count
    out["object_bytes"] += total


def _packs(folder: str, out: dict) -> None:
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return
    for name in names:
        if name.startswith("pack-") and name.endswith(".pack"):
            index = os.path.join(folder, name[: -len(".pack")] + ".idx")
            if os.path.exists(index):  # a pack without an index is not part of the store
                _pack(os.path.join(folder, name), index, out)


def _pack(pack_path: str, index_path: str, out: dict) -> None:
    sha256 = hashlib.sha256
    mismatches = out["mismatches"]
    where = os.path.basename(pack_path)
    with open(index_path, "rb") as handle:
        index = handle.read()
    magic, version, count = INDEX_HEAD.unpack_from(index, 0)
    oids_at = INDEX_HEAD.size + FANOUT_BYTES
    offsets_at = oids_at + 32 * count
    if magic != INDEX_MAGIC or version != 1 or len(index) != offsets_at + 8 * count + 64:
        mismatches.append(("-", os.path.basename(index_path), "not an index of version 1"))
        return
    offsets = struct.unpack_from(f">{count}Q", index, offsets_at)
    trailer = index[offsets_at + 8 * count : offsets_at + 8 * count + 32]
    total = 0
    with open(pack_path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size < PACK_HEAD.size + 32:
            mismatches.append(("-", where, "too short for a pack"))
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                magic, version, packed_count = PACK_HEAD.unpack_from(view, 0)
                if magic != PACK_MAGIC or version != 1 or packed_count != count:
                    mismatches.append(("-", where, "header does not match its index"))
                    return
                if view[size - 32 :] != trailer:
                    mismatches.append(("-", where, "trailer does not match its index"))
                end = size - 32
                for i, offset in enumerate(offsets):
                    oid = index[oids_at + 32 * i : oids_at + 32 * i + 32].hex()
                    head = bytes(view[offset : min(offset + MAX_HEADER, end)])
                    nul = head.find(b"\0")
                    kind, _, length = head[:nul].partition(b" ") if nul > 0 else (b"", b"", b"")
                    if kind not in (b"blob", b"record") or not length.isdigit():
                        mismatches.append((oid, f"{where}@{offset}", "no object header"))
                        continue
                    stop = offset + nul + 1 + int(length)
                    if stop > end:
                        mismatches.append((oid, f"{where}@{offset}", "runs past the pack"))
                        continue
                    digest = sha256(view[offset:stop]).hexdigest()
                    total += stop - offset
                    if digest != oid:
                        mismatches.append((oid, f"{where}@{offset}", f"hashes to {digest}"))
            finally:
                view.release()
    out["packs"] += 1
    out["packed"] += count
    out["objects"] += count
    out["object_bytes"] += total


def _walk_files(top: str, prefix: str, out: dict, what: str, names: set | None) -> None:
    """Read every file under ``top`` (``what``: "ref", collecting the names of the refs that
    hold an oid into ``names``, or "log")."""
    for folder, _, files in os.walk(top):
        relative = os.path.relpath(folder, top)
        for name in files:
            if name.startswith(".tmp-"):
                continue
            with open(os.path.join(folder, name), "rb") as handle:
                data = handle.read()
            if what == "log":
                out["log_files"] += 1
                out["log_bytes"] += len(data)
                continue
            if name.endswith(".lock"):
                continue
            out["ref_files"] += 1
            if len(data) == 65 and data.endswith(b"\n"):
                ref = name if relative == "." else f"{relative}/{name}"
                names.add(f"{prefix}/{ref}")


def _packed_refs(path: str, out: dict, names: set) -> None:
    """The packed refs: ``yyb-packed-refs 1``, then ``<value> <log head> <name>`` lines; a
    value of 64 zeros is no value (a loose file, read before, wins over its line)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return
    none = b"0" * 64
    lines = data.split(b"\n")[1:-1]
    out["packed_refs_lines"] = len(lines)
    for line in lines:
        if line[:64] != none:
            names.add(line[130:].decode("ascii", "replace"))


def main() -> None:
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__.strip().splitlines()[-1])
    result = floor(sys.argv[1])
    print(
        f"floor: {result['objects']} objects ({result['loose']} loose, {result['packed']} in "
        f"{result['packs']} packs), {result['object_bytes']} object bytes hashed; "
        f"{result['refs']} refs ({result['ref_files']} ref files, "
        f"{result['packed_refs_lines']} packed-refs lines); {result['log_files']} log files "
        f"({result['log_bytes']} bytes); {result['seconds']:.2f} s"
    )
    for oid, where, why in result["mismatches"][:20]:
        print(f"mismatch: {oid} at {where}: {why}", file=sys.stderr)
    if result["mismatches"]:
        print(f"{len(result['mismatches'])} objects do not verify", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
