"""Snapshots hold the base commit's tree and nothing else, whatever the source repository holds."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from tests.attempts.conftest import git
from yyb.harness import snapshot

DEFAULT_EXCLUDED = [".yylo-benchmark/", ".juno_task/", "yylo-benchmark.config.json"]


def objects_of(repo) -> set[str]:
    """Every object id stored in ``repo`` (loose and packed, alternates excluded)."""
    out = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch-all-objects", "--batch-check=%(objectname)"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "GIT_ALTERNATE_OBJECT_DIRECTORIES": ""},
    )
    return set(out.stdout.split())


def reachable(repo, *revs: str) -> set[str]:
    return set(line.split()[0] for line in git(repo, "rev-list", "--objects", *revs).splitlines())


def files_of(folder) -> set[str]:
    found = set()
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not (root == str(folder) and d == ".git")]
        for name in files:
            found.add(os.path.relpath(os.path.join(root, name), folder))
    return found


@pytest.fixture
def snap(bench, tmp_path):
    dest = tmp_path / "snap"
    made = snapshot.create(str(bench.repo), bench.base, DEFAULT_EXCLUDED, str(dest))
    return made, dest


def test_snapshot_holds_only_the_base_tree(bench, snap):
    made, dest = snap
    assert made.base_commit == bench.base
    assert made.excluded == [".juno_task", ".yylo-benchmark", "yylo-benchmark.config.json"]
    assert files_of(dest) == {"README.md", "calc.sh", "docs/old.md", "test_calc.sh"}
    assert made.file_count == 4
    assert (dest / "calc.sh").read_text().endswith("echo $(( $1 - $2 ))\n")
    assert os.access(dest / "calc.sh", os.X_OK)
    # One root commit whose tree is the base tree minus the harness-owned paths.
    assert git(dest, "rev-list", "--all") == made.commit
    assert git(dest, "rev-list", "--parents", "-n", "1", made.commit) == made.commit
    assert git(dest, "rev-parse", "HEAD^{tree}") == made.tree
    listed = git(dest, "ls-tree", "-r", "--name-only", "HEAD").splitlines()
    assert listed == ["README.md", "calc.sh", "docs/old.md", "test_calc.sh"]
    for path in listed:  # the same bytes as at the base commit
        assert git(dest, "rev-parse", f"HEAD:{path}") == git(
            bench.repo, "rev-parse", f"{bench.base}:{path}"
        )
    assert git(dest, "status", "--porcelain") == ""


def test_snapshot_holds_no_object_the_base_cannot_reach(bench, snap):
    made, dest = snap
    stored = objects_of(dest)
    assert stored == reachable(dest, "HEAD")
    blobs = set(git(dest, "ls-tree", "-r", "--format=%(objectname)", "HEAD").split())
    assert blobs <= reachable(bench.repo, bench.base)
    # Besides those blobs: the new root commit and the trees rebuilt without excluded paths.
    trees = set(
        git(dest, "ls-tree", "-r", "-t", "-d", "--format=%(objectname)", "HEAD").split()
    ) | {made.tree}
    assert stored == blobs | trees | {made.commit}
    for rev in (
        bench.later,
        f"{bench.later}:FUTURE.md",
        f"{bench.later}:calc.sh",
        "feature",
        "feature:feature.txt",
        f"{bench.base}",
        f"{bench.base}~1",
    ):
        assert git(bench.repo, "rev-parse", rev) not in stored, rev
    done = subprocess.run(
        ["git", "-C", str(dest), "fsck", "--full", "--strict"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_snapshot_has_no_links_back_or_history(bench, snap):
    _, dest = snap
    gitdir = dest / ".git"
    assert gitdir.is_dir()  # a real repository, not a worktree link
    assert git(dest, "for-each-ref", "--format=%(refname)") == "refs/heads/main"
    assert git(dest, "remote") == ""
    assert git(dest, "stash", "list") == ""
    assert not (gitdir / "objects" / "info" / "alternates").exists()
    assert not (gitdir / "logs").exists()  # no reflogs
    assert not (gitdir / "packed-refs").exists()
    assert not (gitdir / "commondir").exists() and not (gitdir / "gitdir").exists()
    assert not (gitdir / "worktrees").exists() and not (gitdir / "modules").exists()
    assert list((gitdir / "hooks").iterdir()) == []
    config = (gitdir / "config").read_text()
    for word in ("remote", "hooksPath", "example.invalid", "worktree", "alternate"):
        assert word not in config
    assert not (bench.root / "hooked").exists()  # the source's hook never ran


def test_snapshot_of_a_shared_clone_has_no_alternates(bench, tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--shared", str(bench.repo), str(clone)], check=True)
    assert (clone / ".git" / "objects" / "info" / "alternates").exists()
    own = clone / ".git" / "objects"
    assert sorted(os.listdir(own)) == ["info", "pack"] and os.listdir(own / "pack") == []
    dest = tmp_path / "snap"
    made = snapshot.create(str(clone), bench.base, DEFAULT_EXCLUDED, str(dest))
    assert not (dest / ".git" / "objects" / "info" / "alternates").exists()
    assert objects_of(dest) == reachable(dest, "HEAD")  # self-contained
    assert git(dest, "cat-file", "-p", "HEAD:calc.sh").endswith("echo $(( $1 - $2 ))")
    assert git(dest, "remote") == "" and made.file_count == 4


def test_snapshot_of_a_linked_worktree_has_no_links(bench, tmp_path):
    worktree = tmp_path / "wt"
    git(bench.repo, "worktree", "add", "-q", "--detach", str(worktree), bench.base)
    dest = tmp_path / "snap"
    snapshot.create(str(worktree), bench.base, DEFAULT_EXCLUDED, str(dest))
    assert (dest / ".git").is_dir()
    assert not (dest / ".git" / "commondir").exists()
    assert str(bench.repo) not in (dest / ".git" / "config").read_text()
    assert git(dest, "for-each-ref", "--format=%(refname)") == "refs/heads/main"


def test_snapshot_leaves_out_submodules_and_configured_paths(bench, tmp_path):
    repo = bench.repo
    git(repo, "checkout", "-q", "-b", "with-module", bench.base)
    blob = git(repo, "rev-parse", f"{bench.base}:README.md")
    commit = git(repo, "rev-parse", bench.base)
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{commit},vendor/lib")
    git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},docs/keep/README.md")
    git(repo, "commit", "-qm", "a submodule and nested docs")
    base = git(repo, "rev-parse", "HEAD")
    dest = tmp_path / "snap"
    made = snapshot.create(
        str(repo), base, ["docs/old.md", "/.juno_task", ".yylo-benchmark"], str(dest)
    )
    assert "vendor/lib" in made.excluded and "docs/old.md" in made.excluded
    assert ".juno_task" in made.excluded and ".yylo-benchmark" in made.excluded
    assert "yylo-benchmark.config.json" not in made.excluded  # not excluded this time
    assert files_of(dest) == {
        "README.md",
        "calc.sh",
        "test_calc.sh",
        "docs/keep/README.md",
        "yylo-benchmark.config.json",
    }
    assert not (dest / "vendor").exists()


@pytest.mark.parametrize("commit", ["0" * 40, "abc123", "main"])
def test_snapshot_refuses_unknown_or_abbreviated_commits(bench, tmp_path, commit):
    from yyb.errors import UsageError

    with pytest.raises(UsageError):
        snapshot.create(str(bench.repo), commit, DEFAULT_EXCLUDED, str(tmp_path / "snap"))


def test_unknown_base_commit_is_an_invalid_case(bench):
    """A case whose base commit is gone from the repository ends as invalid_case, unstarted."""
    from yyb.attempts import run as attempts_run

    plan = bench.plan(["stand/fixer"])
    git(bench.repo, "checkout", "-q", "--orphan", "fresh")
    git(bench.repo, "rm", "-rfq", "--cached", ".")
    git(bench.repo, "commit", "-qm", "empty", "--allow-empty")
    for ref in ("main", "feature"):
        git(bench.repo, "branch", "-D", ref)
    git(bench.repo, "tag", "-d", "v1")
    git(bench.repo, "reflog", "expire", "--expire=now", "--all")
    git(bench.repo, "gc", "-q", "--prune=now")
    assert (
        subprocess.run(["git", "-C", str(bench.repo), "cat-file", "-e", bench.base]).returncode != 0
    )
    [result] = attempts_run.run_plan(bench.context(plan))
    assert result.terminal_class == "invalid_case"
    terminal = bench.terminal(result)
    assert "stdout" not in terminal["links"]  # the candidate never started
    assert bench.doctor_errors() == []


def test_candidate_sees_only_the_snapshot(bench):
    """From inside the sandbox, the candidate's repository holds no future or foreign object."""
    model = bench.behaviour(
        "historian",
        """
git log --all --format='%H %s'
git for-each-ref
git cat-file --batch-all-objects --batch
git fsck --lost-found --unreachable 2>&1
git reflog 2>&1
git remote -v
ls -A .git
ls -A
envelope succeeded
""",
    )
    _, [result] = bench.run([model])
    stdout = bench.linked(result, "stdout")
    receipt = bench.record(bench.terminal(result)["links"]["receipt"])
    assert receipt["base_commit"] == bench.base
    assert receipt["excluded"] == [".juno_task", ".yylo-benchmark", "yylo-benchmark.config.json"]
    log = [
        line
        for line in stdout.decode(errors="replace").splitlines()
        if re.fullmatch(r"[0-9a-f]{40} snapshot of [0-9a-f]{40}", line)
    ]
    assert log == [f"{receipt['snapshot_commit']} snapshot of {bench.base}"]
    for text in (*bench.markers.values(), bench.later, "origin", "feature", "refs/tags"):
        assert text.encode() not in stdout, text
    assert bench.holding(bench.markers["future"]) == []
