"""The rootfs builder: its mmdebstrap command line, builds against stand-ins, real ones (deep)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.environments.test_debian import STATUS
from yyb.errors import EnvironmentBuildFailed, EnvironmentSpecError, InvalidArgument
from yyb.harness.environments import debian, rootfs, tidy

SPEC = {"suite": "bookworm", "packages": ["python3"], "source_date_epoch": 1700000000}


@pytest.fixture(autouse=True)
def no_host_sources(tmp_path: Path, monkeypatch):
    """The machine's apt sources never choose a test's mirror."""
    monkeypatch.setattr(debian, "APT_ROOT", str(tmp_path / "no-apt"))


def test_argv_as_root_with_every_default(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(rootfs, "host_architecture", lambda: "riscv64")
    assert rootfs.argv({"suite": "bookworm", "packages": ["python3"]}, "/t/tree") == [
        "mmdebstrap",
        "--mode=root",
        "--variant=minbase",
        "--architectures=riscv64",
        "--components=main",
        "--include=python3,util-linux",
        "--format=directory",
        "--",
        "bookworm",
        "/t/tree",
        "http://deb.debian.org/debian",
    ]


def test_argv_takes_every_field_and_sorts_the_packages(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    spec = {
        "suite": "trixie",
        "packages": ["zstd", "git=1:2.47.2-0.2", "util-linux", "zstd"],
        "variant": "apt",
        "mirror": "https://mirror.example/debian/",
        "architecture": "arm64",
        "components": ["main", "contrib"],
    }
    line = rootfs.argv(spec, "/t/x")
    assert line[1:6] == [
        "--mode=root",
        "--variant=apt",
        "--architectures=arm64",
        "--components=main,contrib",
        "--include=git=1:2.47.2-0.2,util-linux,zstd",
    ]
    assert line[-3:] == ["trixie", "/t/x", "https://mirror.example/debian"]


def test_the_default_mirror_is_the_hosts_for_that_suite(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    apt = tmp_path / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    (apt / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://snapshot.example/archive/debian/20250520T000000Z/\n"
        "Suites: bookworm bookworm-updates\nComponents: main\n"
    )
    monkeypatch.setattr(debian, "APT_ROOT", str(apt))
    assert rootfs.argv(SPEC, "/t")[-1] == "http://snapshot.example/archive/debian/20250520T000000Z"
    assert rootfs.argv({**SPEC, "suite": "trixie"}, "/t")[-1] == rootfs.DEFAULT_MIRROR


def _subids(tmp_path: Path, monkeypatch, subuid: str | None, subgid: str | None):
    paths = []
    for name, text in (("subuid", subuid), ("subgid", subgid)):
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        paths.append(str(path))
    monkeypatch.setattr(rootfs, "SUBID_FILES", tuple(paths))
    monkeypatch.setattr(os, "geteuid", lambda: 4242)  # no such user: named by number


def test_argv_not_as_root_uses_unshare_with_subids(tmp_path: Path, monkeypatch):
    _subids(tmp_path, monkeypatch, "4242:100000:65536\n", "4242:100000:65536\n")
    assert rootfs.argv(SPEC, "/t")[1] == "--mode=unshare"


@pytest.mark.parametrize(
    "subuid, subgid, missing",
    [
        (None, None, "subuid"),
        ("4242:1:2\n", None, "subgid"),
        ("other:1:2\n", "4242:1:2\n", "subuid"),
    ],
)
def test_argv_not_as_root_refuses_without_a_subid_range(
    tmp_path: Path, monkeypatch, subuid, subgid, missing
):
    _subids(tmp_path, monkeypatch, subuid, subgid)
    with pytest.raises(EnvironmentBuildFailed) as caught:
        rootfs.argv(SPEC, "/t")
    assert caught.value.step == "unshare"
    assert str(tmp_path / missing) in caught.value.reason


@pytest.mark.parametrize(
    "change, field",
    [
        ({"suite": None}, "$.suite"),
        ({"suite": "--help"}, "$.suite"),
        ({"suite": "bookworm main"}, "$.suite"),
        ({"packages": "python3"}, "$.packages"),
        ({"packages": ["python3", "?priority(required)"]}, "$.packages[1]"),
        ({"packages": ["./evil.deb"]}, "$.packages[0]"),
        ({"packages": ["python3/sid"]}, "$.packages[0]"),
        ({"packages": ["a,b"]}, "$.packages[0]"),
        ({"packages": ["-python3"]}, "$.packages[0]"),
        ({"variant": "extract"}, "$.variant"),
        ({"mirror": "/etc/apt/sources.list"}, "$.mirror"),
        ({"mirror": "-"}, "$.mirror"),
        ({"mirror": "deb http://x.example/ sid main"}, "$.mirror"),
        ({"architecture": "amd64,i386"}, "$.architecture"),
        ({"components": []}, "$.components"),
        ({"components": ["main contrib"]}, "$.components[0]"),
        ({"source_date_epoch": -1}, "$.source_date_epoch"),
        ({"source_date_epoch": True}, "$.source_date_epoch"),
        ({"source_date_epoch": "0"}, "$.source_date_epoch"),
        ({"kind": "oci"}, "$.kind"),
        ({"pakages": ["python3"]}, "$.pakages"),
    ],
)
def test_a_spec_field_out_of_form_is_refused_by_its_path(monkeypatch, change, field):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    spec = {**SPEC, **change}
    if change.get("suite", "") is None:
        del spec["suite"]
    with pytest.raises(EnvironmentSpecError) as caught:
        rootfs.argv(spec, "/t")
    assert caught.value.field == field


@pytest.mark.parametrize("spec", [[], "bookworm", None])
def test_a_spec_that_is_not_a_map_is_refused(spec):
    with pytest.raises(EnvironmentSpecError) as caught:
        rootfs.resolve(spec)
    assert caught.value.field is None


def test_errors_name_the_environment_and_a_name_must_be_one(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(EnvironmentSpecError) as caught:
        rootfs.resolve({**SPEC, "name": "py311", "variant": "custom"})
    assert caught.value.where == "py311"
    for name in (["x"], "", " "):
        with pytest.raises(EnvironmentSpecError) as caught:
            rootfs.resolve({**SPEC, "name": name})
        assert (caught.value.where, caught.value.field) == ("rootfs spec", "$.name")


def test_failure_line_finds_the_cause_behind_mmdebstrap_wrappers():
    output = (
        b"I: running apt-get update...\nReading package lists...\n"
        b"E: Unable to locate package nope\n"
        b"E: setup failed: E: apt-get --yes install nope failed\n"
        b"I: main() received signal PIPE: waiting for setup...\n"
        b"E: mmdebstrap failed to run\n\n"
    )
    assert rootfs.failure_line(output) == "Unable to locate package nope"
    assert rootfs.failure_line(b"E: mmdebstrap failed to run\n") == "mmdebstrap failed to run"
    assert rootfs.failure_line(b"I: one\nsomething broke\n\n") == "something broke"
    assert rootfs.failure_line(b"") == "mmdebstrap failed and printed nothing"


STAND_IN = r"""#!{python}
import os, sys
if sys.argv[1:] == ["--version"]:
    print("mmdebstrap 9.8.7")
    sys.exit(0)
dest, mode = sys.argv[-2], os.environ["STAND_IN"]
def put(path, text=""):
    path = os.path.join(dest, path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)
put("usr/bin/python3", "#!")
put("etc/epoch", os.environ.get("SOURCE_DATE_EPOCH", "unset"))
put("etc/argv", "\n".join(sys.argv))
if mode == "fail":
    print("I: running apt-get update...", flush=True)
    sys.stderr.write("E: Unable to locate package nope\nE: mmdebstrap failed to run\n")
    sys.exit(25)
put("var/lib/dpkg/status", {status!r})
put("var/cache/apt/archives/python3_3.11.2-1_amd64.deb", "deb")
put("var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_InRelease", "lists")
put("var/log/apt/history.log", "Start-Date: today")
put("etc/hostname", "buildhost\n")
put("etc/resolv.conf", "nameserver 192.0.2.53\n")
put("tmp/leftover", "x")
put("run/lock/held", "x")
put("dev/null", "not a device")
if mode == "linked-log":
    os.rename(os.path.join(dest, "var/log"), os.path.join(dest, "var/log-real"))
    os.symlink(os.environ["OUTSIDE"], os.path.join(dest, "var/log"))
"""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch):
    """A stand-in mmdebstrap first on PATH; the test picks its behaviour with ``STAND_IN``."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "mmdebstrap"
    script.write_text(STAND_IN.format(python=sys.executable, status=STATUS))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(rootfs, "host_architecture", lambda: "amd64")
    dest = tmp_path / "tree"
    dest.mkdir()
    return dest


def test_a_failed_build_names_the_step_and_the_cause_and_leaves_dest_empty(stand_in, monkeypatch):
    monkeypatch.setenv("STAND_IN", "fail")
    log = io.BytesIO()
    with pytest.raises(EnvironmentBuildFailed) as caught:
        rootfs.build(SPEC, str(stand_in), log)
    assert (caught.value.step, caught.value.reason) == (
        "mmdebstrap",
        "Unable to locate package nope",
    )
    assert caught.value.environment == "rootfs"
    assert os.listdir(stand_in) == []
    assert b"I: running apt-get update...\n" in log.getvalue()
    assert b"E: Unable to locate package nope\n" in log.getvalue()


def test_a_build_reads_packages_and_tidies_the_tree(stand_in, monkeypatch):
    monkeypatch.setenv("STAND_IN", "succeed")
    built = rootfs.build({**SPEC, "mirror": "http://m.example/debian"}, str(stand_in), io.BytesIO())
    assert built.mmdebstrap == "9.8.7"
    assert (built.suite, built.mirror, built.architecture) == (
        "bookworm",
        "http://m.example/debian",
        "amd64",
    )
    assert built.source_date_epoch == 1700000000
    assert built.packages == debian.installed(STATUS, "amd64")
    assert built.packages["python3.11-minimal"] == "3.11.2-6+deb12u6"
    assert 0 <= built.seconds < 60
    with pytest.raises(AttributeError):
        built.suite = "sid"  # frozen
    assert (stand_in / "etc/epoch").read_text() == "1700000000"
    assert (stand_in / "etc/argv").read_text().splitlines()[1:] == rootfs.argv(
        {**SPEC, "mirror": "http://m.example/debian"}, str(stand_in)
    )[1:]
    assert os.listdir(stand_in / "var/cache/apt") == []
    assert os.listdir(stand_in / "var/lib/apt/lists") == []
    assert os.listdir(stand_in / "var/log/apt") == []
    assert (stand_in / "etc/hostname").read_text() == "localhost\n"
    assert (stand_in / "etc/resolv.conf").read_text() == ""
    assert (stand_in / "etc/hostname").stat().st_mode & 0o7777 == 0o644
    for point in ("tmp", "proc", "dev", "run", "testbed"):
        assert sorted(os.listdir(stand_in / point)) == (["shm"] if point == "dev" else [])
    assert os.listdir(stand_in / "dev/shm") == []
    assert (stand_in / "tmp").stat().st_mode & 0o7777 == 0o1777
    assert (stand_in / "usr/bin/python3").exists()


def test_without_an_epoch_the_build_takes_the_suites_release_date(
    stand_in, tmp_path: Path, monkeypatch
):
    mirror = tmp_path / "mirror"
    (mirror / "dists/bookworm").mkdir(parents=True)
    (mirror / "dists/bookworm/InRelease").write_text(
        "-----BEGIN PGP SIGNED MESSAGE-----\n\nDate: Sat, 10 May 2025 09:15:26 UTC\n"
    )
    monkeypatch.setenv("STAND_IN", "succeed")
    spec = {"suite": "bookworm", "mirror": f"file://{mirror}"}
    built = rootfs.build(spec, str(stand_in), io.BytesIO())
    assert built.source_date_epoch == 1746868526
    assert (stand_in / "etc/epoch").read_text() == "1746868526"


def test_an_unreachable_release_fails_before_mmdebstrap_runs(stand_in, tmp_path, monkeypatch):
    monkeypatch.setenv("STAND_IN", "succeed")
    spec = {"suite": "bookworm", "mirror": f"file://{tmp_path}/nowhere"}
    with pytest.raises(EnvironmentBuildFailed) as caught:
        rootfs.build(spec, str(stand_in), io.BytesIO())
    assert caught.value.step == "release"
    assert os.listdir(stand_in) == []


def test_a_build_never_removes_through_a_link_in_the_tree(stand_in, tmp_path: Path, monkeypatch):
    outside = tmp_path / "host-log"
    outside.mkdir()
    (outside / "syslog").write_text("the host's")
    monkeypatch.setenv("STAND_IN", "linked-log")
    monkeypatch.setenv("OUTSIDE", str(outside))
    rootfs.build(SPEC, str(stand_in), io.BytesIO())
    assert (outside / "syslog").read_text() == "the host's"


def test_a_build_refuses_a_dest_that_is_not_an_empty_folder(stand_in, monkeypatch):
    monkeypatch.setenv("STAND_IN", "succeed")
    (stand_in / "keep").write_text("mine")
    with pytest.raises(InvalidArgument):
        rootfs.build(SPEC, str(stand_in), io.BytesIO())
    assert (stand_in / "keep").read_text() == "mine"
    with pytest.raises(InvalidArgument):
        rootfs.build(SPEC, str(stand_in / "keep"), io.BytesIO())


def test_no_mmdebstrap_on_path_is_a_build_failure(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(rootfs, "host_architecture", lambda: "amd64")
    (tmp_path / "tree").mkdir()
    with pytest.raises(EnvironmentBuildFailed) as caught:
        rootfs.build(SPEC, str(tmp_path / "tree"), io.BytesIO())
    assert caught.value.step == "mmdebstrap"


def test_mounts_below_reads_mountinfo_escapes():
    text = (
        "22 1 8:1 / / rw - ext4 /dev/vda rw\n"
        "30 22 0:5 / /b/tree/dev rw - devtmpfs udev rw\n"
        "31 22 0:6 / /b/tree\\040x/proc rw - proc proc rw\n"
        "32 22 0:7 / /b/treehouse rw - tmpfs t rw\n"
    )
    assert tidy.mounts_below("/b/tree", text) == ["/b/tree/dev"]
    assert tidy.mounts_below("/b/tree x", text) == ["/b/tree x/proc"]
    assert tidy.mounts_below("/b", text) == ["/b/tree/dev", "/b/tree x/proc", "/b/treehouse"]


def test_tidy_replaces_a_linked_mount_point_with_a_folder(tmp_path: Path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "precious").write_text("x")
    (root / "tmp").symlink_to(outside)
    tidy.tidy("t", str(root))
    assert not (root / "tmp").is_symlink() and os.listdir(root / "tmp") == []
    assert (outside / "precious").exists()


# Real builds: network (deb.debian.org) and about half a minute each on this machine.


def _build_and_run(tmp_path: Path, suite: str, python: str) -> None:
    dest = tmp_path / suite
    dest.mkdir()
    with open(tmp_path / f"{suite}.log", "wb") as log:
        built = rootfs.build({"suite": suite, "packages": ["python3"]}, str(dest), log)
    assert (dest / "usr/bin" / python).is_file()
    assert (dest / "usr/bin/setpriv").is_file()
    assert "python3" in built.packages and "util-linux" in built.packages
    version = python.removeprefix("python")
    argv = ["bwrap", "--ro-bind", str(dest), "/", "--proc", "/proc", "--dev", "/dev"]
    argv += ["--tmpfs", "/tmp", "python3", "-c", "import sys; print(sys.version)"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(version + ".")


@pytest.mark.deep
@pytest.mark.skipif(not shutil.which("bwrap"), reason="needs bubblewrap")
def test_bookworm_minbase_with_python_builds_and_runs(tmp_path: Path):
    _build_and_run(tmp_path, "bookworm", "python3.11")


@pytest.mark.deep
@pytest.mark.skipif(not shutil.which("bwrap"), reason="needs bubblewrap")
def test_trixie_minbase_with_python_builds_and_runs(tmp_path: Path):
    _build_and_run(tmp_path, "trixie", "python3.13")
