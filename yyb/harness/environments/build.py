"""Building an environment once, and handing out a verified one for each use.

``ensure`` is the one entry: it returns a ``Ready`` environment for a spec, building it when
the cache has none (in a staging folder, moved into place whole, so a failed build leaves
nothing), and otherwise checking the cached tree against its manifest before it is used
(the stamp first, every file when the stamp no longer matches: tree.py). What was built is
an environment record in the store (schemas/yyb_environment.v1) linking the spec, the
manifest (a blob) and the build log; the record's oid is what plans and receipts name.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from yyb.errors import EnvironmentBuildFailed, EnvironmentMismatch, EnvironmentSpecError
from yyb.harness.environments import ENVIRONMENT, PYTHON_MOUNT, REFS, WORKSPACE, tree
from yyb.harness.environments.cache import Cache, remove

# Mount points an environment's root must hold: what bubblewrap makes or yyb binds there.
ROOT_FOLDERS = ("dev", "proc", "tmp", "run")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Request:
    """What to build: the spec (its record's value and oid) and what its kind needs."""

    spec: dict
    spec_oid: str
    base: Ready | None = None  # the built environment a python spec's interpreter is in
    source: str | None = None  # an oci spec's image: a layout folder or a saved tarball
    repository: str | None = None  # a python spec's install step: the repository's path


@dataclass(frozen=True)
class View:
    """How a sandbox shows an environment: its root (None: the host's OS folders), other
    trees at fixed paths, and the variables its processes start with."""

    os_root: str | None
    mounts: tuple[tuple[str, str, bool], ...]
    variables: dict


@dataclass(frozen=True)
class Ready:
    """A built environment whose tree was checked against its manifest."""

    spec_oid: str
    oid: str  # its environment record
    record: dict
    root: str  # the tree, on the host
    base: Ready | None = None
    workspace: str = WORKSPACE  # where a case's workspace is shown (the spec's ``workspace``)

    @property
    def manifest_sha256(self) -> str:
        return self.record["manifest_sha256"]

    def view(self) -> View:
        variables = dict(self.base.record.get("variables", {})) if self.base else {}
        variables.update(self.record.get("variables", {}))
        if self.record["kind"] == "python":
            os_root = self.base.root if self.base is not None else None
            return View(os_root, ((self.root, PYTHON_MOUNT, False),), variables)
        return View(self.root, (), variables)

    def place(self, box, workspace: str):
        """The sandbox ``box`` on this environment: its root and trees in place of the host's
        OS folders, the workspace (bound at ``workspace`` on the host) shown at this
        environment's workspace path, and the working folder there when it was the
        workspace."""
        view = self.view()
        return dataclasses.replace(
            box,
            writable=[path for path in box.writable if path != workspace],
            os_root=view.os_root,
            mounts=(*box.mounts, *view.mounts, (workspace, self.workspace, True)),
            cwd=self.workspace if box.cwd == workspace else box.cwd,
        )


Progress = Callable[[str], None]


def ref(spec_oid: str) -> str:
    """The ref naming what was built from ``spec_oid`` (docs/environments.md)."""
    return REFS + spec_oid


def ensure(store, request: Request, progress: Progress | None = None) -> Ready:
    """The environment ``request`` names, built if need be and checked before it is used.

    Raises:
        EnvironmentBuildFailed: a build step failed (nothing was kept).
        EnvironmentSpecError: the spec or its image cannot be used.
        EnvironmentMismatch: the cached tree differs from its manifest.
    """
    cache = Cache(store.path)
    cached = cache.environment(request.spec_oid)
    if cached is not None and store.objects.contains(cached):
        ready = Ready(
            request.spec_oid, cached, store.objects.get_record(cached),
            cache.root(request.spec_oid), request.base, request.spec["workspace"],
        )  # fmt: skip
        check(store, ready)
        return ready
    return build(store, cache, request, progress)


def check(store, ready: Ready, full: bool = False) -> None:
    """Compare ``ready``'s tree with its manifest: its stamp when that still matches (unless
    ``full``), else every file; a tree found whole is stamped again.

    Raises:
        EnvironmentMismatch: the first path that differs.
    """
    cache = Cache(store.path)
    name = ready.record["name"]
    if not os.path.isdir(ready.root):
        raise EnvironmentMismatch(name, ".", "the built tree is missing")
    if not full and cache.stamp(ready.spec_oid) == tree.stamp(ready.root):
        return
    manifest = store.objects.get(ready.record["links"]["manifest"]).body
    if tree.manifest_sha256(manifest) != ready.manifest_sha256:
        raise EnvironmentMismatch(name, ".", "the stored manifest is not the record's")
    tree.verify(ready.root, manifest, name)
    cache.write_stamp(ready.spec_oid, tree.stamp(ready.root))


def build(store, cache: Cache, request: Request, progress=None) -> Ready:
    """Build ``request`` into the cache (see ``ensure``)."""
    spec = request.spec
    staging = cache.staging()
    started = time.monotonic()
    try:
        root = os.path.join(staging, "root")
        os.mkdir(root)
        facts, variables = _make(request, staging, root, progress)
        if spec["kind"] != "python":
            for name in ROOT_FOLDERS + (spec["workspace"].lstrip("/").split("/")[0],):
                os.makedirs(os.path.join(root, name), exist_ok=True)
        if progress:
            progress("describing the tree")
        facts["sanitised"] = [list(item) for item in tree.sanitise(root)[:100]]
        manifest = tree.manifest(root)
        facts["shared_bytes"] = tree.intern(root, cache.pool)
        facts["build_ms"] = round((time.monotonic() - started) * 1000)
        record = _record(store, request, manifest, facts, variables, staging)
        oid = store.objects.put_record(record)
        for name in os.listdir(staging):  # what the build used beside its tree (wheels, a
            if name != "root":  # checkout, scratch, the log, kept as a blob) goes
                path = os.path.join(staging, name)
                remove(path) if os.path.isdir(path) else os.unlink(path)
        cache.commit(staging, request.spec_oid, oid, tree.stamp(root))
        store.refs.update(ref(request.spec_oid), oid, reason=f"env build: {spec['name']}")
    except BaseException as exc:
        remove(staging)
        if isinstance(exc, OSError):
            raise EnvironmentBuildFailed(spec["name"], "build", str(exc)) from None
        raise
    root = cache.root(request.spec_oid)
    return Ready(request.spec_oid, oid, record, root, request.base, spec["workspace"])


def _make(request: Request, staging: str, root: str, progress) -> tuple[dict, dict]:
    """Make the tree of ``request``'s kind in ``root``; (build facts, variables)."""
    spec = request.spec
    kind = spec["kind"]
    if kind == "python":
        from yyb.harness.environments import python

        return python.build(request, staging, root, progress)
    if kind == "rootfs":
        from yyb.harness.environments import rootfs

        if progress:
            progress(f"mmdebstrap {spec['rootfs']['suite']}")
        with open(os.path.join(staging, "build.log"), "ab") as written:
            built = rootfs.build(dict(spec["rootfs"], name=spec["name"]), root, written)
        return _facts(built), {"PATH": DEFAULT_PATH, **spec.get("variables", {})}
    return _unpack(request, root, progress)


def _unpack(request: Request, root: str, progress) -> tuple[dict, dict]:
    from yyb.harness.environments import oci

    spec = request.spec
    if request.source is None:
        raise EnvironmentSpecError(
            spec["name"], "oci.image", "no image to build from: give its layout or saved tarball"
        )
    image = oci.read(request.source, spec["oci"].get("ref"))
    if image.digest != spec["oci"]["image"]:
        raise EnvironmentSpecError(
            request.source, "oci.image", f"is {image.digest}, the spec names {spec['oci']['image']}"
        )
    if progress:
        progress(f"unpacking {len(image.layers)} layers of {image.digest}")
    unpacked = oci.unpack(image, root)
    variables = {"PATH": DEFAULT_PATH}
    for item in image.config.get("Env") or []:
        name, sep, value = item.partition("=")
        if sep and name:
            variables[name] = value
    variables.update(spec.get("variables", {}))
    facts = {"image": image.digest, "platform": image.platform, **_facts(unpacked)}
    facts["skipped"] = [list(item) for item in getattr(unpacked, "skipped", ())][:100]
    return facts, variables


def _facts(value) -> dict:
    """A build's facts as plain data (a dataclass's fields that are plain values)."""
    out = {}
    fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    for name, item in fields.items():
        if isinstance(item, (str, int, bool)) or item is None:
            out[name] = item
        elif isinstance(item, float):  # records hold no floats: seconds become milliseconds
            out[f"{name.removesuffix('_seconds').removesuffix('seconds') or 'time'}_ms"] = round(
                item * 1000
            )
        elif isinstance(item, dict) and all(isinstance(v, str) for v in item.values()):
            out[name] = dict(item)
    return out


def _record(store, request: Request, manifest: bytes, facts: dict, variables, staging) -> dict:
    spec = request.spec
    lines = manifest.count(b"\n")
    size = sum(
        int(line.split(b" ", 3)[2]) for line in manifest.splitlines() if line.startswith(b"f ")
    )
    links = {"spec": request.spec_oid, "manifest": store.objects.put("blob", manifest)}
    if request.base is not None:
        links["base"] = request.base.oid
    log_path = os.path.join(staging, "build.log")
    if os.path.exists(log_path):
        with open(log_path, "rb") as handle:
            links["log"] = store.objects.put("blob", handle.read())
    return {
        "schema_version": ENVIRONMENT,
        "name": spec["name"],
        "kind": spec["kind"],
        "manifest_sha256": tree.manifest_sha256(manifest),
        "file_count": lines,
        "size_bytes": size,
        "mounts": [PYTHON_MOUNT if spec["kind"] == "python" else "/"],
        "variables": variables,
        "build": facts,
        "links": links,
    }


# Environments this process found whole, by (registry, environment oid): a run, a regrade or a
# gold validation checks each once, before its first use, not before every process it starts
# (a stamp takes about 100 ms for a Debian root's 10,000 entries; docs/performance.md).
_CHECKED: dict[tuple[str, str], Ready] = {}


def pinned(store, environment_oid: str, full: bool = False) -> Ready:
    """The built environment a plan pins (by its record's oid), from this registry's cache,
    checked against its manifest (every file when ``full``), its base too; once per process
    unless ``full``.

    Raises:
        EnvironmentMismatch: no build of it is cached here, another build is, or its tree
            differs from its manifest.
    """
    known = _CHECKED.get((store.path, environment_oid))
    if known is not None and not full:
        return known
    record = store.objects.get_record(environment_oid)
    spec_oid = record["links"]["spec"]
    base_oid = record["links"].get("base")
    base = pinned(store, base_oid, full) if base_oid else None
    cache = Cache(store.path)
    cached = cache.environment(spec_oid)
    if cached is None:
        raise EnvironmentMismatch(
            record["name"], ".", "not built in this registry (yyb env build, or yyb plan)"
        )
    if cached != environment_oid:
        raise EnvironmentMismatch(
            record["name"],
            ".",
            f"the build cached here is {cached}, not the plan's {environment_oid}",
        )
    workspace = store.objects.get_record(spec_oid)["workspace"]
    ready = Ready(spec_oid, environment_oid, record, cache.root(spec_oid), base, workspace)
    check(store, ready, full)
    _CHECKED[(store.path, environment_oid)] = ready
    return ready


def forget() -> None:
    """Check every environment again at its next use in this process (tests, long-lived
    processes)."""
    _CHECKED.clear()
