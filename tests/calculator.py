"""The "calculator with a bug" every run bench starts from (tests/attempts, tests/grading).

The same calculator and test as the built-in example (yyb/example.py): ``calc.sh`` subtracts
where it should add, ``test_calc.sh`` fails until it adds. One case asks for the fix; a
stand-in agent that fixes it runs ``FIX``.
"""

from __future__ import annotations

from pathlib import Path

from yyb.example import CALC_BUGGY, CALC_FIXED
from yyb.example import TEST as TEST_CALC

__all__ = ["CALC_BUGGY", "CALC_FIXED", "FIX", "TEST_CALC", "add_calculator", "task", "write"]

# The shell line a fixing stand-in agent runs in the workspace: subtraction becomes addition.
FIX = "sed -i 's/\\$1 - \\$2/$1 + $2/' calc.sh"

PROMPT = "calc.sh is supposed to print the sum of its two arguments, but test_calc.sh fails.\n"


def write(path: Path, text: str | bytes, executable: bool = False) -> Path:
    """Write ``text`` at ``path`` (its folders made), mode 755 when ``executable``, else 644."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    path.chmod(0o755 if executable else 0o644)
    return path


def add_calculator(repo: Path) -> None:
    """Write the calculator with its bug, its test and a README into ``repo``'s worktree."""
    write(repo / "calc.sh", CALC_BUGGY, executable=True)
    write(repo / "test_calc.sh", TEST_CALC, executable=True)
    write(repo / "README.md", "A calculator.\n")


def task(path: Path, base: str, more: str = "") -> Path:
    """Write the case (``calc-add``, repository ``src`` at ``base``, graded by the profile
    ``tests``) whose prompt asks for the fix; ``more`` follows the prompt's first line."""
    return write(
        path,
        f"""---
id: calc-add
title: Make add add
tags: [benchmark-case]
fields:
  benchmark:
    repository: src
    base_commit: {base}
    case_version: "1"
    category: bugfix
    grader_profile: tests
---
{PROMPT}{more}""",
    )
