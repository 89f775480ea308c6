"""Building, caching and checking environments, and ``yyb env`` over them.

A busybox ``oci`` image (tests/harness/environments/images.py) is the fast kind: no network.
A ``python`` environment over the host's interpreter fetches its wheels from the package index
once per module.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.conftest import Yyb
from tests.harness.environments import images
from yyb.errors import EnvironmentBuildFailed, EnvironmentMismatch, EnvironmentSpecError
from yyb.evidence import environment
from yyb.harness.environments import build, registry, tree
from yyb.harness.environments.cache import Cache
from yyb.store.repo import Store

PYTHON = "/usr/bin/python3"
needs_python = pytest.mark.skipif(
    not os.path.exists(PYTHON)
    or subprocess.run([PYTHON, "-m", "venv", "--help"], capture_output=True).returncode != 0,
    reason="the host has no /usr/bin/python3 with venv",
)


def image_digest(folder) -> str:
    """The digest of the busybox image in ``folder``/image, written the first time."""
    if not (folder / "image").exists():
        return images.layout(
            str(folder / "image"), [images.busybox_root(str(folder / "root"))]
        ).digest
    return json.loads((folder / "image" / "index.json").read_text())["manifests"][0]["digest"]


def busybox_spec(folder, name="busybox", **more) -> str:
    digest = image_digest(folder)
    spec = {"name": name, "kind": "oci", "oci": {"image": digest}, "source": "image", **more}
    path = folder / f"{name}.json"
    path.write_text(json.dumps(spec))
    return str(path)


@pytest.fixture
def store(tmp_path):
    return Store.init(str(tmp_path / "store"))[0]


def test_a_build_is_kept_whole_named_by_a_ref_and_found_again(store, tmp_path):
    declared = environment.load(busybox_spec(tmp_path))
    ready = environment.ensure(store, declared)
    assert store.refs.read(build.ref(declared.oid)) == ready.oid
    manifest = store.objects.get(ready.record["links"]["manifest"]).body
    assert tree.manifest_sha256(manifest) == ready.manifest_sha256
    assert b"f 0755 " in manifest and b" bin/busybox\n" in manifest
    assert os.listdir(os.path.join(Cache(store.path).top, "tmp")) == []
    again = environment.ensure(store, declared)
    assert (again.oid, again.root) == (ready.oid, ready.root)


def test_a_changed_spec_is_another_environment(store, tmp_path):
    first = environment.load(busybox_spec(tmp_path))
    second = environment.load(busybox_spec(tmp_path, variables={"LANG": "C.UTF-8"}))
    assert first.oid != second.oid
    a, b = environment.ensure(store, first), environment.ensure(store, second)
    assert a.oid != b.oid and a.root != b.root
    assert a.manifest_sha256 == b.manifest_sha256  # one tree, two declarations
    assert b.record["build"]["shared_bytes"] > 0  # its files were in the pool already


def test_sanitising_removes_devices_and_privilege_bits(tmp_path):
    root = tmp_path / "t"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "su").write_text("x")
    os.chmod(root / "bin" / "su", 0o4755)
    (root / "w").mkdir()
    os.chmod(root / "w", 0o1777)
    os.mkfifo(root / "fifo")
    done = dict(tree.sanitise(str(root)))
    assert not os.path.exists(root / "fifo") and "fifo" in done
    assert os.stat(root / "bin" / "su").st_mode & 0o7777 == 0o755
    assert os.stat(root / "w").st_mode & 0o7777 == 0o755


@pytest.mark.parametrize("change", ["content", "mode", "added", "removed"])
def test_verify_names_the_first_path_that_differs(store, tmp_path, change):
    ready = environment.ensure(store, environment.load(busybox_spec(tmp_path)))
    target = os.path.join(ready.root, "etc", "hostname-ish")
    if change in ("content", "mode", "removed"):
        target = os.path.join(ready.root, "bin", "busybox")
    if change == "content":
        os.chmod(target, 0o755)  # pool files are shared: a copy, so other trees stay
        data = open(target, "rb").read()
        os.unlink(target)
        with open(target, "wb") as handle:
            handle.write(data[:-1] + bytes([data[-1] ^ 0xFF]))
        os.chmod(target, 0o755)
    elif change == "mode":
        os.chmod(target, 0o700)
    elif change == "added":
        open(target, "w").close()
    else:
        os.unlink(target)
    with pytest.raises(EnvironmentMismatch) as caught:
        build.check(store, ready)
    assert caught.value.path == os.path.relpath(target, ready.root)


def test_an_image_other_than_the_spec_names_is_refused_and_nothing_kept(store, tmp_path):
    path = busybox_spec(tmp_path)
    spec = json.loads(open(path).read())
    spec["oci"]["image"] = "sha256:" + "0" * 64
    open(path, "w").write(json.dumps(spec))
    with pytest.raises(EnvironmentSpecError, match="the spec names sha256:0000"):
        environment.ensure(store, environment.load(path))
    cache = Cache(store.path)
    assert cache.built() == [] and os.listdir(os.path.join(cache.top, "tmp")) == []
    assert list(store.refs.iter_refs("environments/*")) == []


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"name": "x", "kind": "python"}, None),
        ({"name": "x", "kind": "rootfs", "rootfs": {"suite": "bookworm"}, "python": {}}, None),
        ({"name": "../x", "kind": "oci", "oci": {"image": "sha256:" + "a" * 64}}, "name"),
        ({"name": "x", "kind": "oci", "oci": {"image": "latest"}}, "oci.image"),
        ({"name": "x", "kind": "oci", "oci": {"image": "sha256:" + "a" * 64}, "nope": 1}, None),
    ],
)
def test_a_bad_spec_is_refused_naming_its_field(tmp_path, spec, field):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(spec))
    with pytest.raises(EnvironmentSpecError) as caught:
        environment.load(str(path))
    if field is not None:
        assert caught.value.field == field


def test_a_python_base_must_be_a_root(tmp_path):
    (tmp_path / "a.json").write_text(
        json.dumps({"name": "a", "kind": "python", "python": {"interpreter": "/usr/bin/python3"}})
    )
    spec = {"name": "b", "kind": "python", "base": "a.json", "python": {"interpreter": "/p"}}
    (tmp_path / "b.json").write_text(json.dumps(spec))
    with pytest.raises(EnvironmentSpecError, match="is a python spec, not a root"):
        environment.load(str(tmp_path / "b.json"))


@needs_python
def test_a_failed_python_build_names_its_step_and_keeps_nothing(store, tmp_path):
    spec = {
        "name": "broken",
        "kind": "python",
        "python": {"interpreter": PYTHON, "install": ["echo half-made > /yyb/python/x; exit 3"]},
    }
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(spec))
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "f").write_text("x\n")
    subprocess.run(["git", "-C", str(repo), "add", "f"], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "f"],
        check=True,
    )
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    spec["python"]["install_commit"] = head
    path.write_text(json.dumps(spec))
    with pytest.raises(EnvironmentBuildFailed) as caught:
        environment.ensure(store, environment.load(str(path)), str(repo))
    assert caught.value.step == "install" and "exit 3" in caught.value.reason
    cache = Cache(store.path)
    assert cache.built() == [] and os.listdir(os.path.join(cache.top, "tmp")) == []


def test_yyb_env_list_show_verify_and_gc(tmp_path):
    yyb = Yyb(str(tmp_path / "store"))
    path = busybox_spec(tmp_path)
    built = yyb("env", "build", "-q", "--json", path)
    assert built.exit_code == 0, built.stderr
    value = json.loads(built.stdout)
    assert value["kind"] == "oci" and value["cached"] is True
    listed = yyb("env", "list").stdout.split()
    assert listed == [value["spec"], value["environment"], "oci", "cached", "busybox"]
    shown = json.loads(yyb("env", "show", "busybox").stdout)
    assert shown["record"]["manifest_sha256"] == value["manifest_sha256"]
    assert yyb("env", "verify").stdout == "ok busybox\n"
    store = Store.open(str(tmp_path / "store"))
    root = Cache(store.path).root(value["spec"])
    open(os.path.join(root, "etc", "planted"), "w").close()
    checked = yyb("env", "verify", "busybox")
    assert checked.exit_code == 1
    assert checked.stdout.startswith("bad busybox: environment busybox: etc/planted: not in")
    missing = yyb("env", "show", "nothing")
    assert missing.exit_code == 2 and missing.stderr.count("\n") == 1
    os.makedirs(os.path.join(Cache(store.path).top, "tmp", "build-crashed"))
    assert yyb("env", "gc").stdout.startswith("0 trees, 1 leftovers")
    collected = json.loads(yyb("env", "gc", "--json").stdout)
    assert collected == {"trees": 0, "leftovers": 0, "pool_files": 0, "pool_bytes": 0}
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    refused = yyb("env", "build", str(bad))
    assert refused.exit_code == 2 and "not JSON" in refused.stderr
    assert refused.stderr.count("\n") == 1
    assert registry.entries(store)[0].spec_oid == value["spec"]
