"""Hostile candidates against the resource limits: memory, processes, file size, open files.

Each runs with small limits (the plan's ``tool_policy.limits``) and must be stopped by the
kernel, leave nothing running, and have its limits on record in the workspace receipt.
"""

from __future__ import annotations

import json

import pytest

SMALL = {"memory_mib": 64, "processes": 32, "file_mib": 8, "open_files": 64}


@pytest.fixture
def limited(bench):
    bench.configure()
    data = json.loads(bench.config_path.read_text())
    data["tool_policy"]["limits"] = SMALL
    bench.config_path.write_text(json.dumps(data, indent=2))
    return bench


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


def test_a_memory_hog_is_refused_its_memory(limited):
    # awk grows one string past the 64 MiB limit; it cannot, and says so.
    result, stdout = run_one(
        limited,
        "hog",
        """
awk 'BEGIN { s = "x"; for (i = 0; i < 30; i++) s = s s; print length(s) }' \\
  && echo "hog: allocated" || echo "hog: refused"
envelope succeeded
""",
    )
    assert "hog: refused" in stdout and "hog: allocated" not in stdout


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
    assert limited.terminal(result)["class"] in ("harness_failure", "model_failure")


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
    _, stdout = run_one(limited, "counter", "ulimit -a\nenvelope succeeded\n")
    lines = dict(line.rsplit(None, 1) for line in stdout.splitlines() if line.strip())
    assert lines["nofiles"] == "64" and lines["data(kbytes)"] == str(64 * 1024)
    assert lines["file(blocks)"] == str(8 * 2048)
