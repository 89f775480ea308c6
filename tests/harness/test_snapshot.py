"""Snapshots hold the base tree and nothing else; git itself accepts their pack."""

from __future__ import annotations

import subprocess

from tests.conftest import git
from yyb.harness import snapshot


def test_snapshot_is_the_base_tree_only(project, tmp_path):
    (project.root / ".juno_task").mkdir()
    (project.root / ".juno_task" / "secret.md").write_text("hidden answer\n")
    (project.root / "keep.txt").write_text("kept\n")
    git(project.root, "add", "-A")
    git(project.root, "commit", "-qm", "with harness paths")
    base = git(project.root, "rev-parse", "HEAD")
    (project.root / "future.txt").write_text("from the future\n")
    git(project.root, "add", "-A")
    git(project.root, "commit", "-qm", "future")
    future = git(project.root, "rev-parse", "HEAD")
    dest = tmp_path / "snap"
    snap = snapshot.create(str(project.root), base, list(snapshot_defaults()), str(dest))
    assert snap.excluded == [".juno_task", "yylo-benchmark.config.json"]
    assert sorted(p.name for p in dest.iterdir()) == [".git", "calc.py", "docs", "keep.txt"]
    assert snap.file_count == 3
    fsck = subprocess.run(
        ["git", "-C", str(dest), "fsck", "--full", "--strict"], capture_output=True, text=True
    )
    assert fsck.returncode == 0, fsck.stderr
    objects = subprocess.run(
        ["git", "-C", str(dest), "cat-file", "--batch-all-objects", "--batch-check"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert future not in objects and base not in objects
    contents = subprocess.run(
        ["git", "-C", str(dest), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    ).stdout
    assert b"hidden answer" not in contents and b"from the future" not in contents
    log = git(dest, "log", "--all", "--oneline")
    assert len(log.splitlines()) == 1
    assert git(dest, "remote") == "" and git(dest, "branch", "--list") == "* main"
    assert git(dest, "status", "--porcelain") == ""
    assert not (dest / ".git" / "logs").exists()
    assert list((dest / ".git" / "hooks").iterdir()) == []
    assert not (dest / ".git" / "objects" / "info" / "alternates").exists()


def snapshot_defaults():
    from yyb.config import DEFAULT_EXCLUDED

    return DEFAULT_EXCLUDED


def test_every_object_is_reachable_from_the_snapshot_commit(project, tmp_path):
    dest = tmp_path / "snap"
    snapshot.create(str(project.root), project.base, [], str(dest))
    all_objects = set(
        subprocess.run(
            [
                "git",
                "-C",
                str(dest),
                "cat-file",
                "--batch-all-objects",
                "--batch-check=%(objectname)",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    )
    reachable = {
        line.split()[0]
        for line in subprocess.run(
            ["git", "-C", str(dest), "rev-list", "--objects", "--all"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    }
    assert all_objects == reachable
