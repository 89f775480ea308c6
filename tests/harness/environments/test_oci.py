"""OCI images read and unpacked (yyb/harness/environments/oci.py): every form, whiteouts, the
checks against tampering, and the safety rules that keep every write inside the root."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.harness.environments import images
from tests.harness.environments.images import (
    device,
    file,
    folder,
    hardlink,
    opaque,
    symlink,
    whiteout,
)
from yyb.errors import ChecksumMismatch, EnvironmentSpecError, InvalidArgument
from yyb.harness.environments import oci


def listing(root) -> dict[str, tuple]:
    """Every path below ``root``: kind, permission bits and bytes or link target."""
    found = {}
    for here, dirs, names in os.walk(root):
        for name in dirs + names:
            path = os.path.join(here, name)
            info = os.lstat(path)
            rel = os.path.relpath(path, root)
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                found[rel] = ("dir", stat.S_IMODE(info.st_mode))
            else:
                with open(path, "rb") as stream:
                    found[rel] = ("file", stat.S_IMODE(info.st_mode), stream.read())
    return found


def unpacked(source, tmp_path, ref=None, name="out"):
    dest = tmp_path / name
    dest.mkdir(parents=True)
    result = oci.unpack(oci.read(str(source), ref), str(dest))
    return listing(dest), result


def flip(path, offset: int) -> None:
    """XOR one byte with 0xFF (a fixed replacement byte would be a no-op one time in 256)."""
    with open(path, "r+b") as stream:
        stream.seek(offset)
        byte = stream.read(1)
        stream.seek(offset)
        stream.write(bytes([byte[0] ^ 0xFF]))


BASE = [folder("etc"), file("etc/motd", "hello\n"), folder("bin"), file("bin/tool", "#!x", 0o755)]
EXPECTED = {
    "etc": ("dir", 0o755),
    "etc/motd": ("file", 0o644, b"hello\n"),
    "bin": ("dir", 0o755),
    "bin/tool": ("file", 0o755, b"#!x"),
    "bin/alias": ("link", "tool"),
}
CONFIG = {"Env": ["PATH=/bin", "A=1"], "WorkingDir": "/testbed", "User": "1000", "Cmd": ["sh"]}


@pytest.mark.parametrize("compress", [False, True])
def test_a_layout_is_read_and_unpacked(tmp_path, compress):
    built = images.layout(
        str(tmp_path / "layout"), [BASE, [symlink("bin/alias", "tool")]], CONFIG, compress=compress
    )
    image = oci.read(str(tmp_path / "layout"))
    assert image.digest == built.digest
    assert image.form == "oci-layout"
    assert image.platform == f"linux/{oci.host_architecture()}"
    assert image.config == CONFIG
    assert [digest for digest, _, _ in image.layers] == built.layers
    assert all(media.endswith("+gzip") == compress for _, media, _ in image.layers)
    found, result = unpacked(tmp_path / "layout", tmp_path)
    assert found == EXPECTED
    assert (result.files, result.links, result.dirs, result.bytes) == (2, 1, 2, 9)


def test_an_oci_archive_reads_as_its_layout(tmp_path):
    built = images.layout(str(tmp_path / "layout"), [BASE, [symlink("bin/alias", "tool")]])
    images.archive(str(tmp_path / "layout"), str(tmp_path / "image.tar"))
    image = oci.read(str(tmp_path / "image.tar"))
    assert (image.digest, image.form) == (built.digest, "oci-archive")
    assert unpacked(tmp_path / "image.tar", tmp_path)[0] == EXPECTED


@pytest.mark.parametrize("compress", [False, True])
def test_a_docker_archive_is_named_by_its_config(tmp_path, compress):
    built = images.docker_archive(
        str(tmp_path / "saved.tar"),
        [BASE, [symlink("bin/alias", "tool")]],
        CONFIG,
        ("app:1",),
        compress=compress,
    )
    image = oci.read(str(tmp_path / "saved.tar"))
    assert image.digest == built.digest
    assert image.form == "docker-archive"
    assert image.config == CONFIG
    assert [digest for digest, _, _ in image.layers] == built.layers == list(image.diff_ids)
    assert all(media.endswith(".gzip") == compress for _, media, _ in image.layers)
    assert unpacked(tmp_path / "saved.tar", tmp_path)[0] == EXPECTED


def test_a_multi_platform_index_gives_this_machines_image(tmp_path):
    mine, other = (
        oci.host_architecture(),
        "s390x" if oci.host_architecture() != "s390x" else "arm64",
    )
    built = images.multi_platform(
        str(tmp_path / "layout"), {other: [[file("arch", other)]], mine: [[file("arch", mine)]]}
    )
    image = oci.read(str(tmp_path / "layout"))
    assert image.digest == built.digest
    assert unpacked(tmp_path / "layout", tmp_path)[0]["arch"][2] == mine.encode()

    images.multi_platform(str(tmp_path / "foreign"), {other: [[file("arch", other)]]})
    with pytest.raises(
        EnvironmentSpecError, match=f"no linux/{mine} image; offered: linux/{other}"
    ):
        oci.read(str(tmp_path / "foreign"))


def test_whiteouts_delete_and_opaque_folders_empty_lower_layers(tmp_path):
    lower = [
        folder("a"),
        file("a/old", "1"),
        folder("a/sub"),
        file("a/sub/deep", "2"),
        folder("b"),
        file("b/keep", "3"),
        file("b/gone", "4"),
        folder("c"),
        file("c/x", "5"),
        file("top", "6"),
    ]
    upper = [
        file("a/new", "7"),  # written before the marker, and kept: opaque hides lower layers only
        opaque("a"),
        whiteout("b/gone"),
        whiteout("c"),
        whiteout("top"),
        whiteout("never-was"),
    ]
    images.layout(str(tmp_path / "layout"), [lower, upper])
    found, _ = unpacked(tmp_path / "layout", tmp_path)
    assert found == {
        "a": ("dir", 0o755),
        "a/new": ("file", 0o644, b"7"),
        "b": ("dir", 0o755),
        "b/keep": ("file", 0o644, b"3"),
    }


def test_a_whiteout_of_a_folder_rewritten_in_the_same_layer_keeps_only_the_new_content(tmp_path):
    lower = [folder("d"), file("d/old", "1")]
    upper = [folder("d"), file("d/new", "2"), whiteout("d")]
    images.layout(str(tmp_path / "layout"), [lower, upper])
    found, _ = unpacked(tmp_path / "layout", tmp_path)
    assert set(found) == {"d", "d/new"}


def test_later_layers_replace_entries_of_any_kind(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched")
    lower = [
        folder("was-dir"),
        file("was-dir/x"),
        file("was-file"),
        symlink("was-link", "/outside.txt"),
    ]
    lower.append(symlink("rel-link", "../../outside.txt"))
    upper = [file("was-dir", "f"), folder("was-file"), file("was-link", "l"), file("rel-link", "r")]
    images.layout(str(tmp_path / "layout"), [lower, upper])
    found, _ = unpacked(tmp_path / "layout", tmp_path)
    assert found == {
        "was-dir": ("file", 0o644, b"f"),
        "was-file": ("dir", 0o755),
        "was-link": ("file", 0o644, b"l"),
        "rel-link": ("file", 0o644, b"r"),
    }
    assert outside.read_text() == "untouched"


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_a_tampered_layer_is_refused(tmp_path, compress, where):
    content = [file(f"f{n}", os.urandom(300)) for n in range(20)]
    built = images.layout(str(tmp_path / "layout"), [BASE, content], compress=compress)
    blob = images.blob_file(str(tmp_path / "layout"), built.layers[1])
    size = os.path.getsize(blob)
    flip(blob, {"start": 0, "middle": size // 2, "end": size - 1}[where])
    image = oci.read(str(tmp_path / "layout"))
    (tmp_path / "out").mkdir()
    with pytest.raises(ChecksumMismatch) as caught:
        oci.unpack(image, str(tmp_path / "out"))
    assert caught.value.expected == built.layers[1]
    assert caught.value.got != built.layers[1]


@pytest.mark.parametrize("change", ["truncated", "extended"])
def test_a_layer_of_another_size_is_refused(tmp_path, change):
    built = images.layout(str(tmp_path / "layout"), [BASE])
    blob = images.blob_file(str(tmp_path / "layout"), built.layers[0])
    with open(blob, "r+b") as stream:
        if change == "truncated":
            stream.truncate(os.path.getsize(blob) - 1)
        else:
            stream.seek(0, os.SEEK_END)
            stream.write(b"\0")
    (tmp_path / "out").mkdir()
    with pytest.raises(ChecksumMismatch, match="bytes"):
        oci.unpack(oci.read(str(tmp_path / "layout")), str(tmp_path / "out"))


@pytest.mark.parametrize("compress", [False, True])
def test_a_tampered_docker_archive_layer_is_refused(tmp_path, compress):
    content = [file(f"f{n}", os.urandom(300)) for n in range(20)]
    built = images.docker_archive(str(tmp_path / "saved.tar"), [content], compress=compress)
    with tarfile.open(tmp_path / "saved.tar") as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("layer.tar"))
    flip(tmp_path / "saved.tar", member.offset_data + member.size // 2)
    image = oci.read(str(tmp_path / "saved.tar"))
    (tmp_path / "out").mkdir()
    with pytest.raises(ChecksumMismatch) as caught:
        oci.unpack(image, str(tmp_path / "out"))
    assert caught.value.expected == built.layers[0]


@pytest.mark.parametrize("document", ["manifest", "config", "index"])
def test_a_tampered_blob_document_is_refused(tmp_path, document):
    built = images.multi_platform(str(tmp_path / "layout"), {oci.host_architecture(): [BASE]})
    digest = getattr(built, {"manifest": "digest", "config": "config", "index": "index"}[document])
    flip(images.blob_file(str(tmp_path / "layout"), digest), 10)
    with pytest.raises(ChecksumMismatch) as caught:
        oci.read(str(tmp_path / "layout"))
    assert caught.value.expected == digest


def test_a_tampered_index_json_is_refused(tmp_path):
    images.layout(str(tmp_path / "layout"), [BASE])
    flip(tmp_path / "layout" / "index.json", 5)
    with pytest.raises(EnvironmentSpecError, match="index.json"):
        oci.read(str(tmp_path / "layout"))


def test_a_tampered_docker_config_is_refused(tmp_path):
    built = images.docker_archive(str(tmp_path / "saved.tar"), [BASE])
    with tarfile.open(tmp_path / "saved.tar") as tar:
        member = next(
            m
            for m in tar.getmembers()
            if m.name.endswith(".json") and "/" not in m.name and m.name != "manifest.json"
        )
    flip(tmp_path / "saved.tar", member.offset_data + 3)
    with pytest.raises(ChecksumMismatch) as caught:
        oci.read(str(tmp_path / "saved.tar"))
    assert caught.value.expected == built.digest


def test_an_oversized_document_is_refused(tmp_path):
    images.layout(str(tmp_path / "layout"), [BASE])
    index = json.loads((tmp_path / "layout" / "index.json").read_text())
    (tmp_path / "layout" / "index.json").write_text(json.dumps(index) + " " * (5 << 20))
    with pytest.raises(EnvironmentSpecError, match="larger than"):
        oci.read(str(tmp_path / "layout"))


@pytest.mark.parametrize(
    "media_type",
    [
        "application/vnd.oci.image.layer.v1.tar+zstd",
        "application/vnd.oci.image.layer.v1.tar+lz4",
        "application/vnd.example.unknown",
    ],
)
def test_unsupported_layer_media_types_are_refused(tmp_path, media_type):
    images.layout(str(tmp_path / "layout"), [BASE], media_type=media_type)
    with pytest.raises(EnvironmentSpecError, match="zstd" if "zstd" in media_type else "media"):
        oci.read(str(tmp_path / "layout"))


def test_several_images_need_a_ref(tmp_path):
    images.layout(str(tmp_path / "layout"), [[file("which", "one")]], ref="one")
    images.layout(str(tmp_path / "layout"), [[file("which", "two")]], ref="two")
    with pytest.raises(EnvironmentSpecError) as caught:
        oci.read(str(tmp_path / "layout"))
    assert caught.value.field == "ref"
    assert str(caught.value).endswith("holds 2 images; name one of: one, two")
    assert unpacked(tmp_path / "layout", tmp_path, "two")[0]["which"][2] == b"two"
    with pytest.raises(EnvironmentSpecError, match="no image 'three'; known: one, two"):
        oci.read(str(tmp_path / "layout"), "three")


def test_several_docker_images_need_a_repo_tag(tmp_path):
    images.docker_archive(
        str(tmp_path / "saved.tar"),
        [[file("which", "one")]],
        tags=("one:latest",),
        more=((("two:v2",), [[file("which", "two")]]),),
    )
    with pytest.raises(
        EnvironmentSpecError, match="holds 2 images; name one of: one:latest, two:v2"
    ):
        oci.read(str(tmp_path / "saved.tar"))
    assert unpacked(tmp_path / "saved.tar", tmp_path, "two:v2", "a")[0]["which"][2] == b"two"
    assert unpacked(tmp_path / "saved.tar", tmp_path, "one", "b")[0]["which"][2] == b"one"


def test_what_is_not_an_image_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "text").write_text("hello")
    for source in ("empty", "text", "missing"):
        with pytest.raises(EnvironmentSpecError):
            oci.read(str(tmp_path / source))


def test_the_destination_must_be_an_empty_folder(tmp_path):
    images.layout(str(tmp_path / "layout"), [BASE])
    image = oci.read(str(tmp_path / "layout"))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("")
    with pytest.raises(InvalidArgument):
        oci.unpack(image, str(tmp_path / "out"))
    with pytest.raises(InvalidArgument):
        oci.unpack(image, str(tmp_path / "nowhere"))


def confined(tmp_path, layers, expect_refusal: bool):
    """Unpack into tmp_path/box/dest; what lies beside dest must be as it was."""
    (tmp_path / "box" / "dest").mkdir(parents=True)
    (tmp_path / "box" / "sentinel").write_text("s")
    images.layout(str(tmp_path / "layout"), layers)
    image = oci.read(str(tmp_path / "layout"))
    if expect_refusal:
        with pytest.raises(EnvironmentSpecError):
            oci.unpack(image, str(tmp_path / "box" / "dest"))
    else:
        oci.unpack(image, str(tmp_path / "box" / "dest"))
    assert sorted(os.listdir(tmp_path / "box")) == ["dest", "sentinel"]
    assert (tmp_path / "box" / "sentinel").read_text() == "s"
    assert sorted(os.listdir(tmp_path)) == ["box", "layout"]
    return listing(tmp_path / "box" / "dest")


@pytest.mark.parametrize("name", ["../x", "a/../../x", "./../x", "a/b/../../../x", "/../x"])
def test_a_name_leaving_the_root_is_refused(tmp_path, name):
    confined(tmp_path, [[file(name, "escaped")]], expect_refusal=True)


def test_absolute_names_land_inside_the_root(tmp_path):
    found = confined(tmp_path, [[file("/etc/abs", "a"), file("//x/./y/../z", "b")]], False)
    assert found["etc/abs"] == ("file", 0o644, b"a")
    assert found["x/z"] == ("file", 0o644, b"b")


@pytest.mark.parametrize("split", [False, True])
def test_symlinks_among_the_parents_are_followed_inside_the_root(tmp_path, split):
    links = [
        symlink("a", "/"),
        symlink("b", "../../.."),
        symlink("c", "/../../etc"),
        symlink("d", "b/a/c"),
    ]
    writes = [file("a/etc/x", "1"), file("b/y", "2"), file("c/z", "3"), file("d/w", "4")]
    layers = [links, writes] if split else [links + writes]
    found = confined(tmp_path, layers, expect_refusal=False)
    assert found["etc/x"] == ("file", 0o644, b"1")
    assert found["y"] == ("file", 0o644, b"2")
    assert found["etc/z"] == ("file", 0o644, b"3")
    assert found["etc/w"] == ("file", 0o644, b"4")


def test_a_symlink_loop_among_the_parents_is_refused(tmp_path):
    confined(tmp_path, [[symlink("p", "q"), symlink("q", "p"), file("p/x")]], expect_refusal=True)


def test_a_hard_link_to_a_file_in_the_tree_is_one_file(tmp_path):
    found = confined(
        tmp_path, [[file("etc/real", "r")], [hardlink("copy", "/etc/real")]], expect_refusal=False
    )
    assert found["copy"] == found["etc/real"]
    box = tmp_path / "box" / "dest"
    assert os.stat(box / "copy").st_ino == os.stat(box / "etc/real").st_ino


@pytest.mark.parametrize(
    "target",
    [
        "../../etc/passwd",  # leaves the root
        "/etc/passwd",  # the host has one, the tree does not
        "up/etc/passwd",  # through a symlink to / : still the tree's /etc
        "etc",  # a folder
        "link",  # a symbolic link
        "nothing",
    ],
)
def test_a_hard_link_to_anything_but_a_regular_file_in_the_tree_is_refused(tmp_path, target):
    lower = [folder("etc"), symlink("up", "/"), symlink("link", "/etc/passwd")]
    confined(tmp_path, [lower, [hardlink("h", target)]], expect_refusal=True)
    assert not (tmp_path / "box" / "dest" / "h").exists()


def test_devices_and_fifos_are_skipped_and_listed(tmp_path):
    layer = [device("dev/null", "chr"), device("dev/sda", "blk"), device("run/pipe", "fifo")]
    images.layout(str(tmp_path / "layout"), [layer + [file("kept")]])
    found, result = unpacked(tmp_path / "layout", tmp_path)
    assert result.skipped == (
        ("dev/null", "character device"),
        ("dev/sda", "block device"),
        ("run/pipe", "fifo"),
    )
    assert "kept" in found and "dev/null" not in found and "run/pipe" not in found


def test_special_and_group_write_bits_are_dropped(tmp_path):
    layer = [
        file("suid", "", 0o4755),
        file("all", "", 0o6777),
        file("shared", "", 0o666),
        folder("tmp", 0o1777),
        folder("group", 0o2775),
        folder("private", 0o700),
    ]
    images.layout(str(tmp_path / "layout"), [layer])
    found, _ = unpacked(tmp_path / "layout", tmp_path)
    modes = {path: entry[1] for path, entry in found.items()}
    assert modes == {
        "suid": 0o755,
        "all": 0o755,
        "shared": 0o644,
        "tmp": 0o755,
        "group": 0o755,
        "private": 0o700,
    }


def test_nothing_is_chowned(tmp_path):
    owned = file("owned", "x")
    owned[0].uid, owned[0].gid = 4242, 4243
    images.layout(str(tmp_path / "layout"), [[owned]])
    unpacked(tmp_path / "layout", tmp_path)
    info = os.lstat(tmp_path / "out" / "owned")
    assert (info.st_uid, info.st_gid) == (os.getuid(), os.getgid())


def made(kind: str, name: str, target: str) -> images.Entry:
    if kind in ("symlink", "hardlink"):
        return {"symlink": symlink, "hardlink": hardlink}[kind](name, target)
    return file(name, "p") if kind == "file" else folder(name)


NAMES = st.sampled_from(["x", "y", "..", ".", "", "lnk", "yyb-oci-probe"])
TARGETS = st.sampled_from(["/", "..", "../..", "../../..", "x/../..", "lnk", "/x", "y/.."])


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["file", "folder", "symlink", "hardlink"]),
            st.lists(NAMES, min_size=1, max_size=4),
            TARGETS,
        ),
        max_size=8,
    )
)
def test_no_entry_writes_outside_the_root(tmp_path, entries):
    base = tempfile.mkdtemp(dir=tmp_path)
    layers = []
    for kind, parts, target in entries:
        layers.append([made(kind, "/".join(parts), target)])
    os.makedirs(os.path.join(base, "box", "dest"))
    images.layout(os.path.join(base, "layout"), layers or [[]])
    try:
        oci.unpack(oci.read(os.path.join(base, "layout")), os.path.join(base, "box", "dest"))
    except EnvironmentSpecError:
        pass
    assert os.listdir(os.path.join(base, "box")) == ["dest"]
    assert sorted(os.listdir(base)) == ["box", "layout"]
    assert not os.path.lexists("/yyb-oci-probe") and not os.path.lexists("/x/yyb-oci-probe")


def test_a_busybox_root_runs(tmp_path):
    try:
        root = images.busybox_root(str(tmp_path / "root"))
    except FileNotFoundError:
        pytest.skip("busybox-static is not installed")
    images.layout(str(tmp_path / "layout"), [root])
    found, _ = unpacked(tmp_path / "layout", tmp_path)
    assert found["bin/sh"] == ("link", "busybox")
    assert {"tmp", "proc", "dev", "etc", "testbed"} <= set(found)
    done = subprocess.run([str(tmp_path / "out" / "bin" / "echo"), "hi"], capture_output=True)
    assert done.stdout == b"hi\n"


@pytest.mark.skipif(shutil.which("umoci") is None, reason="umoci is not installed")
def test_umoci_unpacks_the_same_files(tmp_path):
    lower = BASE + [
        folder("opaque"),
        file("opaque/old"),
        folder("w"),
        file("w/gone"),
        file("w/kept"),
        symlink("bin/alias", "tool"),
        file("etc/passwd", "root"),
    ]
    upper = [
        opaque("opaque"),
        file("opaque/new"),
        whiteout("w/gone"),
        hardlink("bin/hard", "bin/tool"),
        folder("etc/deep"),
        file("etc/deep/f", "deep"),
        whiteout("etc/motd"),
    ]
    images.layout(str(tmp_path / "layout"), [lower, upper], compress=True)
    found, _ = unpacked(tmp_path / "layout", tmp_path)
    subprocess.run(
        [
            "umoci",
            "unpack",
            "--rootless",
            "--image",
            f"{tmp_path / 'layout'}:latest",
            str(tmp_path / "umoci"),
        ],
        check=True,
        capture_output=True,
    )
    theirs = listing(tmp_path / "umoci" / "rootfs")
    assert sorted(found) == sorted(theirs)
    assert found == theirs


def test_a_docker_saved_layout_answers_to_its_image_name(tmp_path):
    images.layout(str(tmp_path / "layout"), [[file("which", "app")]], ref="1.0")
    images.layout(str(tmp_path / "layout"), [[file("which", "other")]], ref="other")
    index_path = tmp_path / "layout" / "index.json"
    index = json.loads(index_path.read_text())
    index["manifests"][0]["annotations"]["io.containerd.image.name"] = "docker.io/library/app:1.0"
    index_path.write_text(json.dumps(index))
    for ref in ("1.0", "app:1.0", "docker.io/library/app:1.0"):
        assert (
            oci.read(str(tmp_path / "layout"), ref).digest
            == oci.read(str(tmp_path / "layout"), "1.0").digest
        )
    with pytest.raises(EnvironmentSpecError, match="no image 'app:2.0'"):
        oci.read(str(tmp_path / "layout"), "app:2.0")
    assert unpacked(tmp_path / "layout", tmp_path, "app:1.0")[0]["which"][2] == b"app"


def test_a_gzipped_save_is_read(tmp_path):
    built = images.docker_archive(str(tmp_path / "saved.tar"), [BASE])
    with open(tmp_path / "saved.tar", "rb") as plain:
        (tmp_path / "saved.tar.gz").write_bytes(gzip.compress(plain.read()))
    assert oci.read(str(tmp_path / "saved.tar.gz")).digest == built.digest
    found, _ = unpacked(tmp_path / "saved.tar.gz", tmp_path)
    assert found["etc/motd"] == EXPECTED["etc/motd"]


def test_the_counts_take_a_hard_linked_file_once(tmp_path):
    layer = [file("a", "12345"), hardlink("b", "a"), symlink("c", "a"), folder("d")]
    images.layout(str(tmp_path / "layout"), [layer, [device("d/null")]])
    _, result = unpacked(tmp_path / "layout", tmp_path)
    assert result == oci.Unpacked(
        files=2, links=1, dirs=1, bytes=5, skipped=(("d/null", "character device"),)
    )
