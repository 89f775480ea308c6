"""Every record class, found by its ``schema_version``: one class per schema in schemas/.

Kinds a lower layer writes (the store's ref updates, checkpoints and notes; the harness's
envelopes, file listings and manifests) keep being written as maps there, since neither layer
may import this one; their classes live here for the readers above them.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

from yyb.errors import InvalidRecord
from yyb.evidence.kinds import attempt, governed, grading, harness, plan, readiness, report, store
from yyb.evidence.record import Record

MODULES: tuple[ModuleType, ...] = (
    store,
    harness,
    plan,
    attempt,
    grading,
    report,
    governed,
    readiness,
)

# Every record class defined in MODULES, in their order (a test holds it one to one with schemas/).
CLASSES: tuple[type[Record], ...] = tuple(
    value
    for module in MODULES
    for value in vars(module).values()
    if isinstance(value, type) and issubclass(value, Record) and value.__module__ == module.__name__
)
KINDS: dict[str, type[Record]] = {cls.schema_version: cls for cls in CLASSES}


def record_class(schema_version: str) -> type[Record]:
    """The class of ``schema_version``.

    Raises:
        InvalidRecord: no class is known for it.
    """
    cls = KINDS.get(schema_version)
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
