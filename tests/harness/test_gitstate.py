"""The Git state read without libgit2 opening the repository: same answers as Git on an honest
repository, bounded and unobeyed on a hostile one."""

from __future__ import annotations

import os
from pathlib import Path

import pygit2
import pytest

from tests.conftest import git
from yyb.harness import gitstate


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for name, text in {
        "keep.txt": "keep\n",
        "edit.txt": "one\n",
        "gone.txt": "gone\n",
        "staged.txt": "s\n",
        "mode.sh": "echo\n",
        "kind.txt": "a file\n",
        "sub/deep.txt": "deep\n",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "-c", "user.name=a", "-c", "user.email=b@c", "commit", "-qm", "base")
    return root


def change(root: Path) -> None:
    """One of each kind of change Git's status tells apart."""
    (root / "edit.txt").write_text("two\n")
    (root / "gone.txt").unlink()
    (root / "staged.txt").write_text("staged change\n")
    git(root, "add", "staged.txt")
    (root / "new.txt").write_text("new\n")
    git(root, "add", "new.txt")
    (root / "untracked.txt").write_text("u\n")
    (root / "mode.sh").chmod(0o755)
    (root / "kind.txt").unlink()
    (root / "kind.txt").symlink_to("keep.txt")
    git(root, "rm", "-q", "--cached", "sub/deep.txt")


def libgit2_status(root: Path) -> list[list]:
    """What pygit2 answers for this honest repository (the test's oracle)."""
    found = pygit2.Repository(str(root)).status()
    return sorted([path, int(flags)] for path, flags in found.items() if flags)


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_status_and_index_agree_with_git_on_an_honest_repository(repo, version):
    change(repo)
    git(repo, "update-index", "--index-version", version)
    state = gitstate.read(str(repo))
    assert state["readable"] is True and state["unread"] == []
    assert state["head"] == {
        "ref": "refs/heads/main",
        "commit": git(repo, "rev-parse", "HEAD"),
    }
    assert state["refs"] == {"refs/heads/main": git(repo, "rev-parse", "HEAD")}
    assert state["index"]["entries"] == len(git(repo, "ls-files").splitlines())
    assert state["status"] == libgit2_status(repo)
    assert ["untracked.txt", gitstate.WT_NEW] in state["status"]


def test_a_clean_worktree_has_an_empty_status(repo):
    assert gitstate.read(str(repo))["status"] == []


def test_a_workspace_without_git_does_not_read_the_repository_above_it(repo):
    inner = repo / "sub"
    state = gitstate.read(str(inner))
    assert state == {"readable": False, "error": "the workspace has no .git folder"}


def test_a_detached_head_and_symbolic_and_packed_refs(repo):
    head = git(repo, "rev-parse", "HEAD")
    git(repo, "tag", "-a", "-m", "t", "v1")
    git(repo, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
    git(repo, "pack-refs", "--all")
    git(repo, "checkout", "-q", "--detach")
    state = gitstate.read(str(repo))
    assert state["head"] == {"ref": None, "commit": head}
    refs = state["refs"]
    assert refs["refs/heads/main"] == head == refs["refs/heads/alias"]
    assert refs["refs/tags/v1"] == git(repo, "rev-parse", "v1")  # the tag object, not peeled


def test_refs_past_the_limit_are_counted_not_listed(repo, monkeypatch):
    monkeypatch.setattr(gitstate, "MAX_REFS", 100)
    head = git(repo, "rev-parse", "HEAD")
    folder = repo / ".git" / "refs" / "tags"
    for i in range(gitstate.MAX_REFS + 50):
        (folder / f"t{i:05d}").write_text(head + "\n")
    state = gitstate.read(str(repo))
    assert len(state["refs"]) == gitstate.MAX_REFS
    assert "refs" in [what for what, _ in state["unread"]]


@pytest.mark.parametrize(
    "damage, what",
    [
        (lambda g: (g / "index").write_bytes(b"garbage"), "index"),
        (lambda g: (g / "index").write_bytes(b"DIRC" + bytes(40)), "index"),
        (lambda g: os.truncate(g / "index", gitstate.MAX_INDEX + 1), "index"),
        (lambda g: (g / "HEAD").write_text("nonsense\n"), "HEAD"),
        (lambda g: os.truncate(g / "packed-refs", gitstate.MAX_PACKED_REFS + 1), "packed-refs"),
    ],
    ids=["garbage-index", "bad-checksum", "huge-index", "bad-head", "huge-packed-refs"],
)
def test_a_damaged_part_is_named_and_the_rest_still_read(repo, damage, what):
    git(repo, "pack-refs", "--all")
    damage(repo / ".git")
    state = gitstate.read(str(repo))
    assert state["readable"] is True
    assert what in [w for w, _ in state["unread"]], state["unread"]


@pytest.mark.parametrize("kind", ["gitdir-file", "symlink"])
def test_a_git_that_leads_elsewhere_is_not_followed(repo, tmp_path, kind):
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "secret-branch")
    (repo / ".git").rename(repo / "old-git")
    if kind == "symlink":
        (repo / ".git").symlink_to(other / ".git")
    else:
        (repo / ".git").write_text(f"gitdir: {other}/.git\n")
    state = gitstate.read(str(repo))
    assert state["readable"] is False and "not followed" in state["error"]


def test_config_is_never_read(repo, tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    (host / "host-file").write_text("x\n")
    git(repo, "config", "core.worktree", str(host))
    git(repo, "config", "core.fsmonitor", f"touch {tmp_path}/ran")
    with open(repo / ".git" / "config", "a") as handle:
        handle.write(f"[include]\n\tpath = {host}/host-file\n")
    state = gitstate.read(str(repo))
    assert state["status"] == [] and "host-file" not in str(state)
    assert not (tmp_path / "ran").exists()


def test_an_object_behind_a_link_is_not_followed(repo, tmp_path):
    head = git(repo, "rev-parse", "HEAD")
    fanout = repo / ".git" / "objects" / head[:2]
    fanout.rename(tmp_path / "elsewhere")
    fanout.symlink_to(tmp_path / "elsewhere")
    state = gitstate.read(str(repo))
    [(what, why)] = state["unread"]
    assert what == "HEAD commit" and "is a link: not followed" in why
