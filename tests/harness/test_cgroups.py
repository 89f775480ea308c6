"""Control groups: made below the controller's own, joined before anything runs, counted by
the kernel, removed after; groups left by a killed controller are swept, live ones are not."""

from __future__ import annotations

import os
import subprocess

import pytest

from yyb.harness import cgroups

LIMITS = {"memory_mib": 48, "processes": 12}


@pytest.fixture
def group():
    made = cgroups.create(LIMITS)
    if made is None:
        pytest.skip("this host lets yyb make no control group (rlimits hold instead)")
    yield made
    made.remove()


def run_in(group, script: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*group.join_prefix(), "/bin/sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_process_joins_its_group_before_it_runs(group):
    done = run_in(group, "cat /proc/self/cgroup")
    assert done.returncode == 0, done.stderr
    named = {os.path.basename(group.memory), os.path.basename(group.pids)}
    lines = done.stdout.splitlines()
    assert all(any(line.endswith("/" + name) for line in lines) for name in named), lines


def test_the_kernel_counts_a_memory_hog_and_a_fork_bomb(group):
    hog = run_in(group, "exec awk 'BEGIN { s = \"x\"; for (i = 0; i < 30; i++) s = s s }'")
    assert hog.returncode in (137, -9)
    bomb = run_in(group, "for i in $(seq 40); do sleep 3 & done; wait")
    assert "fork" in bomb.stderr.lower() or bomb.returncode != 0
    subprocess.run(["pkill", "-f", "sleep 3"], check=False)
    usage = group.usage()
    assert usage["oom_kills"] >= 1
    assert usage["peak_memory_bytes"] <= LIMITS["memory_mib"] << 20
    assert usage["refused_processes"] >= 1
    if usage["peak_processes"] is not None:
        assert usage["peak_processes"] == LIMITS["processes"]


def test_a_group_is_removed_once_empty_and_a_dead_creators_group_is_swept(group):
    # A group named for a pid that no longer exists, as a controller killed by SIGKILL leaves.
    child = subprocess.Popen(["/bin/true"])
    child.wait()
    parent = os.path.dirname(group.pids)
    left = os.path.join(parent, f"{cgroups.PREFIX}{child.pid}-deadbeef0000")
    os.mkdir(left)
    live = os.path.join(parent, f"{cgroups.PREFIX}{os.getpid()}-livelive0000")
    os.mkdir(live)
    try:
        swept = cgroups.sweep()
        assert left in swept and not os.path.exists(left)
        assert os.path.isdir(live) and os.path.isdir(group.pids)  # ours: not touched
    finally:
        for folder in (left, live):
            if os.path.isdir(folder):
                os.rmdir(folder)
    group.remove()
    assert not os.path.exists(group.memory) and not os.path.exists(group.pids)


def test_no_group_where_the_hierarchy_cannot_be_written(monkeypatch):
    monkeypatch.setattr(cgroups, "_mounts", lambda: {})
    assert cgroups.create(LIMITS) is None
    assert cgroups.sweep() == []


def test_a_group_that_cannot_be_joined_is_not_used(monkeypatch):
    """Made but not joinable (a delegation that stops short, say): every sandboxed start would
    fail with 125 and read as the candidate's failure, so rlimits hold instead."""
    made = cgroups.create(LIMITS)
    if made is None:
        pytest.skip("this host lets yyb make no control group (rlimits hold instead)")
    made.remove()

    def ours() -> set[str]:
        mine = f"{cgroups.PREFIX}{os.getpid()}-"
        return {n for p in cgroups._parents() for n in os.listdir(p) if n.startswith(mine)}

    before = ours()
    monkeypatch.setattr(cgroups, "_joinable", {})
    monkeypatch.setattr(
        cgroups.Group, "join_prefix", lambda self: ["/bin/sh", "-c", "exit 125", "join", "--"]
    )
    assert cgroups.create(LIMITS) is None
    assert ours() == before  # the group it made was removed
