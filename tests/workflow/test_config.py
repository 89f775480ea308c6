"""The governed configuration checked by its schema, each problem worded at its JSON path; a
plan argument the library refuses, worded by the command line as its option."""

from __future__ import annotations

import json

import pytest

from yyb.errors import UsageError
from yyb.workflow import config

GOOD = {
    "schema_version": "juno_benchmark_config.v1",
    "yylo_version": "1",
    "boundary": {"executable": "b", "sha256": "a" * 64, "identity": "x@1", "journal": "j"},
    "lock_store": "locks",
}
JUDGE = {"model": "m", "prompt": "p", "rubric": "r", "harness": {"kind": "command", "argv": ["j"]}}


def _with(**changes) -> dict:
    value = json.loads(json.dumps(GOOD))
    for dotted, new in changes.items():
        *path, last = dotted.split("__")
        node = value
        for step in path:
            node = node[step]
        if new is None:
            del node[last]
        else:
            node[last] = new
    return value


def test_a_complete_configuration_lacks_nothing():
    assert config.lacks(GOOD) == []
    assert config.lacks(_with(judges={"plain-1": JUDGE}, tool_paths=["/opt"])) == []


@pytest.mark.parametrize(
    "value, expected",
    [
        (_with(yylo_version=""), "$.yylo_version: must be a non-empty string"),
        (_with(lock_store=None), "$.lock_store: must name the folder of the shared resource locks"),
        (_with(extra=1), "$.extra: is not a known field"),
        (_with(project=3), "$.project: must be a path"),
        (_with(tool_paths=[1]), "$.tool_paths: must list paths"),
        (_with(boundary=None), "$.boundary: must pin the boundary program (docs/boundary.md)"),
        (_with(boundary__journal=""), "$.boundary.journal: must be a path"),
        (_with(boundary__sha256="A" * 64), "$.boundary.sha256: must be the SHA-256"),
        (_with(boundary__identity=" x"), "$.boundary.identity: must be the reviewed identity"),
        (_with(boundary__interpreter="python3"), "$.boundary.interpreter: must be an absolute"),
        (_with(boundary__credentials=["lower"]), "$.boundary.credentials: must list environment"),
        (_with(boundary__other=1), "$.boundary.other: is not a known field"),
        (_with(judges=[]), "$.judges: must map a profile to a judge"),
        (_with(judges={"no name": JUDGE}), '$.judges["no name"]: a profile is a plain name'),
        (_with(judges={"j": 1}), "$.judges.j: must be an object"),
        (_with(judges={"j": dict(JUDGE, model="")}), "$.judges.j.model: must be a non-empty"),
        (
            _with(judges={"j": dict(JUDGE, harness={"kind": "command", "argv": []})}),
            "$.judges.j.harness: must be {kind: command",
        ),
        (
            _with(judges={"j": dict(JUDGE, parsing="x")}),
            "$.judges.j.parsing: must be one of strict_json, verdict_line",
        ),
        (
            _with(judges={"j": dict(JUDGE, evidence=["all"])}),
            "$.judges.j.evidence: may only name outputs",
        ),
        (
            _with(judges={"j": dict(JUDGE, repetitions=0)}),
            "$.judges.j.repetitions: must be a positive integer",
        ),
        (
            _with(judges={"j": dict(JUDGE, byte_limit=True)}),
            "$.judges.j.byte_limit: must be a positive integer",
        ),
    ],
)
def test_each_problem_is_worded_at_its_json_path(value, expected):
    assert config.lacks(value)[0].startswith(expected)


def test_load_names_the_path_at_fault_as_a_field(tmp_path):
    path = tmp_path / "governed.json"
    path.write_text(json.dumps(_with(judges={"j": dict(JUDGE, timeout_ms=1.0)})))
    with pytest.raises(UsageError) as caught:
        config.load(str(path))
    assert caught.value.field == "$.judges.j.timeout_ms"  # 1.0 is no integer here
    assert caught.value.reason == "must be a positive integer"
    assert str(caught.value) == (
        f"governed configuration {path}: $.judges.j.timeout_ms: must be a positive integer"
    )


@pytest.mark.parametrize(
    "options, words",
    [
        (("--steps", "first,first", "--models", "zz/good"), "--steps: must name each step once"),
        (("--steps", "first", "--models", "zz/a,zz/a"), "--models: must name each model once"),
        (("--steps", "first", "--models", "zz/a", "--attempts", "0"), "--attempts: must be at"),
    ],
)
def test_a_refused_plan_argument_is_worded_as_its_option(governed, tmp_path, options, words):
    done = governed.make_plan(tmp_path / "plan.json", *options)
    assert done.exit_code == 2 and f"yyb: error: {words}" in done.stderr, done.stderr
    assert not (tmp_path / "plan.json").exists()
