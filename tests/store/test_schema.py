"""Schema checks: the fast validator that decides and the full one that explains must agree."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import pytest

from yyb import config
from yyb.plans import build
from yyb.store import schema


def _variants(value):
    """The value, and mutations of it: each key dropped, each leaf replaced by odd types."""
    yield value
    if isinstance(value, dict):
        for key in value:
            dropped = {k: v for k, v in value.items() if k != key}
            yield dropped
            for odd in (None, 7, "text", [], {}, True, -1):
                changed = dict(value)
                changed[key] = odd
                yield changed
            for inner in _variants(value[key]):
                changed = dict(value)
                changed[key] = inner
                yield changed
    elif isinstance(value, list) and value:
        for inner in _variants(value[0]):
            yield [inner, *value[1:]]


@pytest.fixture
def samples(project, tmp_path):
    c = config.load(str(project.config_path))
    plan = build.task_plan(c, [str(project.task())], ":mini,vendor/b", 1, None)
    flow = tmp_path / "f.yaml"
    flow.write_text("a: 1\n")
    wf = build.workflow_plan(c, str(flow), "vendor/a", 1, "m", ["x=1"])
    records = list(plan.records.values()) + list(wf.records.values())
    records.append(
        {
            "schema_version": "yyb_ref_update.v1",
            "ref": "refs/a",
            "old": None,
            "new": "a" * 64,
            "time_ms": 1,
            "reason": "r",
            "links": {"target": "a" * 64},
        }
    )
    records.append(copy.deepcopy(c.data))
    return records


GOLDEN = Path(__file__).parents[1] / "evidence" / "golden" / "records.json"


def golden_records() -> list[dict]:
    """A record of (nearly) every schema, as the golden-record test pins them."""
    return [entry["value"] for entry in json.loads(GOLDEN.read_text())]


def rewritten(record: dict) -> bool:
    """Whether the compiled check of ``record``'s schema reads another schema than its own."""
    written = schema.load_schema(record["schema_version"])
    return schema._branchless(written, written.get("$defs", {})) != written


def agreeing(version: str, variants) -> int:
    """How many of ``variants`` were checked, failing when the fast check decides one
    otherwise than jsonschema does."""
    checked = 0
    for variant in variants:
        fast = schema._fast_problem(variant, version) is None
        full = not list(schema._validator(version).iter_errors(variant))
        assert fast == full, (version, variant)
        checked += 1
    return checked


def test_fast_and_full_validators_agree(samples):
    checked = 0
    for record in samples:
        checked += agreeing(record["schema_version"], _variants(record))
    assert checked > 1000


def test_fast_and_full_validators_agree_where_choices_were_rewritten():
    """The golden record of each schema ``_branchless`` changes, and a fixed sample of its
    mutations: the rewritten check decides as jsonschema does on the schema as written."""
    picked = random.Random(37)
    checked = 0
    records = [record for record in golden_records() if rewritten(record)]
    assert len({record["schema_version"] for record in records}) >= 8
    for record in records:
        variants = list(_variants(record))
        sample = picked.sample(variants, min(len(variants), 80))
        checked += agreeing(record["schema_version"], sample)
    assert checked > 1000


def test_choices_of_null_are_compiled_without_branches():
    """The compiled check reads a schema whose "null or X" choices are gone (so it raises
    no exception to try a branch); where X constrains every type, the choice stays."""
    layer = schema.load_schema("yylo_benchmark_report_rows.v3")
    plain = schema._branchless(layer, layer["$defs"])
    attempt = plain["$defs"]["attempt"]["properties"]
    assert "oneOf" in layer["$defs"]["attempt"]["properties"]["terminal"]
    assert attempt["terminal"] == {"type": ["string", "null"], "pattern": "^[0-9a-f]{64}$"}
    assert attempt["displaced"]["type"] == ["object", "null"]
    assert "oneOf" not in json.dumps(plain["$defs"]["attempt"])
    kept = {"oneOf": [{"type": "null"}, {"enum": ["a"], "type": "string"}]}
    assert schema._branchless(kept, {}) == kept  # an enum admits no null: not rewritten
    both = {"anyOf": [{"type": "integer", "minimum": 3}, {"type": "null"}], "title": "t"}
    assert schema._branchless(both, {}) == {"title": "t", "type": ["integer", "null"], "minimum": 3}


def test_problem_names_the_path(samples):
    plan = next(r for r in samples if r["schema_version"].endswith("experiment_plan.v2"))
    broken = dict(plan, attempts_per_cell=0)
    path, reason = schema.problem(broken, plan["schema_version"])
    assert path == "$.attempts_per_cell"
    assert "less than the minimum" in reason
