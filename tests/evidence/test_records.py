"""Every record kind through its class: same canonical bytes, same oid, old versions included.

golden/records.json holds real records, up to three per kind chosen to cover as many of the
kind's keys as real records carry: read from a store the built-in example made and from the
stores the suite's own writers made (the governed lane, release readiness, gold validation,
signing and its transparency log, regrade and rejudge, the reports' fabricated stores, which
write a receipt v2 and a report layer v2). Each entry keeps the oid it had when it was written.
Three kinds are no store's records: the grader's input and output (JSON files beside an
evaluation, taken from the example's blobs) and the configuration (the example's file). Two
kinds nothing writes any more were put together from the example's records and checked against
their schemas: a grade v2 (from an evaluation and its result) and a longitudinal layer v2 (a v3
layer with its cohorts inline). The report layer v4 and its cases records are what yyb's
writer (yyb/reports/layer.py) makes of the golden v3 layer's report, which they follow. The
gateway's kinds (a price table, a streamed call, a refused call and their meter) come from an
attempt through the gateway against the scripted provider (tests/gateway/).
"""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path

import pytest

from yyb.errors import InvalidRecord, SchemaViolation
from yyb.evidence.kinds import CLASSES, KINDS, from_stored, from_value, record_class
from yyb.evidence.kinds.attempt import Terminal
from yyb.evidence.record import ABSENT, Record, Shape
from yyb.evidence.records import TERMINAL
from yyb.store.objects import codec
from yyb.store.objects.format import hash_object
from yyb.store.schema import load_schema, schema_names
from yyb.store.schema import validate as schema_check

GOLDEN = json.loads((Path(__file__).parent / "golden" / "records.json").read_text())


def _value(entry: dict) -> dict:
    return codec.from_json(json.dumps(entry["value"]))


def _oid(value: dict) -> str:
    return hash_object("record", codec.encode(value))


def test_every_schema_has_exactly_one_class_and_every_class_a_schema():
    versions = [cls.schema_version for cls in CLASSES]
    assert len(versions) == len(set(versions))
    assert sorted(versions) == schema_names()


def test_the_golden_set_has_every_kind():
    assert {entry["value"]["schema_version"] for entry in GOLDEN} == set(KINDS)


@pytest.mark.parametrize(
    "entry", GOLDEN, ids=[f"{e['value']['schema_version']}-{e['oid'][:8]}" for e in GOLDEN]
)
def test_a_real_record_round_trips_to_the_same_bytes_and_oid(entry):
    value = _value(entry)
    assert _oid(value) == entry["oid"]
    record = from_value(value, entry["oid"])
    assert type(record) is KINDS[value["schema_version"]]
    again = record.to_value()
    assert again == value
    assert next(iter(again)) == "schema_version"
    assert codec.encode(again) == codec.encode(value)
    assert _oid(again) == entry["oid"]
    assert from_stored(value) == record


def _with_all_keys(kind: str) -> dict:
    """The golden record of ``kind`` with the most top-level keys."""
    values = [_value(e) for e in GOLDEN if e["value"]["schema_version"] == kind]
    return max(values, key=len)


def test_a_class_that_dropped_an_optional_field_would_fail():
    value = _with_all_keys(TERMINAL)
    assert "spend" in value, "the golden set lost the terminal that carries a spend"
    fields = [(f.name, f.type, f) for f in dataclasses.fields(Terminal) if f.name != "spend"]
    narrower = dataclasses.make_dataclass(
        "Narrower",
        fields,
        bases=(Record,),
        frozen=True,
        kw_only=True,
        namespace={"schema_version": TERMINAL, "__module__": Terminal.__module__},
    )
    with pytest.raises(InvalidRecord) as caught:
        narrower.from_stored(value)
    assert caught.value.path == "$.spend"


def test_an_absent_field_is_left_out_and_a_null_is_kept():
    value = _with_all_keys(TERMINAL)
    record = Terminal.from_value(value)
    assert dataclasses.replace(record, spend=ABSENT).to_value() == {
        k: v for k, v in value.items() if k != "spend"
    }
    identity = dataclasses.replace(record.identity, observed=None)
    assert dataclasses.replace(record, identity=identity).to_value()["identity"]["observed"] is None
    assert not ABSENT


def test_nested_objects_are_shapes_and_arrays_tuples():
    record = Terminal.from_value(_with_all_keys(TERMINAL))
    assert isinstance(record.exit, Shape)
    assert isinstance(record.links.evaluations, tuple | type(ABSENT))
    assert record.class_ == _with_all_keys(TERMINAL)["class"]


def test_from_value_raises_the_schema_violation_with_its_json_path():
    value = _with_all_keys(TERMINAL)
    broken = {**value, "exit": {**value["exit"], "code": "zero"}}
    with pytest.raises(SchemaViolation) as caught:
        Terminal.from_value(broken, "ab" * 32)
    assert caught.value.path == "$.exit.code"
    assert caught.value.oid == "ab" * 32


def test_from_value_refuses_another_kind_and_an_unknown_one():
    value = _with_all_keys(TERMINAL)
    other = next(cls for cls in CLASSES if cls is not Terminal)
    with pytest.raises(InvalidRecord) as caught:
        other.from_value(value)
    assert caught.value.path == "$.schema_version"
    with pytest.raises(InvalidRecord):
        record_class("yylo_benchmark_nothing.v1")


def test_records_are_frozen():
    record = Terminal.from_value(_with_all_keys(TERMINAL))
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.reason = "changed"  # type: ignore[misc]


def _resolved(schema: dict, root: dict) -> dict:
    while "$ref" in schema:
        target = root
        # A compiled schema's refs may have been made absolute ("<$id>#/$defs/x").
        for part in schema["$ref"].split("#", 1)[-1].removeprefix("/").split("/"):
            target = target[part]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _mismatches(cls: type, schema: dict, root: dict, where: str) -> list[str]:
    """How a class's fields differ from its schema's properties: keys, order, which may be
    absent; then the same for each nested Shape against its own subschema."""
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    keys = [f.metadata.get("key", f.name) for f in fields]
    properties = [k for k in schema.get("properties", {}) if k != "schema_version"]
    found = []
    if keys != properties:
        found.append(f"{where}: fields {keys} are not the schema's {properties}")
    required = set(schema.get("required", ())) - {"schema_version"}
    for f, name in zip(fields, keys, strict=False):
        if (f.default is ABSENT) == (name in required):
            found.append(f"{where}.{name}: absent by default exactly when not required")
        members = typing.get_args(hints[f.name]) or (hints[f.name],)
        for member in members:
            if isinstance(member, type) and issubclass(member, Shape) and name in properties:
                sub = _resolved(schema["properties"][name], root)
                found += _mismatches(member, sub, root, f"{where}.{name}")
    return found


@pytest.mark.parametrize("cls", CLASSES, ids=[c.schema_version for c in CLASSES])
def test_a_class_has_its_schemas_fields_in_order(cls):
    root = load_schema(cls.schema_version)
    assert _mismatches(cls, root, root, "$") == []


def test_from_stored_names_the_json_path_of_what_does_not_fit():
    value = _with_all_keys(TERMINAL)
    with pytest.raises(InvalidRecord) as caught:
        Terminal.from_stored({**value, "exit": {**value["exit"], "stray": 1}})
    assert (caught.value.path, caught.value.parts) == ("$.exit.stray", ("exit", "stray"))
    with pytest.raises(InvalidRecord) as caught:
        Terminal.from_stored({k: v for k, v in value.items() if k != "reason"})
    assert caught.value.path == "$.reason"
    exit_info = {k: v for k, v in value["exit"].items() if k != "code"}
    with pytest.raises(InvalidRecord) as caught:
        Terminal.from_stored({**value, "exit": exit_info})
    assert caught.value.path == "$.exit.code"


def test_read_takes_a_stored_record_of_its_kind_and_refuses_another():
    from yyb.evidence.kinds.attempt import Execution
    from yyb.store.repo import Store

    store = Store.memory()
    value = _with_all_keys(TERMINAL)
    oid = store.objects.put_record(value)
    assert Terminal.read(store.objects, oid) == Terminal.from_value(value)
    with pytest.raises(InvalidRecord) as caught:
        Execution.read(store.objects, oid)
    assert caught.value.path == "$.schema_version" and oid in caught.value.reason


def test_a_v4_layer_carrying_case_rows_inline_or_an_oversized_cases_record_is_refused():
    """A v4 layer keeps its case rows in cases records: one that carries them inline (as v3
    did), or a cases record past 1,000 rows, is refused by its schema."""
    layer = _with_all_keys("yylo_benchmark_report_layer.v4")
    cases = _with_all_keys("yylo_benchmark_report_cases.v4")
    schema_check(layer, layer["schema_version"])
    schema_check(cases, cases["schema_version"])
    layer["report"]["models"][0]["cases"] = list(cases["cases"])
    with pytest.raises(SchemaViolation):
        schema_check(layer, layer["schema_version"])
    cases["cases"] = list(cases["cases"]) * (1001 // len(cases["cases"]) + 1)
    with pytest.raises(SchemaViolation):
        schema_check(cases, cases["schema_version"])
