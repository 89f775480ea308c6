"""What every stand-in CLI does besides printing its CLI's output: record what it was given
(argv, a few variables, whether it holds the envelope channel) and make a real edit."""

from __future__ import annotations

import json
import os
import sys

WATCHED = ("IS_SANDBOX", "MSWEA_CONFIGURED", "LLM_MODEL", "RUNTIME", "SAVE_TRAJECTORY_PATH")


def _links() -> list[str]:
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            found.append(os.readlink(f"/proc/self/fd/{name}"))
        except OSError:
            continue
    return found


def record(kind: str) -> str:
    """Write what this process got to $STANDIN_RECORD; return the stand-in's mode."""
    pipe = os.environ.get("STANDIN_PIPE", "")
    facts = {
        "kind": kind,
        "argv": sys.argv[1:],
        "cwd": os.getcwd(),
        "env": {name: os.environ.get(name) for name in WATCHED},
        "envelope_fd_variable": os.environ.get("YYB_ENVELOPE_FD"),
        "holds_channel": bool(pipe) and pipe in _links(),
        "stdin": os.readlink("/proc/self/fd/0"),
    }
    with open(os.environ["STANDIN_RECORD"], "w") as handle:
        json.dump(facts, handle)
    return os.environ.get("STANDIN_MODE", "ok")


def edit(kind: str) -> None:
    """A real change in the workspace (the working folder)."""
    with open("calc.sh") as handle:
        text = handle.read()
    with open("calc.sh", "w") as handle:
        handle.write(text.replace("$1 - $2", "$1 + $2") + f"# fixed by {kind}\n")


def after(argv: list[str], flag: str) -> str | None:
    """The value following ``flag`` in ``argv``."""
    return argv[argv.index(flag) + 1] if flag in argv else None


def emit(value: object) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()
