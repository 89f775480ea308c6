"""``yyb envelope``: flags and a JSON object into an envelope, on the channel or printed; with
``-- CMD`` the command runs first, without the channel, and its exit code is passed on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from yyb.store import schema

from .conftest import read_pipe

SCHEMA = "juno_execution_envelope.v1"
FLAGS = ("--provider", "anthropic", "--model", "claude-sonnet-4-5-20250929")


def test_print_builds_from_flags(yyb):
    result = yyb("envelope", *FLAGS, "--status", "succeeded", "--cost-usd", "0.0000015", "--print")
    assert result.exit_code == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["cost"] == {"completeness": "complete", "currency": "USD", "micros": 2}
    assert schema.problems(printed, SCHEMA) == []


def test_flags_override_the_json_object(yyb, tmp_path):
    fields = {
        "provider": "anthropic",
        "model": "claude-x",
        "status": "failed",
        "usage": {"input_tokens": 5, "output_tokens": 1},
        "cost": {"completeness": "partial", "currency": "USD", "micros": 40},
        "session_id": "from-file",
    }
    (tmp_path / "f.json").write_text(json.dumps(fields))
    result = yyb(
        "envelope", "--json", str(tmp_path / "f.json"), "--model", "claude-y",
        "--usage", "output_tokens=9", "--cost-micros", "77", "--print",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["model"] == "claude-y"
    assert printed["usage"] == {"input_tokens": 5, "output_tokens": 9}
    assert printed["cost"] == {"completeness": "partial", "currency": "USD", "micros": 77}
    assert (printed["status"], printed["session_id"]) == ("failed", "from-file")


def test_json_from_stdin(yyb):
    fields = {"provider": "openai", "model": "gpt-5", "status": "succeeded", "cost_usd": "1.5"}
    result = yyb("envelope", "--json", "-", "--print", input=json.dumps(fields))
    assert json.loads(result.stdout)["cost"]["micros"] == 1_500_000


def test_no_figure_is_unavailable_never_zero(yyb):
    result = yyb("envelope", *FLAGS, "--status", "failed", "--cost-usd", "0", "--print")
    assert json.loads(result.stdout)["cost"] == {
        "completeness": "unavailable",
        "currency": "USD",
        "micros": None,
    }


def test_bad_input_is_one_line_and_exit_2(yyb, tmp_path):
    (tmp_path / "bad.json").write_text('{"provider": "p", "model": "m", "colour": "red"}')
    for args in (
        (*FLAGS, "--status", "succeeded", "--usage", "tokens", "--print"),
        (*FLAGS, "--status", "succeeded", "--cost-usd", "-1", "--print"),
        (*FLAGS, "--print"),  # no status
        ("--json", str(tmp_path / "bad.json"), "--status", "failed", "--print"),
        ("--json", str(tmp_path / "missing.json"), "--print"),
        (*FLAGS, "--status", "succeeded", "--cost-usd", "1", "--cost-micros", "1", "--print"),
        (*FLAGS, "--status", "succeeded"),  # no channel
    ):
        result = yyb("envelope", *args)
        assert result.exit_code == 2, args
        assert result.stdout == ""
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("yyb: error:"), args


TOOL = """
import json, os, sys
links = []
for name in os.listdir("/proc/self/fd"):
    try:
        links.append(os.readlink("/proc/self/fd/" + name))
    except OSError:
        pass
print("tool ran")
with open(sys.argv[1], "w") as handle:
    json.dump({"usage": {"output_tokens": 12}, "session_id": "s-1"}, handle)
with open(sys.argv[1] + ".facts", "w") as handle:
    json.dump({"holds": os.environ["PIPE"] in links,
               "variable": os.environ.get("YYB_ENVELOPE_FD")}, handle)
sys.exit(int(sys.argv[2]))
"""


def run_yyb(tmp_path: Path, *args: str):
    """``python -m yyb envelope ARGS`` with a real pipe as its channel."""
    read, write = os.pipe()
    env = {
        **os.environ,
        "YYB_ENVELOPE_FD": str(write),
        "PIPE": os.readlink(f"/proc/self/fd/{write}"),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "yyb", "envelope", *args],
        env=env,
        pass_fds=(write,),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    os.close(write)
    data = read_pipe(read)
    out, err = process.communicate(timeout=60)
    return process.returncode, json.loads(data) if data else None, out, err


def tool(tmp_path: Path, exit_code: int) -> list[str]:
    (tmp_path / "tool.py").write_text(TOOL)
    return [
        sys.executable,
        str(tmp_path / "tool.py"),
        str(tmp_path / "fields.json"),
        str(exit_code),
    ]


def test_a_command_runs_without_the_channel_and_its_file_is_read_after(tmp_path):
    code, written, out, err = run_yyb(
        tmp_path, *FLAGS, "--json", str(tmp_path / "fields.json"), "--", *tool(tmp_path, 0)
    )
    assert (code, out, err) == (0, "tool ran\n", "")
    facts = json.loads((tmp_path / "fields.json.facts").read_text())
    assert facts["holds"] is False and facts["variable"] is None
    assert written["status"] == "succeeded"
    assert (written["usage"], written["session_id"]) == ({"output_tokens": 12}, "s-1")


def test_the_command_exit_code_is_passed_on_and_fails_the_status(tmp_path):
    code, written, out, err = run_yyb(tmp_path, *FLAGS, "--", *tool(tmp_path, 3))
    assert code == 3
    assert written["status"] == "failed"
    assert schema.problems(written, SCHEMA) == []


def test_an_explicit_status_wins_over_the_exit_code(tmp_path):
    code, written, _, _ = run_yyb(
        tmp_path, *FLAGS, "--status", "succeeded", "--", *tool(tmp_path, 1)
    )
    assert (code, written["status"]) == (1, "succeeded")


def test_bad_flags_refuse_before_the_command_runs(tmp_path):
    code, written, out, err = run_yyb(tmp_path, "--provider", "p", "--", *tool(tmp_path, 0))
    assert (code, written, out) == (2, None, "")
    assert err.count("\n") == 1 and "model" in err
    assert not (tmp_path / "fields.json").exists()


def test_a_bad_file_after_the_command_writes_nothing(tmp_path):
    (tmp_path / "tool.py").write_text("import sys; open(sys.argv[1], 'w').write('[1]')")
    command = [sys.executable, str(tmp_path / "tool.py"), str(tmp_path / "fields.json")]
    code, written, _, err = run_yyb(
        tmp_path, *FLAGS, "--json", str(tmp_path / "fields.json"), "--", *command
    )
    assert (code, written) == (2, None)
    assert "one JSON object" in err


def test_a_command_that_cannot_start_is_127_and_failed(tmp_path):
    code, written, _, err = run_yyb(tmp_path, *FLAGS, "--", str(tmp_path / "no-such-tool"))
    assert code == 127 and written["status"] == "failed"
    assert "cannot run" in err
