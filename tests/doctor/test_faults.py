"""SIGKILL at durable write points of `yyb run` and `yyb regrade`, then rerun and verify.

After every interruption a rerun must finish the experiment, `doctor --plan` must find it
complete, and no attempt may have been dispatched twice (its intent ref was moved once).
The quick profile (CI) kills at every STRIDE-th write point; YYB_DEEP=1 kills at every one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from yyb.store.repo import Store

DEEP = os.environ.get("YYB_DEEP") == "1"
STRIDE = 1 if DEEP else 7
LIMIT = 2000


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """An example project with a plan of 2 models x 1 attempt and a grant, nothing run."""
    from yyb import config as configuration
    from yyb.example import build
    from yyb.plans import build as plans
    from yyb.plans import grant, planfile

    root = tmp_path_factory.mktemp("faults") / "ex"
    root.mkdir()
    paths = build(str(root))
    store, _ = Store.init(str(root / "store"))
    config = configuration.load(paths["config"])
    plan = plans.task_plan(config, [paths["task"]], ":fixer,:idler", 1, "1")
    plans.write(store, plan)
    planfile.write_new(str(root / "plan.json"), planfile.render(plan.oid, plan.records))
    now = grant.now_ms()
    store.refs.update(
        f"refs/grants/{plan.oid}",
        store.objects.put_record(grant.grant_for(plan.oid, plan.experiment, now + 86_400_000, now)),
    )
    return root, paths["config"], plan.oid


def yyb(store: str, config: str, *args: str, kill_at: int | None = None):
    env = {k: v for k, v in os.environ.items() if k != "YYB_FAULT_KILL_AT"}
    if kill_at is not None:
        env["YYB_FAULT_KILL_AT"] = str(kill_at)
    return subprocess.run(
        [sys.executable, "-m", "yyb", "--store", store, "--config", config, *args],
        capture_output=True,
        env=env,
        timeout=300,
    )


def check_recovered(store_path: str, config: str, plan_file: str, plan_oid: str) -> None:
    doctor = yyb(store_path, config, "doctor", "--plan", plan_file)
    assert doctor.returncode == 0, doctor.stdout.decode() + doctor.stderr.decode()
    fsck = yyb(store_path, config, "doctor")
    assert fsck.returncode == 0, fsck.stdout.decode()
    store = Store.open(store_path)
    intents = [
        n
        for n in store.refs.names()
        if n.startswith(f"refs/runs/{plan_oid}/") and n.endswith("/intent")
    ]
    assert len(intents) == 2
    for name in intents:
        assert len(list(store.refs.log(name))) == 1, f"{name} was dispatched more than once"


def sweep(tmp_path, template, first_args, rerun_args, prepare=None, stride=STRIDE, check=None):
    root, config, plan_oid = template
    plan_file = str(root / "plan.json")
    points = 0
    for n in range(1, LIMIT, stride):
        store_path = str(tmp_path / f"s{n}")
        shutil.copytree(root / "store", store_path, symlinks=True)
        if prepare:
            prepare(store_path, config, plan_file)
        killed = yyb(store_path, config, *first_args(plan_file), kill_at=n)
        if killed.returncode != -9:
            assert killed.returncode == 0, killed.stderr.decode()
            break
        points += 1
        again = yyb(store_path, config, *rerun_args(plan_file))
        assert again.returncode == 0, (n, again.stderr.decode())
        check_recovered(store_path, config, plan_file, plan_oid)
        if check:
            check(store_path, plan_oid)
        shutil.rmtree(store_path)
    else:
        pytest.fail(f"the run still had durable writes after {LIMIT}")
    assert points >= 3, "the sweep must actually interrupt the run"


def test_sigkill_during_run(tmp_path, template):
    sweep(
        tmp_path,
        template,
        lambda plan: ["run", "--plan", plan],
        lambda plan: ["run", "--plan", plan],
    )


def test_sigkill_during_regrade(tmp_path, template):
    def run_first(store_path, config, plan_file):
        assert yyb(store_path, config, "run", "--plan", plan_file).returncode == 0

    def regrade(plan):
        return ["regrade", "--plan", plan, "--profile", "tests"]

    def one_generation_each(store_path, plan_oid):
        """The rerun completed the interrupted pass: every attempt is at the same generation
        (2, or 3 when the kill came after the first pass had already finished)."""
        from yyb.grading.evaluate import history

        store = Store.open(store_path)
        plan = store.objects.get_record(plan_oid)
        levels = {
            history(store, plan_oid, a, "tests")[-1][1]["generation"]
            for a in plan["links"]["attempts"]
        }
        assert levels in ({2}, {3})

    sweep(
        tmp_path,
        template,
        regrade,
        regrade,
        prepare=run_first,
        stride=1 if DEEP else 2,
        check=one_generation_each,
    )
