"""Harness adapters build the documented invocations; the envelope normalizes identities."""

from __future__ import annotations

import json

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
    places = adapters.Places("/ws", str(control), "/dev/fd/9")
    argv = adapters.invocation(harness, "v/m", places, b"do it")
    assert argv == ["/bin/echo", "--model=v/m", "/ws", "/dev/fd/9", str(control / "prompt.md")]
    assert (control / "prompt.md").read_bytes() == b"do it"


def test_yylo_pi_needs_yy(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match="yy \\(the YYLO CLI\\)"):
        adapters.executable({"kind": "yylo_pi"})
    fake = tmp_path / "yy"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    control = tmp_path / "c"
    control.mkdir()
    places = adapters.Places("/ws", str(control), "/dev/fd/7")
    argv = adapters.invocation({"kind": "yylo_pi"}, "v/m", places, b"p")
    assert argv == [
        str(fake),
        "pi",
        "--execution-envelope",
        "/dev/fd/7",
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
    argv = adapters.invocation(
        harness,
        "v/m",
        adapters.Places("/ws", str(control), "/dev/fd/3"),
        None,
        adapters.Workflow(b"steps: []\n", variables, "candidate_model"),
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


def test_envelope_read():
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
    value, problem = envelope.read(json.dumps(good).encode(), 1000, 1500)
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
        ([good], "malformed"),
    ]:
        assert needle in envelope.read(json.dumps(broken).encode(), 0, 0)[1]
    assert "malformed" in envelope.read(b"{not json", 0, 0)[1]
    assert "no execution envelope" in envelope.read(None, 0, 0)[1]
    assert "no execution envelope" in envelope.read(b"", 0, 0)[1]
    assert "larger than 1 MiB" in envelope.read(b" " * (envelope.MAX_ENVELOPE + 1), 0, 0)[1]


def test_channel_collects_what_a_child_writes_and_drains_past_its_limit():
    """The child writes through its inherited descriptor and through /dev/fd/N; the
    controller keeps limit + 1 bytes but drains everything, so the writer never blocks."""
    import subprocess

    from yyb.harness.channel import Channel

    channel = Channel(limit=10)
    script = "printf head >/dev/fd/$1; head -c 300000 /dev/zero >>/dev/fd/$1"
    done = subprocess.run(
        ["/bin/sh", "-c", script, "sh", str(channel.fd)], pass_fds=(channel.fd,), timeout=30
    )
    assert done.returncode == 0
    assert channel.collect() == b"head" + b"\0" * 7
    assert channel.total == 300004
    silent = Channel(limit=10)
    subprocess.run(["/bin/true"], pass_fds=(silent.fd,), check=True)
    assert silent.collect() is None


def test_a_child_not_given_the_channel_cannot_reach_it():
    import subprocess

    from yyb.harness.channel import Channel

    channel = Channel(limit=100)
    done = subprocess.run(
        ["/bin/sh", "-c", f"echo forged >/dev/fd/{channel.fd}"], capture_output=True, timeout=30
    )
    assert done.returncode != 0
    assert channel.collect() is None
