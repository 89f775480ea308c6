"""Historical governed evidence: a read-only, bounded, hash-verifying view of v1 objects.

Governed evidence written before the v2 records (immutable JSON objects of a ``*.v1`` schema
that carry ``juno_version``) is read here and never written: a projection is checked against
the SHA-256 it is known by (given, or the file's name when that is ``<64 hex>`` or
``<64 hex>.json``), bounded in size, parsed strictly, and handed out frozen. Nothing in this
module opens a file for writing, and a projection cannot be turned back into bytes other than
the ones read. Old objects are evidence to read and check, not v2 scoring oracles.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from types import MappingProxyType

from yyb.errors import YybError
from yyb.evidence.record import kind_of
from yyb.store.objects import codec

MAX_BYTES = 16 << 20
_NAMED = re.compile(r"^([0-9a-f]{64})(\.json)?$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class HistoricalRefused(YybError):
    """An object that is not a verifiable historical v1 object (exit 1: a check failed)."""

    def __init__(self, where: str, reason: str):
        super().__init__(f"{where}: {reason}")
        self.reason = reason


@dataclass(frozen=True)
class Historical:
    sha256: str
    size: int
    schema_version: str
    juno_version: str
    value: MappingProxyType  # the whole object, frozen (mappings read-only, lists tuples)


def project(data: bytes, expected_sha256: str, where: str = "object") -> Historical:
    """The projection of ``data``, proved to be the object ``expected_sha256`` names.

    Raises:
        HistoricalRefused: too large, another hash, not strict JSON, not an object, no
            ``juno_version``, or not a ``.v1`` schema.
    """
    if not _SHA256.match(expected_sha256 or ""):
        raise HistoricalRefused(where, "no SHA-256 (64 lowercase hex) to check it against")
    if len(data) > MAX_BYTES:
        raise HistoricalRefused(where, f"larger than {MAX_BYTES} bytes")
    got = hashlib.sha256(data).hexdigest()
    if got != expected_sha256:
        raise HistoricalRefused(where, f"its bytes hash to {got}, not {expected_sha256}")
    try:
        value = codec.loads_strict(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise HistoricalRefused(where, f"not strict JSON ({exc})") from None
    if not isinstance(value, dict):
        raise HistoricalRefused(where, "not a JSON object")
    version = value.get("juno_version")
    if not isinstance(version, str) or not version:
        raise HistoricalRefused(where, "it carries no juno_version")
    schema = kind_of(value)  # a historical file of any v1 kind: which one is what it says
    if not isinstance(schema, str) or not schema.endswith(".v1"):
        raise HistoricalRefused(where, f"schema_version {schema!r} is not a v1 schema")
    return Historical(got, len(data), schema, version, _frozen(value))


def read(path: str, expected_sha256: str | None = None) -> Historical:
    """``project`` the file at ``path``, read once and at most ``MAX_BYTES`` + 1 bytes; the
    hash to check is ``expected_sha256``, else the file's name."""
    if expected_sha256 is None:
        named = _NAMED.match(os.path.basename(path))
        expected_sha256 = named.group(1) if named else ""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise HistoricalRefused(path, f"cannot be read ({exc.strerror})") from None
    return project(data, expected_sha256, path)


def _frozen(value):
    if isinstance(value, dict):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value
