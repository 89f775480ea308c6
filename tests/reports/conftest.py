"""The grading bench (a repository with a bug, stand-in agents and graders) for reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.grading.conftest import Bench, build_bench


@pytest.fixture
def bench(tmp_path: Path) -> Bench:
    return build_bench(tmp_path / "bench")
