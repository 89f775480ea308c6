"""SIGKILL at durable write points of `yyb run` and `yyb regrade`, then rerun and verify.

After every interruption a rerun must finish the experiment, `doctor --plan` must find it
complete, `doctor` must find no error, and no attempt may have been dispatched twice (its
intent ref was moved once). Every sweep runs with signing off and on. With signing on, no
record a run ref names may be unsigned, neither right after the kill (records are signed
before their refs move) nor after the rerun.

The quick profile (CI) kills at a sample of the write points: every n-th one, each sweep from
an offset of its own so that together they reach different points (docs/testing.md has the
figures). YYB_DEEP=1 kills at every write point.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

import pytest

from yyb import signing
from yyb.evidence import names, records
from yyb.store.repo import Store

DEEP = os.environ.get("YYB_DEEP") == "1"
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


@dataclass
class Signing:
    """The key every yyb process of a sweep is given (``path`` "" turns signing off)."""

    path: str
    public: str | None

    @property
    def env(self) -> dict[str, str]:
        return {signing.KEY_ENV: self.path}


@pytest.fixture(params=["off", "on"])
def keyed(request, tmp_path) -> Signing:
    if request.param == "off":
        return Signing("", None)
    path = str(tmp_path / "signing.key")
    return Signing(path, signing.generate_key(path))


def yyb(store: str, config: str, keyed: Signing, *args: str, kill_at: int | None = None):
    env = {k: v for k, v in os.environ.items() if k != "YYB_FAULT_KILL_AT"}
    env.update(keyed.env)
    if kill_at is not None:
        env["YYB_FAULT_KILL_AT"] = str(kill_at)
    return subprocess.run(
        [sys.executable, "-m", "yyb", "--store", store, "--config", config, *args],
        capture_output=True,
        env=env,
        timeout=300,
    )


def check_signatures(store_path: str, plan_oid: str, keyed: Signing) -> None:
    """Every terminal and evaluation receipt a run ref names (and each one it links) carries
    a valid signature by the sweep's key; with signing off, nothing is signed at all."""
    store = Store.open(store_path)
    if keyed.public is None:
        assert store.refs.names(names.SIGNATURES) == []
        return
    trusted = [signing.load_public(keyed.public)]
    for name, head in store.refs.iter_refs(names.runs(plan_oid)):
        if store.objects.get_record(head).get("schema_version") in records.SIGNED_KINDS:
            findings = signing.check_vouched(store, head, trusted)
            assert not findings, (name, [str(f) for f in findings])


def check_recovered(store_path: str, config: str, plan_file: str, plan_oid: str, keyed) -> None:
    doctor = yyb(store_path, config, keyed, "doctor", "--plan", plan_file)
    assert doctor.returncode == 0, doctor.stdout.decode() + doctor.stderr.decode()
    fsck = yyb(store_path, config, keyed, "doctor")
    assert fsck.returncode == 0, fsck.stdout.decode()
    store = Store.open(store_path)
    intents = [n for n in store.refs.names(names.runs(plan_oid)) if n.endswith("/intent")]
    assert len(intents) == 2
    for name in intents:
        assert len(list(store.refs.log(name))) == 1, f"{name} was dispatched more than once"
    terminals = [n for n in store.refs.names(names.runs(plan_oid)) if n.endswith("/terminal")]
    assert len(terminals) == 2
    check_signatures(store_path, plan_oid, keyed)


def points(stride: int, start: int) -> range:
    """The write points a sweep kills at: all of them when deep, else every ``stride``-th."""
    return range(1, LIMIT) if DEEP else range(start, LIMIT, stride)


def sweep(
    tmp_path,
    template,
    keyed: Signing,
    first_args,
    reruns,
    kill_points: range,
    prepare=None,
    check=None,
):
    """Kill ``first_args`` at each of ``kill_points``, run each of ``reruns`` in a row, check.

    Every point starts from a copy of the template's store, after ``prepare`` (done once).
    Ends at the first point the command finishes without being killed (it has fewer writes).
    """
    root, config, plan_oid = template
    plan_file = str(root / "plan.json")
    base = tmp_path / "base"
    shutil.copytree(root / "store", base, symlinks=True)
    if prepare:
        prepare(str(base), config, keyed, plan_file)
    interrupted = 0
    for n in kill_points:
        store_path = str(tmp_path / f"s{n}")
        shutil.copytree(base, store_path, symlinks=True)
        killed = yyb(store_path, config, keyed, *first_args(plan_file), kill_at=n)
        if killed.returncode != -9:
            assert killed.returncode == 0, killed.stderr.decode()
            break
        interrupted += 1
        # Records are signed before a ref names them: a kill never leaves one unsigned.
        check_signatures(store_path, plan_oid, keyed)
        for rerun in reruns:
            again = yyb(store_path, config, keyed, *rerun(plan_file))
            assert again.returncode == 0, (n, rerun(plan_file), again.stderr.decode())
        check_recovered(store_path, config, plan_file, plan_oid, keyed)
        if check:
            check(store_path, plan_oid)
        shutil.rmtree(store_path)
    else:
        pytest.fail(f"the command still had durable writes after {kill_points.stop}")
    assert interrupted >= 3, "the sweep must actually interrupt the command"


def run(plan: str) -> list[str]:
    return ["run", "--plan", plan]


def recover(plan: str) -> list[str]:
    return ["recover", "--plan", plan]


def test_sigkill_during_run(tmp_path, template, keyed):
    sweep(tmp_path, template, keyed, run, [run], points(7, 1))


def test_sigkill_during_run_then_recover(tmp_path, template, keyed):
    """`yyb recover` completes what the kill cut short without dispatching; `yyb run` then
    dispatches only what was never dispatched."""
    sweep(tmp_path, template, keyed, run, [recover, run], points(11, 4))


def test_sigkill_during_regrade(tmp_path, template, keyed):
    def run_first(store_path, config, keyed, plan_file):
        assert yyb(store_path, config, keyed, *run(plan_file)).returncode == 0

    def regrade(plan):
        return ["regrade", "--plan", plan, "--profile", "tests"]

    def one_generation_each(store_path, plan_oid):
        """The rerun completed the interrupted pass: every attempt is at the same generation
        (2, or 3 when the kill came after the first pass had already finished)."""
        from yyb.evidence.chain import history

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
        keyed,
        regrade,
        [regrade],
        points(2, 1),
        prepare=run_first,
        check=one_generation_each,
    )
