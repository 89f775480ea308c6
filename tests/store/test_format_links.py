"""docs/format.md's links rule and its exceptions, checked against the shipped schemas.

The page lists every field outside ``links`` that holds an oid, and every other 64-hex field
(a hash, not an oid). Together they must be exactly the 64-hex fields the schemas declare;
the fields the page says are linked as well must be, in records a real run writes; and bin
values must behave under the schemas as the page says.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

from tests.conftest import Yyb
from yyb.store import schema

ROOT = Path(__file__).resolve().parents[2]
FORMAT = (ROOT / "docs" / "format.md").read_text()
HEX64 = "^[0-9a-f]{64}$"


def _section(name: str) -> list[tuple[str, list[str], str]]:
    """(record, expanded JSON paths, third cell) for each row of a marked table."""
    body = FORMAT.split(f"<!-- {name}: start -->")[1].split(f"<!-- {name}: end -->")[0]
    rows = []
    for line in body.strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        record = cells[0].strip("`")
        paths = [p for text in re.findall(r"`(\$[^`]*)`", cells[1]) for p in _expand(text)]
        rows.append((record, paths, cells[2] if len(cells) > 2 else ""))
    return rows


def _expand(path: str) -> list[str]:
    """``$.a.{b,c}`` -> ``$.a.b``, ``$.a.c`` (every brace group, in every combination)."""
    parts = re.split(r"\{([^}]*)\}", path)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(combo) for combo in itertools.product(*choices)]


def _hex_fields(document: dict) -> set[str]:
    """JSON paths outside ``$.links`` at which a schema declares a 64-hex string."""
    found: set[str] = set()

    def walk(node, path: str, seen: frozenset) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, path, seen)
            return
        if not isinstance(node, dict):
            return
        ref = node.get("$ref", "")
        if ref.startswith("#/") and ref not in seen:
            target = document  # a JSON pointer into this schema (RFC 6901)
            for step in ref[2:].split("/"):
                target = target[step.replace("~1", "/").replace("~0", "~")]
            walk(target, path, seen | {ref})
        if node.get("pattern") == HEX64:
            found.add(path)
        for key, value in node.items():
            if key == "properties":
                for name, sub in value.items():
                    walk(sub, f"{path}.{name}", seen)
            elif key == "items":
                walk(value, f"{path}[]", seen)
            elif key == "additionalProperties":
                walk(value, f"{path}.*", seen)
            elif key in ("oneOf", "anyOf", "allOf", "if", "then", "else"):
                walk(value, path, seen)

    walk(document, "$", frozenset())
    return {p for p in found if p != "$.links" and not p.startswith("$.links.")}


def test_the_page_lists_every_hex_field_of_every_schema_once():
    oids = {(r, p) for r, paths, _ in _section("oids-outside-links") for p in paths}
    hashes = {(r, p) for r, paths, _ in _section("hashes-not-oids") for p in paths}
    assert not oids & hashes
    declared = {  # read afresh: a compiled schema's cached document has its $refs rewritten
        (path.name.removesuffix(".schema.json"), field)
        for path in sorted((ROOT / "schemas").glob("*.schema.json"))
        for field in _hex_fields(json.loads(path.read_text()))
    }
    assert oids | hashes == declared, (
        f"listed, not declared: {sorted((oids | hashes) - declared)}; "
        f"declared, not listed: {sorted(declared - (oids | hashes))}"
    )


def _values(value, path: str) -> list:
    """The values at ``path`` ($.a.b[].c) in ``value``; absent or null parts yield nothing."""
    found = [value]
    for step in re.findall(r"\.[^.\[]+|\[\]", path[1:]):
        nxt = []
        for item in found:
            if step == "[]":
                nxt.extend(item if isinstance(item, list) else [])
            elif isinstance(item, dict) and step[1:] in item:
                nxt.append(item[step[1:]])
        found = [x for x in nxt if x is not None]
    return found


@pytest.fixture(scope="module")
def example_records(tmp_path_factory) -> dict[str, list[dict]]:
    """Every record of the example run (a report included), by schema_version."""
    root = tmp_path_factory.mktemp("format-links")
    store = str(root / "store")
    done = Yyb(store)("example", "--dir", str(root / "ex"), "--attempts", "1")
    assert done.exit_code == 0, done.stderr
    from yyb.store.repo import Store

    opened = Store.open(store)
    found: dict[str, list[dict]] = {}
    for oid in opened.objects.iter_oids():
        if opened.objects.get(oid).kind == "record":
            value = opened.objects.get_record(oid)
            found.setdefault(value["schema_version"], []).append(value)
    return found


def test_fields_the_page_calls_linked_are_linked(example_records):
    checked = 0
    for record, paths, linked in _section("oids-outside-links"):
        if not linked.startswith("yes"):
            continue
        for value in example_records.get(record, []):
            links = {t for v in value.get("links", {}).values() for t in _as_list(v)}
            for path in paths:
                for oid in _flatten(_values(value, path)):
                    assert oid in links, (record, path, oid)
                    checked += 1
    assert checked >= 10  # intents, executions, terminals, receipts, rows, layer, grant


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def _flatten(values: list) -> list:
    return [x for v in values for x in _as_list(v)]


def test_bin_values_under_the_schemas_as_the_page_says():
    free = {"schema_version": "yyb_note.v1", "message": "m", "data": {"raw": b"\x00\xff"}}
    assert schema.problem(free, "yyb_note.v1") is None
    typed = {"schema_version": "yyb_note.v1", "message": b"not a string"}
    assert schema.problem(typed, "yyb_note.v1") is not None
    # The JSON view's {"$bin": ...} is not what a schema sees: it validates as bytes.
    from yyb.store.objects import codec

    decoded = codec.from_json(json.dumps(dict(typed, message={"$bin": "AAE="})))
    assert decoded["message"] == b"\x00\x01"
    assert schema.problem(decoded, "yyb_note.v1") is not None
    for subschema, accepts in (
        ({}, True),
        ({"pattern": "^a$", "maxLength": 1}, True),
        ({"type": "string"}, False),
        ({"type": "object"}, False),
        ({"enum": ["x"]}, False),
    ):
        import fastjsonschema

        check = fastjsonschema.compile(subschema)
        try:
            check(b"xyz")
            got = True
        except fastjsonschema.JsonSchemaValueException:
            got = False
        assert got is accepts, subschema
