"""Each shipped agent kind through a real run: the plan binds its adapter, the sandbox starts
it on its stand-in CLI (tests/agents/standins/, which prints that CLI's documented output and
makes the fix), and the envelope the adapter writes decides the terminal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from yyb import agents

STANDINS = Path(__file__).resolve().parents[1] / "agents" / "standins"
CLI = {
    "claude_code": "claude",
    "codex": "codex",
    "aider": "aider",
    "mini_swe_agent": "mini",
    "openhands": "openhands",
}
# What each stand-in answers for (tests/agents/conftest.py): a dated snapshot of these.
MODEL = {"codex": "openai/gpt-5-codex"}


def standin(bench, kind: str) -> str:
    """The stand-in CLI of ``kind`` as a program among the bench's tools (shown read-only)."""
    folder = bench.tools / "standins"
    folder.mkdir(exist_ok=True)
    for source in STANDINS.glob("*.py"):
        (folder / source.name).write_bytes(source.read_bytes())
    program = folder / CLI[kind]
    module = CLI[kind]
    program.write_text(
        f"#!/usr/bin/env python3\nimport sys\nsys.path.insert(0, {str(folder)!r})\n"
        f"import {module}\nsys.exit({module}.main())\n"
    )
    program.chmod(0o755)
    return str(program)


def configure(bench, kind: str, mode: str = "ok") -> str:
    data = bench.configure()
    data["harnesses"] = {
        "candidate": {
            "kind": kind,
            "executable": standin(bench, kind),
            "env": {"STANDIN_RECORD": "/tmp/standin.json", "STANDIN_MODE": mode},
        }
    }
    model = MODEL.get(kind, "anthropic/claude-sonnet-4-5")
    data["models"] = {":m": {"id": model, "accept": ["dated"]}}
    bench.config_path.write_text(json.dumps(data, indent=2))
    return model


@pytest.mark.parametrize("kind", sorted(CLI))
def test_an_agent_kind_resolves_the_case_through_its_adapter(bench, kind):
    model = configure(bench, kind)
    plan, [result] = bench.run([":m"])
    assert result.terminal_class == "resolved", (result.reason, bench.linked(result, "stderr"))
    experiment = plan.experiment
    # The adapter ran is the one the plan bound: its files are a listing in the plan.
    program = bench.record(experiment["links"]["harness_program"])
    assert [row[0] for row in program["entries"]] == sorted(
        name for name, _ in agents.program(kind)
    )
    assert tuple(experiment.get("scratch_paths", ())) == agents.KINDS[kind].scratch
    terminal = bench.terminal(result)
    assert terminal["identity"]["resolved"] == model
    assert terminal["identity"]["observed"].startswith(model)
    assert "calc.sh" in bench.linked(result, "patch").decode()
    assert bench.doctor_errors() == []


def test_claude_code_reports_its_dated_model_tokens_and_cost(bench):
    configure(bench, "claude_code")
    _, [result] = bench.run([":m"])
    terminal = bench.terminal(result)
    assert terminal["identity"]["observed"] == "anthropic/claude-sonnet-4-5-20250929"
    assert terminal["candidate_cost"] == {
        "completeness": "complete",
        "currency": "USD",
        "micros": 123457,
    }
    envelope = bench.record(terminal["links"]["envelope"])
    assert envelope["session_id"] == "6f1d3c2a-8a55-4d43-9a5e-2f7c1b0e9d41"
    assert envelope["usage"]["output_tokens"] > 0


def test_a_cli_that_reports_no_cost_leaves_it_unavailable(bench):
    configure(bench, "codex")
    _, [result] = bench.run([":m"])
    assert result.terminal_class == "resolved", result.reason
    cost = bench.terminal(result)["candidate_cost"]
    assert (cost["completeness"], cost["micros"]) == ("unavailable", None)


def test_an_agent_whose_cli_is_missing_is_refused_before_dispatch(bench):
    from yyb.errors import UsageError

    configure(bench, "aider")
    data = json.loads(bench.config_path.read_text())
    data["harnesses"]["candidate"]["executable"] = "/nonexistent/aider"
    bench.config_path.write_text(json.dumps(data))
    plan = bench.plan([":m"])
    with pytest.raises(UsageError, match="needs /nonexistent/aider"):
        bench.execute(plan)
    assert bench.run_refs() == []
