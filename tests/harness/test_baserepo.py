"""The base as a Git repository in a rebuilt workspace: Git itself reads it as a sound
repository at the base, with the graded worktree's changes uncommitted."""

from __future__ import annotations

import subprocess

from yyb.harness import baserepo, manifest

FILE, EXEC, LINK = 0o100644, 0o100755, 0o120000


def git(folder, *args) -> str:
    done = subprocess.run(
        ["git", "-C", str(folder), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def test_git_sees_the_base_and_the_changes(disk_store, tmp_path):
    put = lambda data: disk_store.objects.put("blob", data)  # noqa: E731
    base = {
        "README.md": (FILE, put(b"readme\n")),
        "src/calc.sh": (EXEC, put(b"echo $(( $1 - $2 ))\n")),
        "src/deep/er/x.txt": (FILE, put(b"x\n")),
        "tests/test_calc.sh": (FILE, put(b"test\n")),
        "link": (LINK, put(b"README.md")),
        "gone.txt": (FILE, put(b"to be deleted\n")),
    }
    graded = dict(base)
    graded["src/calc.sh"] = (EXEC, put(b"echo $(( $1 + $2 ))\n"))
    graded["NEW.md"] = (FILE, put(b"new\n"))
    del graded["gone.txt"]
    workspace = tmp_path / "ws"
    manifest.rebuild(disk_store, manifest.listing_of(graded), str(workspace))
    key = disk_store.objects.put_record(manifest.listing_of(base))
    commit = baserepo.write(disk_store, key, base, graded, str(workspace))

    git(workspace, "fsck", "--full", "--strict")
    assert git(workspace, "rev-parse", "HEAD").strip() == commit
    assert git(workspace, "log", "--format=%s").strip() == "base"
    assert sorted(git(workspace, "ls-tree", "-r", "--name-only", "HEAD").split()) == sorted(base)
    status = sorted(git(workspace, "status", "--porcelain").splitlines())
    assert status == [" D gone.txt", " M src/calc.sh", "?? NEW.md"]
    assert "+echo $(( $1 + $2 ))" in git(workspace, "diff")
    assert git(workspace, "show", "HEAD:src/calc.sh") == "echo $(( $1 - $2 ))\n"
    git(workspace, "checkout", "--", "src/calc.sh")
    assert (workspace / "src" / "calc.sh").read_text() == "echo $(( $1 - $2 ))\n"
    assert git(workspace, "cat-file", "-p", "HEAD:link") == "README.md"

    # A second workspace of the same base reuses the built pack: the same commit.
    other = tmp_path / "ws2"
    manifest.rebuild(disk_store, manifest.listing_of(base), str(other))
    assert baserepo.write(disk_store, key, base, base, str(other)) == commit
    assert git(other, "status", "--porcelain") == ""
