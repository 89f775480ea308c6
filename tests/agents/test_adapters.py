"""Each shipped adapter, run as the real program against a stand-in of its CLI that prints
that CLI's documented output: the envelope it writes, the flags it passes, the channel kept."""

from __future__ import annotations

import pytest

from yyb.store import schema

KINDS = ("claude_code", "codex", "aider", "mini_swe_agent", "openhands")
ENVELOPE = "juno_execution_envelope.v1"


def cost(micros, completeness):
    return {"completeness": completeness, "currency": "USD", "micros": micros}


def assert_valid(run) -> None:
    assert run.envelope is not None, run.stderr
    assert schema.problems(run.envelope, ENVELOPE) == []


@pytest.mark.parametrize("kind", KINDS)
def test_the_cli_runs_in_the_workspace_without_the_channel(adapters, kind):
    """The CLI edits the workspace, gets stdin /dev/null, neither the channel's descriptor
    nor its variable; its output reaches the adapter's own stdout (the evidence)."""
    run = adapters.run(kind)
    assert_valid(run)
    assert run.code == 0, run.stderr
    assert run.envelope["status"] == "succeeded"
    assert "# fixed by" in (run.workspace / "calc.sh").read_text()
    assert run.record["cwd"] == str(run.workspace)
    assert run.record["stdin"] == "/dev/null"
    assert run.record["holds_channel"] is False
    assert run.record["envelope_fd_variable"] is None
    assert run.stdout.strip(), "the CLI's output is copied to the adapter's stdout"
    assert run.stderr == ""


@pytest.mark.parametrize("kind", KINDS)
def test_a_missing_executable_is_a_failed_envelope_and_one_line(adapters, kind):
    run = adapters.run(kind, executable="no-such-cli-anywhere")
    assert_valid(run)
    assert run.code == 1
    assert run.envelope["status"] == "failed"
    assert run.envelope["cost"] == cost(None, "unavailable")
    assert run.envelope["provider"] == "anthropic" if kind != "codex" else "openai"
    assert run.stderr.count("\n") == 1 and "no-such-cli-anywhere" in run.stderr
    assert run.record is None


def test_claude_code(adapters):
    run = adapters.run("claude_code", ceiling_micros=2_500_000)
    assert run.record["argv"][:3] == ["-p", "--output-format", "json"]
    argv = run.record["argv"]
    assert argv[argv.index("--model") + 1] == "claude-sonnet-4-5"
    assert argv[argv.index("--max-budget-usd") + 1] == "2.5"
    assert argv[argv.index("--permission-mode") + 1] == "bypassPermissions"
    assert argv[-2:] == ["--", "Fix calc.sh so that add adds.\n"]
    assert run.envelope == {
        "schema_version": ENVELOPE,
        "provider": "anthropic",
        "model": "claude-sonnet-4-5-20250929",  # the id the API reported, not the planned one
        "status": "succeeded",
        "session_id": "6f1d3c2a-8a55-4d43-9a5e-2f7c1b0e9d41",
        "usage": {  # summed over both models of modelUsage
            "input_tokens": 1544,
            "output_tokens": 1604,
            "cache_read_input_tokens": 80131,
            "cache_creation_input_tokens": 12873,
            "web_search_requests": 0,
        },
        "cost": cost(123457, "complete"),  # $0.1234565, half up
        "started_ms": 0,
        "ended_ms": 0,
        "elapsed_ms": 0,
    }


def test_claude_code_without_a_ceiling_passes_no_budget_and_honours_model_argument(adapters):
    run = adapters.run("claude_code", settings={"model_argument": "sonnet"}, args=["--verbose"])
    argv = run.record["argv"]
    assert "--max-budget-usd" not in argv
    assert argv[argv.index("--model") + 1] == "sonnet"
    assert argv[-3:-2] == ["--verbose"]
    assert run.envelope["model"] == "claude-sonnet-4-5-20250929"  # the most output tokens


@pytest.mark.parametrize("mode", ["budget", "api_error"])
def test_claude_code_error_results_fail_and_keep_their_cost(adapters, mode):
    run = adapters.run("claude_code", mode)
    assert_valid(run)
    assert run.code == 1
    assert run.envelope["status"] == "failed"
    assert run.envelope["cost"] == cost(123457, "complete")
    assert run.stderr.count("\n") == 1
    assert ("error_max_budget_usd" if mode == "budget" else "401") in run.stderr


def test_claude_code_without_a_cost_is_unavailable_never_zero(adapters):
    run = adapters.run("claude_code", "nocost")
    assert run.envelope["status"] == "succeeded"
    assert run.envelope["cost"] == cost(None, "unavailable")


def test_claude_code_unparseable_output_fails_with_cost_unavailable(adapters):
    run = adapters.run("claude_code", "garbage")
    assert_valid(run)
    assert run.envelope["status"] == "failed"
    assert run.envelope["model"] == "claude-sonnet-4-5"  # nothing reported: the planned one
    assert run.envelope["cost"] == cost(None, "unavailable")
    assert "unreadable output" in run.stderr and run.stderr.count("\n") == 1


def test_codex(adapters):
    run = adapters.run("codex", ceiling_micros=1_000_000)
    argv = run.record["argv"]
    assert argv[:3] == ["exec", "--json", "--color"]
    assert argv[argv.index("--model") + 1] == "gpt-5-codex"
    assert "--dangerously-bypass-approvals-and-sandbox" in argv
    assert not any("budget" in a or "cost" in a for a in argv)  # codex has no budget flag
    assert run.envelope["model"] == "gpt-5-codex"  # codex reports none: the planned model
    assert run.envelope["session_id"] == "0199a213-81c0-7800-8aa1-bbab2a035a53"
    # turn.completed carries the thread's running totals: the last one, not a sum.
    assert run.envelope["usage"] == {
        "input_tokens": 50210,
        "cached_input_tokens": 49152,
        "output_tokens": 301,
    }
    assert run.envelope["cost"] == cost(None, "unavailable")
    assert run.envelope["status"] == "succeeded"


@pytest.mark.parametrize("mode", ["failed", "garbage"])
def test_codex_a_failed_turn_or_no_events_fails(adapters, mode):
    run = adapters.run("codex", mode)
    assert_valid(run)
    assert run.code == 1
    assert run.envelope["status"] == "failed"
    assert run.envelope["cost"] == cost(None, "unavailable")
    assert ("429" if mode == "failed" else "thread.started") in run.stderr


def test_aider_reads_its_analytics_log(adapters):
    run = adapters.run("aider", ceiling_micros=3_000_000)
    argv = run.record["argv"]
    assert argv[argv.index("--model") + 1] == "anthropic/claude-sonnet-4-5"  # litellm style
    assert argv[argv.index("--message-file") + 1].endswith("prompt.md")
    for flag in ("--yes-always", "--no-auto-commits", "--no-gitignore", "--no-analytics"):
        assert flag in argv
    assert not any("budget" in a or "cost" in a for a in argv)
    assert run.envelope["model"] == "claude-sonnet-4-5"
    assert run.envelope["usage"] == {
        "prompt_tokens": 2315 + 12873,
        "completion_tokens": 310 + 911,
        "messages": 2,
    }
    assert run.envelope["cost"] == cost(63879, "complete")  # the exact session total
    assert "session_id" not in run.envelope
    assert not any(p.name.startswith(".aider.chat") for p in run.workspace.iterdir())


def test_aider_without_its_log_reads_the_printed_lines(adapters):
    """``2.3k sent`` is rounded: no token counts; the session cost is printed in cents."""
    run = adapters.run("aider", "nolog")
    assert run.envelope["status"] == "succeeded"
    assert "usage" not in run.envelope
    assert run.envelope["cost"] == cost(60000, "partial")  # "$0.06 session"


@pytest.mark.parametrize(
    "mode, status, price",
    [
        ("noreply", "failed", cost(None, "unavailable")),
        ("noprice", "succeeded", cost(None, "unavailable")),
    ],
)
def test_aider_no_reply_fails_and_no_price_is_unavailable(adapters, mode, status, price):
    run = adapters.run("aider", mode)
    assert_valid(run)
    assert run.envelope["status"] == status
    assert run.envelope["cost"] == price


def test_mini_swe_agent(adapters):
    run = adapters.run("mini_swe_agent", ceiling_micros=750_000)
    argv = run.record["argv"]
    assert argv[:2] == ["--yolo", "--exit-immediately"]
    assert argv[argv.index("--model") + 1] == "anthropic/claude-sonnet-4-5"
    assert argv[argv.index("--cost-limit") + 1] == "0.75"
    assert argv[argv.index("--task") + 1] == "Fix calc.sh so that add adds.\n"
    assert run.record["env"]["MSWEA_CONFIGURED"] == "true"
    assert run.envelope["model"] == "claude-sonnet-4-5-20250929"
    assert run.envelope["usage"] == {
        "prompt_tokens": 1830 + 2410 + 2690,
        "completion_tokens": 120 + 95 + 40,
        "api_calls": 3,
    }
    assert run.envelope["cost"] == cost(41235, "complete")  # $0.0412345, half up
    assert run.envelope["status"] == "succeeded"


@pytest.mark.parametrize("mode", ["limits", "notraj", "noprice"])
def test_mini_swe_agent_unfinished_or_unpriced(adapters, mode):
    run = adapters.run("mini_swe_agent", mode)
    assert_valid(run)
    assert run.envelope["status"] == ("succeeded" if mode == "noprice" else "failed")
    if mode != "noprice":
        assert run.code == 1
        assert run.stderr.splitlines()[-1].startswith("mini_swe_agent: ")
    assert run.envelope["cost"] == (
        cost(None, "unavailable") if mode != "limits" else cost(41235, "complete")
    )


def test_openhands(adapters):
    run = adapters.run("openhands", ceiling_micros=0, settings={"max_iterations": 30})
    argv = run.record["argv"]
    assert argv[:4] == ["-m", "openhands.core.main", "-d", str(run.workspace)]
    assert argv[argv.index("-f") + 1].endswith("prompt.md")
    assert argv[argv.index("--max-iterations") + 1] == "30"
    # A ceiling of 0 is one micro-USD: OpenHands would read 0 as no limit.
    assert argv[argv.index("--max-budget-per-task") + 1] == "0.000001"
    assert run.record["env"]["LLM_MODEL"] == "anthropic/claude-sonnet-4-5"
    assert run.record["env"]["RUNTIME"] == "local"
    assert run.envelope["model"] == "claude-sonnet-4-5"
    assert run.envelope["session_id"] == "b2d1e0c4a7f34c1e9f0a5d6c7b8e9f01"
    assert run.envelope["usage"] == {
        "prompt_tokens": 11020,
        "completion_tokens": 520,
        "cache_read_tokens": 4096,
        "cache_write_tokens": 1024,
    }
    assert run.envelope["cost"] == cost(21300, "complete")
    assert run.envelope["status"] == "succeeded"


@pytest.mark.parametrize("mode", ["error", "noprice"])
def test_openhands_an_agent_error_fails_and_no_price_is_unavailable(adapters, mode):
    run = adapters.run("openhands", mode)
    assert_valid(run)
    if mode == "error":
        assert run.envelope["status"] == "failed" and "'error'" in run.stderr
    else:
        assert run.envelope["cost"] == cost(None, "unavailable")


def test_a_bad_invocation_writes_no_envelope(adapters):
    run = adapters.run("codex", schema_version="something_else")
    assert run.envelope is None
    assert run.code == 2 and run.stderr.count("\n") == 1
    assert run.record is None


def test_a_reported_model_no_envelope_can_hold_fails_with_the_planned_one(adapters):
    run = adapters.run("claude_code", "longmodel")
    assert_valid(run)
    assert (run.envelope["status"], run.envelope["model"]) == ("failed", "claude-sonnet-4-5")
    assert run.envelope["cost"] == cost(None, "unavailable")
    assert "no envelope can hold" in run.stderr and run.stderr.count("\n") == 1


def test_a_prompt_no_command_line_can_carry_is_a_failed_envelope(adapters):
    run = adapters.run("mini_swe_agent", prompt="a NUL \0 byte")
    assert_valid(run)
    assert run.envelope["status"] == "failed" and run.code == 1
    assert "cannot start" in run.stderr and run.stderr.count("\n") == 1
