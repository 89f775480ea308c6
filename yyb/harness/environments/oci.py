"""An OCI image layout, OCI archive or docker-archive read and unpacked into a folder, no daemon.

The formats and the safety rules are described in docs/environments.md, "oci".
"""

from __future__ import annotations

import gzip
import os
import platform
import re
import tarfile
import zlib
from dataclasses import dataclass, field
from typing import IO, Literal

from yyb.errors import (
    ChecksumMismatch,
    EnvironmentBuildFailed,
    EnvironmentSpecError,
    InvalidArgument,
    YybError,
)
from yyb.harness.environments.layer import Tree, Unpacked
from yyb.harness.environments.ocisource import (
    Source,
    blob_path,
    check_digest,
    digest_of,
    hasher,
    parse,
)

__all__ = ["Image", "Unpacked", "read", "unpack"]

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
CONFIG_TYPES = (
    "application/vnd.oci.image.config.v1+json",
    "application/vnd.docker.container.image.v1+json",
)
DOCKER_TAR = "application/vnd.docker.image.rootfs.diff.tar"
DOCKER_GZIP = "application/vnd.docker.image.rootfs.diff.tar.gzip"
LAYER_TYPES = {  # media type -> how its bytes are compressed
    "application/vnd.oci.image.layer.v1.tar": "tar",
    "application/vnd.oci.image.layer.v1.tar+gzip": "gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar": "tar",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip": "gzip",
    DOCKER_TAR: "tar",
    DOCKER_GZIP: "gzip",
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip": "gzip",
}
REF_ANNOTATIONS = ("org.opencontainers.image.ref.name", "io.containerd.image.name")
ARCHITECTURES = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "i686": "386"}
MAX_NESTING = 4  # indexes inside indexes: one level is multi-platform, more is not an image
GZIP_MAGIC, ZSTD_MAGIC = b"\x1f\x8b", b"\x28\xb5\x2f\xfd"


@dataclass(frozen=True)
class Image:
    """One image chosen from what a user gave, read and checked but not unpacked.

    ``digest`` names the image: for the OCI forms it is the manifest's digest (the one
    registries and ``skopeo inspect`` show); a docker-archive has no manifest blob, so it is
    the config's digest, the image id ``docker images --no-trunc`` shows. ``config`` is the
    config's ``config`` object (Env, WorkingDir, User, Entrypoint, Cmd...), ``{}`` when absent.
    ``layers`` holds ``(digest, media_type, size)`` in the order they apply: for the OCI
    forms the descriptor's values (the stored, maybe compressed, bytes); for a docker-archive
    the digest is the layer's diff id (its uncompressed tar's digest, which the config
    names) and the size the stored member's. ``diff_ids`` are the config's, one per layer,
    checked against each layer's uncompressed bytes; ``layer_paths`` says where each layer
    lives inside ``source``.
    """

    digest: str
    config: dict = field(hash=False)
    layers: tuple[tuple[str, str, int], ...]
    platform: str
    source: str
    form: Literal["oci-layout", "oci-archive", "docker-archive"]
    diff_ids: tuple[str, ...]
    layer_paths: tuple[str, ...]


def host_architecture() -> str:
    """This machine's architecture in OCI's words (``amd64``, ``arm64``...)."""
    machine = platform.machine()
    return ARCHITECTURES.get(machine, machine)


def read(source: str, ref: str | None = None) -> Image:
    """Read and check the one image ``source`` holds, or the one ``ref`` names.

    Args:
        source: an OCI image layout folder (``oci-layout`` and ``index.json``), a tar of one
            (an OCI archive), or a docker-archive (``docker save``, ``podman save``).
        ref: an ``org.opencontainers.image.ref.name`` (or ``io.containerd.image.name``)
            annotation, or a docker RepoTag; needed when the source holds several images.

    Returns:
        The image; a multi-platform index resolved to linux on this machine's architecture.

    Raises:
        EnvironmentSpecError: not one of the forms, no image or several without ``ref``, a
            document malformed or too large, a media type unsupported (zstd included).
        ChecksumMismatch: a manifest, index or config whose bytes are not the ones referred to.
    """
    with Source(source) as files:
        if files.has("oci-layout") and files.has("index.json"):
            return read_oci(files, ref)
        if files.tar is not None and files.has("manifest.json"):
            return read_docker(files, ref)
    raise EnvironmentSpecError(source, None, "not an OCI layout, OCI archive or docker-archive")


def read_oci(files: Source, ref: str | None) -> Image:
    where = files.path
    layout = files.document("oci-layout")
    if not str(layout.get("imageLayoutVersion", "")).startswith("1."):
        raise EnvironmentSpecError(where, "oci-layout", "not an image layout version 1")
    descriptor = choose(where, files.document("index.json"), ref)
    for _ in range(MAX_NESTING):
        if descriptor.get("mediaType") not in (OCI_INDEX, DOCKER_LIST):
            break
        descriptor = platform_manifest(where, blob(files, descriptor))
    if descriptor.get("mediaType") not in (OCI_MANIFEST, DOCKER_MANIFEST):
        raise EnvironmentSpecError(
            where, "mediaType", f"not an image manifest: {descriptor.get('mediaType')!r}"
        )
    manifest = blob(files, descriptor)
    if manifest.get("mediaType", descriptor["mediaType"]) != descriptor["mediaType"]:
        raise EnvironmentSpecError(where, "mediaType", "the manifest contradicts its descriptor")
    config_descriptor = manifest.get("config")
    if not isinstance(config_descriptor, dict):
        raise EnvironmentSpecError(where, "config", "the manifest names no config")
    if config_descriptor.get("mediaType") not in CONFIG_TYPES:
        raise EnvironmentSpecError(
            where, "config", f"not an image config: {config_descriptor.get('mediaType')!r}"
        )
    config = blob(files, config_descriptor)
    descriptors = manifest.get("layers")
    if not isinstance(descriptors, list):
        raise EnvironmentSpecError(where, "layers", "the manifest lists no layers")
    layers = tuple(oci_layer(where, item, n) for n, item in enumerate(descriptors))
    return Image(
        digest=descriptor["digest"],
        config=config_part(where, config),
        layers=layers,
        platform=platform_of(where, config),
        source=where,
        form="oci-layout" if files.tar is None else "oci-archive",
        diff_ids=diff_ids(where, config, len(layers)),
        layer_paths=tuple(blob_path(digest) for digest, _, _ in layers),
    )


def blob(files: Source, descriptor: object) -> dict:
    """The JSON blob a descriptor names, checked against its digest and size."""
    if not isinstance(descriptor, dict):
        raise EnvironmentSpecError(files.path, "descriptor", "not a JSON object")
    digest = check_digest(descriptor.get("digest"), files.path, "digest")
    return files.document(blob_path(digest), digest, descriptor.get("size"))


def names(descriptor: dict) -> list[str]:
    annotations = descriptor.get("annotations")
    if not isinstance(annotations, dict):
        return []
    return [str(annotations[key]) for key in REF_ANNOTATIONS if key in annotations]


def choose(where: str, index: dict, ref: str | None) -> dict:
    """The descriptor of the top index that ``ref`` names, or its only one."""
    manifests = index.get("manifests")
    if not isinstance(manifests, list) or not all(isinstance(m, dict) for m in manifests):
        raise EnvironmentSpecError(where, "index.json", "no list of manifests")
    if not manifests:
        raise EnvironmentSpecError(where, "index.json", "holds no image")
    return pick(where, manifests, [names(m) for m in manifests], ref)


def aliases(name: str) -> set[str]:
    """The names one image name also answers to: without ``docker.io/library/`` and ``:latest``."""
    found = {name}
    for prefix in ("docker.io/library/", "docker.io/"):
        if name.startswith(prefix):
            found.add(name[len(prefix) :])
    return found | {alias.removesuffix(":latest") for alias in found}


def pick(where: str, items: list, labels: list[list[str]], ref: str | None):
    """The one item that ``ref`` names among its labels; without ``ref``, the only item."""
    known = ", ".join(sorted({name for label in labels for name in label})) or "-"
    if ref is None:
        if len(items) == 1:
            return items[0]
        raise EnvironmentSpecError(where, "ref", f"holds {len(items)} images; name one of: {known}")
    for item, label in zip(items, labels, strict=True):
        if any(ref in aliases(name) for name in label):
            return item
    raise EnvironmentSpecError(where, "ref", f"no image {ref!r}; known: {known}")


def platform_manifest(where: str, index: dict) -> dict:
    """The manifest of a multi-platform index for linux on this machine's architecture."""
    manifests = index.get("manifests")
    if not isinstance(manifests, list):
        raise EnvironmentSpecError(where, "manifests", "an index with no list of manifests")
    wanted = host_architecture()
    offered = []
    for item in manifests:
        spec = item.get("platform") if isinstance(item, dict) else None
        if isinstance(spec, dict):
            offered.append(f"{spec.get('os')}/{spec.get('architecture')}")
            if spec.get("os") == "linux" and spec.get("architecture") == wanted:
                return item
    raise EnvironmentSpecError(
        where, "platform", f"no linux/{wanted} image; offered: {', '.join(offered) or '-'}"
    )


def oci_layer(where: str, descriptor: object, n: int) -> tuple[str, str, int]:
    if not isinstance(descriptor, dict):
        raise EnvironmentSpecError(where, f"layers[{n}]", "not a descriptor")
    media_type = str(descriptor.get("mediaType"))
    compression(media_type, where, f"layers[{n}]")
    size = descriptor.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise EnvironmentSpecError(where, f"layers[{n}].size", f"not a size: {size!r}")
    return check_digest(descriptor.get("digest"), where, f"layers[{n}].digest"), media_type, size


def compression(media_type: str, where: str, part: str) -> str:
    """``tar`` or ``gzip``: how a layer of ``media_type`` is stored; others are refused."""
    if "zstd" in media_type:
        raise EnvironmentSpecError(
            where, part, f"zstd-compressed layers are not supported: {media_type}"
        )
    if media_type not in LAYER_TYPES:
        raise EnvironmentSpecError(where, part, f"not a layer media type: {media_type!r}")
    return LAYER_TYPES[media_type]


def config_part(where: str, config: dict) -> dict:
    part = config.get("config") or {}
    if not isinstance(part, dict):
        raise EnvironmentSpecError(where, "config.config", "not a JSON object")
    return part


def platform_of(where: str, config: dict) -> str:
    os_name, architecture = config.get("os"), config.get("architecture")
    if os_name != "linux" or not isinstance(architecture, str) or not architecture:
        raise EnvironmentSpecError(
            where, "config.os", f"not a linux image: {os_name!r}/{architecture!r}"
        )
    variant = config.get("variant")
    return f"linux/{architecture}" + (f"/{variant}" if isinstance(variant, str) and variant else "")


def diff_ids(where: str, config: dict, count: int) -> tuple[str, ...]:
    rootfs = config.get("rootfs")
    ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
    if not isinstance(ids, list) or len(ids) != count:
        raise EnvironmentSpecError(
            where, "config.rootfs.diff_ids", f"not one diff id for each of the {count} layers"
        )
    return tuple(check_digest(d, where, f"config.rootfs.diff_ids[{n}]") for n, d in enumerate(ids))


def read_docker(files: Source, ref: str | None) -> Image:
    where = files.path
    entries = parse(files.raw("manifest.json"), where, "manifest.json", list)
    if not entries or not all(isinstance(e, dict) for e in entries):
        raise EnvironmentSpecError(where, "manifest.json", "holds no image")
    tags = [[str(t) for t in (e.get("RepoTags") or [])] for e in entries]
    entry = pick(where, entries, tags, ref)
    config_name = str(entry.get("Config"))
    data = files.raw(config_name)
    digest = digest_of(data)
    named = re.search(r"([0-9a-f]{64})(\.json)?$", config_name)
    if named and f"sha256:{named.group(1)}" != digest:
        raise ChecksumMismatch(f"sha256:{named.group(1)}", digest)
    config = parse(data, where, config_name)
    paths = entry.get("Layers")
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise EnvironmentSpecError(where, "Layers", "not a list of layer paths")
    ids = diff_ids(where, config, len(paths))
    layers = tuple(
        (diff, docker_media_type(files, path), files.size(path))
        for diff, path in zip(ids, paths, strict=True)
    )
    return Image(
        digest=digest,
        config=config_part(where, config),
        layers=layers,
        platform=platform_of(where, config),
        source=where,
        form="docker-archive",
        diff_ids=ids,
        layer_paths=tuple(paths),
    )


def docker_media_type(files: Source, path: str) -> str:
    """A docker-archive's layer names no media type: its first bytes tell tar from gzip."""
    with files.open(path) as stream:
        magic = stream.read(4)
    if magic.startswith(ZSTD_MAGIC):
        raise EnvironmentSpecError(files.path, path, "zstd-compressed layers are not supported")
    return DOCKER_GZIP if magic.startswith(GZIP_MAGIC) else DOCKER_TAR


def unpack(image: Image, dest: str) -> Unpacked:
    """Apply the image's layers in order into the existing empty folder ``dest``.

    Each layer is streamed once; its stored bytes are checked against the layer's digest and
    size, its uncompressed bytes against its diff id, as they are read. The checks end with
    the layer, so when one fails ``dest`` holds a partial tree: the caller removes it.

    Returns:
        What the tree holds, and the entries skipped (devices, fifos, unknown types).

    Raises:
        InvalidArgument: ``dest`` is not an existing empty folder.
        ChecksumMismatch: a layer whose bytes are not the ones its digest, size or diff id say.
        EnvironmentSpecError: a layer that is not a readable tar, or an entry refused by the
            safety rules (a ``..`` leaving the root, a hard link to no regular file in the
            tree, a symlink loop, a parent that is not a folder).
        EnvironmentBuildFailed: the file system refused a write.
    """
    if not os.path.isdir(dest) or os.listdir(dest):
        raise InvalidArgument("dest", "must be an existing empty folder", dest)
    tree = Tree(dest)
    with Source(image.source) as files:
        for n, (digest, media_type, size) in enumerate(image.layers):
            where = f"{image.source}: layer {digest}"
            # A docker-archive names its layers by diff id alone: the stored bytes' digest
            # is checked when they are the uncompressed tar (the diff check below).
            hashed = image.form != "docker-archive"
            stored = Checked(files.open(image.layer_paths[n]), digest, size, hashed)
            with stored.raw:
                apply_layer(
                    tree,
                    stored,
                    compression(media_type, where, "mediaType"),
                    image.diff_ids[n],
                    where,
                )
    return tree.finish()


DECODING = (tarfile.TarError, zlib.error, EOFError, gzip.BadGzipFile)


def apply_layer(tree: Tree, stored: Checked, packing: str, diff_id: str, where: str) -> None:
    """Stream one layer into ``tree``, a checksum failure winning over any other."""
    plain = gzip.GzipFile(fileobj=stored, mode="rb") if packing == "gzip" else stored
    diff = Checked(plain, diff_id)
    try:
        with tarfile.open(fileobj=diff, mode="r|") as layer:
            tree.apply(layer, where)
    except (YybError, OSError, *DECODING) as error:
        settle(stored, diff)  # tampered bytes explain any failure: say so, not the symptom
        if isinstance(error, YybError):
            raise
        if isinstance(error, DECODING):
            raise EnvironmentSpecError(where, None, f"not a readable layer: {error}") from None
        raise EnvironmentBuildFailed(where, "unpack", str(error)) from None
    settle(stored, diff)


def settle(stored: Checked, diff: Checked) -> None:
    """Read a layer to its end and check it, stored bytes first, then uncompressed ones.

    Raises:
        ChecksumMismatch: the bytes are not the ones the layer's digest, size or diff id
            name, or (with no stored digest to check) do not decompress at all.
    """
    try:
        diff.drain()
    except DECODING as error:
        stored.drain()
        stored.check()
        if stored.hash is None:
            raise ChecksumMismatch(diff.digest, f"bytes that do not decompress: {error}") from None
        return
    stored.drain()
    stored.check()
    diff.check()


class Checked:
    """A stream that counts and hashes what passes through it, refusing bytes past ``size``.

    ``digest`` is what the bytes must hash to (``hashed``) and what a size mismatch names.
    """

    def __init__(self, raw: IO[bytes], digest: str, size: int | None = None, hashed=True):
        self.raw = raw
        self.digest = digest
        self.size = size
        self.count = 0
        self.hash = hasher(digest) if hashed else None

    def read(self, n: int = -1) -> bytes:
        if self.size is not None:
            room = self.size + 1 - self.count  # one byte over the size proves it too long
            n = room if n is None or n < 0 else min(n, room)
        data = self.raw.read(n)
        self.count += len(data)
        if self.hash is not None:
            self.hash.update(data)
        if self.size is not None and self.count > self.size:
            raise ChecksumMismatch(self.digest, f"more than the {self.size} bytes declared")
        return data

    def drain(self) -> None:
        while self.read(1 << 20):
            pass

    def check(self) -> None:
        if self.size is not None and self.count != self.size:
            raise ChecksumMismatch(
                self.digest, f"{self.count} bytes where {self.size} are declared"
            )
        if self.hash is not None:
            got = f"{self.digest.split(':', 1)[0]}:{self.hash.hexdigest()}"
            if got != self.digest:
                raise ChecksumMismatch(self.digest, got)
