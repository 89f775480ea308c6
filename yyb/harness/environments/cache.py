"""Where built environments live: a cache under the registry, outside every repository.

``<store>/environments/`` holds (docs/environments.md, "The cache")::

    pool/<2 hex>/<62 hex>.<mode>   every file of every tree, once (tree.py)
    <spec oid>/root/               the built tree, hard links into the pool
    <spec oid>/environment         the oid of its environment record, and a newline
    <spec oid>/stamp               the tree's stamp when it was last verified (tree.py)
    tmp/                           builds in progress; what a crashed build left is removed

The environment record and the manifest are objects in the store; the folder is a cache of
what they describe, rebuilt when it is missing and refused when it differs. A build is made in
``tmp/`` and renamed into place whole, so a folder under its spec oid is always complete.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass

FOLDER = "environments"


@dataclass(frozen=True)
class Cache:
    """The environment cache of the store at ``store_path``."""

    store_path: str

    @property
    def top(self) -> str:
        return os.path.join(self.store_path, FOLDER)

    @property
    def pool(self) -> str:
        return os.path.join(self.top, "pool")

    def folder(self, spec_oid: str) -> str:
        return os.path.join(self.top, spec_oid)

    def root(self, spec_oid: str) -> str:
        return os.path.join(self.folder(spec_oid), "root")

    def environment(self, spec_oid: str) -> str | None:
        """The oid of the environment built from ``spec_oid``, None when none is cached."""
        try:
            with open(os.path.join(self.folder(spec_oid), "environment")) as handle:
                text = handle.read().strip()
        except FileNotFoundError:
            return None
        return text if len(text) == 64 else None

    def stamp(self, spec_oid: str) -> str | None:
        try:
            with open(os.path.join(self.folder(spec_oid), "stamp")) as handle:
                return handle.read().strip() or None
        except FileNotFoundError:
            return None

    def write_stamp(self, spec_oid: str, value: str) -> None:
        _write(os.path.join(self.folder(spec_oid), "stamp"), value)

    def staging(self) -> str:
        """A new empty folder to build in, on the cache's file system."""
        top = os.path.join(self.top, "tmp")
        os.makedirs(top, exist_ok=True)
        os.makedirs(self.pool, exist_ok=True)
        return tempfile.mkdtemp(prefix="build-", dir=top)

    def commit(self, staging: str, spec_oid: str, environment_oid: str, stamp: str) -> None:
        """Move the finished build in ``staging`` (holding ``root/``) into place, replacing
        any earlier build of ``spec_oid``."""
        _write(os.path.join(staging, "environment"), environment_oid)
        _write(os.path.join(staging, "stamp"), stamp)
        self.discard(spec_oid)
        os.replace(staging, self.folder(spec_oid))

    def built(self) -> list[str]:
        """The spec oids with a cached build."""
        if not os.path.isdir(self.top):
            return []
        return sorted(n for n in os.listdir(self.top) if len(n) == 64 and self.environment(n))

    def discard(self, spec_oid: str) -> None:
        """Remove the build of ``spec_oid``, if any: renamed into ``tmp/`` first, so that no
        half-removed tree is ever under its name."""
        folder = self.folder(spec_oid)
        if os.path.exists(folder):
            old = tempfile.mkdtemp(prefix="old-", dir=os.path.join(self.top, "tmp"))
            os.replace(folder, os.path.join(old, "gone"))
            remove(old)

    def sweep_pool(self) -> tuple[int, int]:
        """Remove pool files no tree links any more (a link count of 1); (files, bytes)."""
        files = size = 0
        if not os.path.isdir(self.pool):
            return 0, 0
        for prefix in os.listdir(self.pool):
            folder = os.path.join(self.pool, prefix)
            for name in os.listdir(folder):
                path = os.path.join(folder, name)
                info = os.lstat(path)
                if info.st_nlink == 1:
                    os.unlink(path)
                    files, size = files + 1, size + info.st_size
        return files, size


def _write(path: str, text: str) -> None:
    temp = f"{path}.tmp"
    with open(temp, "w") as handle:
        handle.write(text + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def remove(folder: str) -> None:
    """Remove a build folder, whatever modes its tree has (a tree's folders may be 0555)."""

    def writable(func, path, _exc):
        os.chmod(os.path.dirname(path), 0o700)
        os.chmod(path, 0o700) if os.path.isdir(path) else None
        func(path)

    shutil.rmtree(folder, onerror=writable)
