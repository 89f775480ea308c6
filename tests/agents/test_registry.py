"""The registry of kinds and the program each copies into the sandbox: standard library only."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import yyb.agents
from yyb.agents import KINDS, program
from yyb.errors import InvalidArgument

FOLDER = Path(yyb.agents.__file__).parent


def test_the_five_kinds():
    assert sorted(KINDS) == ["aider", "claude_code", "codex", "mini_swe_agent", "openhands"]
    assert KINDS["claude_code"].executable == "claude"
    assert KINDS["claude_code"].budget_flag == "--max-budget-usd"
    assert KINDS["codex"].budget_flag is False
    assert ".aider.tags.cache.v*" in KINDS["aider"].scratch
    assert ".aider.chat.history.md" in KINDS["aider"].scratch


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_program_is_the_helper_the_loop_and_the_adapter(kind):
    files = program(kind)
    assert [name for name, _ in files] == ["envelope.py", "adapter.py", f"{kind}.py"]
    for name, data in files:
        assert data == (FOLDER / name).read_bytes()


def test_an_unknown_kind_is_refused():
    with pytest.raises(InvalidArgument):
        program("devin")


@pytest.mark.parametrize("name", ["envelope.py", "adapter.py", *(f"{k}.py" for k in KINDS)])
def test_what_runs_in_the_sandbox_imports_only_the_standard_library(name):
    """The sandbox has python3 and these files, nothing of yyb or its dependencies."""
    allowed = set(sys.stdlib_module_names) | {"envelope", "adapter", "__future__"}
    tree = ast.parse((FOLDER / name).read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.add(node.module.split(".")[0])
    assert found - allowed == set()
