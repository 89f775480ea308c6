"""Every record class, found by its ``schema_version``: one class per schema in schemas/.

Kinds a lower layer writes (the store's ref updates, checkpoints and notes; the harness's
envelopes, file listings and manifests) keep being written as maps there, since neither layer
may import this one; their classes live here for the readers above them.

The modules load when first used (``CLASSES`` and ``KINDS`` import them all): building the
dataclasses of all of them costs about 0.1 s, which a command that reads one kind, or none,
should not pay. Import the module of the kind you need (``yyb.evidence.kinds.attempt``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import cache
from typing import Any

from yyb.errors import InvalidRecord
from yyb.evidence.record import Record

MODULES = (
    "store",
    "harness",
    "environment",
    "plan",
    "attempt",
    "grading",
    "report",
    "governed",
    "readiness",
    "gateway",
)


@cache
def _classes() -> tuple[type[Record], ...]:
    """Every record class defined in MODULES, in their order."""
    found = []
    for name in MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        found += [
            value
            for value in vars(module).values()
            if isinstance(value, type)
            and issubclass(value, Record)
            and value.__module__ == module.__name__
        ]
    return tuple(found)


@cache
def _kinds() -> dict[str, type[Record]]:
    return {cls.schema_version: cls for cls in _classes()}


def __getattr__(name: str) -> Any:
    # CLASSES (every class; a test holds it one to one with schemas/) and KINDS (by
    # schema_version), built on first use.
    if name == "CLASSES":
        return _classes()
    if name == "KINDS":
        return _kinds()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def record_class(schema_version: str) -> type[Record]:
    """The class of ``schema_version``.

    Raises:
        InvalidRecord: no class is known for it.
    """
    cls = _kinds().get(schema_version)
    if cls is None:
        raise InvalidRecord(
            "$.schema_version", f"no record class for {schema_version!r}", ("schema_version",)
        )
    return cls


def from_value(value: Mapping[str, Any], oid: str | None = None) -> Record:
    """Validate ``value`` against its schema and build the record of its kind."""
    return record_class(str(value.get("schema_version"))).from_value(value, oid)


def from_stored(value: Mapping[str, Any]) -> Record:
    """Build the record of ``value``'s kind from a value the store has already validated."""
    return record_class(str(value.get("schema_version"))).from_stored(value)
