"""Record schemas: one JSON Schema per schema_version, shipped in ``yyb.schemas``.

fastjsonschema compiles each schema once and decides validity (it is an order of magnitude
faster than jsonschema, which matters for plans of thousands of records and for doctor);
jsonschema explains a failure in full. Both load on first use so that blob plumbing never
pays for either.
"""

from __future__ import annotations

import os
from functools import cache

from yyb.errors import SchemaViolation
from yyb.store.objects.codec import json_path

TYPE_CHECKING = False  # typing is not imported at run time (docs/performance.md)
if TYPE_CHECKING:
    from typing import Any

SUFFIX = ".schema.json"


@cache
def _folder() -> str:
    """The schemas: package data (``yyb/schemas``) when installed, the top-level folder in a
    source tree. (A path, not ``importlib.resources``: that and pathlib would cost every
    ``doctor`` a few milliseconds; yyb is never imported from a zip.)"""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    installed = os.path.join(package, "schemas")
    if os.path.isdir(installed):
        return installed
    return os.path.join(os.path.dirname(package), "schemas")


def schema_names() -> list[str]:
    """Every schema_version this installation knows, sorted."""
    return sorted(name[: -len(SUFFIX)] for name in os.listdir(_folder()) if name.endswith(SUFFIX))


@cache
def load_schema(schema_version: str) -> dict | None:
    """The JSON Schema document for ``schema_version``, or None when there is none."""
    entry = os.path.join(_folder(), f"{schema_version}{SUFFIX}")
    if not os.path.isfile(entry):
        return None
    import json  # here: json brings re, and a store of blobs alone needs no schema

    with open(entry, encoding="utf-8") as handle:
        return json.loads(handle.read())


@cache
def _validator(schema_version: str) -> Any:
    """jsonschema's validator: slow, used only to explain a failure in full."""
    import jsonschema

    schema = load_schema(schema_version)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


@cache
def _compiled(schema_version: str) -> Any:
    """fastjsonschema's compiled check: the one that decides valid or not, everywhere. It
    checks a schema ``_branchless`` made equivalent: its "null or X" choices are one schema
    of X's keywords admitting null as well (fastjsonschema tries each branch of a choice by
    raising and catching an exception, which was most of the time of checking a report
    layer). jsonschema, which explains, reads the schema as written."""
    import fastjsonschema

    schema = load_schema(schema_version)
    return fastjsonschema.compile(_branchless(schema, schema.get("$defs", {})))


# Keywords that constrain only values of one JSON type: a null passes each of them.
_TYPED_ONLY = frozenset(
    "type properties required additionalProperties patternProperties propertyNames"
    " minProperties maxProperties items minItems maxItems uniqueItems pattern minLength"
    " maxLength format minimum maximum exclusiveMinimum exclusiveMaximum multipleOf"
    " description title $comment default examples".split()
)
_NULL = {"type": "null"}


def _branchless(node: Any, defs: dict) -> Any:
    """``node`` with each ``oneOf``/``anyOf`` of ``{"type": "null"}`` and one schema X
    whose keywords all constrain one non-null type only (a ``#/$defs/`` reference followed)
    replaced by X admitting null: a null passes X's keywords, and anything else passes
    the choice exactly when it passes X."""
    if isinstance(node, list):
        return [_branchless(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _branchless(value, defs) for key, value in node.items()}
    for word in ("oneOf", "anyOf"):
        choice = node.get(word)
        if not (isinstance(choice, list) and len(choice) == 2 and _NULL in choice):
            continue
        other = choice[1] if choice[0] == _NULL else choice[0]
        ref = other.get("$ref", "") if isinstance(other, dict) else ""
        if ref.startswith("#/$defs/") and len(other) == 1:
            other = defs.get(ref[len("#/$defs/") :])
        if not isinstance(other, dict) or not set(other) <= _TYPED_ONLY:
            continue
        kind = other.get("type")
        if not isinstance(kind, str) or kind == "null":
            continue
        rest = {key: value for key, value in node.items() if key != word}
        if set(rest) & set(other):
            continue
        node = {**rest, **_branchless(other, defs), "type": [kind, "null"]}
    return node


def _fast_problem(value: Any, schema_version: str) -> tuple[tuple, str] | None:
    from fastjsonschema import JsonSchemaValueException

    try:
        _compiled(schema_version)(value)
    except JsonSchemaValueException as exc:
        parts = tuple(exc.path[1:]) if exc.path else ()
        return parts, exc.message.removeprefix("data").lstrip(". ") or exc.message
    return None


def _short(message: str) -> str:
    return message if len(message) <= 240 else message[:237] + "..."


def problems(value: Any, schema_version: str) -> list[tuple[tuple, str]]:
    """Every way ``value`` breaks its schema: (path parts, reason), sorted by path."""
    if load_schema(schema_version) is None:
        return [(("schema_version",), f"no schema is known for {schema_version!r}")]
    first = _fast_problem(value, schema_version)
    if first is None:
        return []
    found = [
        (tuple(e.absolute_path), _short(e.message))
        for e in _validator(schema_version).iter_errors(value)
    ]
    if not found:
        found = [(first[0], _short(first[1]))]
    return sorted(found, key=lambda item: ([str(p) for p in item[0]], item[1]))


def problem(value: dict, schema_version: str) -> tuple[str, str] | None:
    """Return (JSON path, reason) for the first way ``value`` breaks its schema, or None."""
    if load_schema(schema_version) is None:
        return "$.schema_version", f"no schema is known for {schema_version!r}"
    first = _fast_problem(value, schema_version)
    if first is None:
        return None
    from jsonschema.exceptions import best_match

    error = best_match(_validator(schema_version).iter_errors(value))
    if error is None:
        return json_path(first[0]), _short(first[1])
    return json_path(tuple(error.absolute_path)), _short(error.message)


def validate(value: dict, schema_version: str, oid: str | None = None) -> None:
    """Raise SchemaViolation unless ``value`` is valid against its schema."""
    found = problem(value, schema_version)
    if found is not None:
        raise SchemaViolation(schema_version, found[0], found[1], oid)
