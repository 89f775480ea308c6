"""Bundles built byte by byte, as a hostile producer would: every part can be spelled wrong.

``Forge`` holds objects and refs; ``build`` writes a bundle that follows docs/format.md unless
told otherwise (other capabilities, header lines, frames in another order, numbers spelled
another way, another end count). Records are encoded canonically but never schema-checked,
so a forger can write whatever update chain it likes.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import Yyb
from yyb.store.bundle import exchange as bundle
from yyb.store.objects import codec
from yyb.store.objects.format import header as object_header
from yyb.store.repo import Store

REF_UPDATE = "yyb_ref_update.v1"


def stored(kind: str, body: bytes) -> tuple[str, bytes]:
    """(oid, stored bytes) of an object."""
    data = object_header(kind, len(body)) + body
    return hashlib.sha256(data).hexdigest(), data


def frame(oid: str, data: bytes, packed: bytes | None = None, numbers=None) -> bytes:
    """One object frame; ``numbers`` spells (length, clen) as given bytes instead."""
    packed = zlib.compress(data) if packed is None else packed
    length, clen = numbers or (b"%d" % len(data), b"%d" % len(packed))
    return oid.encode() + b" " + length + b" " + clen + b"\n" + packed


def seal(body: bytes) -> bytes:
    """Append the trailer: the SHA-256 of everything before it."""
    return body + hashlib.sha256(body).digest()


@dataclass
class Forge:
    objects: dict[str, bytes] = field(default_factory=dict)  # oid -> stored bytes
    refs: dict[str, str] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)
    caps: str | None = None  # None: the version's own ("zlib ref-logs", "pack ref-logs")
    version: int = 1

    def blob(self, body: bytes) -> str:
        oid, data = stored("blob", body)
        self.objects[oid] = data
        return oid

    def record(self, value: dict) -> str:
        oid, data = stored("record", codec.encode(value))
        self.objects[oid] = data
        return oid

    def update(self, ref: str, old: str | None, new: str | None, **links) -> str:
        """A ref-update record, ``links`` as given (``target`` is not added for you)."""
        value = {
            "schema_version": REF_UPDATE,
            "ref": ref,
            "old": old,
            "new": new,
            "time_ms": 1,
            "reason": "forged",
        }
        links = {k: v for k, v in links.items() if v is not None}
        if links:
            value["links"] = links
        return self.record(value)

    def ref(self, name: str, value: str, head: str | None = None) -> str:
        """Bundle ``name`` at ``value`` with log head ``head`` (default: a one-update chain)."""
        if head is None:
            head = self.update(name, None, value, target=value)
        self.refs[name] = value
        self.logs[name] = head
        return head

    def header(self, lines: list[bytes] | None = None) -> bytes:
        """The text header; ``lines`` replaces the ref and log lines."""
        if lines is None:
            lines = []
            for name in sorted(self.refs):
                lines.append(f"{self.refs[name]} {name}".encode())
                if name in self.logs:
                    lines.append(f"{self.logs[name]} logs/{name}".encode())
        caps = self.caps if self.caps is not None else CAPS[self.version]
        head = b"yyb-bundle %d\nhash sha256\ncapabilities %s\n" % (self.version, caps.encode())
        return head + b"".join(line + b"\n" for line in lines) + b"\n"

    def frames(self, order: list[str] | None = None) -> list[bytes]:
        return [frame(oid, self.objects[oid]) for oid in order or sorted(self.objects)]

    def build(
        self,
        frames: list[bytes] | None = None,
        end: bytes | None = None,
        lines: list[bytes] | None = None,
    ) -> bytes:
        frames = self.frames() if frames is None else frames
        end = b"%d" % len(frames) if end is None else end
        return seal(self.header(lines) + b"".join(frames) + b"end " + end + b"\n")

    def build_pack(
        self,
        stored: list[bytes] | None = None,
        count: int | None = None,
        magic: bytes = b"YYBPACK\0",
        pack_version: int = 1,
        lines: list[bytes] | None = None,
    ) -> bytes:
        """A version 2 bundle: the header, the pack head, ``stored`` (default: every object in
        oid order) and the trailer over the header, the pack head and each object's oid."""
        self.version = 2
        stored = [self.objects[o] for o in sorted(self.objects)] if stored is None else stored
        head = self.header(lines) + struct.pack(
            ">8sIQ", magic, pack_version, len(stored) if count is None else count
        )
        oids = b"".join(hashlib.sha256(data).digest() for data in stored)
        return head + b"".join(stored) + hashlib.sha256(head + oids).digest()


CAPS = {1: "zlib ref-logs", 2: "pack ref-logs"}


def write(tmp_path: Path, data: bytes) -> str:
    path = tmp_path / "hostile.bundle"
    path.write_bytes(data)
    return str(path)


def refused(tmp_path: Path, path: str, code: int, *words: str) -> None:
    """verify and unbundle both fail with one error line and import nothing."""
    target = Store.init(str(tmp_path / "victim"))[0]
    for args in (("bundle", "verify", path), ("bundle", "unbundle", path)):
        result = Yyb(target.path)(*args)
        assert result.exit_code == code, (args, result.stderr)
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("yyb: error: ")
        for word in words:
            assert word in result.stderr, (word, result.stderr)
    assert list(target.objects.iter_oids()) == [] and target.refs.names() == []
    assert target.refs.log_names() == []


def accepted(tmp_path: Path, data: bytes) -> None:
    """The control of a hostile case: the same bundle, spelled right, imports cleanly."""
    from yyb.store.fsck import fsck

    path = write(tmp_path, data)
    bundle.verify(path)
    target = Store.init(str(tmp_path / "control"))[0]
    bundle.unbundle(target, path)
    assert [f for f in fsck(target) if f.level == "error"] == []
