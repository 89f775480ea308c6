"""The shipped agent adapters, by kind: what each runs and what the controller copies in.

Each adapter (``yyb/agents/<kind>.py``) is a standard-library script run inside the sandbox
beside ``envelope.py`` (the envelope helper) and ``adapter.py`` (the run loop they share);
docs/adapters.md is the protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from yyb.agents import aider, claude_code, codex, mini_swe_agent, openhands
from yyb.errors import InvalidArgument


@dataclass(frozen=True)
class Agent:
    """One adapter kind: its default CLI, the scratch paths it leaves in the workspace (globs,
    relative to it) and its CLI's own budget flag (False: the CLI has none)."""

    kind: str
    executable: str
    scratch: tuple[str, ...]
    budget_flag: str | bool


KINDS: dict[str, Agent] = {
    module.__name__.rpartition(".")[2]: Agent(
        module.__name__.rpartition(".")[2],
        module.EXECUTABLE,
        tuple(module.SCRATCH),
        module.BUDGET_FLAG,
    )
    for module in (claude_code, codex, aider, mini_swe_agent, openhands)
}
# The envelope helper and the run loop the adapters share, copied beside each adapter.
SHARED = ("envelope.py", "adapter.py")


def program(kind: str) -> list[tuple[str, bytes]]:
    """The files to copy into the sandbox's adapter folder, as (file name, bytes): the
    envelope helper, the shared run loop and the kind's adapter, which
    ``python3 -E -s <folder>/<kind>.py invocation.json`` runs.

    Raises:
        InvalidArgument: no adapter of that kind.
    """
    if kind not in KINDS:
        raise InvalidArgument("kind", f"no adapter {kind!r}; known: {', '.join(sorted(KINDS))}")
    folder = resources.files(__package__)
    return [(name, folder.joinpath(name).read_bytes()) for name in (*SHARED, f"{kind}.py")]
