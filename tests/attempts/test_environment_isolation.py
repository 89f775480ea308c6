"""The isolation suites on an ``oci`` environment: a hostile busybox image, run as candidate.

The same properties as on the host's OS folders (tests/attempts/test_escape.py,
test_isolation.py) must hold when the candidate's root is an image: no capability,
no_new_privs, a seccomp filter, no user namespace, not root, its limits, nothing of the store,
the repository, the config or the controller's home visible, and loopback only. The images
are hostile too: one plants setuid and world-writable files, device nodes and a fake
``/usr/bin/setpriv`` that would keep root (yyb drops root with the host's setpriv, shown at
``/.yyb-drop``); another links ``/etc`` to ``/``, ``/usr`` to a host path holding a canary
and ``/.yyb-drop`` to a host folder by way of ``/oldroot`` (where bubblewrap, while it sets up
the mounts, would reach the host's root). Each bench runs one probe; the tests read its
stdout. tests/attempts/test_rootfs_isolation.py runs the same probe on a Debian root (deep).
"""

from __future__ import annotations

import json
import os
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.grading.conftest import build_bench, write
from tests.harness.environments import images

pytestmark = pytest.mark.skipif(
    not os.path.exists("/bin/busybox") and not os.path.exists("/usr/bin/busybox"),
    reason="busybox-static is not installed",
)
LIMITS = {"memory_mib": 256, "processes": 64, "file_mib": 8, "open_files": 64, "disk_mib": 64}
EXTRA_APPLETS = ("unshare", "nsenter", "mount", "umount", "chroot", "kill")
# Whatever it is started with, it keeps root and runs the rest: what an image's author would
# put where a careless sandbox looks for setpriv.
FAKE_SETPRIV = """#!/bin/sh
echo FAKE-SETPRIV-RAN
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done
shift
exec "$@"
"""
PROBE = r"""
grep -E '^(Uid|Gid|CapEff|CapPrm|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status
try() {  # try NAME COMMAND...: run it, say whether it worked
  name="$1"; shift
  if "$@" >/dev/null 2>&1; then echo "escape $name: WORKED"; else echo "escape $name: refused"; fi
}
try umount umount -l /tmp
try remount-root mount -o remount,bind,rw /
try remount-bin mount -o remount,bind,rw /bin
try mount-tmpfs mount -t tmpfs none /bin
try setns-net nsenter --net=/proc/1/ns/net true
try setns-mnt nsenter --mount=/proc/1/ns/mnt true
try userns unshare --user --map-root-user true
try chroot chroot / true
try write-root sh -c 'echo x > /PWNED'
try write-bin sh -c 'echo x > /bin/PWNED'
try write-etc sh -c 'echo x > /etc/PWNED'
try overwrite-sh sh -c 'echo x >> /bin/busybox'
try mkdir-root mkdir /PWNED-dir
try chmod-bin chmod 0777 /bin
try kill-init sh -c 'kill -9 1; sleep 0.2; [ ! -e /proc/1/status ]'
for path in @PATHS@; do
  if [ -e "$path" ] || [ -L "$path" ]; then echo "visible $path"; else echo "absent $path"; fi
done
echo "== mountinfo"
cat /proc/self/mountinfo
echo "== end"
echo "interfaces $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')"
echo "open-files $(ulimit -n)"
head -c 12582912 /dev/zero > big 2>/dev/null
echo "big $(wc -c < big)"
rm -f big
@MORE@
envelope succeeded
"""
# What the planted image's probe adds: the planted files as the candidate finds them.
PLANTED = r"""
echo "suid-mode $(stat -c %a /bin/suid)"
echo "suid-uid $(/bin/suid id -u)"
echo "sgid-mode $(stat -c %a /bin/sgid)"
echo "open-mode $(stat -c %a /etc/open)"
for node in /bin/disk /etc/mem /etc/pipe; do
  if [ -e "$node" ]; then echo "node $node: present"; else echo "node $node: absent"; fi
done
echo "id $(id -u) $(id -g)"
"""
# What the linked image's probe adds: where its links lead inside.
LINKED = r"""
echo "etc-holds $(ls /etc/ | tr '\n' ' ')"
echo "usr-target $(readlink /usr)"
cat /usr/canary /etc/passwd /etc/shadow 2>&1 | head -n 5
ls /.yyb-drop/ 2>&1 | tr '\n' ' '
echo
"""


def busybox_entries(top: Path) -> list[images.Entry]:
    """The busybox root (tests/harness/environments/images.py) with the applets an escape
    needs, as layer entries."""
    root = images.busybox_root(str(top))
    for applet in EXTRA_APPLETS:
        os.symlink("busybox", os.path.join(root, "bin", applet))
    return images.folder_entries(root)


def planted_layers(top: Path) -> list:
    with open(images.busybox_path(), "rb") as handle:
        busybox = handle.read()
    hostile = [
        images.folder("usr"),
        images.folder("usr/bin"),
        images.folder("usr/sbin"),
        images.file("usr/bin/setpriv", FAKE_SETPRIV, 0o755),
        images.file("usr/sbin/setpriv", FAKE_SETPRIV, 0o755),
        images.file("bin/suid", busybox, 0o4755),
        images.file("bin/sgid", busybox, 0o2755),
        images.file("etc/open", "anyone may write me\n", 0o666),
        images.device("bin/disk", "blk"),
        images.device("etc/mem", "chr"),
        images.device("etc/pipe", "fifo"),
    ]
    return [busybox_entries(top / "root"), hostile]


def linked_layers(top: Path, host_usr: Path, landing: Path) -> list:
    entries = [e for e in busybox_entries(top / "root") if not e[0].name.startswith("etc")]
    return [
        entries,
        [
            images.symlink("etc", "/"),
            images.symlink("usr", str(host_usr)),
            images.symlink(".yyb-drop", "/oldroot" + str(landing)),
        ],
    ]


@contextmanager
def hermetic_module(top: Path):
    """A home and temp folder of the module's own (the autouse ``hermetic`` fixture is the
    tests', which a module fixture runs before)."""
    import tempfile

    with pytest.MonkeyPatch.context() as patch:
        for name in ("home", "tmp"):
            (top / name).mkdir()
        patch.setenv("HOME", str(top / "home"))
        patch.setenv("TMPDIR", str(top / "tmp"))
        patch.setattr(tempfile, "tempdir", None)
        yield top / "home"


@dataclass
class Probed:
    """One run of the probe: the bench, its result, its stdout and the places it looked for."""

    bench: object
    result: object
    stdout: str
    places: dict[str, str]


def on_environment(bench, spec: dict, more: str = "", limits: dict | None = None) -> Probed:
    """Declare ``spec`` as the case's environment, configure the bench (with ``limits``) and
    run the probe (with ``more`` at its end) once."""
    write(bench.root / "env.json", json.dumps(spec))
    text = bench.task_path.read_text()
    text = text.replace(
        "    grader_profile: tests\n", "    grader_profile: tests\n    environment: env.json\n"
    )
    write(bench.task_path, text)
    data = bench.configure()
    data["tool_policy"]["limits"] = limits or LIMITS
    bench.config_path.write_text(json.dumps(data, indent=2))
    places = protected(bench)
    paths = " ".join(f'"{p}"' for p in places.values())
    bench.behaviour("probe", PROBE.replace("@PATHS@", paths).replace("@MORE@", more))
    _, [result] = bench.run(["zz/probe"])
    stdout = bench.body(bench.terminal(result)["links"]["stdout"]).decode()
    return Probed(bench, result, stdout, places)


def protected(bench) -> dict[str, str]:
    """What a candidate must never see, by name."""
    return {
        "store": bench.store_path,
        "store-format": os.path.join(bench.store_path, "format"),
        "environments": os.path.join(bench.store_path, "environments"),
        "repo": str(bench.repo),
        "config": str(bench.config_path),
        "home": os.path.expanduser("~"),
        "graders": str(bench.root / "graders"),
    }


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    top = tmp_path_factory.mktemp("planted")
    with hermetic_module(top):
        bench = build_bench(top / "bench")
        built = images.layout(str(bench.root / "image"), planted_layers(top / "layers"))
        spec = {"name": "planted", "kind": "oci", "oci": {"image": built.digest}}
        yield on_environment(bench, {**spec, "source": "image"}, PLANTED)


@pytest.fixture(scope="module")
def linked(tmp_path_factory):
    top = tmp_path_factory.mktemp("linked")
    with hermetic_module(top):
        host_usr, landing = top / "host-usr", top / "landing"
        host_usr.mkdir()
        landing.mkdir()
        canary = f"HOST-CANARY-{uuid.uuid4().hex}"
        (host_usr / "canary").write_text(canary + "\n")
        bench = build_bench(top / "bench")
        layers = linked_layers(top / "layers", host_usr, landing)
        built = images.layout(str(bench.root / "image"), layers)
        spec = {"name": "linked", "kind": "oci", "oci": {"image": built.digest}}
        yield on_environment(bench, {**spec, "source": "image"}, LINKED), canary, landing


def status(stdout: str) -> dict[str, str]:
    found = {}
    for line in stdout.splitlines():
        name, sep, value = line.partition(":")
        if sep and name in ("Uid", "Gid", "CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs"):
            found[name] = value.split()[0]
        elif sep and name == "Seccomp":
            found[name] = value.split()[0]
    return found


def assert_confined(stdout: str) -> None:
    """The properties every sandbox holds, read from the probe's stdout."""
    assert "CANDIDATE-RAN" in stdout, stdout
    found = status(stdout)
    for name in ("CapEff", "CapPrm", "CapBnd", "CapAmb"):
        assert found[name].strip("0") == "", (name, found)
    assert found["NoNewPrivs"] == "1" and found["Seccomp"] == "2", found
    if os.geteuid() == 0:
        assert found["Uid"] != "0" and found["Gid"] != "0", found
    escapes = [line for line in stdout.splitlines() if line.startswith("escape ")]
    assert len(escapes) == 15, escapes
    assert all(line.endswith(": refused") for line in escapes), escapes
    interfaces = next(line for line in stdout.splitlines() if line.startswith("interfaces "))
    assert interfaces.split()[1:] == ["lo"]
    assert f"open-files {LIMITS['open_files']}" in stdout.splitlines()
    big = next(line for line in stdout.splitlines() if line.startswith("big "))
    assert 0 < int(big.split()[1]) <= LIMITS["file_mib"] << 20, big


def assert_nothing_protected_visible(probed: Probed) -> None:
    for name, path in probed.places.items():
        assert f"absent {path}" in probed.stdout.splitlines(), (name, probed.stdout)


def mountinfo(stdout: str) -> list[list[str]]:
    lines = stdout.splitlines()
    return [line.split() for line in lines[lines.index("== mountinfo") + 1 : lines.index("== end")]]


def assert_no_host_mounts(probed: Probed) -> None:
    """Of the store, only the environment's tree is mounted, and nothing of the repository,
    the config, the graders or the controller's home is."""
    store, places = probed.bench.store_path, probed.places
    for fields in mountinfo(probed.stdout):
        root, point = fields[3], fields[4]
        assert not root.startswith(store) or root.startswith(places["environments"] + "/"), fields
        for path in (places["repo"], places["home"], places["graders"]):
            assert path not in (root, point) and not root.startswith(path + "/"), fields


def test_on_a_planted_image_the_candidate_is_confined(planted):
    assert planted.result.terminal_class == "grader_failure", planted.stdout
    assert_confined(planted.stdout)
    assert_nothing_protected_visible(planted)
    assert_no_host_mounts(planted)


def test_planted_setuid_files_and_device_nodes_are_gone(planted):
    lines = planted.stdout.splitlines()
    assert "suid-mode 755" in lines and "sgid-mode 755" in lines, planted.stdout
    assert "open-mode 644" in lines
    assert "suid-uid 0" not in lines and any(line.startswith("suid-uid ") for line in lines)
    for node in ("/bin/disk", "/etc/mem", "/etc/pipe"):
        assert f"node {node}: absent" in lines


def test_the_images_setpriv_never_runs(planted):
    assert "FAKE-SETPRIV-RAN" not in planted.stdout
    line = next(line for line in planted.stdout.splitlines() if line.startswith("id "))
    if os.geteuid() == 0:
        assert line == "id 65534 65534"


def test_the_environment_root_is_read_only_and_unchanged(planted):
    from yyb.harness.environments import build

    bench = planted.bench
    plan = bench.plan(["zz/idler"])
    ready = build.pinned(bench.store, plan.experiment["environments"][0]["environment"])
    build.check(bench.store, ready, full=True)  # every file as built, after the run
    for name in ("PWNED", "PWNED-dir", "bin/PWNED", "etc/PWNED"):
        assert not os.path.lexists(os.path.join(ready.root, name)), name
    assert not os.path.lexists("/PWNED") and not os.path.lexists("/PWNED-dir")


@pytest.mark.xfail(
    strict=True,
    reason="an environment's tree is bound from the store's cache, and /proc/self/mountinfo "
    "names a bind mount's source folder: hiding it needs a mount whose own root is the tree",
)
def test_mountinfo_names_no_host_path_of_the_store(planted):
    shown = "\n".join(" ".join(fields) for fields in mountinfo(planted.stdout))
    assert planted.bench.store_path not in shown


def test_links_in_the_image_lead_nowhere_on_the_host(linked):
    probed, canary, _ = linked
    assert probed.result.terminal_class == "grader_failure", probed.stdout
    assert_confined(probed.stdout)
    assert_nothing_protected_visible(probed)
    assert_no_host_mounts(probed)
    assert canary not in probed.stdout
    # Neither the host's /etc/passwd nor its shadow: each read is refused.
    assert "root:x:0:0:" not in probed.stdout and "root:*:" not in probed.stdout
    for name in ("/usr/canary", "/etc/passwd", "/etc/shadow"):
        assert f"cat: can't open '{name}': No such file or directory" in probed.stdout
    line = next(line for line in probed.stdout.splitlines() if line.startswith("etc-holds "))
    assert {"bin", "testbed"} <= set(line.split()) and "passwd" not in line  # /etc is its /
    patch = probed.bench.body(probed.bench.terminal(probed.result)["links"]["patch"])
    assert canary.encode() not in patch


def test_a_link_into_oldroot_makes_nothing_on_the_host(linked):
    probed, _, landing = linked
    assert os.listdir(landing) == [], probed.stdout
    if os.geteuid() == 0:  # the host's setpriv was shown at /.yyb-drop, not through the link
        assert "setpriv" in probed.stdout
        assert status(probed.stdout)["Uid"] == "65534"
