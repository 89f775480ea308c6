"""docs/ci.md's recipes, their `yyb` lines run as written by a shell: against the example's
agent that fixes the bug the job passes; against the one that does nothing, the run step fails
with exit 3; the JUnit report the job keeps counts the attempts."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import Yyb

DOC = Path(__file__).resolve().parents[2] / "docs" / "ci.md"
MODEL = "openai/gpt-5"  # the recipes' model, swapped for one of the example's stand-in agents


def recipe(title: str) -> list[str]:
    """The `yyb` command lines of the recipe under ``## title``, in order."""
    section = DOC.read_text().split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```yaml\n(.*?)```", section, re.S)
    lines = []
    for line in block.splitlines():
        found = re.search(r"(?:- |run: )(yyb .*)$", line.strip())
        if found:
            lines.append(found.group(1))
    assert lines, f"no yyb line in the {title} recipe"
    return lines


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ci") / "ex"
    done = Yyb(str(root / "store"))("example", "--dir", str(root), "--attempts", "1")
    assert done.exit_code == 0, done.stdout + done.stderr
    shim = root.parent / "bin"
    shim.mkdir()
    (shim / "yyb").write_text(f'#!/bin/sh\nexec {sys.executable} -m yyb "$@"\n')
    (shim / "yyb").chmod(0o755)
    return root


def job(example: Path, tmp_path: Path, title: str, agent: str) -> list[tuple[str, int]]:
    """Run the recipe's yyb lines in a fresh checkout-like folder (``cases/`` holding the
    example's case), as a CI runner would: each line by a shell, stopping at the first that
    fails unless it is an always-run step. Returns (line, exit code) of each line run."""
    work = tmp_path / title.replace(" ", "-")
    (work / "cases").mkdir(parents=True)
    shutil.copy(example / "task.md", work / "cases" / "calc-add.md")
    env = {
        **os.environ,
        "PATH": f"{example.parent / 'bin'}:{os.environ['PATH']}",
        "YYB_STORE": str(example / "store"),
        "YYB_CONFIG": str(example / "repo" / "yylo-benchmark.config.json"),
        "GITHUB_STEP_SUMMARY": str(work / "summary.md"),
    }
    ran, failed = [], False
    for line in recipe(title):
        always = "report" in line  # the recipes' `if: always()` and after_script steps
        if failed and not always:
            continue
        done = subprocess.run(
            ["bash", "-c", line.replace(MODEL, agent)],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert "Traceback" not in done.stderr, done.stderr
        ran.append((line, done.returncode))
        failed = failed or done.returncode != 0
    return ran


@pytest.mark.parametrize("title", ["GitHub Actions", "GitLab CI"])
def test_a_recipe_passes_above_its_threshold_and_fails_under_it(example, tmp_path, title):
    passed = job(example, tmp_path / "pass", title, ":fixer")
    assert [code for _, code in passed] == [0] * len(passed), passed
    report = tmp_path / "pass" / title.replace(" ", "-") / "report.xml"
    suites = ET.parse(report).getroot()
    assert suites.get("tests") == "3" and suites.get("failures") == "0"  # --attempts 3
    failed = job(example, tmp_path / "fail", title, ":idler")
    codes = {line.split(" --")[0]: code for line, code in failed}
    assert codes["yyb run"] == 3, failed
    assert "yyb plan" in codes and codes["yyb plan"] == 0
    report = tmp_path / "fail" / title.replace(" ", "-") / "report.xml"
    assert ET.parse(report).getroot().get("failures") == "3"  # the always-run step ran
