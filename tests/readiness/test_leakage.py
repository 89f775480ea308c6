"""Every leakage check of release-readiness can fail: each is run with its protection switched
off (a sandbox that shows the place its canary is planted, a snapshot that carries the future
history, a candidate environment that inherits the controller's), and then that check, and
only that one, fails, naming what its probe saw."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest

from tests.readiness.conftest import by_case
from yyb.evidence.records import LEAKAGE_CHECKS
from yyb.harness import sandbox


def show(monkeypatch, readiness, check: str, writable: bool = False) -> None:
    """A sandbox that does not hide the places of ``check``: each is bound at its own path
    (after the masks, so nothing covers it), for every sandboxed process."""
    original = sandbox.Sandbox.argv

    def argv(self, *args, **kwargs):
        command = original(self, *args, **kwargs)
        if not (readiness.root / "tools" / "targets.json").exists():
            return command  # the host's sandbox probe, before the suite is built
        readiness.seen = readiness.targets()["checks"][check]
        paths = [path for _, path in readiness.seen["paths"]]
        extra = []
        for folder in sandbox._ancestors(paths, list(sandbox.OS_FOLDERS)):
            extra += ["--perms", "0755", "--dir", folder]
        for path in paths:
            extra += ["--bind" if writable else "--ro-bind", path, path]
        at = command.index("--remount-ro")
        return command[:at] + extra + command[at:]

    monkeypatch.setattr(sandbox.Sandbox, "argv", argv)


def only_failure(outcome, check: str) -> dict:
    """The record of ``check``, after asserting every other check and case passed."""
    records = by_case(outcome)
    failed = sorted(name for name, record in records.items() if not record["passed"])
    assert failed == [f"leak-{check}"], failed
    assert outcome.receipt["passed"] is False
    assert outcome.receipt["leakage"] == {c: c != check for c in LEAKAGE_CHECKS}
    assert outcome.receipt["coverage"]["missing"] == []  # the coverage cases are unaffected
    return records[f"leak-{check}"]


def test_the_honest_build_passes_every_check(readiness):
    outcome = readiness.run()
    assert [r["case"] for r in outcome.checks if not r["passed"]] == []
    assert outcome.receipt["passed"] is True
    for check in LEAKAGE_CHECKS:
        observed = by_case(outcome)[f"leak-{check}"]["observed"]
        assert observed["probe"] == "complete"
        assert observed["findings"] == [] and observed["changed"] == []


@pytest.mark.parametrize("check", ["store", "graders", "sibling", "home"])
def test_a_place_the_sandbox_shows_fails_its_check(readiness, monkeypatch, check):
    show(monkeypatch, readiness, check)
    record = only_failure(readiness.run(), check)
    findings = record["observed"]["findings"]
    labels = [label for label, _ in readiness.seen["paths"]]
    assert {f"visible: {label}" for label in labels} <= set(findings), findings
    if check != "home":  # credential files are 0600: seen, though another uid cannot read them
        assert "canary in a file it can read" in findings


def test_a_probe_that_can_write_there_is_caught_changing_it(readiness, monkeypatch):
    """Shown writable to the sandbox's uid: the probe writes, and the controller's
    fingerprint of the planted place sees the change."""
    from yyb.readiness import suite

    plant = suite.plant_sibling

    def open_to_all(folder: str) -> None:
        plant(folder)
        for top, folders, _ in os.walk(folder):
            for name in [".", *folders]:
                os.chmod(os.path.join(top, name), 0o777)

    monkeypatch.setattr(suite, "plant_sibling", open_to_all)
    show(monkeypatch, readiness, "sibling", writable=True)
    record = only_failure(readiness.run(), "sibling")
    assert "wrote into: a sibling attempt's folder" in record["observed"]["findings"]
    assert record["observed"]["changed"] == ["changed: sibling canary place"]


def test_a_snapshot_that_carries_the_history_fails_the_history_check(readiness, monkeypatch):
    from yyb.harness import snapshot

    original = snapshot.create

    def create(source_path, base_commit, excluded, dest):
        made = original(source_path, base_commit, excluded, dest)
        # Fetched on the host, then copied in: Git resolves the path of a workspace on the
        # attempt's disk (/proc/<holder>/root/...) to the host's folder under the mount.
        staging = tempfile.mkdtemp(prefix="yyb-leak-")
        subprocess.run(["git", "init", "-q", "--bare", staging], check=True)
        subprocess.run(
            ["git", "-C", staging, "fetch", "-q", source_path, "+refs/*:refs/leaked/*"],
            check=True,
            capture_output=True,
        )
        for part in ("objects", "refs"):
            shutil.copytree(f"{staging}/{part}", f"{dest}/.git/{part}", dirs_exist_ok=True)
        shutil.rmtree(staging)
        return made

    monkeypatch.setattr(snapshot, "create", create)
    record = only_failure(readiness.run(), "history")
    findings = record["observed"]["findings"]
    for label in ("a later commit", "an annotated tag", "a stash"):
        assert f"object in its repository: {label}" in findings
    assert "canary in its repository's objects" in findings


def test_a_candidate_environment_that_inherits_the_controllers_fails(readiness, monkeypatch):
    from yyb.attempts import execute

    original = execute.build

    def build(*args, **kwargs):
        env, policy = original(*args, **kwargs)
        return {**os.environ, **env}, policy

    monkeypatch.setattr(execute, "build", build)
    record = only_failure(readiness.run(), "environment")
    findings = record["observed"]["findings"]
    assert "variable: YYB_READINESS_SECRET" in findings
    assert "canary in its environment" in findings


def test_a_probe_that_does_not_finish_fails_its_check(readiness, monkeypatch):
    """A probe cut short (here: its report never completes) proves nothing: failed."""
    from yyb.readiness import standin

    broken = standin.AGENT.replace('say(f"probe {check} complete', 'say(f"probe {check} stopped')
    assert broken != standin.AGENT
    monkeypatch.setattr(standin, "AGENT", broken)
    outcome = readiness.run()
    failed = sorted(r["case"] for r in outcome.checks if not r["passed"])
    assert failed == [f"leak-{c}" for c in sorted(LEAKAGE_CHECKS)]
    assert all(r["observed"]["probe"] == "incomplete" for r in outcome.checks if r.get("leakage"))
