"""Harness adapters build the documented invocations; the envelope normalizes identities."""

from __future__ import annotations

import json
import os

import pytest

from yyb.errors import UsageError
from yyb.harness import adapters, envelope


def test_command_placeholders(tmp_path):
    control = tmp_path / "control"
    control.mkdir()
    harness = {
        "kind": "command",
        "argv": ["/bin/echo", "--model={model}", "{workspace}", "{envelope}", "{prompt_file}"],
    }
    argv, env_path = adapters.invocation(harness, "v/m", "/ws", str(control), b"do it")
    assert argv == [
        "/bin/echo",
        "--model=v/m",
        "/ws",
        str(control / "envelope.json"),
        str(control / "prompt.md"),
    ]
    assert (control / "prompt.md").read_bytes() == b"do it"
    assert env_path == str(control / "envelope.json")


def test_yylo_pi_needs_yy(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match="yy \\(the YYLO CLI\\)"):
        adapters.executable({"kind": "yylo_pi"})
    fake = tmp_path / "yy"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    control = tmp_path / "c"
    control.mkdir()
    argv, env_path = adapters.invocation({"kind": "yylo_pi"}, "v/m", "/ws", str(control), b"p")
    assert argv == [
        str(fake),
        "pi",
        "--execution-envelope",
        env_path,
        "--model",
        "v/m",
        "--prompt-file",
        str(control / "prompt.md"),
    ]


def test_workflow_runner_gets_workflow_and_variables(tmp_path):
    control = tmp_path / "c"
    control.mkdir()
    harness = {
        "kind": "workflow_runner",
        "argv": ["/bin/true", "{workflow_file}", "{variables_file}", "{model_variable}"],
    }
    variables = {
        "run_date": {"type": "string", "value": "2026-08-31"},
        "n": {"type": "json", "value": "5"},
        "obj": {"type": "json", "value": '{"a":[1,null]}'},
    }
    argv, _ = adapters.invocation(
        harness, "v/m", "/ws", str(control), None, b"steps: []\n", variables, "candidate_model"
    )
    assert argv[1:] == [
        str(control / "workflow.yaml"),
        str(control / "variables.json"),
        "candidate_model",
    ]
    assert (control / "workflow.yaml").read_bytes() == b"steps: []\n"
    assert json.loads((control / "variables.json").read_text()) == {
        "run_date": "2026-08-31",
        "n": 5,
        "obj": {"a": [1, None]},
        "candidate_model": "v/m",
    }


def test_missing_command_executable():
    with pytest.raises(UsageError, match="not installed"):
        adapters.executable({"kind": "command", "argv": ["no-such-program-here"]})


@pytest.mark.parametrize(
    "provider, model, expected",
    [
        ("Vendor", "Model-1", "vendor/model-1"),
        ("vendor", "vendor/model-1", "vendor/model-1"),
        (" vendor ", "MODEL", "vendor/model"),
        ("a", "b/c", "a/b/c"),
    ],
)
def test_normalize(provider, model, expected):
    assert envelope.normalize(provider, model) == expected


def _write(path, value):
    path.write_text(json.dumps(value))


def test_envelope_read(tmp_path):
    path = tmp_path / "e.json"
    good = {
        "schema_version": "juno_execution_envelope.v1",
        "provider": "v",
        "model": "m",
        "status": "succeeded",
        "started_ms": 1,
        "ended_ms": 2,
        "elapsed_ms": 1,
        "cost": {"completeness": "partial", "currency": "USD", "micros": 12},
    }
    _write(path, good)
    value, problem = envelope.read(str(path), 1000, 1500)
    assert problem is None
    assert (value["started_ms"], value["ended_ms"], value["elapsed_ms"]) == (1000, 1500, 500)
    for broken, needle in [
        (
            {**good, "cost": {"completeness": "unavailable", "currency": "USD", "micros": 0}},
            "invalid",
        ),
        (
            {**good, "cost": {"completeness": "genuine_zero", "currency": "USD", "micros": 5}},
            "invalid",
        ),
        ({**good, "schema_version": "other.v1"}, "not juno_execution_envelope.v1"),
        ({**good, "status": "maybe"}, "invalid"),
    ]:
        _write(path, broken)
        assert needle in envelope.read(str(path), 0, 0)[1]
    path.write_text("{not json")
    assert "malformed" in envelope.read(str(path), 0, 0)[1]
    os.unlink(path)
    assert "no execution envelope" in envelope.read(str(path), 0, 0)[1]
