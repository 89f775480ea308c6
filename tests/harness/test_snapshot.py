"""Snapshots hold the base tree and nothing else; git itself accepts their pack."""

from __future__ import annotations

import os
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


def test_snapshot_objects_are_those_libgit2_would_write(project, tmp_path):
    """Trees and the commit are written by yyb: unfiltered, the tree is the base's own; the
    commit, and a filtered tree, are what pygit2 makes of the same entries."""
    import pygit2

    whole = snapshot.create(str(project.root), project.base, [], str(tmp_path / "whole"))
    assert whole.tree == git(project.root, "rev-parse", f"{project.base}^{{tree}}")
    repo = pygit2.Repository(str(tmp_path / "whole"))
    when = pygit2.Repository(str(project.root))[project.base].committer.time
    signature = pygit2.Signature(*snapshot.SNAPSHOT_AUTHOR, when, 0)
    message = f"snapshot of {project.base}\n"
    made = repo.create_commit(None, signature, signature, message, pygit2.Oid(hex=whole.tree), [])
    assert str(made) == whole.commit
    part = snapshot.create(str(project.root), project.base, ["docs/"], str(tmp_path / "part"))
    builder = repo.TreeBuilder(repo[whole.tree])
    builder.remove("docs")
    assert str(builder.write()) == part.tree
    assert git(tmp_path / "part", "status", "--porcelain") == ""


def test_the_index_holds_each_file_as_written(project, tmp_path):
    """Git (and gitstate) compare stat data before they hash: the index records it."""
    from yyb.harness import gitstate

    dest = tmp_path / "snap"
    snapshot.create(str(project.root), project.base, [], str(dest))
    tree = git(dest, "ls-tree", "-r", "HEAD").splitlines()
    assert git(dest, "ls-files", "-s").splitlines() == [
        line.replace(" blob ", " ").replace("\t", " 0\t") for line in tree
    ]
    entries = gitstate.parse_index((dest / ".git" / "index").read_bytes())
    assert sorted(entries) == sorted(line.split("\t")[1] for line in tree)
    for path, (_mode, _oid, stage, size, mtime_s, mtime_ns, ino) in entries.items():
        info = os.lstat(dest / path)
        assert (stage, size, ino) == (0, info.st_size, info.st_ino)
        assert (mtime_s, mtime_ns) == divmod(info.st_mtime_ns, 10**9)


def test_a_base_is_exported_once_and_a_candidate_cannot_touch_the_export(
    project, tmp_path, monkeypatch
):
    """Snapshots of one base copy one export; what a candidate does to its copy (or the export
    folder going away) changes nothing in the next snapshot."""
    import shutil

    from yyb.harness import scratch

    built = []
    build = snapshot._build
    monkeypatch.setattr(snapshot, "_build", lambda *a: built.append(a) or build(*a))
    monkeypatch.setattr(snapshot, "_EXPORTS", snapshot._Exports())
    first = snapshot.create(str(project.root), project.base, [], str(tmp_path / "one"))
    for pack in (tmp_path / "one" / ".git" / "objects" / "pack").iterdir():
        pack.chmod(0o644)
        pack.write_bytes(b"overwritten by the candidate")
    second = snapshot.create(str(project.root), project.base, [], str(tmp_path / "two"))
    assert len(built) == 1 and second == first.__class__(**{**vars(first), "path": second.path})
    fsck = subprocess.run(["git", "-C", str(tmp_path / "two"), "fsck", "--full", "--strict"])
    assert fsck.returncode == 0
    for folder in os.listdir(scratch.run_folder()):
        if folder.startswith("yyb-snapshot-"):
            shutil.rmtree(os.path.join(scratch.run_folder(), folder))
    third = snapshot.create(str(project.root), project.base, [], str(tmp_path / "three"))
    assert len(built) == 2 and third.commit == first.commit
    assert git(tmp_path / "three", "status", "--porcelain") == ""


def test_a_fresh_snapshot_is_listed_without_reading_it_back(project, tmp_path, monkeypatch):
    """``Snapshot.known`` lists the files yyb wrote as a full read lists them; a file that is
    not as written, or a run with secrets to redact, is read."""
    from yyb.harness import manifest
    from yyb.harness.redaction import Redactor
    from yyb.store.repo import Store

    (project.root / "run.sh").write_text("#!/bin/sh\n")
    (project.root / "run.sh").chmod(0o755)
    (project.root / "link").symlink_to("calc.py")
    git(project.root, "add", "-A")
    git(project.root, "commit", "-qm", "more kinds")
    dest = tmp_path / "snap"
    snap = snapshot.create(str(project.root), git(project.root, "rev-parse", "HEAD"), [], str(dest))
    assert sorted(snap.known) == sorted(p for p in snap.known if p != "link")
    store = Store.memory()
    read = manifest.listing_record(manifest.scan(store, str(dest), known=snap.known))
    assert read == manifest.listing_record(manifest.scan(Store.memory(), str(dest)))
    retained = manifest._retain_file
    reads = []
    monkeypatch.setattr(
        manifest,
        "_retain_file",
        lambda s, r, b, item: reads.append(item.path) or retained(s, r, b, item),
    )
    assert manifest.listing_record(manifest.scan(store, str(dest), known=snap.known)) == read
    assert reads == []
    (dest / "calc.py").write_text("def add(a, b):\n    return a * b\n")  # the same size
    manifest.scan(store, str(dest), known=snap.known)
    assert reads == ["calc.py"]
    manifest.scan(store, str(dest), Redactor({"TOKEN": "s3cret-value"}), known=snap.known)
    assert len(reads) == 1 + len(snap.known)


def test_past_max_exports_the_least_recent_export_is_removed(project, tmp_path, monkeypatch):
    monkeypatch.setattr(snapshot, "_EXPORTS", snapshot._Exports())
    monkeypatch.setattr(snapshot, "MAX_EXPORTS", 1)
    snapshot.create(str(project.root), project.base, [], str(tmp_path / "one"))
    (first,) = [slot[1] for slot in snapshot._EXPORTS.slots.values()]
    snapshot.create(str(project.root), project.later, [], str(tmp_path / "two"))
    assert not os.path.exists(first.folder)
    assert [slot[1].commit for slot in snapshot._EXPORTS.slots.values()] != [first.commit]
    again = snapshot.create(str(project.root), project.base, [], str(tmp_path / "three"))
    assert again.commit == first.commit
    assert git(tmp_path / "three", "status", "--porcelain") == ""
