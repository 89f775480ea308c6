"""The attempt's disk: a tmpfs of a given size in a holder's namespaces, for root and for an
unprivileged controller alike; nothing of it is left on the host once it is closed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from yyb.harness import disk, probe

# Run by the controller under test (root, or uid 65534 through setpriv): a sandboxed writer of
# three 1 MiB files on a 2 MiB disk; prints what it saw and what the controller reads back.
CONTROLLER = """
import json, os, sys
from yyb.harness import disk, sandbox
root = sys.argv[1]
with disk.Disk.mount(root, 2) as held:
    mine = held.reach(root)
    os.mkdir(os.path.join(mine, "workspace"))
    sandbox.hand_over(mine)
    work = os.path.join(root, "workspace")
    box = sandbox.Sandbox(writable=[work], cwd=work, disk=held)
    script = ('for i in 1 2 3; do head -c 1048576 /dev/urandom > f$i 2>/dev/null '
              '&& echo wrote $i || echo refused $i; done')
    outcome, resources = box.run(["/bin/sh", "-c", script], {"PATH": "/usr/bin:/bin"}, 30000)
    sizes = {n: os.lstat(os.path.join(mine, "workspace", n)).st_size
             for n in os.listdir(os.path.join(mine, "workspace"))}
print(json.dumps({"stdout": outcome.stdout.data.decode(), "stderr": outcome.stderr.data.decode(),
                  "resources": resources, "sizes": sizes, "left": os.listdir(root)}))
"""


def run_controller(root: Path, prefix: list[str], python: str) -> dict:
    package = str(Path(disk.__file__).resolve().parents[2])
    done = subprocess.run(
        [*prefix, python, "-c", CONTROLLER, str(root)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": package},
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def check_bounded(seen: dict) -> None:
    assert "wrote 1" in seen["stdout"] and "refused 3" in seen["stdout"], seen
    assert sum(seen["sizes"].values()) <= 2 << 20
    assert seen["resources"]["disk_full"] is True
    assert seen["resources"]["disk_used_bytes"] <= 2 << 20
    assert seen["left"] == []  # the tmpfs went with its holder; the host folder is empty


def test_a_disk_holds_its_size_for_this_controller(tmp_path):
    root = tmp_path / "attempt"
    root.mkdir()
    check_bounded(run_controller(root, [], sys.executable))


def test_a_disk_holds_its_size_for_an_unprivileged_controller(open_folder):
    """The controller itself as uid 65534: the holder makes a user namespace to mount in."""
    if os.geteuid() != 0:
        root = open_folder / "attempt"
        root.mkdir()
        check_bounded(run_controller(root, [], sys.executable))
        return
    python = shutil.which("python3", path="/usr/bin:/bin")
    package = Path(disk.__file__).resolve().parents[2]
    for path in (python, *[str(p) for p in package.parents], str(package)):
        if path and path != "/" and not os.stat(path).st_mode & 0o005:
            pytest.skip(f"{path} cannot be read by an unprivileged user")
    root = open_folder / "attempt"
    root.mkdir()
    os.chown(root, 65534, 65534)
    prefix = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    check_bounded(run_controller(root, prefix, python))


def test_a_disk_refused_by_the_host_is_named(tmp_path):
    with pytest.raises(disk.DiskUnavailable, match="could not be mounted"):
        disk.Disk.mount(str(tmp_path / "missing"), 1)


def test_the_probe_verifies_the_disk():
    _, verified = probe.verify()
    assert any("disk that a larger file does not fit" in line for line in verified)
