"""A forger with the producer's store and key, who rewrites a run's refs below the plumbing and
appends their updates to the log by hand, is caught by the log's replay: each new update is a
second creation of a ref the log already holds."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.conftest import Yyb
from tests.doctor.forge import consistent_pass, drop_derived, plant_by_hand
from yyb import signing
from yyb.store.repo import Store


@pytest.fixture
def forged(signed, tmp_path, monkeypatch):
    """A copy of the signed example; a checkpoint held before the forgery (old.txt); then
    the idler's failure rewritten as a pass, its three run refs planted by hand and the forged
    terminal and evaluation signed with the producer's key."""
    root, public, key = signed
    shutil.copytree(root / "store", tmp_path / "store", symlinks=True)
    monkeypatch.setenv(signing.KEY_ENV, key)
    yyb = Yyb(str(tmp_path / "store"))
    old = tmp_path / "old.txt"
    assert yyb("checkpoint", "--output", str(old)).exit_code == 0
    store = Store.open(yyb.store_path)
    plan_oid = next(n.split("/")[2] for n in store.refs.names() if n.startswith("refs/plans/"))
    _, refs = consistent_pass(store, plan_oid)
    for name, oid in refs.items():
        plant_by_hand(store, name, oid)
    evaluation, terminal, _ = refs.values()
    for oid in (evaluation, terminal):
        signing.sign(store, oid, signing.load_private(key))
    return yyb, refs, public, old, str(root / "ex" / "plan.json")


def test_a_run_rewritten_below_the_plumbing_and_logged_by_hand_is_caught(forged):
    yyb, refs, public, old, plan_file = forged
    doctor = yyb("doctor")
    assert doctor.exit_code == 1
    for name in refs:
        assert f"error log-recreated {name}:" in doctor.stdout, doctor.stdout
    audit = yyb("verify-log", "--checkpoint", str(old), "--trusted-key", public)
    assert audit.exit_code == 1
    assert all(f"log-recreated {name}" in audit.stdout for name in refs), audit.stdout
    for name in refs:  # signed, and its own chain a clean one of one update: the log tells
        checked = yyb("verify-chain", "--trusted-key", public, name)
        assert checked.exit_code == 1 and f"error log-recreated {name}:" in checked.stdout
    plan = yyb("doctor", "--plan", plan_file)
    assert plan.exit_code == 1 and "log-recreated" in plan.stdout, plan.stdout
    report = yyb("report", "--plan", plan_file, "--no-layer")
    assert report.exit_code == 1 and "status: incomplete" in report.stdout, report.stdout
    [idler] = [line for line in report.lines if line.startswith("example/idler  (all)")]
    assert idler.split()[4] == "0"  # resolved: the forged pass is not counted


def test_the_signed_example_replays_clean(signed, tmp_path):
    """What the forgery is measured against: the genuine store passes every check."""
    root, public, key = signed
    shutil.copytree(root / "store", tmp_path / "store", symlinks=True)
    yyb = Yyb(str(tmp_path / "store"))
    assert yyb("doctor").exit_code == 0
    assert yyb("doctor", "--plan", str(root / "ex" / "plan.json")).exit_code == 0


def tree(path) -> dict[str, tuple[int, int]]:
    """Every file and folder below ``path``: (size, modification time in ns)."""
    found = {}
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(folder, name)
            info = os.lstat(full)
            found[os.path.relpath(full, path)] = (info.st_size, info.st_mtime_ns)
    return found


def test_checks_write_nothing_to_a_store_with_no_log_or_a_log_behind(tmp_path):
    """doctor and verify-log read the log as it stands: a store without one stays without
    one, and derived files removed from a log are not rebuilt by a check."""
    key = str(tmp_path / "signing.key")
    public = signing.generate_key(key)
    yyb = Yyb(str(tmp_path / "store"))
    Store.init(yyb.store_path)
    held = tmp_path / "held.txt"
    empty = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="  # the root of no leaves
    held.write_bytes(f"yyb/{'0' * 32}\n0\n{empty}\n\n".encode())
    before = tree(yyb.store_path)
    assert yyb("doctor").exit_code == 0
    assert yyb("verify-log", "--checkpoint", str(held), "--trusted-key", public).exit_code != 0
    assert tree(yyb.store_path) == before
    store = Store.open(yyb.store_path)
    store.refs.update("refs/notes/a", store.objects.put("blob", b"a"))
    drop_derived(store)
    before = tree(yyb.store_path)
    done = yyb("doctor")
    assert done.exit_code == 0 and "info log-levels-behind transparency/level-00" in done.stdout
    assert tree(yyb.store_path) == before


def test_the_forgery_checkpointed_again_and_bundled_is_caught_by_its_auditor(forged, tmp_path):
    """The forger signs a fresh checkpoint of the log holding the forged leaves and sends a
    bundle of the experiment: the auditor replays the carried log."""
    yyb, refs, public, old, plan_file = forged
    assert yyb("checkpoint").exit_code == 0
    path = str(tmp_path / "evidence.bundle")
    assert yyb("bundle", "create", path, "--plan", plan_file).exit_code == 0
    auditor = Yyb(str(tmp_path / "auditor"))
    Store.init(auditor.store_path)
    assert auditor("bundle", "unbundle", path).exit_code == 0
    audit = auditor("verify-log", "--checkpoint", str(old), "--trusted-key", public)
    assert audit.exit_code == 1 and "the carried checkpoint" in audit.stderr
    assert all(f"log-recreated {name}" in audit.stdout for name in refs), audit.stdout
