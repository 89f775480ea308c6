"""The frame every typed record stands on: one frozen dataclass per ``schema_version``.

A record class names its ``schema_version`` as a class attribute and its top-level keys as
fields, in the order its schema lists them. ``to_value()`` gives the map the store encodes, so
a record built through its class has the same canonical bytes and oid as the dict it replaces.

The absent-field rule: a key that the schema does not require and a writer leaves out is the
field's default, ``ABSENT``, and ``to_value()`` omits it. ``None`` is never "absent": it is the
JSON ``null`` some fields may hold (``terminal.runtime.resources.disk_used_bytes`` is null when
the disk could not be read, and absent on terminals written before disks were counted), so an
explicit sentinel is the only way to keep both meanings and the bytes of both.

Arrays are tuples in a class and lists in its value; a nested object of fixed shape is a
``Shape`` (a frozen dataclass of its own); a free-form map stays a plain mapping.

The shipped JSON Schema stays the one validator: ``from_value`` runs it (through
yyb.store.schema) before building the class, and ``from_stored`` trusts a value the store
validated when it was written, so readers do not pay for the check a second time.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, Self, TypeVar

from yyb.errors import InvalidRecord
from yyb.store.objects.codec import json_path
from yyb.store.schema import validate


class Absent(enum.Enum):
    """The type of ``ABSENT``: a key the record does not carry (never the same as null)."""

    ABSENT = "absent"

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        # An absent field reads as false, so `if record.spend:` means "present and non-empty".
        return False


ABSENT = Absent.ABSENT

# One converter per field, worked out from its type on first use: (attribute, key, from value).
_Plan = tuple[tuple[str, str, Any], ...]
_PLANS: dict[type, _Plan] = {}


def named(name: str, default: Any = dataclasses.MISSING) -> Any:
    """A field whose key is not a Python name: ``class_: TerminalClass = named("class")``."""
    return dataclasses.field(default=default, metadata={"key": name})


def _members(hint: Any) -> tuple[Any, ...]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def _shape_of(hint: Any) -> type[Shape] | None:
    for member in _members(hint):
        if isinstance(member, type) and issubclass(member, Shape):
            return member
    return None


def _converter(hint: Any) -> Any:
    """How a stored value becomes this field's value: a Shape, a tuple, or itself."""
    shape = _shape_of(hint)
    if shape is not None:
        return lambda v: v if v is None else shape.from_stored(v)
    # Items of an array stay as they are stored: maps, or scalars (no kind has an array of
    # fixed-shape objects that readers would rather see as classes).
    if any(typing.get_origin(member) is tuple for member in _members(hint)):
        return lambda v: v if v is None else tuple(v)
    return None


def _plan(cls: type) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        hints = typing.get_type_hints(cls)
        plan = tuple(
            (f.name, f.metadata.get("key", f.name), _converter(hints[f.name]))
            for f in dataclasses.fields(cls)
        )
        _PLANS[cls] = plan
    return plan


def _out(value: Any) -> Any:
    if isinstance(value, Shape):
        return value.to_value()
    if isinstance(value, tuple | list):
        return [_out(item) for item in value]
    return value


S = TypeVar("S", bound="Shape")


class Shape:
    """A fixed-shape object inside a record (a frozen dataclass): its keys are its fields."""

    __slots__ = ()

    def to_value(self) -> dict[str, Any]:
        """The map this object stands for; absent fields are left out."""
        out: dict[str, Any] = {}
        for attr, name, _ in _plan(type(self)):
            value = getattr(self, attr)
            if value is not ABSENT:
                out[name] = _out(value)
        return out

    @classmethod
    def from_stored(cls, value: Mapping[str, Any]) -> Self:
        """Build from a value already valid against its schema: read from the store, which
        validated it when it was written, or a part of a record the store validates when it
        is put.

        Raises:
            InvalidRecord: the value has a key the class does not know, or lacks a required one
                (a value that was not validated after all).
        """
        kwargs: dict[str, Any] = {}
        for attr, name, convert in _plan(cls):
            if name in value:
                item = value[name]
                if convert is None:
                    kwargs[attr] = item
                    continue
                try:
                    kwargs[attr] = convert(item)
                except InvalidRecord as exc:  # in a nested object: name it from here
                    raise _fault((name, *exc.parts), exc.reason) from None
        if len(kwargs) != len(value) - (1 if "schema_version" in value else 0):
            known = {name for _, name, _ in _plan(cls)} | {"schema_version"}
            extra = sorted(set(value) - known)
            raise _fault((extra[0],), f"not a field of {cls.__name__}")
        try:
            return cls(**kwargs)
        except TypeError as exc:
            required = (
                f.metadata.get("key", f.name)
                for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING
            )
            lacking = next((key for key in required if key not in value), None)
            if lacking is None:
                raise _fault((), f"{cls.__name__}: {exc}") from None
            raise _fault((lacking,), f"{cls.__name__} requires it") from None


def _fault(parts: tuple, reason: str) -> InvalidRecord:
    return InvalidRecord(json_path(parts), reason, parts)


def kind_of(value: Mapping[str, Any]) -> Any:
    """The ``schema_version`` a stored map claims (None when it claims none)."""
    return value.get("schema_version")


class Record(Shape):
    """A record of one ``schema_version``: ``to_value()`` puts ``schema_version`` first."""

    __slots__ = ()
    schema_version: ClassVar[str]

    @classmethod
    def holds(cls, value: Mapping[str, Any] | None) -> bool:
        """Whether ``value`` claims to be a record of this class's kind."""
        return value is not None and kind_of(value) == cls.schema_version

    def to_value(self) -> dict[str, Any]:
        """The map the store encodes: the same canonical bytes and oid as today's dict."""
        return {"schema_version": self.schema_version, **Shape.to_value(self)}

    @classmethod
    def from_value(cls, value: Mapping[str, Any], oid: str | None = None) -> Self:
        """Validate ``value`` against the shipped schema, then build the record.

        Args:
            value: a record's map, as decoded or as a writer built it.
            oid: the object's id, named in the error when the value is refused.

        Raises:
            SchemaViolation: the schema refuses the value (its ``path`` is the JSON path).
            InvalidRecord: the value is another kind's.
        """
        if not cls.holds(value):
            raise cls._other_kind(value, oid)
        validate(dict(value), cls.schema_version, oid)
        return cls.from_stored(value)

    @classmethod
    def read(cls, objects: Any, oid: str) -> Self:
        """The record ``oid`` of a store's ``objects`` as this class (the store validated it
        when it was written, so it is not validated again).

        Raises:
            ObjectMissing, CorruptObject: as ``objects.get_record`` raises them.
            InvalidRecord: the object is a record of another kind.
        """
        value = objects.get_record(oid)
        if not cls.holds(value):
            raise cls._other_kind(value, oid)
        return cls.from_stored(value)

    @classmethod
    def _other_kind(cls, value: Mapping[str, Any], oid: str | None) -> InvalidRecord:
        where = f"{oid}: " if oid else ""
        return InvalidRecord(
            "$.schema_version",
            f"{where}{kind_of(value)!r} is not {cls.schema_version!r}",
            ("schema_version",),
        )


_dataclass = dataclasses.dataclass(frozen=True, kw_only=True, slots=True)


@typing.dataclass_transform(frozen_default=True, kw_only_default=True)
def shape(cls: type[S]) -> type[S]:
    """Make ``cls`` a frozen, keyword-only dataclass with slots (a Shape or a Record)."""
    return _dataclass(cls)
