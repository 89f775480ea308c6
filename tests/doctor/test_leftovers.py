"""Private folders of a killed yyb process: reported by doctor, removed by the next run."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import Yyb
from yyb.harness import scratch

KILLED = """
import os, sys
from yyb.harness import scratch
path = scratch.folder("grade", sys.argv[1])
with open(os.path.join(path, "solution.patch"), "w") as handle:
    handle.write("hidden grader asset\\n")
print(path, flush=True)
os.kill(os.getpid(), 9)
"""


def killed_with_a_folder(store_path: str) -> str:
    """A yyb process that made a private folder and was killed: that folder."""
    done = subprocess.run(
        [sys.executable, "-c", KILLED, store_path], capture_output=True, text=True
    )
    assert done.returncode == -9
    path = done.stdout.strip()
    assert os.path.isfile(os.path.join(path, "solution.patch"))
    return path


def test_a_killed_process_leaves_a_folder_that_doctor_names_and_recover_removes(copy):
    store, plan_oid, plan_file = copy
    left = killed_with_a_folder(store.path)
    run_folder = os.path.dirname(left)
    assert scratch.leftovers(store.path) == [run_folder]
    yyb = Yyb(store.path)
    doctor = yyb("doctor")
    assert doctor.exit_code == 1
    assert f"error leftover-run-folder {run_folder}:" in doctor.stdout
    recovered = yyb("recover", "--plan", plan_file)
    assert recovered.exit_code == 0
    assert f"removed {run_folder}" in recovered.stderr
    assert not os.path.exists(run_folder)
    assert yyb("doctor").exit_code == 0


def test_a_live_process_keeps_its_folder_and_a_normal_exit_removes_it(tmp_path):
    mine = scratch.folder("attempt", str(tmp_path))
    assert os.path.dirname(mine) not in scratch.leftovers()  # this process is alive
    assert os.path.dirname(mine) not in scratch.sweep()
    assert os.path.isdir(mine)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from yyb.harness import scratch; print(scratch.folder('attempt'))",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and not os.path.exists(done.stdout.strip())


def test_another_users_run_folder_is_neither_judged_nor_removed(tmp_path, monkeypatch):
    """A run folder another user's killed yyb left in the shared temp folder is not ours:
    the sweep passes it by, instead of failing on its lock (unreadable to us) or, as root,
    removing it."""
    import tempfile

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    theirs = os.path.dirname(killed_with_a_folder(str(tmp_path / "store")))
    assert scratch.leftovers() == [theirs]  # abandoned, and ours: it would be swept
    other = os.geteuid() + 1 if os.geteuid() != 0 else 65534
    if os.geteuid() == 0:
        os.chown(theirs, other, other)
        os.chown(os.path.join(theirs, scratch.LOCK), other, other)
        os.chmod(os.path.join(theirs, scratch.LOCK), 0)
    else:
        # An unprivileged test cannot give a folder away: pretend to be another uid.
        monkeypatch.setattr(os, "geteuid", lambda: other)
    assert scratch.leftovers() == []
    assert scratch.sweep() == []
    assert os.path.isdir(theirs)


TEMP_TOPS = """
import json, sys
from yyb.harness import scratch
mine = scratch.temp_top()  # before anything imports tempfile
assert "tempfile" not in sys.modules, "temp_top imported tempfile"
import tempfile
print(json.dumps([mine, tempfile.gettempdir()]))
"""


def test_the_temp_folder_doctor_searches_is_the_one_run_folders_are_made_in(tmp_path):
    """``scratch.temp_top`` (doctor's, without tempfile) finds the folder tempfile would, in a
    fresh process, whatever $TMPDIR, $TEMP and $TMP say: set, empty, missing, a file, not
    writable (unless root, who may write anywhere), relative."""
    import json

    writable, locked, a_file = tmp_path / "w", tmp_path / "locked", tmp_path / "file"
    writable.mkdir()
    locked.mkdir(mode=0o500)
    a_file.write_text("")
    cases = [
        {},
        {"TMPDIR": str(writable)},
        {"TMPDIR": ""},
        {"TMPDIR": str(tmp_path / "missing"), "TEMP": str(writable)},
        {"TMPDIR": str(a_file), "TMP": str(writable)},
        {"TMPDIR": str(locked), "TMP": str(writable)},
        {"TMPDIR": "w"},  # relative to the current folder
    ]
    base = {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "TEMP", "TMP")}
    for case in cases:
        done = subprocess.run(
            [sys.executable, "-c", TEMP_TOPS],
            env={**base, **case},
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, (case, done.stderr)
        ours, theirs = json.loads(done.stdout)
        assert ours == theirs, case
