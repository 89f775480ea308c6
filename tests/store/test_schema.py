"""Schema checks: the fast validator that decides and the full one that explains must agree."""

from __future__ import annotations

import copy

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


def test_fast_and_full_validators_agree(samples):
    checked = 0
    for record in samples:
        version = record["schema_version"]
        for variant in _variants(record):
            fast = schema._fast_problem(variant, version) is None
            full = not list(schema._validator(version).iter_errors(variant))
            assert fast == full, (version, variant)
            checked += 1
    assert checked > 1000


def test_problem_names_the_path(samples):
    plan = next(r for r in samples if r["schema_version"].endswith("experiment_plan.v2"))
    broken = dict(plan, attempts_per_cell=0)
    path, reason = schema.problem(broken, plan["schema_version"])
    assert path == "$.attempts_per_cell"
    assert "less than the minimum" in reason
