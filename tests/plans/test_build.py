"""Plans: one order and oid; every bound input changes the oid; bad input writes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from yyb import config
from yyb.errors import UsageError
from yyb.plans import build
from yyb.store.repo import Store


def cfg(project):
    return config.load(str(project.config_path))


def plan_oid(project, **kw):
    if "task_paths" not in kw:
        kw["task_paths"] = [str(project.task())]
    args = {"models_text": ":mini,vendor/big", "attempts": 2, "max_usd": None, **kw}
    return build.task_plan(cfg(project), **args).oid


def test_matrix_order_and_budget(project):
    a = project.task("a.md", case_id="b-case")
    b = project.task("b.md", case_id="a-case")
    plan = build.task_plan(cfg(project), [str(a), str(b)], "vendor/z,:mini", 2, "1")
    rows = [plan.records[o] for o in plan.attempt_oids]
    assert [(r["case_id"], r["model"]["resolved"], r["attempt"]) for r in rows] == [
        ("a-case", "vendor/z", 1),
        ("a-case", "vendor/z", 2),
        ("a-case", "vendor/mini-1", 1),
        ("a-case", "vendor/mini-1", 2),
        ("b-case", "vendor/z", 1),
        ("b-case", "vendor/z", 2),
        ("b-case", "vendor/mini-1", 1),
        ("b-case", "vendor/mini-1", 2),
    ]
    assert [r["ordinal"] for r in rows] == list(range(8))
    ceilings = [r["budget"]["ceiling_micros"] for r in rows]
    assert sum(ceilings) == 1_000_000 and ceilings == [125_000] * 8
    exp = plan.experiment
    assert exp["budget"] == {
        "currency": "USD",
        "total_micros": 1_000_000,
        "per_attempt_micros": 125_000,
        "remainder_micros": 0,
    }
    assert exp["models"][1] == {"requested": ":mini", "resolved": "vendor/mini-1"}
    assert exp["evaluators"]["selected"] == ["checks"]
    assert set(exp["evaluators"]["catalog"]) == {"checks", "judge"}
    assert exp["attempt_count"] == 8 and exp["comparison"] == "model_only"


def test_default_budget_is_twenty_dollars(project):
    plan = build.task_plan(cfg(project), [str(project.task())], "vendor/a", 3, None)
    assert plan.experiment["budget"]["total_micros"] == 20_000_000
    ceilings = [plan.records[o]["budget"]["ceiling_micros"] for o in plan.attempt_oids]
    assert ceilings == [6_666_667, 6_666_667, 6_666_666]


def test_same_inputs_same_oid_in_two_processes(project):
    first = plan_oid(project)
    assert plan_oid(project) == first
    code = (
        "import sys; from yyb import config; from yyb.plans import build; "
        "c = config.load(sys.argv[1]); "
        "print(build.task_plan(c, [sys.argv[2]], ':mini,vendor/big', 2, None).oid)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(project.config_path), str(project.task())],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == first


def _edit_config(project, change):
    data = project.config()
    change(data)
    project.set_config(data)


@pytest.mark.parametrize(
    "change",
    [
        lambda p: {"attempts": 3},
        lambda p: {"max_usd": "19"},
        lambda p: {"models_text": ":mini,vendor/other"},
        lambda p: {"models_text": "vendor/big,:mini"},
        lambda p: _edit_config(p, lambda d: d["models"].update({":mini": "vendor/mini-2"})),
        lambda p: _edit_config(p, lambda d: d["tool_policy"].update(network="allowed")),
        lambda p: _edit_config(p, lambda d: d.update(attempt_timeout_ms=1000)),
        lambda p: _edit_config(p, lambda d: d.update(yylo_version="9.9")),
        lambda p: _edit_config(p, lambda d: d["harnesses"]["candidate"].update(prompt="x")),
        lambda p: _edit_config(p, lambda d: d.update(default_evaluators=["judge"])),
        lambda p: _edit_config(p, lambda d: d["evaluators"]["judge"].update(version="2")),
        lambda p: _edit_config(p, lambda d: d["workspace"].update(excluded_paths=[])),
        lambda p: {"task_paths": [str(p.task("changed.md", case_version="2"))]},
        lambda p: {"task_paths": [str(p.task("changed.md", category="other"))]},
        lambda p: {"task_paths": [str(p.task("changed.md", base_commit=p.later))]},
        lambda p: {"task_paths": [str(p.task("changed.md", wiki_paths=["docs"]))]},
    ],
)
def test_every_bound_input_changes_the_oid(project, change):
    before = plan_oid(project)
    overrides = change(project) or {}
    assert plan_oid(project, **overrides) != before


def test_prompt_and_wiki_content_change_the_oid(project):
    task = project.task(wiki_paths=["docs"])
    before = plan_oid(project, task_paths=[str(task)])
    task.write_text(task.read_text() + "More detail.\n")
    assert plan_oid(project, task_paths=[str(task)]) != before


@pytest.mark.parametrize(
    "kw, needle",
    [
        ({"attempts": 0}, "at least 1"),
        ({"models_text": ":nope"}, "unknown model selector"),
        ({"models_text": "vendor/a,vendor/a"}, "each model may appear once"),
        ({"models_text": ":mini,vendor/mini-1"}, "each model may appear once"),
        ({"models_text": "vendor/a,,vendor/b"}, "without empty items"),
        ({"max_usd": "0"}, "positive"),
        ({"max_usd": "-3"}, "positive"),
        ({"max_usd": "0.000001", "attempts": 5}, "cannot cover"),
    ],
)
def test_bad_input(project, kw, needle):
    with pytest.raises(UsageError, match=needle):
        plan_oid(project, **kw)


def test_duplicate_cases_refused(project):
    a = project.task("a.md")
    b = project.task("b.md")
    with pytest.raises(UsageError, match="each case may appear once"):
        build.task_plan(cfg(project), [str(a), str(b)], "vendor/a", 1, None)


def test_write_stores_everything_under_the_plan_ref(project):
    from yyb.store.fsck.verify_chain import verify_chain

    plan = build.task_plan(cfg(project), [str(project.task())], "vendor/a", 2, None)
    store, _ = Store.init(project.store_path)
    build.write(store, plan)
    build.write(store, plan)  # idempotent
    assert store.refs.read(f"plans/{plan.oid}") == plan.oid
    assert list(verify_chain(store, f"plans/{plan.oid}")) == []
    assert len(list(store.refs.log(f"plans/{plan.oid}"))) == 1


def test_workflow_plan(project, tmp_path):
    flow = tmp_path / "flow.yaml"
    flow.write_text("steps:\n  - run: yy pi\n")
    c = cfg(project)
    plan = build.workflow_plan(
        c,
        str(flow),
        "vendor/a,vendor/b",
        2,
        "candidate_model",
        ["run_date=2026-08-31", "n=5", 'obj={"b": 1, "a": [true, null]}', 's="quoted"'],
    )
    exp = plan.experiment
    assert exp["comparison"] == "model_only" and exp["budget"] is None
    assert exp["workflow"]["variables"] == {
        "run_date": {"type": "string", "value": "2026-08-31"},
        "n": {"type": "json", "value": "5"},
        "obj": {"type": "json", "value": '{"a":[true,null],"b":1}'},
        "s": {"type": "string", "value": '"quoted"'},
    }
    from yyb.store.objects.format import hash_object

    assert exp["links"]["workflow"] == hash_object("blob", flow.read_bytes())
    assert exp["attempt_count"] == 4
    other = build.workflow_plan(
        c,
        str(flow),
        "vendor/a,vendor/b",
        2,
        None,
        ["run_date=2026-08-31", "n=5", 'obj={"b": 1, "a": [true, null]}', 's="quoted"'],
    )
    assert other.experiment["comparison"] == "agent_system" and other.oid != plan.oid
    flow.write_text("steps:\n  - run: yy pi --x\n")
    assert (
        build.workflow_plan(
            c, str(flow), "vendor/a,vendor/b", 2, "candidate_model", ["run_date=2026-08-31"]
        ).oid
        != plan.oid
    )


@pytest.mark.parametrize("text, needle", [("a: [\n", "not valid YAML"), ("- 1\n", "mapping")])
def test_workflow_must_be_valid_yaml(project, tmp_path, text, needle):
    flow = tmp_path / "flow.yaml"
    flow.write_text(text)
    with pytest.raises(UsageError, match=needle):
        build.workflow_plan(cfg(project), str(flow), "vendor/a", 1, None, [])


def test_workflow_vars_refused(project, tmp_path):
    flow = tmp_path / "flow.yaml"
    flow.write_text("a: 1\n")
    for items, needle in ((["novalue"], "NAME=VALUE"), (["a=1", "a=2"], "twice")):
        with pytest.raises(UsageError, match=needle):
            build.workflow_plan(cfg(project), str(flow), "vendor/a", 1, None, items)
    with pytest.raises(UsageError, match="not also given"):
        build.workflow_plan(cfg(project), str(flow), "vendor/a", 1, "a", ["a=1"])


def test_large_plan_builds(project):
    """200 cases x 3 models x 5 attempts: correct shape (speed is in tools/bench_plan.py)."""
    paths = [str(project.task(f"t{i}.md", case_id=f"case-{i:03d}")) for i in range(200)]
    plan = build.task_plan(cfg(project), paths, "vendor/a,vendor/b,vendor/c", 5, None)
    assert plan.experiment["attempt_count"] == 3000 == len(set(plan.attempt_oids))
    assert json.dumps(plan.experiment)  # JSON-serializable throughout
    assert os.path.exists(paths[0])
