"""What a candidate is given beside its workspace: its files, its HOME, its environment.

Everything here comes from the plan (the harness's configuration as the plan copied it, the
listings the plan bound for its home folder and adapter program), never from the
configuration file or the installed yyb on the day of the run (docs/agents.md).

- the prompt file holds the harness's ``prompt`` (instructions), a blank line, then the
  case's prompt;
- ``settings`` are written to ``settings.json`` in the control folder, named by
  ``YYB_SETTINGS_FILE`` and ``{settings_file}``;
- ``env`` is added to the candidate's environment (names recorded in the receipt, values in
  the plan);
- ``home`` (a listing) is written into the private HOME;
- the envelope helper is ``control/bin/yyb-envelope``, that folder last on PATH;
- an agent kind's adapter program is written into ``control/agent/`` with its
  ``invocation.json`` (docs/adapters.md), and started as
  ``PYTHON -E -s control/agent/KIND.py control/agent/invocation.json``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from importlib import resources

from yyb import agents
from yyb.errors import UsageError
from yyb.evidence import plan as planned
from yyb.harness import adapters, manifest
from yyb.harness.environment import SYSTEM_PATH

SETTINGS_ENV = "YYB_SETTINGS_FILE"
HELPER = "yyb-envelope"
INVOCATION = "yyb_agent_invocation.v1"


def prompt_of(harness: dict, prompt: bytes | None) -> bytes | None:
    """The prompt file's bytes: the harness's instructions before the case's prompt."""
    if prompt is None or not harness.get("prompt"):
        return prompt
    return harness["prompt"].rstrip("\n").encode() + b"\n\n" + prompt


def _reach(places, path: str) -> str:
    """Where the controller writes the file the candidate sees at ``path`` (in control)."""
    if places.written is None:
        return path
    return os.path.join(places.written, os.path.relpath(path, places.control))


def settings_file(harness: dict, places) -> dict[str, str]:
    """Write the harness's settings into the control folder; the placeholders they fill."""
    if "settings" not in harness:
        return {}
    path = os.path.join(places.control, "settings.json")
    with open(_reach(places, path), "w") as handle:
        json.dump(harness["settings"], handle, sort_keys=True)
    return {"settings_file": path}


def write_helper(places) -> str:
    """Write the envelope helper (``yyb.agents.envelope``, standard library only) into the
    control folder as ``bin/yyb-envelope``, for a harness in any language to report through
    (docs/adapters.md); returns the folder to put on the candidate's PATH."""
    data = (resources.files("yyb.agents") / "envelope.py").read_bytes()
    if not data.startswith(b"#!"):
        data = b"#!/usr/bin/env python3\n" + data
    folder = os.path.join(places.control, "bin")
    os.makedirs(_reach(places, folder), exist_ok=True)
    path = _reach(places, os.path.join(folder, HELPER))
    with open(path, "wb") as handle:
        handle.write(data)
    os.chmod(path, 0o755)
    return folder


def sealed(box, places):
    """``box`` with the programs yyb wrote into the control folder (the envelope helper, an
    agent kind's adapter) read-only inside it: the harness runs them, and a tool it starts
    must not be able to replace them before it does."""
    folders = [os.path.join(places.control, name) for name in ("bin", "agent")]
    kept = tuple((path, path, False) for path in folders if os.path.isdir(_reach(places, path)))
    return dataclasses.replace(box, mounts=(*box.mounts, *kept))


def write_home(store, plan: dict, home: str) -> None:
    """Write the plan's home folder listing (if it has one) into the private ``home``."""
    oid = plan["links"].get("harness_home")
    if oid is not None:
        manifest.write_entries(store, manifest.entries_at(store, oid), home)


def agent_argv(store, plan: dict, attempt: dict, places, values: dict[str, str]) -> list[str]:
    """Write an agent kind's adapter program and its invocation into ``control/agent``;
    the argv that starts it (``values``: the placeholders' values, the prompt file's path
    among them)."""
    harness = plan["candidate_harness"]["config"]
    folder = os.path.join(places.control, "agent")
    program = manifest.entries_at(store, plan["links"]["harness_program"])
    manifest.write_entries(store, program, _reach(places, folder))
    invocation = {
        "schema_version": INVOCATION,
        "kind": harness["kind"],
        "model": attempt["model"]["resolved"],
        "prompt_file": values["prompt_file"],
        "workspace": places.workspace,
        "executable": harness.get("executable") or _default_executable(harness["kind"]),
        "args": list(harness.get("args", [])),
        "settings": dict(harness.get("settings", {})),
        "ceiling_micros": planned.ceiling(attempt),
        "timeout_ms": plan["timeout_ms"],
    }
    path = os.path.join(folder, "invocation.json")
    with open(_reach(places, path), "w") as handle:
        json.dump(invocation, handle, sort_keys=True, indent=1)
    return [python(harness), "-E", "-s", os.path.join(folder, harness["kind"] + ".py"), path]


def _default_executable(kind: str) -> str:
    return agents.KINDS[kind].executable


def python(harness: dict) -> str:
    """The interpreter an agent kind's adapter runs on: ``python`` (a path, or a name looked
    up in the system folders the sandbox shows), else ``python3`` there.

    Raises:
        UsageError: there is none.
    """
    name = harness.get("python", "python3")
    found = name if os.path.isabs(name) else shutil.which(name, path=os.pathsep.join(SYSTEM_PATH))
    if not found or not os.access(found, os.X_OK):
        raise UsageError(
            f"the {harness['kind']} harness runs its adapter on {name}, "
            "which is not installed in the system folders"
        )
    return found


def check_program(harness: dict, tools: list[str]) -> None:
    """Refuse, before anything is dispatched, a candidate harness whose program is missing:
    an agent kind's interpreter or CLI (``check_agent``), another kind's executable.

    Raises:
        UsageError: it is missing.
    """
    if harness["kind"] in agents.KINDS:
        check_agent(harness, tools)
    else:
        adapters.executable(harness)


def check_agent(harness: dict, tools: list[str]) -> None:
    """Refuse, before anything is dispatched, an agent kind whose interpreter or CLI cannot be
    found: the CLI as configured (a path), or its name in the system folders or the tool
    policy's read-only folders (the candidate's PATH).

    Raises:
        UsageError: one of them is missing.
    """
    python(harness)
    name = harness.get("executable") or _default_executable(harness["kind"])
    search = os.pathsep.join([*SYSTEM_PATH, *tools])
    found = name if os.path.isabs(name) else shutil.which(name, path=search)
    if not found or not os.access(found, os.X_OK):
        raise UsageError(
            f"the {harness['kind']} harness needs {name}, which is not installed where the "
            "candidate can run it (a system folder or a tool_policy read-only path)"
        )
