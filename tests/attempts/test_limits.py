"""Hostile candidates against the resource limits: memory, processes, file size, open files.

Each runs with small limits (the plan's ``tool_policy.limits``) and must be stopped by the
kernel, leave nothing running, and have its limits on record in the workspace receipt.
"""

from __future__ import annotations

import pytest

SMALL = {"memory_mib": 64, "processes": 32, "file_mib": 8, "open_files": 64, "disk_mib": 64}


@pytest.fixture
def limited(bench):
    return bench.limited(SMALL)


def run_one(bench, name: str, script: str):
    model = bench.behaviour(name, script)
    _, [result] = bench.run([model])
    assert bench.alive() == []
    return result, bench.linked(result, "stdout").decode(errors="replace")


def test_the_limits_are_planned_and_recorded(limited):
    result, _ = run_one(limited, "quiet", "envelope succeeded\n")
    receipt = limited.record(limited.terminal(result)["links"]["receipt"])
    assert receipt["sandbox"]["limits"] == SMALL
    plan = limited.record(limited.terminal(result)["links"]["plan"])
    assert plan["tool_policy"]["limits"] == SMALL


def resources(bench, result) -> dict:
    """What held the memory and process limits, and what the kernel counted."""
    execution = bench.record(bench.terminal(result)["links"]["execution"])
    return execution["runtime"]["resources"]


HOG = """
awk 'BEGIN { s = "x"; for (i = 0; i < 30; i++) s = s s; print length(s) }' \\
  && echo "hog: allocated" || echo "hog: refused"
envelope succeeded
"""


def test_a_memory_hog_is_refused_its_memory(limited):
    # awk grows one string past the 64 MiB limit; it cannot. With a control group the kernel
    # kills it and counts the kill, and the terminal names the limit even though the
    # candidate itself went on and finished.
    result, stdout = run_one(limited, "hog", HOG)
    assert "hog: refused" in stdout and "hog: allocated" not in stdout
    used = resources(limited, result)
    if used["enforced_by"] == "rlimit":
        pytest.skip("no control group on this host: rlimits refuse, but count nothing")
    assert used["oom_kills"] >= 1
    assert used["peak_memory_bytes"] <= SMALL["memory_mib"] << 20
    terminal = limited.terminal(result)
    assert "ran out of memory (the 64 MiB memory limit)" in terminal["reason"]


def test_a_candidate_that_is_itself_the_hog_is_stopped_and_named(limited):
    result, _ = run_one(
        limited,
        "bighog",
        """exec awk 'BEGIN { s = "x"; for (i = 0; i < 30; i++) s = s s; print length(s) }'""",
    )
    terminal = limited.terminal(result)
    if resources(limited, result)["enforced_by"] == "rlimit":
        # awk is refused its memory and exits without an envelope: nothing names the limit.
        assert terminal["class"] in ("model_failure", "harness_failure")
        pytest.skip("no control group on this host: rlimits refuse, but count nothing")
    assert terminal["class"] == "model_failure"
    assert "stopped by its resource limits: it ran out of memory" in terminal["reason"]


def test_a_fork_bomb_is_held_to_its_process_limit(limited):
    """Each child it starts is counted in a file; the shell dies when it can fork no more."""
    result, _ = run_one(
        limited,
        "forker",
        """
n=0
while [ $n -lt 200 ]; do
  sleep 5 &
  n=$((n + 1))
  echo $n > started
done
envelope succeeded
""",
    )
    files = listing_files(limited, result)
    assert int(files["started"]) < SMALL["processes"]
    terminal = limited.terminal(result)
    assert terminal["class"] in ("harness_failure", "model_failure")
    used = resources(limited, result)
    if used["enforced_by"] == "rlimit":
        pytest.skip("no control group on this host: rlimits refuse, but count nothing")
    assert used["refused_processes"] >= 1
    assert used["peak_processes"] == SMALL["processes"]
    assert "reached the process limit (32 processes)" in terminal["reason"]


def test_without_a_control_group_rlimits_hold(limited, monkeypatch):
    """Where the host lets yyb make no control group (an unprivileged user, mostly), the
    same hog and bomb are refused by rlimits, and the record says which held."""
    from yyb.harness import cgroups

    monkeypatch.setattr(cgroups, "create", lambda limits: None)
    result, stdout = run_one(limited, "hog", HOG)
    assert "hog: refused" in stdout and "hog: allocated" not in stdout
    used = resources(limited, result)
    assert {name: used[name] for name in used if not name.startswith("disk_")} == {
        "enforced_by": "rlimit",
        "oom_kills": None,
        "refused_processes": None,
        "peak_memory_bytes": None,
        "peak_processes": None,
    }
    assert used["disk_full"] is False  # the disk is a tmpfs, with or without a group
    assert "resource limits" not in limited.terminal(result)["reason"]


def listing_files(bench, result) -> dict[str, bytes]:
    post = bench.record(bench.terminal(result)["links"]["manifest"])
    listing = bench.record(post["links"]["listing"])
    files = listing["links"]["files"]
    return {path: bench.body(files[i]) for path, _, i in listing["entries"]}


def test_a_writer_past_the_file_size_limit_is_stopped_and_named(limited):
    """A sparse file past the limit is refused; a process writing past it is killed
    (SIGXFSZ), and when that is the candidate itself its terminal names the limit."""
    result, stdout = run_one(
        limited,
        "writer",
        """
truncate -s 100M sparse.bin 2>/dev/null && echo "writer: sparse made"
exec dd if=/dev/zero of=big.bin bs=1M count=20
""",
    )
    terminal = limited.terminal(result)
    assert "writer: sparse made" not in stdout
    assert terminal["class"] == "model_failure"
    assert "file size limit (8 MiB)" in terminal["reason"]
    assert len(listing_files(limited, result)["big.bin"]) == 8 << 20


def test_the_limits_are_in_force_inside(limited):
    result, stdout = run_one(limited, "counter", "ulimit -a\nenvelope succeeded\n")
    lines = dict(line.rsplit(None, 1) for line in stdout.splitlines() if line.strip())
    assert lines["nofiles"] == "64" and lines["file(blocks)"] == str(8 * 2048)
    if resources(limited, result)["enforced_by"] == "rlimit":
        assert lines["data(kbytes)"] == str(64 * 1024)
    else:  # the control group holds memory: no per-process data limit on top
        assert lines["data(kbytes)"] == "unlimited"
