"""What an object is: a kind, a body, and the SHA-256 of ``<kind> <length>\\0<body>``."""

from __future__ import annotations

import hashlib

from yyb.errors import ChecksumMismatch, CorruptObject, InvalidOid, InvalidRecord
from yyb.store.objects import codec

TYPE_CHECKING = False  # typing is not imported at run time (docs/performance.md)
if TYPE_CHECKING:
    from typing import Any

KINDS = ("blob", "record")
OID_HEX = 64
ZERO_OID = "0" * OID_HEX
MIN_ABBREV = 4
# A header is at most "record " + 20 digits + NUL; anything longer is not an object.
MAX_HEADER = 32
# Records are metadata; bulk bytes belong in blobs. Readers refuse larger record bodies.
MAX_RECORD = 64 << 20

# Lowercase hexadecimal: a string is made of these alone when stripping them leaves nothing.
# (Plain string methods rather than regular expressions: plumbing does not import ``re``.)
HEX = "0123456789abcdef"
_KIND_BYTES = (b"blob", b"record")
_VERSION_NAME = "abcdefghijklmnopqrstuvwxyz0123456789_"
# The stored header: kind, space, decimal length without sign or leading zeros, NUL
# (``parse_header``). Readers that match it in a mapped file (packs, bundles) compile this
# pattern (``header_re``): one grammar.
HEADER_PATTERN = rb"(blob|record) (0|[1-9][0-9]{0,19})\x00"
_header_re = None


def header_re():
    """HEADER_PATTERN compiled (once, on first use: most commands never need it)."""
    global _header_re
    if _header_re is None:
        import re

        _header_re = re.compile(HEADER_PATTERN)
    return _header_re


def is_oid(text: str) -> bool:
    return isinstance(text, str) and len(text) == OID_HEX and not text.strip(HEX)


def loose_path(oid: str) -> str:
    """Where ``oid``'s loose file lies, relative to the store: ``objects/<2 hex>/<62 hex>``."""
    return f"objects/{oid[:2]}/{oid[2:]}"


def check_oid(text: str) -> str:
    """Return ``text`` if it is a full object id, else raise InvalidOid."""
    if not is_oid(text):
        raise InvalidOid(text)
    return text


def check_prefix(text: str) -> str:
    """Return ``text`` if it can name an object (4 to 64 lowercase hex digits)."""
    if not isinstance(text, str) or not MIN_ABBREV <= len(text) <= OID_HEX or text.strip(HEX):
        raise InvalidOid(text)
    return text


def header(kind: str, size: int) -> bytes:
    if kind not in KINDS:
        raise ValueError(f"unknown object kind {kind!r}")
    return b"%s %d\x00" % (kind.encode("ascii"), size)


def hash_object(kind: str, body: bytes) -> str:
    """The object id of a body of the given kind."""
    h = hashlib.sha256(header(kind, len(body)))
    h.update(body)
    return h.hexdigest()


def parse_header(data: bytes, oid: str | None = None) -> tuple[str, int, int]:
    """Read the header at the start of ``data``: return (kind, declared size, body offset).

    Raises:
        CorruptObject: the header is malformed.
    """
    head = data[:MAX_HEADER]
    end = head.find(b"\x00")
    if end < 0:
        raise CorruptObject(oid, "truncated or missing header", "truncated")
    kind, space, digits = head[:end].partition(b" ")
    if (
        kind not in _KIND_BYTES
        or not space
        or not 0 < len(digits) <= 20
        or not digits.isdigit()  # ASCII digits only, for bytes; no sign, no space
        or (digits[0] == 0x30 and len(digits) > 1)  # no leading zero
    ):
        raise CorruptObject(
            oid, "malformed header (expected '<blob|record> <length>\\0')", "malformed"
        )
    return kind.decode("ascii"), int(digits), end + 1


def split(data: bytes, oid: str | None = None) -> tuple[str, bytes]:
    """Split stored bytes into (kind, body), checking the declared length.

    Raises:
        CorruptObject: malformed header, or a body shorter or longer than declared.
    """
    kind, size, start = parse_header(data, oid)
    actual = len(data) - start
    if actual < size:
        raise CorruptObject(
            oid, f"truncated: header declares {size} bytes, {actual} present", "truncated"
        )
    if actual > size:
        raise CorruptObject(
            oid, f"{actual - size} bytes after the declared {size}-byte body", "trailing-bytes"
        )
    return kind, data[start:]


def check_links(value: dict, oid: str | None = None) -> dict[str, list[str]]:
    """Return a record's links as {role: [oid, ...]}, refusing any malformed ``links`` map.

    Raises:
        InvalidRecord: ``links`` is not a map of role to an oid or a list of oids.
    """
    links = value.get("links")
    if links is None:
        return {}
    where = f"{oid}: " if oid else ""
    if type(links) is not dict:
        raise InvalidRecord("$.links", f"{where}links must be a map of role to oid(s)")
    out: dict[str, list[str]] = {}
    for role, target in links.items():
        targets = target if type(target) is list else [target]
        if not _all_oids(targets):
            for item in targets:
                if not is_oid(item):
                    raise InvalidRecord(
                        codec.json_path(("links", role)),
                        f"{where}{item!r} is not a full object id",
                    )
        out[role] = targets
    return out


def _all_oids(items: list) -> bool:
    """Whether every item is an oid, tested in a few passes of C over the whole list (a
    record may link thousands): each a string of 64 characters, all of them hexadecimal."""
    if not items:
        return True
    try:
        joined = "".join(items)
    except TypeError:  # not every item is a string
        return False
    return min(map(len, items)) == max(map(len, items)) == 64 and not joined.strip(HEX)


def check_record(value: dict) -> str:
    """Check what every record must have whatever its schema; return its schema_version."""
    return checked_record(value)[0]


def checked_record(value: dict) -> tuple[str, dict[str, list[str]]]:
    """``check_record``, and the record's links (``check_links``) found on the way."""
    version = value.get("schema_version")
    if version is None:
        raise InvalidRecord("$.schema_version", "missing: every record names its schema_version")
    if type(version) is not str or not _is_version(version):
        raise InvalidRecord(
            "$.schema_version", f"{version!r} is not a schema version like 'name.v1'"
        )
    return version, check_links(value)


def _is_version(text: str) -> bool:
    """Whether ``text`` is ``[a-z0-9_]+\\.v[0-9]+`` (a name, ".v", a decimal number)."""
    name, dot_v, number = text.rpartition(".v")
    return bool(
        dot_v and name and number.isascii() and number.isdigit() and not name.strip(_VERSION_NAME)
    )


class StoredObject:
    """An object as read from a store: its id, kind and body (a plain class, not a dataclass:
    ``cat-object`` must not pay for importing ``dataclasses``)."""

    __slots__ = ("oid", "kind", "body", "_decoded")

    def __init__(self, oid: str, kind: str, body: bytes) -> None:
        self.oid = oid
        self.kind = kind
        self.body = body
        self._decoded: dict[str, Any] | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StoredObject):
            return NotImplemented
        return (self.oid, self.kind, self.body) == (other.oid, other.kind, other.body)

    def __hash__(self) -> int:
        return hash(self.oid)

    def __repr__(self) -> str:
        return f"StoredObject(oid={self.oid!r}, kind={self.kind!r}, body=<{len(self.body)} bytes>)"

    def check(self) -> None:
        """Recompute the id (and, for a record, prove the body canonical).

        Raises:
            ChecksumMismatch: the bytes hash to another id.
            NonCanonical: a record body that is not canonical.
        """
        self.check_hash()
        if self.kind == "record":
            self.value()

    def check_hash(self) -> None:
        """Recompute the id; raise ChecksumMismatch when the bytes hash to another."""
        got = hash_object(self.kind, self.body)
        if got != self.oid:
            raise ChecksumMismatch(self.oid, got)

    def value(self) -> dict[str, Any]:
        """Decode a record body (canonical or NonCanonical is raised); decoded once, so
        ``check()`` followed by ``value()`` pays for one decode."""
        if self.kind != "record":
            raise CorruptObject(self.oid, f"a {self.kind} has no record value")
        if self._decoded is None:
            self._decoded = codec.decode(self.body, self.oid)
        return self._decoded
