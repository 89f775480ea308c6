"""Git's own files written without Git: tree and commit objects, a pack and its index, an index.

A snapshot is a new repository that only yyb writes, so it is written straight in Git's formats
(``gitformat-pack``, ``gitformat-index``; SHA-1 repositories only) rather than through libgit2:
one walk of the base tree gives every object id, one undeltified pack holds every object (no
loose object, so no file per object), and the index carries the stat data of the files as they
were written, so ``git status`` (and ``gitstate``) start clean without hashing the worktree.
"""

from __future__ import annotations

import hashlib
import os
import struct
import zlib

TREE = 0o040000
OBJ_COMMIT, OBJ_TREE, OBJ_BLOB = 1, 2, 3
_KINDS = {OBJ_COMMIT: b"commit", OBJ_TREE: b"tree", OBJ_BLOB: b"blob"}
_U32 = 0xFFFFFFFF


def object_id(type_num: int, data: bytes) -> bytes:
    """The raw SHA-1 id Git gives an object of this type and body."""
    digest = hashlib.sha1(b"%s %d\0" % (_KINDS[type_num], len(data)))
    digest.update(data)
    return digest.digest()


def tree_body(rows: list[tuple[int, bytes, bytes]]) -> bytes:
    """A tree's body from ``(mode, name, raw id)`` rows, in Git's order: names compared as
    bytes, a folder's as if it ended in ``/``."""
    rows = sorted(rows, key=lambda row: row[1] + b"/" if row[0] == TREE else row[1])
    return b"".join(b"%o %s\0%s" % row for row in rows)


def commit_body(tree: str, name: str, email: str, when: int, message: str) -> bytes:
    """A root commit's body, author and committer both ``name <email>`` at ``when`` UTC, as
    libgit2's ``create_commit`` writes it."""
    signature = f"{name} <{email}> {when} +0000".encode()
    return b"tree %s\nauthor %s\ncommitter %s\n\n%s" % (
        tree.encode(),
        signature,
        signature,
        message.encode(),
    )


def _entry_header(type_num: int, size: int) -> bytes:
    byte = (type_num << 4) | (size & 0x0F)
    size >>= 4
    out = bytearray()
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


class PackWriter:
    """An undeltified pack (version 2) of a known number of objects, then its index (v2).

    ``add`` returns where the object's zlib stream lies in the pack, so a reader that kept the
    pack can inflate one object with a single ``pread``.
    """

    def __init__(self, path: str, count: int, level: int = 1) -> None:
        self.path, self.count, self.level = path, count, level
        self.handle = open(path, "wb")  # noqa: SIM115 - closed by finish
        self.digest = hashlib.sha1()
        self.entries: list[tuple[bytes, int, int]] = []  # (raw id, crc32, offset)
        self.offset = 0
        self._write(b"PACK" + struct.pack(">II", 2, count))

    def _write(self, data: bytes) -> None:
        self.handle.write(data)
        self.digest.update(data)
        self.offset += len(data)

    def add(self, type_num: int, oid: bytes, data: bytes) -> tuple[int, int]:
        """Append one object; return (offset of its zlib stream, length of that stream)."""
        head = _entry_header(type_num, len(data))
        body = zlib.compress(data, self.level)
        self.entries.append((oid, zlib.crc32(body, zlib.crc32(head)), self.offset))
        self._write(head)
        start = self.offset
        self._write(body)
        return start, len(body)

    def finish(self) -> str:
        """Write the trailer and the index (``<path without .pack>.idx``); return the pack's
        checksum in hex, which names it (``pack-<checksum>.pack``).

        Raises:
            ValueError: fewer or more objects were added than the header announced.
        """
        if len(self.entries) != self.count:
            self.handle.close()
            raise ValueError(f"the pack announced {self.count} objects, {len(self.entries)} came")
        trailer = self.digest.digest()
        self.handle.write(trailer)
        self.handle.close()
        entries = sorted(self.entries)
        fanout = [0] * 256
        for oid, _, _ in entries:
            fanout[oid[0]] += 1
        for i in range(1, 256):
            fanout[i] += fanout[i - 1]
        small, large = [], []
        for _, _, offset in entries:
            if offset < 0x80000000:
                small.append(offset)
            else:
                small.append(0x80000000 | len(large))
                large.append(offset)
        index = b"".join(
            [
                b"\377tOc",
                struct.pack(">I", 2),
                struct.pack(">256I", *fanout),
                b"".join(oid for oid, _, _ in entries),
                struct.pack(f">{len(entries)}I", *(crc for _, crc, _ in entries)),
                struct.pack(f">{len(small)}I", *small),
                struct.pack(f">{len(large)}Q", *large),
                trailer,
            ]
        )
        with open(self.path[: -len(".pack")] + ".idx", "wb") as handle:
            handle.write(index + hashlib.sha1(index).digest())
        return trailer.hex()


def inflate(fd: int, offset: int, length: int, size: int) -> bytes:
    """The body of one object of a pack written by ``PackWriter``, read with one ``pread``.

    Raises:
        ValueError: the bytes there do not inflate to ``size`` bytes.
    """
    data = zlib.decompress(os.pread(fd, length, offset)) if size else b""
    if len(data) != size:
        raise ValueError(f"the pack object at {offset} is not {size} bytes")
    return data


def index_file(entries: list[tuple[bytes, os.stat_result, int, bytes]]) -> bytes:
    """An index (version 2, no extensions) of ``(path, lstat, mode, raw id)`` entries at stage
    0, holding the stat data Git compares before it hashes a file."""
    out = [b"DIRC", struct.pack(">II", 2, len(entries))]
    for path, info, mode, oid in sorted(entries, key=lambda entry: entry[0]):
        ctime, mtime = info.st_ctime_ns, info.st_mtime_ns
        out.append(
            struct.pack(
                ">10I20sH",
                (ctime // 10**9) & _U32,
                ctime % 10**9,
                (mtime // 10**9) & _U32,
                mtime % 10**9,
                info.st_dev & _U32,
                info.st_ino & _U32,
                mode,
                info.st_uid & _U32,
                info.st_gid & _U32,
                info.st_size & _U32,
                oid,
                min(len(path), 0xFFF),
            )
        )
        out.append(path + b"\0" * (8 - (62 + len(path)) % 8))
    data = b"".join(out)
    return data + hashlib.sha1(data).digest()
