"""A plan with holes made for real, for the retry tests: a cancelled attempt (its run cancelled
while the candidate held), a harness failure of the infrastructure (the controller SIGKILLed
while the candidate held; the next run closes the attempt) and two resolved attempts.

Plan: models ``stand/holder`` and ``stand/fixer`` x 2 attempts; ordinals 0, 1 are the holder's
(cancelled, harness_failure), 2, 3 the fixer's (resolved).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.attempts.conftest import Bench, build_bench, wait_for
from tests.conftest import Yyb
from yyb.attempts import run as attempts_run
from yyb.evidence import names

# Holds while the file tools/hold exists (the tools folder is visible read-only to candidates).
HOLDER = """
if [ -e "$TOOLS/hold" ]; then
  trap '' TERM INT
  echo "holding"
  sleep $MARK
fi
echo "done"
envelope succeeded
"""


@dataclass
class Holes:
    """The bench, its plan (every attempt with a terminal) and the attempt oids by ordinal."""

    bench: Bench
    plan: object  # yyb.plans.build.Plan
    attempts: list[str]

    def yyb(self, *args: str, store: str | None = None):
        """The CLI on the bench's store (or on ``store``, a copy of it)."""
        return Yyb(store or self.bench.store_path)("--config", str(self.bench.config_path), *args)

    def terminal_class(self, plan_oid: str, attempt_oid: str, store=None) -> str | None:
        store = store or self.bench.store
        oid = store.refs.read(names.attempt(plan_oid, attempt_oid, "terminal"))
        return None if oid is None else store.objects.get_record(oid)["class"]


def cancel_first(bench: Bench, plan) -> None:
    """Run the plan and cancel it once the first holder holds: attempt 0 is cancelled, the
    others are never dispatched."""
    ctx = bench.context(plan)
    done: dict = {}
    worker = threading.Thread(target=lambda: done.setdefault("r", attempts_run.run_plan(ctx)))
    worker.start()
    try:
        assert wait_for(lambda: len(bench.alive()) >= 1), "the holder never started"
    finally:
        ctx.cancel.set()
        worker.join(timeout=60)
    statuses = [(r.terminal_class, r.status) for r in done["r"]]
    skipped = len(plan.attempt_oids) - 1
    assert statuses == [("cancelled", "ran")] + [("-", "skipped")] * skipped, statuses


def _kill_during_second(bench: Bench, plan) -> None:
    """SIGKILL a `yyb run` while the second holder holds: attempt 1 keeps only its intent."""
    bench.kill_controller(plan.oid, running=1, settle_s=20)


def make(root: Path) -> Holes:
    """Build the bench under ``root`` and its plan with a cancelled attempt, an attempt closed
    as an interrupted harness failure, and two resolved ones."""
    bench = build_bench(root)
    bench.behaviour("holder", HOLDER)
    (bench.tools / "hold").touch()
    plan = bench.plan(["stand/holder", "stand/fixer"], attempts=2)
    cancel_first(bench, plan)
    _kill_during_second(bench, plan)
    (bench.tools / "hold").unlink()
    results = bench.execute(plan)  # closes attempt 1, runs the fixer's
    classes = [r.terminal_class for r in results]
    assert classes == ["cancelled", "harness_failure", "resolved", "resolved"], classes
    return Holes(bench, plan, list(plan.attempt_oids))


@pytest.fixture(name="holes")
def holes_fixture(tmp_path):
    """``make`` under the test's folder; no stand-in process outlives the test."""
    made = make(tmp_path / "bench")
    yield made
    for pid, _ in made.bench.alive():
        os.kill(pid, 9)
