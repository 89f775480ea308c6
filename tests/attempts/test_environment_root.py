"""A case declaring an ``oci`` environment runs its candidate and grader on that root alone.

The image is built here: the host's static busybox and its applets, packed as an OCI image
layout (tests/harness/environments/images.py). The calculator case (tests/calculator.py) is a
shell script and its grader a shell script too, so they run on busybox's ``sh``; nothing of the
host's /usr is visible. A spec naming another digest, a layer changed after the spec was
written, and a file of the unpacked tree changed after the build are each refused before
anything is dispatched.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.grading.conftest import build_bench, write
from tests.harness.environments import images
from yyb.errors import ChecksumMismatch, EnvironmentMismatch, EnvironmentSpecError

pytestmark = pytest.mark.skipif(
    not os.path.exists("/bin/busybox") and not os.path.exists("/usr/bin/busybox"),
    reason="busybox-static is not installed",
)
# Says what the candidate's root holds, then fixes the calculator.
LOOK = (
    "{ ls /usr/bin/python3 /usr/bin/git 2>&1; ls -d /testbed; pwd; ls /; } > root.txt\n"
    "sed -i 's/\\$1 - \\$2/$1 + $2/' calc.sh\nenvelope succeeded\n"
)


def _image(root):
    tree = images.busybox_root(str(root / "busybox-root"))
    return images.layout(str(root / "image"), [tree], {"Env": ["PATH=/bin", "IMAGE=busybox"]})


def _case(bench, built, digest=None):
    spec = {
        "name": "busybox",
        "kind": "oci",
        "oci": {"image": digest or built.digest},
        "source": "image",
    }
    write(bench.root / "env.json", json.dumps(spec))
    text = bench.task_path.read_text()
    if "environment:" not in text:
        text = text.replace(
            "    grader_profile: tests\n", "    grader_profile: tests\n    environment: env.json\n"
        )
    write(bench.task_path, text)


@pytest.fixture(scope="module")
def on_busybox(tmp_path_factory):
    root = tmp_path_factory.mktemp("oci")
    bench = build_bench(root / "bench")
    built = _image(bench.root)
    _case(bench, built)
    bench.configure()
    bench.behaviour("look", LOOK)
    plan, results = bench.run(["zz/look", "zz/idler"], jobs=2)
    return bench, built, plan, dict(zip(["look", "idler"], results, strict=True))


def test_the_candidate_and_grader_run_on_the_image_alone(on_busybox):
    bench, _, plan, results = on_busybox
    assert results["look"].terminal_class == "resolved", results["look"].reason
    assert results["idler"].terminal_class == "grader_failure"
    patch = bench.body(bench.terminal(results["look"])["links"]["patch"]).decode()
    assert "/usr/bin/python3: No such file or directory" in patch
    assert "/usr/bin/git: No such file or directory" in patch
    assert "+/testbed\n" in patch  # ls -d /testbed, and pwd
    pin = plan.experiment["environments"][0]
    assert bench.record(pin["environment"])["kind"] == "oci"
    assert bench.record(pin["environment"])["variables"]["IMAGE"] == "busybox"


def test_a_spec_naming_another_image_is_refused(on_busybox, tmp_path):
    bench, built, _, _ = on_busybox
    other = build_bench(tmp_path / "bench")
    images.layout(str(other.root / "image"), [images.busybox_root(str(tmp_path / "r"))])
    _case(other, built, digest="sha256:" + "ab" * 32)
    other.configure()
    with pytest.raises(EnvironmentSpecError, match="the spec names sha256:abab"):
        other.plan(["zz/idler"])


def test_a_changed_layer_is_refused_before_the_build(tmp_path):
    bench = build_bench(tmp_path / "bench")
    built = _image(bench.root)
    _case(bench, built)
    bench.configure()
    layer = images.blob_file(str(bench.root / "image"), built.layers[0])
    os.chmod(layer, 0o644)
    with open(layer, "r+b") as handle:
        handle.seek(700)
        byte = handle.read(1)
        handle.seek(700)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ChecksumMismatch):
        bench.plan(["zz/idler"])
    assert not os.path.exists(
        os.path.join(bench.store_path, "environments", "tmp")
    ) or not os.listdir(os.path.join(bench.store_path, "environments", "tmp"))


def test_a_changed_file_of_the_unpacked_tree_stops_the_run_before_dispatch(on_busybox):
    from yyb.harness.environments.cache import Cache

    bench, _, _, _ = on_busybox
    plan = bench.plan(["zz/idler"])
    root = Cache(bench.store_path).root(plan.experiment["environments"][0]["spec"])
    target = os.path.join(root, "etc", "added")
    write(root / "etc" / "added" if False else __import__("pathlib").Path(target), "x\n")
    try:
        with pytest.raises(EnvironmentMismatch) as caught:
            bench.context(plan)
        assert caught.value.path == "etc/added"
    finally:
        os.unlink(target)
    bench.context(plan)


def test_a_worker_without_the_build_ends_the_attempt_as_the_environments(on_busybox, tmp_path):
    """A context whose registry holds no build of the case's environment (a Dask worker's, say)
    ends each attempt as environment_failure naming it; nothing runs on another root."""
    from yyb.attempts import run as attempts_run
    from yyb.harness.environments import build

    bench, _, _, _ = on_busybox
    plan = bench.plan(["zz/idler"])
    ctx = bench.context(plan)
    ctx.environments = {}  # as a worker's context starts
    build.forget()
    gone = os.path.join(bench.store_path, "environments", "moved")
    spec = plan.experiment["environments"][0]["spec"]
    os.rename(os.path.join(bench.store_path, "environments", spec), gone)
    try:
        results = attempts_run.run_plan(ctx, 1)
    finally:
        os.rename(gone, os.path.join(bench.store_path, "environments", spec))
    assert [r.terminal_class for r in results] == ["environment_failure"]
    assert "not built in this registry" in results[0].reason
