"""Shared fixtures: stores (memory twin and disk), the CLI through one runner."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import settings

from yyb.store.repo import Store

settings.register_profile("ci", derandomize=True, max_examples=200, deadline=None)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile("deep", max_examples=5000, deadline=None)
settings.load_profile(os.environ.get("YYB_HYPOTHESIS", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture
def disk_store(tmp_path: Path) -> Store:
    store, _ = Store.init(str(tmp_path / "store"))
    return store


@pytest.fixture(params=["memory", "disk"])
def store(request, tmp_path: Path) -> Store:
    if request.param == "memory":
        return Store.memory()
    return Store.init(str(tmp_path / "store"))[0]


def note(message: str, **links) -> dict:
    record = {"schema_version": "yyb_note.v1", "message": message}
    if links:
        record["links"] = links
    return record


def flip_byte(path: str, offset: int = -1) -> None:
    """Corrupt one byte of a file with XOR 0xFF (a fixed replacement byte could be a no-op)."""
    os.chmod(path, 0o644)
    with open(path, "r+b") as handle:
        handle.seek(offset, os.SEEK_END if offset < 0 else os.SEEK_SET)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0xFF]))


@dataclass
class Result:
    exit_code: int
    stdout_bytes: bytes
    stderr: str

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode("utf-8", "replace")

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()


class Yyb:
    """Runs ``yyb.cli.main(["--store", STORE, ...])`` in-process, capturing its streams."""

    def __init__(self, store_path: str):
        self.store_path = store_path

    def __call__(self, *args: str, input: bytes | str | None = None) -> Result:
        from yyb.cli import main

        runner = CliRunner()
        with runner.isolation(input=input) as streams:
            try:
                main(["--store", self.store_path, *args])
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            out, err = streams[0].getvalue(), streams[1].getvalue()
        return Result(code, out, err.decode("utf-8", "replace"))


@pytest.fixture
def yyb(disk_store: Store) -> Yyb:
    return Yyb(disk_store.path)


def run_yyb(*args: str, input: bytes | None = None, env: dict | None = None,
            cwd: str | None = None):
    """A real subprocess run of the CLI, for pipelines, signals and tracebacks."""
    return subprocess.run([sys.executable, "-m", "yyb", *args], input=input,
                          capture_output=True, env=env, cwd=cwd, timeout=120)
