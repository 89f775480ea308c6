"""A candidate against its disk: many files, each under the file size limit, past the size its
folders may take together.

The plan bounds the attempt's disk at 4 MiB and each file at 3 MiB. The candidate writes 2 MiB
files of random bytes (so the store cannot share them) until it is refused: the kernel stops it
at the bound, the terminal names the disk limit, and the store holds no more than the bound.
"""

from __future__ import annotations

import pytest

DISK_MIB = 4
SMALL = {"memory_mib": 256, "processes": 64, "file_mib": 3, "open_files": 64, "disk_mib": DISK_MIB}

FILLER = """
for i in 1 2 3 4; do
  head -c 2097152 /dev/urandom > "$1/fill$i.bin" 2>/dev/null \
    || { echo "filler: refused $i"; exit 1; }
  echo "filler: wrote $i"
done
envelope succeeded
"""


@pytest.fixture
def limited(bench):
    return bench.limited(SMALL)


def run_filler(bench, name: str, where: str):
    """Run a candidate that fills ``where`` (a shell word) with 2 MiB files."""
    script = FILLER.replace('"$1/', f'"{where}/')
    model = bench.behaviour(name, script)
    _, [result] = bench.run([model])
    assert bench.alive() == []
    return result, bench.linked(result, "stdout").decode(errors="replace")


def stored_bytes(bench) -> int:
    return sum(len(body) for body in bench.every_object().values())


def test_a_workspace_filled_past_its_disk_is_stopped_and_named(limited):
    result, stdout = run_filler(limited, "filler", ".")
    assert "filler: wrote 1" in stdout
    assert "filler: wrote 3" not in stdout and "filler: refused" in stdout
    terminal = limited.terminal(result)
    assert terminal["class"] == "model_failure"
    assert "filled its disk (the 4 MiB disk limit)" in terminal["reason"]
    execution = limited.record(terminal["links"]["execution"])
    used = execution["runtime"]["resources"]
    assert used["disk_full"] is True and used["disk_used_bytes"] <= DISK_MIB << 20
    assert stored_bytes(limited) < DISK_MIB << 20  # the excess never reached the store
    receipt = limited.record(terminal["links"]["receipt"])
    assert receipt["sandbox"]["limits"]["disk_mib"] == DISK_MIB


def test_home_and_temp_folders_count_with_the_workspace(limited):
    # Two files in HOME, two in TMPDIR: the third is refused wherever it goes.
    script = """
for where in "$HOME" "$TMPDIR" "$XDG_CACHE_HOME"; do
  head -c 1572864 /dev/urandom > "$where/a.bin" 2>/dev/null || { echo "refused in $where"; exit 1; }
done
envelope succeeded
"""
    model = limited.behaviour("spreader", script)
    _, [result] = limited.run([model])
    stdout = limited.linked(result, "stdout").decode(errors="replace")
    assert "refused in" in stdout
    assert "filled its disk" in limited.terminal(result)["reason"]


def test_the_sandboxes_own_file_systems_are_bounded(limited):
    # /tmp, /run and /dev/shm are not the attempt's folders: each has a bound of its own.
    script = """
df -k /tmp /run /dev/shm | tail -n +2
envelope succeeded
"""
    model = limited.behaviour("sizer", script)
    _, [result] = limited.run([model])
    stdout = limited.linked(result, "stdout").decode(errors="replace")
    sizes = [int(line.split()[1]) for line in stdout.splitlines() if line.startswith("tmpfs")]
    assert len(sizes) == 3 and all(size <= 64 * 1024 for size in sizes), stdout


def test_a_kept_workspace_is_rebuilt_on_the_host_from_its_listing(limited, tmp_path, monkeypatch):
    # The disk goes with its holder; --keep-workspaces leaves the final files where a person
    # can look, rebuilt from what the store retained (never more than the disk held).
    import tempfile

    from yyb.attempts import run as attempts_run

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    model = limited.behaviour("keeper", "echo kept > note.txt\nenvelope succeeded\n")
    plan = limited.plan([model])
    ctx = limited.context(plan)
    ctx.keep_workspaces = True
    [result] = attempts_run.run_plan(ctx, 1)
    kept = [p for p in tmp_path.glob("yyb-attempt-*/workspace/note.txt")]
    assert [p.read_text() for p in kept] == ["kept\n"]
    assert limited.terminal(result)["class"] != "environment_failure"
