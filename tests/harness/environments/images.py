"""Images built for tests: OCI layouts, OCI archives and docker-archives from tar entries.

A layer is a list of entries (``file``, ``folder``, ``symlink``, ``hardlink``, ``device``,
``whiteout``, ``opaque``) or a folder whose contents become one. Everything is deterministic
(owner 0, time 0, gzip without a timestamp), so that one layer always has one digest.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import tarfile
from dataclasses import dataclass, field

from yyb.harness.environments.oci import host_architecture

Entry = tuple[tarfile.TarInfo, bytes | None]
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
APPLETS = (
    "sh",
    "ls",
    "cat",
    "echo",
    "id",
    "env",
    "true",
    "false",
    "mkdir",
    "rm",
    "head",
    "tail",
    "grep",
    "sed",
    "wc",
    "cp",
    "mv",
    "ln",
    "touch",
    "pwd",
    "test",
    "sleep",
    "chmod",
    "find",
    "sort",
    "uniq",
    "tr",
    "cut",
    "printf",
    "stat",
    "readlink",
    "dirname",
    "basename",
    "tee",
)


def entry(name: str, kind: bytes, mode: int, data: bytes | None = None, link: str = "") -> Entry:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname = kind, mode, link
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.size = len(data) if data is not None else 0
    return info, data


def file(name: str, data: bytes | str = b"", mode: int = 0o644) -> Entry:
    return entry(name, tarfile.REGTYPE, mode, data.encode() if isinstance(data, str) else data)


def folder(name: str, mode: int = 0o755) -> Entry:
    return entry(name, tarfile.DIRTYPE, mode)


def symlink(name: str, target: str) -> Entry:
    return entry(name, tarfile.SYMTYPE, 0o777, link=target)


def hardlink(name: str, target: str) -> Entry:
    return entry(name, tarfile.LNKTYPE, 0o644, link=target)


def device(name: str, kind: str = "chr") -> Entry:
    """A character or block device (``chr``, ``blk``) or a ``fifo``."""
    types = {"chr": tarfile.CHRTYPE, "blk": tarfile.BLKTYPE, "fifo": tarfile.FIFOTYPE}
    return entry(name, types[kind], 0o666)


def whiteout(path: str) -> Entry:
    """The entry that deletes ``path`` of lower layers."""
    parent, _, base = path.rstrip("/").rpartition("/")
    return file(f"{parent}/.wh.{base}" if parent else f".wh.{base}")


def opaque(path: str) -> Entry:
    """The entry that empties folder ``path`` of lower layers' content."""
    return file(f"{path.rstrip('/')}/.wh..wh..opq")


def folder_entries(top: str) -> list[Entry]:
    """A folder's contents as entries, sorted, with their modes and symbolic links."""
    found: list[Entry] = []
    for here, dirs, names in os.walk(top):
        dirs.sort()
        for name in sorted(dirs + names):
            path = os.path.join(here, name)
            rel = os.path.relpath(path, top)
            info = os.lstat(path)
            mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISLNK(info.st_mode):
                found.append(symlink(rel, os.readlink(path)))
            elif stat.S_ISDIR(info.st_mode):
                found.append(folder(rel, mode))
            else:
                with open(path, "rb") as stream:
                    found.append(file(rel, stream.read(), mode))
    return found


def layer_tar(layer: list[Entry] | str | os.PathLike) -> bytes:
    """The uncompressed tar of one layer."""
    entries = layer if isinstance(layer, list) else folder_entries(os.fspath(layer))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class Built:
    """What a builder wrote: the image's digest and each blob's digest, for tampering."""

    path: str
    digest: str
    config: str
    layers: list[str] = field(default_factory=list)
    index: str | None = None  # a nested index's digest (multi_platform)


def put_blob(dest: str, data: bytes) -> str:
    digest = sha256(data)
    folder_path = os.path.join(dest, "blobs", "sha256")
    os.makedirs(folder_path, exist_ok=True)
    with open(os.path.join(folder_path, digest.split(":")[1]), "wb") as out:
        out.write(data)
    return digest


def blob_file(dest: str, digest: str) -> str:
    """The path of the blob ``digest`` in layout ``dest``."""
    return os.path.join(dest, "blobs", "sha256", digest.split(":")[1])


def config_document(tars: list[bytes], config: dict | None, architecture: str | None) -> bytes:
    part = {"Env": ["PATH=/bin"], "Cmd": ["/bin/sh"]} if config is None else config
    document = {
        "architecture": architecture or host_architecture(),
        "os": "linux",
        "config": part,
        "rootfs": {"type": "layers", "diff_ids": [sha256(t) for t in tars]},
    }
    return json.dumps(document, sort_keys=True).encode()


def image_manifest(
    dest: str,
    layers: list,
    config: dict | None,
    compress: bool,
    media_type: str | None,
    architecture: str | None = None,
) -> tuple[bytes, str, list[str]]:
    """Write an image's blobs into ``dest``; its manifest's bytes, config and layer digests."""
    tars = [layer_tar(layer) for layer in layers]
    descriptors = []
    for tar in tars:
        data = gzip.compress(tar, mtime=0) if compress else tar
        kind = media_type or (OCI_LAYER + "+gzip" if compress else OCI_LAYER)
        descriptors.append({"mediaType": kind, "digest": put_blob(dest, data), "size": len(data)})
    config_bytes = config_document(tars, config, architecture)
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": put_blob(dest, config_bytes),
            "size": len(config_bytes),
        },
        "layers": descriptors,
    }
    data = json.dumps(manifest, sort_keys=True).encode()
    return data, manifest["config"]["digest"], [d["digest"] for d in descriptors]


def add_to_index(dest: str, descriptor: dict) -> None:
    with open(os.path.join(dest, "oci-layout"), "w") as out:
        json.dump({"imageLayoutVersion": "1.0.0"}, out)
    path = os.path.join(dest, "index.json")
    index = {"schemaVersion": 2, "manifests": []}
    if os.path.exists(path):
        with open(path) as stream:
            index = json.load(stream)
    index["manifests"].append(descriptor)
    with open(path, "w") as out:
        json.dump(index, out)


def layout(
    dest: str,
    layers: list,
    config: dict | None = None,
    *,
    ref: str | None = "latest",
    compress: bool = False,
    media_type: str | None = None,
    architecture: str | None = None,
) -> Built:
    """Write (or add one more image to) an OCI image layout in ``dest``.

    Args:
        dest: the layout folder, made if missing; an existing layout gains one more image.
        layers: each a list of entries or a folder, applied in order.
        config: the config's ``config`` part (Env, Cmd...), a small default when None.
        ref: its ``org.opencontainers.image.ref.name`` annotation (None: no annotation).
        compress: gzip the layers.
        media_type: every layer's media type instead of the one the compression says.
        architecture: the config's architecture instead of this machine's.
    """
    os.makedirs(dest, exist_ok=True)
    data, config_digest, layer_digests = image_manifest(
        dest, layers, config, compress, media_type, architecture
    )
    digest = put_blob(dest, data)
    descriptor = {
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": digest,
        "size": len(data),
    }
    if ref is not None:
        descriptor["annotations"] = {"org.opencontainers.image.ref.name": ref}
    add_to_index(dest, descriptor)
    return Built(dest, digest, config_digest, layer_digests)


def multi_platform(dest: str, platforms: dict[str, list], ref: str = "latest") -> Built:
    """A layout whose one image is a nested index of one image per architecture.

    Returns:
        The built image of this machine's architecture (``index`` the nested index's digest).
    """
    os.makedirs(dest, exist_ok=True)
    descriptors, mine = [], None
    for architecture, layers in platforms.items():
        data, config_digest, layer_digests = image_manifest(
            dest, layers, None, False, None, architecture
        )
        digest = put_blob(dest, data)
        descriptors.append(
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": digest,
                "size": len(data),
                "platform": {"os": "linux", "architecture": architecture},
            }
        )
        if architecture == host_architecture():
            mine = Built(dest, digest, config_digest, layer_digests)
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": descriptors,
    }
    data = json.dumps(index).encode()
    nested = put_blob(dest, data)
    add_to_index(
        dest,
        {
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "digest": nested,
            "size": len(data),
            "annotations": {"org.opencontainers.image.ref.name": ref},
        },
    )
    if mine is not None:
        mine.index = nested
    return mine or Built(dest, "", "", [], nested)


def archive(layout_dir: str, tar_path: str) -> str:
    """Tar an OCI layout's contents into ``tar_path`` (an OCI archive)."""
    with tarfile.open(tar_path, "w") as tar:
        for name in sorted(os.listdir(layout_dir)):
            tar.add(os.path.join(layout_dir, name), arcname=name)
    return tar_path


def docker_archive(
    tar_path: str,
    layers: list,
    config: dict | None = None,
    tags: tuple[str, ...] = ("example/image:latest",),
    more: tuple = (),
    compress: bool = False,
) -> Built:
    """Write a docker-archive (as ``docker save`` does) of one image, or several.

    Args:
        tar_path: the archive to write.
        layers: the first image's layers (lists of entries or folders).
        config: the first image's config part.
        tags: the first image's RepoTags.
        more: further images, each ``(tags, layers)``.
        compress: gzip the layer members (their diff ids stay the uncompressed tars').

    Returns:
        The first image (``digest`` its config's digest, the image id; ``layers`` diff ids).
    """
    members: dict[str, bytes] = {}
    manifest, first = [], None
    for image_tags, image_layers, part in [(tags, layers, config)] + [(*m, None) for m in more]:
        tars = [layer_tar(layer) for layer in image_layers]
        config_bytes = config_document(tars, part, None)
        digest = sha256(config_bytes)
        members[digest.split(":")[1] + ".json"] = config_bytes
        paths = []
        for tar in tars:
            paths.append(f"{sha256(tar).split(':')[1]}/layer.tar")
            members[paths[-1]] = gzip.compress(tar, mtime=0) if compress else tar
        manifest.append(
            {
                "Config": digest.split(":")[1] + ".json",
                "RepoTags": list(image_tags),
                "Layers": paths,
            }
        )
        first = first or Built(tar_path, digest, digest, [sha256(t) for t in tars])
    members["manifest.json"] = json.dumps(manifest).encode()
    with tarfile.open(tar_path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return first


def busybox_path() -> str:
    """The host's static busybox, as Debian's busybox-static package installs it."""
    listing = subprocess.run(
        ["dpkg", "-L", "busybox-static"], capture_output=True, text=True, check=False
    ).stdout
    for line in listing.splitlines():
        if line.endswith("/bin/busybox") and os.path.isfile(line):
            return line
    raise FileNotFoundError("busybox-static is not installed")


def busybox_root(dest: str) -> str:
    """A minimal root in ``dest``: ``bin/busybox``, its applet links and the usual folders.

    Raises:
        FileNotFoundError: busybox-static is not installed.
    """
    source = busybox_path()
    os.makedirs(os.path.join(dest, "bin"), exist_ok=True)
    shutil.copyfile(source, os.path.join(dest, "bin", "busybox"))
    os.chmod(os.path.join(dest, "bin", "busybox"), 0o755)
    for applet in APPLETS:
        os.symlink("busybox", os.path.join(dest, "bin", applet))
    for name in ("tmp", "proc", "dev", "etc", "testbed"):
        os.makedirs(os.path.join(dest, name), exist_ok=True)
    return dest
