"""The sandbox on an environment's root: links in the tree never lead a mount onto the host.

bubblewrap follows links while it makes the mount points, in a root where the host's is
reachable as /oldroot; tests/attempts/test_environment_isolation.py shows the effect for real,
these show the command line the sandbox builds.
"""

from __future__ import annotations

import os

import pytest

from yyb.errors import EnvironmentSpecError
from yyb.harness import sandbox


def tree(tmp_path, links: dict[str, str], folders=("bin", "etc")) -> str:
    root = tmp_path / "root"
    for name in folders:
        (root / name).mkdir(parents=True)
    for name, target in links.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / name)
    return str(root)


def shown(args: list[str]) -> dict[str, str]:
    """Where each path inside comes from, by the options that make it (the last one wins)."""
    found = {}
    for at, word in enumerate(args):
        if word in ("--symlink", "--ro-bind", "--bind"):
            found[args[at + 2]] = f"{word} {args[at + 1]}"
    return found


def argv(root: str, mounts=(), read_only=None) -> list[str]:
    box = sandbox.Sandbox(writable=[], os_root=root, mounts=mounts, read_only=read_only or {})
    return box.argv(["/bin/true"], 3)


def test_a_top_level_link_where_yyb_mounts_is_not_shown(tmp_path):
    root = tree(tmp_path, {"testbed": "/oldroot/etc", "srv": "/oldroot/srv", "lib": "usr/lib"})
    made = shown(argv(root, ((str(tmp_path), "/testbed", True), (str(tmp_path), "/srv/x", False))))
    assert made["/testbed"] == f"--bind {tmp_path}"
    assert "/srv" not in made and made["/srv/x"] == f"--ro-bind {tmp_path}"
    assert made["/lib"] == "--symlink usr/lib"  # a link nothing is mounted under stays


def test_the_images_own_drop_folder_is_never_shown(tmp_path):
    root = tree(tmp_path, {".yyb-drop": "/oldroot/var/tmp"})
    made = shown(argv(root))
    assert not any(path == sandbox.DROP for path in made)
    if os.geteuid() == 0:
        setpriv = os.path.realpath(sandbox.setpriv_path())
        assert made[f"{sandbox.DROP}/setpriv"] == f"--ro-bind {setpriv}"


@pytest.mark.parametrize("link", ["yyb/python", "opt/tools"])
def test_a_link_inside_a_folder_on_the_way_to_a_mount_is_refused(tmp_path, link):
    root = tree(tmp_path, {link: "/oldroot/root"}, folders=("bin", "yyb", "opt"))
    with pytest.raises(EnvironmentSpecError) as caught:
        argv(root, ((str(tmp_path), "/yyb/python", False),), {"/opt/tools/bin": str(tmp_path)})
    assert caught.value.field == "/" + link


def test_a_tree_without_links_on_the_way_is_shown_whole(tmp_path):
    root = tree(tmp_path, {}, folders=("bin", "etc", "yyb"))
    made = shown(argv(root, ((str(tmp_path), "/yyb/python", False),)))
    assert made["/bin"] == f"--ro-bind {root}/bin" and made["/yyb"] == f"--ro-bind {root}/yyb"
    assert made["/yyb/python"] == f"--ro-bind {tmp_path}"


@pytest.mark.skipif(os.geteuid() != 0, reason="a setuid-root file can only be made as root")
def test_a_setuid_root_file_left_in_a_tree_gives_no_root(open_folder):
    """What the build strips (tree.sanitise) would not help if it stayed: the tree is mounted
    nosuid and the process has no_new_privs."""
    import shutil
    import subprocess

    from tests.harness.environments import images

    try:
        root = images.busybox_root(str(open_folder / "root"))
    except FileNotFoundError:
        pytest.skip("busybox-static is not installed")
    planted = os.path.join(root, "sbin", "busybox")  # busybox takes its applet from argv[0]
    os.mkdir(os.path.dirname(planted))
    shutil.copy(os.path.join(root, "bin", "busybox"), planted)
    os.chmod(planted, 0o4755)
    assert os.stat(planted).st_uid == 0
    box = sandbox.Sandbox(writable=[], os_root=root)
    with box.launch(["/sbin/busybox", "sh", "-c", "id -u; cat /proc/self/status"]) as launch:
        done = subprocess.run(
            launch.argv, capture_output=True, text=True, timeout=60, pass_fds=launch.pass_fds
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == str(sandbox.sandbox_uid())
    assert "\nCapEff:\t0000000000000000\n" in done.stdout


def test_the_candidate_writes_its_own_tmp_and_shm_as_root_or_not(tmp_path):
    """/tmp and /dev/shm are the sandbox's own, sticky and writable by whoever it runs as
    (under root, the dropped uid): a CLI that writes a trajectory to /tmp works."""
    import subprocess

    box = sandbox.Sandbox(writable=[])
    script = "echo x > /tmp/t && echo y > /dev/shm/s && stat -c %a /tmp /dev/shm && cat /tmp/t"
    with box.launch(["/bin/sh", "-c", script]) as launch:
        done = subprocess.run(
            launch.argv, capture_output=True, text=True, timeout=60, pass_fds=launch.pass_fds
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1777", "1777", "x"]
