"""Grading workspaces as an overlay (yyb/harness/overlay.py): what the mount shows is exactly
the graded listing, whatever the base had where, and nothing done inside reaches the pristine
base the next evaluation starts from.

The mount tests need what ``overlay.usable`` needs (root, util-linux, an overlay with
``redirect_dir=on``); elsewhere they are skipped and the workspace is rebuilt whole, which
the last tests check."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yyb.harness import manifest, overlay, scratch, worktree

FILE, EXEC, LINK = 0o100644, 0o100755, 0o120000
mounts = pytest.mark.skipif(
    os.geteuid() != 0 or not overlay.usable(), reason="no overlay can be mounted here"
)

# Run inside the mount namespace: every path below the target with its kind, mode and bytes.
LISTER = """
import json, os, stat, sys
top = sys.argv[1]
seen = {}
for folder, dirs, files in os.walk(top):
    rel = os.path.relpath(folder, top)
    if rel != ".":
        seen[rel] = ["folder"]
    for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
        path = os.path.join(folder, name)
        key = os.path.relpath(path, top)
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            seen[key] = ["link", os.readlink(path)]
        else:
            with open(path, "rb") as handle:
                seen[key] = ["file", stat.S_IMODE(info.st_mode), handle.read().hex()]
print(json.dumps(seen))
"""


def inside(mount: overlay.Mount, *command: str) -> subprocess.CompletedProcess:
    """Run ``command`` in a mount namespace where ``mount`` is mounted, as the sandbox does."""
    read, write = os.pipe()
    try:
        done = subprocess.run(
            [*mount.prefix(write), *command], capture_output=True, text=True, pass_fds=(write,)
        )
        os.close(write)
        write = -1
        assert os.read(read, 1) == b"m", done.stderr
        return done
    finally:
        os.close(read)
        if write != -1:
            os.close(write)


def shown(mount: overlay.Mount) -> dict:
    done = inside(mount, sys.executable, "-c", LISTER, mount.target)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def expected(store, entries: dict) -> dict:
    """What a plain rebuild of ``entries`` holds, in the lister's terms."""
    seen = {}
    for path, (mode, oid) in entries.items():
        parts = path.split("/")
        for i in range(1, len(parts)):
            seen["/".join(parts[:i])] = ["folder"]
        body = store.objects.get(oid).body
        if mode == LINK:
            seen[path] = ["link", body.decode()]
        else:
            seen[path] = ["file", 0o755 if mode == EXEC else 0o644, body.hex()]
    return seen


def tree_digest(folder: str) -> str:
    """Every path, mode and byte under ``folder``, as one hash."""
    digest = hashlib.sha256()
    for top, dirs, files in sorted(os.walk(folder)):
        dirs.sort()
        for name in sorted(files + dirs):
            path = os.path.join(top, name)
            info = os.lstat(path)
            digest.update(f"{os.path.relpath(path, folder)} {info.st_mode:o}\n".encode())
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as handle:
                    digest.update(handle.read())
    return digest.hexdigest()


# Paths chosen so that one listing's file is another's folder, at several depths.
PATHS = ["a", "b", "a/b", "a/c", "a/b/c", "b/a", "c", "c/d/e"]
BODIES = [b"one\n", b"two\n", b"a"]


@st.composite
def listings(draw) -> dict:
    picked = draw(
        st.dictionaries(
            st.sampled_from(PATHS),
            st.tuples(st.sampled_from([FILE, EXEC, LINK]), st.integers(0, len(BODIES) - 1)),
            max_size=6,
        )
    )
    # No path below one that is a file: keep the shallower of any two that clash.
    kept = {}
    for path in sorted(picked, key=lambda p: p.count("/")):
        if not any(path.startswith(other + "/") for other in kept):
            kept[path] = picked[path]
    return kept


def entries_of(store, drawn: dict) -> dict:
    return {p: (mode, store.objects.put("blob", BODIES[i])) for p, (mode, i) in drawn.items()}


@mounts
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(base_drawn=listings(), graded_drawn=listings())
def test_the_overlay_shows_exactly_the_graded_listing(disk_store, base_drawn, graded_drawn):
    base = entries_of(disk_store, base_drawn)
    graded = entries_of(disk_store, graded_drawn)
    key = disk_store.objects.put_record(manifest.listing_of(base))
    root = scratch.folder("test")
    try:
        target = os.path.join(root, "workspace")
        with overlay.workspace(disk_store, key, base, graded, target) as mount:
            assert mount is not None
            assert shown(mount) == expected(disk_store, graded)
    finally:
        worktree.remove(root)


def write_everywhere(top: str) -> str:
    """A script that defaces the workspace every way a process can: bytes in place, modes,
    deletions, a renamed base folder, new files and folders."""
    return f"""
set -e
cd {top}
printf tampered >> src/calc.sh
chmod 600 README.md
rm -f docs/guide.md
mv src moved
python3 -c 'import os; os.rename("docs", "docs2")'
mkdir -p new/deeper && echo new > new/deeper/file
ln -s /etc/passwd planted
echo done
"""


@mounts
def test_what_an_evaluation_does_never_reaches_the_pristine_base(disk_store):
    put = lambda data: disk_store.objects.put("blob", data)  # noqa: E731
    base = {
        "README.md": (FILE, put(b"readme\n")),
        "src/calc.sh": (EXEC, put(b"echo $(( $1 - $2 ))\n")),
        "docs/guide.md": (FILE, put(b"guide\n")),
        "docs/more/deep.md": (FILE, put(b"deep\n")),
    }
    key = disk_store.objects.put_record(manifest.listing_of(base))
    root = scratch.folder("test")
    try:
        target = os.path.join(root, "one", "workspace")
        os.makedirs(os.path.dirname(target))
        with overlay.workspace(disk_store, key, base, base, target) as mount:
            before = tree_digest(mount.lower)
            done = inside(mount, "/bin/sh", "-c", write_everywhere(target))
            # A base folder is renamed like any folder (redirect_dir), not refused with EXDEV.
            assert done.returncode == 0 and "done" in done.stdout, done.stderr
            assert tree_digest(mount.lower) == before
        assert not any("yyb-workspace" in line for line in open("/proc/self/mountinfo"))
        # The next evaluation of the same base shares the same lower and sees it as built.
        target = os.path.join(root, "two", "workspace")
        os.makedirs(os.path.dirname(target))
        with overlay.workspace(disk_store, key, base, base, target) as second:
            assert second.lower == mount.lower
            assert shown(second) == expected(disk_store, base)
    finally:
        worktree.remove(root)


@mounts
def test_a_command_evaluator_workspace_is_a_sound_git_repository(disk_store):
    put = lambda data: disk_store.objects.put("blob", data)  # noqa: E731
    base = {"calc.sh": (EXEC, put(b"minus\n")), "keep/x.txt": (FILE, put(b"x\n"))}
    graded = {
        "calc.sh": (EXEC, put(b"plus\n")),
        "keep/x.txt": base["keep/x.txt"],
        "new.txt": (FILE, put(b"n\n")),
    }
    key = disk_store.objects.put_record(manifest.listing_of(base))
    root = scratch.folder("test")
    try:
        target = os.path.join(root, "workspace")
        with overlay.workspace(disk_store, key, base, graded, target, git=True) as mount:
            done = inside(mount, "git", "-C", target, "status", "--porcelain")
            assert done.returncode == 0, done.stderr
            assert sorted(done.stdout.splitlines()) == [" M calc.sh", "?? new.txt"]
            assert inside(mount, "git", "-C", target, "fsck", "--strict").returncode == 0
    finally:
        worktree.remove(root)


def test_only_unused_pristine_bases_are_dropped(disk_store, monkeypatch):
    monkeypatch.setattr(overlay, "MAX_KEPT", 1)
    monkeypatch.setattr(overlay, "_kept", type(overlay._kept)())
    put = lambda data: disk_store.objects.put("blob", data)  # noqa: E731
    bases = [{"f": (FILE, put(bytes([n])))} for n in range(3)]
    keys = [disk_store.objects.put_record(manifest.listing_of(b)) for b in bases]
    first = overlay._acquire(disk_store, keys[0], bases[0], False)
    second = overlay._acquire(disk_store, keys[1], bases[1], False)
    assert os.path.isdir(first.folder), "a base in use was dropped"
    overlay._release(first)
    overlay._release(second)
    third = overlay._acquire(disk_store, keys[2], bases[2], False)
    assert not os.path.exists(first.folder) and not os.path.exists(second.folder)
    assert os.path.isdir(third.folder)
    overlay._release(third)


def test_without_an_overlay_the_workspace_is_rebuilt_whole(disk_store, monkeypatch):
    monkeypatch.setattr(overlay, "usable", lambda: False)
    put = lambda data: disk_store.objects.put("blob", data)  # noqa: E731
    base = {"a/b": (FILE, put(b"b\n")), "gone": (FILE, put(b"g\n"))}
    graded = {"a/b": base["a/b"], "c": (EXEC, put(b"c\n"))}
    key = disk_store.objects.put_record(manifest.listing_of(base))
    root = scratch.folder("test")
    try:
        target = os.path.join(root, "workspace")
        with overlay.workspace(disk_store, key, base, graded, target, git=True) as mount:
            assert mount is None
            assert sorted(os.listdir(target)) == [".git", "a", "c"]
            assert os.access(os.path.join(target, "c"), os.X_OK)
    finally:
        worktree.remove(root)


def _counting_builds(monkeypatch, gate=None):
    """Count pristine builds (``manifest.write_entries`` into a ``lower`` folder); each waits
    for ``gate`` when one is given."""
    real, built = manifest.write_entries, []

    def write_entries(store, proved, dest, listing=None):
        if "yyb-lower-" in dest:
            built.append(dest)
            if gate is not None:
                assert gate.wait(20)
        return real(store, proved, dest, listing)

    monkeypatch.setattr(manifest, "write_entries", write_entries)
    return built


def test_two_callers_wanting_one_base_build_it_once(disk_store, monkeypatch):
    import threading

    monkeypatch.setattr(overlay, "_kept", type(overlay._kept)())
    gate = threading.Event()
    built = _counting_builds(monkeypatch, gate)
    base = {"f": (FILE, disk_store.objects.put("blob", b"one\n"))}
    key = disk_store.objects.put_record(manifest.listing_of(base))
    got = []
    threads = [
        threading.Thread(target=lambda: got.append(overlay._acquire(disk_store, key, base, False)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for _ in range(2000):  # the first caller is building; the second must wait for it
        if built:
            break
        threading.Event().wait(0.01)
    gate.set()
    for thread in threads:
        thread.join(20)
    assert len(built) == 1 and len(got) == 2 and got[0] is got[1] and got[0].users == 2
    assert overlay._building == {}
    for pristine in got:
        overlay._release(pristine)


def test_a_build_of_one_base_keeps_no_other_waiting(disk_store, monkeypatch):
    import threading

    monkeypatch.setattr(overlay, "_kept", type(overlay._kept)())
    gate = threading.Event()
    built = _counting_builds(monkeypatch, gate)
    put = lambda data: disk_store.objects.put("blob", data)  # noqa: E731
    bases = [{"f": (FILE, put(bytes([n])))} for n in range(2)]
    keys = [disk_store.objects.put_record(manifest.listing_of(b)) for b in bases]
    slow = threading.Thread(target=overlay._acquire, args=(disk_store, keys[0], bases[0], False))
    slow.start()
    for _ in range(2000):
        if built:
            break
        threading.Event().wait(0.01)
    other = []
    fast = threading.Thread(
        target=lambda: other.append(overlay._acquire(disk_store, keys[1], bases[1], False))
    )
    gate_for_fast = threading.Timer(0.5, gate.set)  # lets the slow build go after a while
    fast.start()
    # The second base's build waits on the gate too; it must be under way while the first
    # is still held (both builds run at once, neither under the lock).
    for _ in range(500):
        if len(built) == 2:
            break
        threading.Event().wait(0.01)
    assert len(built) == 2 and slow.is_alive()
    gate_for_fast.start()
    slow.join(20)
    fast.join(20)
    assert other and os.path.isdir(other[0].folder)


def test_a_failed_warm_build_is_built_again_by_the_evaluation(disk_store, monkeypatch):
    monkeypatch.setattr(overlay, "_kept", type(overlay._kept)())
    monkeypatch.setattr(overlay, "usable", lambda: True)
    real, calls = manifest.write_entries, []

    def write_entries(store, proved, dest, listing=None):
        calls.append(dest)
        if len(calls) == 1:
            raise OSError(28, "No space left on device")
        return real(store, proved, dest, listing)

    monkeypatch.setattr(manifest, "write_entries", write_entries)
    base = {"f": (FILE, disk_store.objects.put("blob", b"x\n"))}
    key = disk_store.objects.put_record(manifest.listing_of(base))
    overlay.warm(disk_store, key, [False]).join(20)
    assert len(calls) == 1 and overlay._building == {} and not overlay._kept
    pristine = overlay._acquire(disk_store, key, base, False)
    assert len(calls) == 2 and os.path.isfile(os.path.join(pristine.folder, "f"))
    overlay._release(pristine)


@mounts
def test_the_evaluation_mounts_the_base_the_run_warmed(disk_store, monkeypatch):
    from yyb.harness import baserepo

    monkeypatch.setattr(overlay, "_kept", type(overlay._kept)())
    built = _counting_builds(monkeypatch)
    real, repositories = baserepo.write_repository, []
    monkeypatch.setattr(
        baserepo,
        "write_repository",
        lambda *args: repositories.append(args[-1]) or real(*args),
    )
    put = lambda data: disk_store.objects.put("blob", data)  # noqa: E731
    base = {"calc.sh": (EXEC, put(b"minus\n")), "keep/x.txt": (FILE, put(b"x\n"))}
    key = disk_store.objects.put_record(manifest.listing_of(base))
    assert overlay.warm(disk_store, key, []) is None
    overlay.warm(disk_store, key, [False, True]).join(20)
    # The base's files once, and its repository once, as a layer of its own: none in use.
    assert len(built) == 1 and len(repositories) == 1
    root = scratch.folder("test")
    try:
        for git in (False, True):
            target = os.path.join(root, str(git), "workspace")
            os.makedirs(os.path.dirname(target))
            with overlay.workspace(disk_store, key, base, base, target, git=git) as mount:
                assert mount.lower in built
                assert mount.repository == (repositories[0] if git else None)
                if not git:
                    assert shown(mount) == expected(disk_store, base)
        assert len(built) == 1 and len(repositories) == 1  # nothing was built again
    finally:
        worktree.remove(root)
