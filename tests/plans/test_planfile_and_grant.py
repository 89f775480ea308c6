"""The plan file refuses edits; grants match a plan exactly or refuse, naming the field."""

from __future__ import annotations

import json
import os

import pytest

from yyb import config
from yyb.errors import UsageError
from yyb.plans import build, grant, planfile

NOW = 1_800_000_000_000


@pytest.fixture
def built(project):
    c = config.load(str(project.config_path))
    return build.task_plan(c, [str(project.task())], ":mini,vendor/big", 2, "2")


def test_round_trip(built, tmp_path):
    path = str(tmp_path / "plan.json")
    planfile.write_new(path, planfile.render(built.oid, built.records))
    oid, records = planfile.load(path)
    assert oid == built.oid and records == built.records
    assert json.loads(open(path).read())["dispatch_count"] == 0


def test_never_overwrites(built, tmp_path):
    path = tmp_path / "plan.json"
    path.write_text("mine")
    with pytest.raises(UsageError, match="never overwritten"):
        planfile.write_new(str(path), planfile.render(built.oid, built.records))
    assert path.read_text() == "mine"
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp")]


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda d, oid: d["records"][oid].update(attempts_per_cell=3), "was edited"),
        (lambda d, oid: d["records"][oid]["budget"].update(total_micros=1), "was edited"),
        (lambda d, oid: d.update(plan="0" * 64), "does not hold its plan"),
        (
            lambda d, oid: d["records"].pop(d["records"][oid]["links"]["attempts"][0]),
            "does not hold",
        ),
        (lambda d, oid: d.update(format="other"), "format"),
        (lambda d, oid: d["records"][oid].update(schema_version="x.v1"), "invalid"),
    ],
)
def test_edited_files_are_refused(built, tmp_path, edit, needle):
    path = tmp_path / "plan.json"
    document = json.loads(planfile.render(built.oid, built.records))
    edit(document, built.oid)
    path.write_text(json.dumps(document))
    with pytest.raises(planfile.PlanFileError, match=needle):
        planfile.load(str(path))


def test_byte_flip_is_refused(built, tmp_path):
    path = tmp_path / "plan.json"
    data = bytearray(planfile.render(built.oid, built.records))
    at = data.index(b'"attempts_per_cell": 2') + len(b'"attempts_per_cell": ')
    data[at] ^= 0x02  # '2' -> '0'
    path.write_bytes(bytes(data))
    with pytest.raises(planfile.PlanFileError):
        planfile.load(str(path))


def test_grant_matches(built):
    g = grant.grant_for(built.oid, built.experiment, NOW + 1000, NOW)
    grant.check(g, built.oid, built.experiment, NOW)
    assert g["models"] == ["vendor/big", "vendor/mini-1"]
    assert g["total_ceiling_micros"] == 2_000_000 and g["attempt_ceiling_micros"] == 500_000


@pytest.mark.parametrize(
    "field, value",
    [
        ("plan", "1" * 64),
        ("models", ["vendor/big"]),
        ("models", ["vendor/big", "vendor/x"]),
        ("currency", "EUR"),
        ("total_ceiling_micros", 2_000_001),
        ("attempt_ceiling_micros", 500_001),
        ("schema_version", "other.v1"),
    ],
)
def test_grant_mismatch_names_the_field(built, field, value):
    g = grant.grant_for(built.oid, built.experiment, NOW + 1000, NOW)
    g[field] = value
    with pytest.raises(grant.GrantError) as caught:
        grant.check(g, built.oid, built.experiment, NOW)
    assert caught.value.field == field


def test_grant_for_another_plan(project, built):
    c = config.load(str(project.config_path))
    other = build.task_plan(c, [str(project.task())], ":mini,vendor/big", 2, "3")
    g = grant.grant_for(built.oid, built.experiment, NOW + 1000, NOW)
    with pytest.raises(grant.GrantError) as caught:
        grant.check(g, other.oid, other.experiment, NOW)
    assert caught.value.field == "plan"


def test_grant_expiry(built):
    g = grant.grant_for(built.oid, built.experiment, NOW + 1000, NOW)
    grant.check(g, built.oid, built.experiment, NOW + 999)
    with pytest.raises(grant.GrantError) as caught:
        grant.check(g, built.oid, built.experiment, NOW + 1000)
    assert caught.value.field == "expires_ms"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("+24h", NOW + 86_400_000),
        ("7d", NOW + 7 * 86_400_000),
        ("30m", NOW + 1_800_000),
        ("2030-01-01T00:00:00Z", 1_893_456_000_000),
        ("2030-01-01T01:00:00+01:00", 1_893_456_000_000),
    ],
)
def test_parse_expiry(text, expected):
    assert grant.parse_expiry(text, NOW) == expected


@pytest.mark.parametrize("text", ["soon", "2030-01-01T00:00:00", "2020-01-01T00:00:00Z", "0h"])
def test_parse_expiry_refuses(text):
    with pytest.raises(UsageError):
        grant.parse_expiry(text, NOW)


def test_workflow_plans_take_no_grant(project, tmp_path):
    flow = tmp_path / "f.yaml"
    flow.write_text("a: 1\n")
    c = config.load(str(project.config_path))
    plan = build.workflow_plan(c, str(flow), "vendor/a", 1, None, [])
    with pytest.raises(UsageError, match="only task plans"):
        grant.grant_for(plan.oid, plan.experiment, NOW + 1, NOW)
    assert os.path.exists(flow)


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda d, oid: d["records"][oid].update(attempts_per_cell=3), "was edited"),
        (lambda d, oid: d.update(plan="0" * 64), "does not hold its plan"),
        (lambda d, oid: d.update(format="other"), "not a yyb-plan-file.v1"),
        (lambda d, oid: d["records"][oid].update(timeout_ms=1.5), "float"),
    ],
)
def test_naming_a_plan_by_its_file_proves_the_plan_record(built, tmp_path, edit, needle):
    path = tmp_path / "plan.json"
    document = json.loads(planfile.render(built.oid, built.records))
    assert planfile.plan_oid(_written(path, document), None) == built.oid
    edit(document, built.oid)
    with pytest.raises(planfile.PlanFileError, match=needle):
        planfile.plan_oid(_written(path, document), None)


def _written(path, document) -> str:
    path.write_text(json.dumps(document))
    return str(path)


def test_naming_a_plan_by_a_file_that_is_not_json_is_refused(tmp_path):
    path = tmp_path / "plan.json"
    path.write_bytes(b"\xff not json")
    with pytest.raises(planfile.PlanFileError, match="not a plan file"):
        planfile.plan_oid(str(path), None)
