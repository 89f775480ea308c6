"""Run a shipped adapter as the sandbox runs it: its program copied into a folder, a real
pipe as its envelope channel, a stand-in CLI (tests/agents/standins/) in place of the real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from yyb.agents import program

STANDINS = Path(__file__).parent / "standins"
# kind -> the stand-in module and the name it is installed under.
STANDIN = {
    "claude_code": ("claude", "claude"),
    "codex": ("codex", "codex"),
    "aider": ("aider", "aider"),
    "mini_swe_agent": ("mini", "mini"),
    "openhands": ("openhands", "python-openhands"),
}
PLANNED = {
    "claude_code": "anthropic/claude-sonnet-4-5",
    "codex": "openai/gpt-5-codex",
    "aider": "anthropic/claude-sonnet-4-5",
    "mini_swe_agent": "anthropic/claude-sonnet-4-5",
    "openhands": "anthropic/claude-sonnet-4-5",
}
PROMPT = "Fix calc.sh so that add adds.\n"


@dataclass
class Run:
    code: int
    envelope: dict | None
    stdout: str
    stderr: str
    record: dict | None
    workspace: Path


def read_pipe(read: int) -> bytes:
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    return b"".join(chunks)


class Adapters:
    """Installs stand-ins under ``bin/`` and runs ``python3 -E -s <kind>.py invocation.json``."""

    def __init__(self, root: Path):
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir()
        for module, name in STANDIN.values():
            path = self.bin / name
            path.write_text(
                f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(STANDINS)!r})\n"
                f"import {module}\nsys.exit({module}.main())\n"
            )
            path.chmod(0o755)

    def run(self, kind: str, mode: str = "ok", prompt: str = PROMPT, **fields) -> Run:
        folder = self.root / f"run-{len(list(self.root.iterdir()))}"
        agent, workspace = folder / "agent", folder / "workspace"
        agent.mkdir(parents=True)
        workspace.mkdir()
        (workspace / "calc.sh").write_text("#!/bin/sh\necho $(( $1 - $2 ))\n")
        for name, data in program(kind):
            (agent / name).write_bytes(data)
        (folder / "prompt.md").write_text(prompt)
        invocation = {
            "schema_version": "yyb_agent_invocation.v1",
            "kind": kind,
            "model": PLANNED[kind],
            "prompt_file": str(folder / "prompt.md"),
            "workspace": str(workspace),
            "executable": str(self.bin / STANDIN[kind][1]),
            "args": [],
            "settings": {},
            "ceiling_micros": None,
            "timeout_ms": 60000,
            **fields,
        }
        (agent / "invocation.json").write_text(json.dumps(invocation))
        read, write = os.pipe()
        record = folder / "record.json"
        env = {
            **os.environ,
            "PATH": f"{self.bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "YYB_ENVELOPE_FD": str(write),
            "STANDIN_PIPE": os.readlink(f"/proc/self/fd/{write}"),
            "STANDIN_RECORD": str(record),
            "STANDIN_MODE": mode,
        }
        process = subprocess.Popen(
            [sys.executable, "-E", "-s", str(agent / f"{kind}.py"), str(agent / "invocation.json")],
            cwd=workspace,
            env=env,
            pass_fds=(write,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        os.close(write)
        data = read_pipe(read)
        out, err = process.communicate(timeout=60)
        return Run(
            process.returncode,
            json.loads(data) if data else None,
            out.decode(),
            err.decode(),
            json.loads(record.read_text()) if record.exists() else None,
            workspace,
        )


@pytest.fixture
def adapters(tmp_path: Path) -> Adapters:
    return Adapters(tmp_path)
