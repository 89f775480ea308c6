"""The flags each adapter passes, checked against the real CLI's ``--help`` (deep: installs
the CLI from the package registry into a virtual environment, minutes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from yyb.agents import adapter, aider, mini_swe_agent

CLIS = [
    (aider, "aider-chat", "aider"),
    (mini_swe_agent, "mini-swe-agent", "mini"),
]


@pytest.mark.deep
@pytest.mark.parametrize("module, package, command", CLIS, ids=[c[2] for c in CLIS])
def test_every_flag_the_adapter_passes_is_in_the_cli_help(tmp_path: Path, module, package, command):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin/pip"), "install", "-q", package], check=True, timeout=1200)
    done = subprocess.run(
        [str(venv / "bin" / command), "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            "PATH": f"{venv}/bin:/usr/bin:/bin",
            "HOME": str(tmp_path),
            "COLUMNS": "300",
            "MSWEA_CONFIGURED": "true",
            "TERM": "dumb",
            "NO_COLOR": "1",
        },
    )
    assert done.returncode == 0, done.stderr
    invocation = adapter.Invocation(
        module.__name__.rpartition(".")[2], "anthropic/claude-sonnet-4-5",
        str(tmp_path / "prompt.md"), str(tmp_path), command, ceiling_micros=1_000_000,
    )  # fmt: skip
    flags = [a for a in module.plan(invocation, "task", str(tmp_path)).argv if a.startswith("--")]
    assert flags
    missing = [flag for flag in flags if flag not in done.stdout]
    assert missing == []
