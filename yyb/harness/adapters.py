"""Harness adapters: how each harness kind is invoked for one attempt.

- ``command``: the configured argv, with ``{prompt_file}``, ``{workspace}``, ``{model}`` and
  ``{envelope}`` replaced.
- ``yylo_pi``: ``yy pi --execution-envelope ENVELOPE --model MODEL --prompt-file PROMPT``
  (``executable`` replaces ``yy``), run in the workspace.
- an agent kind (``claude_code``, ``codex``, ...): its adapter program, whose argv the
  porcelain makes (``program``).
- ``workflow_runner``: the configured argv with ``{workflow_file}``, ``{variables_file}``,
  ``{model}``, ``{model_variable}``, ``{workspace}`` and ``{envelope}`` replaced; the variables
  file is JSON ``{name: value}`` of the planned variables plus the controlled model variable.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass

from yyb.errors import UsageError

PLACEHOLDERS = (
    "prompt_file",
    "workspace",
    "model",
    "envelope",
    "workflow_file",
    "variables_file",
    "model_variable",
    "settings_file",  # a judge's settings (JSON), when it has some
    "judge",  # a judge's pinned program, copied into its control folder
)


def _fill(argv: list[str], values: dict[str, str]) -> list[str]:
    out = []
    for arg in argv:
        for name in PLACEHOLDERS:
            if name in values:
                arg = arg.replace("{" + name + "}", values[name])
        out.append(arg)
    return out


def executable(harness: dict) -> str:
    """The program the harness starts (resolved on the host PATH).

    Raises:
        UsageError: it is not installed; nothing is dispatched.
    """
    if harness["kind"] == "yylo_pi":
        name = harness.get("executable", "yy")
    else:
        name = harness["argv"][0]
    found = name if os.path.isabs(name) else shutil.which(name)
    if not found or not os.access(found, os.X_OK):
        what = "yy (the YYLO CLI)" if harness["kind"] == "yylo_pi" else name
        raise UsageError(
            f"the {harness['kind']} harness needs {what}, which is not installed or not executable"
        )
    return found


@dataclass(frozen=True)
class Places:
    """Where one harness process finds its files.

    Attributes:
        workspace: its working tree.
        control: the folder its prompt, workflow and variables files are written to.
        envelope: the path of its envelope channel.
        written: the path by which the controller reaches ``control``, when it is not the one
            the process sees (on the attempt's disk, yyb/harness/disk.py); None: the same.
    """

    workspace: str
    control: str
    envelope: str
    written: str | None = None


@dataclass(frozen=True)
class Workflow:
    """What a ``workflow_runner`` harness is given beside the prompt: the workflow's bytes,
    the planned variables (name -> {type, value}) and the variable that names the model."""

    document: bytes | None = None
    variables: dict | None = None
    model_variable: str | None = None


def invocation(
    harness: dict,
    model: str,
    places: Places,
    prompt: bytes | None,
    workflow: Workflow | None = None,
    extra: dict[str, str] | None = None,
    program: Callable[[dict[str, str]], list[str]] | None = None,
) -> list[str]:
    """The argv of one attempt; writes the prompt and workflow files into ``places.control``.
    ``extra`` fills further placeholders (``settings_file``, a judge's ``judge``);
    ``program``, given the placeholders' values, makes the argv of a harness kind that has
    no ``argv`` of its own (an agent kind's adapter, yyb/attempts/candidate.py)."""
    workflow = workflow or Workflow()
    control, written = places.control, places.written
    values = {
        "workspace": places.workspace,
        "model": model,
        "envelope": places.envelope,
        **(extra or {}),
    }

    def mine(path: str) -> str:
        return path if written is None else os.path.join(written, os.path.relpath(path, control))

    if prompt is not None:
        values["prompt_file"] = os.path.join(control, "prompt.md")
        with open(mine(values["prompt_file"]), "wb") as handle:
            handle.write(prompt)
    kind = harness["kind"]
    if program is not None:
        return program(values)
    if kind == "yylo_pi":
        argv = [
            executable(harness),
            "pi",
            "--execution-envelope",
            places.envelope,
            "--model",
            model,
            "--prompt-file",
            values["prompt_file"],
        ]
        return argv
    if kind == "workflow_runner":
        values["workflow_file"] = os.path.join(control, "workflow.yaml")
        with open(mine(values["workflow_file"]), "wb") as handle:
            handle.write(workflow.document or b"")
        resolved = {
            name: (spec["value"] if spec["type"] == "string" else json.loads(spec["value"]))
            for name, spec in (workflow.variables or {}).items()
        }
        if workflow.model_variable:
            resolved[workflow.model_variable] = model
            values["model_variable"] = workflow.model_variable
        values["variables_file"] = os.path.join(control, "variables.json")
        with open(mine(values["variables_file"]), "w") as handle:
            json.dump(resolved, handle, sort_keys=True)
    argv = _fill(harness["argv"], values)
    argv[0] = executable({**harness, "argv": argv})  # a placeholder program: as filled in
    return argv
