"""The grading bench (a repository with a bug, stand-in agents and graders) for reports, and
the built-in example with more plans of it (``Example``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Yyb
from tests.grading.conftest import Bench, build_bench


@pytest.fixture
def bench(tmp_path: Path) -> Bench:
    return build_bench(tmp_path / "bench")


class Example:
    def __init__(self, root: Path):
        self.root = root
        self.store = str(root / "store")
        self.plan = str(root / "plan.json")
        self.yyb = Yyb(self.store)
        self.config = str(root / "repo" / "yylo-benchmark.config.json")

    def plan_of(self, selector: str, attempts: int = 2) -> str:
        """A plan of the example's case for one of its agents, authorized and run."""
        out = str(self.root / f"plan-{selector.strip(':')}.json")
        made = self.yyb(
            "--config",
            self.config,
            "plan",
            "--task",
            str(self.root / "task.md"),
            "--models",
            selector,
            "--attempts",
            str(attempts),
            "--output",
            out,
        )
        assert made.exit_code == 0, made.stderr
        assert self.yyb("authorize", "--plan", out, "--expires", "+1h").exit_code == 0
        ran = self.yyb("--config", self.config, "run", "--plan", out, "--progress", "none")
        assert ran.exit_code == 0, ran.stderr
        return out

    def report(self, *args: str, plan: str | None = None):
        return self.yyb("report", "--plan", plan or self.plan, "--no-layer", *args)


def example_runs(root: Path, attempts: int) -> Example:
    """``yyb example --dir root`` (``attempts`` per cell), as an ``Example``."""
    done = Yyb(str(root / "store"))("example", "--dir", str(root), "--attempts", str(attempts))
    assert done.exit_code == 0, done.stdout + done.stderr
    return Example(root)
