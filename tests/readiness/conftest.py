"""Running the release-readiness suite in-process, honestly or with one protection off."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import GIT_ENV
from yyb.readiness import run, suite
from yyb.store.repo import Store

# A build identity for in-process runs (the checkout these tests run from may be dirty).
BUILD = {"kind": "checkout", "version": "0.0.0", "commit": "0" * 40}


class GivenBuild:
    """A stand-in for ``identity.Build`` that binds ``BUILD`` as it is."""

    def identity(self) -> dict:
        return dict(BUILD)


class Suite:
    """One run of the suite against a store of its own; ``root`` is where it is built."""

    def __init__(self, tmp_path: Path, monkeypatch):
        self.store, _ = Store.init(str(tmp_path / "store"))
        self.root = tmp_path / "suite"
        self.root.mkdir()
        monkeypatch.setattr(suite, "new_root", lambda: str(self.root))

    def targets(self) -> dict:
        import json

        return json.loads((self.root / "tools" / "targets.json").read_text())

    def run(self) -> run.Outcome:
        self.root.mkdir(exist_ok=True)
        return run.release_readiness(self.store, None, dict(os.environ), build=GivenBuild())


@pytest.fixture
def readiness(tmp_path, monkeypatch) -> Suite:
    return Suite(tmp_path, monkeypatch)


def by_case(outcome: run.Outcome) -> dict[str, dict]:
    return {record["case"]: record for record in outcome.checks}


REAL = Path(run.__file__).resolve().parents[2]  # the folder holding the running yyb


def copy_of_yyb(top: Path) -> Path:
    """A committed checkout holding a copy of the running yyb's package (its bytes)."""
    import shutil

    top.mkdir(parents=True)
    shutil.copytree(REAL / "yyb", top / "yyb", ignore=shutil.ignore_patterns("__pycache__"))
    (top / "README.md").write_text("yyb\n")
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "build"]):
        subprocess.run(["git", "-C", str(top), *args], env=env, check=True)
    return top


def checkout(folder: Path, files: dict[str, str]) -> Path:
    """A git checkout holding ``files``, committed."""
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "build"]):
        subprocess.run(["git", "-C", str(folder), *args], env=env, check=True)
    return folder
