"""The files of an image as given: an OCI layout folder or a tar (OCI archive, docker-archive).

Paths are relative to the layout's top (a folder) or the tar's member names with any leading
``./`` dropped. JSON documents are read bounded in size and checked against the digest that
references them; blobs are opened as streams for the caller to check as it reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import tarfile
from typing import IO

from yyb.errors import ChecksumMismatch, EnvironmentSpecError

MAX_DOCUMENT = 4 << 20  # an index, manifest or config far above this is not an image's
MAX_MEMBER_LINKS = 8  # a docker-archive links a repeated layer to its first copy
DIGEST = re.compile(r"^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$")


def check_digest(value: object, where: str, field: str) -> str:
    """``value`` if it is a digest this reader can check (sha256 or sha512, lowercase hex)."""
    if not isinstance(value, str) or not DIGEST.match(value):
        raise EnvironmentSpecError(where, field, f"not a sha256 or sha512 digest: {value!r}")
    return value


def blob_path(digest: str) -> str:
    """Where an OCI layout keeps the blob named by a checked ``digest``."""
    algorithm, hexes = digest.split(":", 1)
    return f"blobs/{algorithm}/{hexes}"


def hasher(digest: str):
    """A fresh hash object of the algorithm ``digest`` names."""
    return hashlib.new(digest.split(":", 1)[0])


class Source:
    """An image's files, opened once for a read or an unpack (a context manager)."""

    def __init__(self, path: str):
        self.path = path
        self.tar: tarfile.TarFile | None = None
        self.members: dict[str, tarfile.TarInfo] = {}
        if os.path.isdir(path):
            return
        try:
            self.tar = tarfile.open(path, "r:*")
            for member in self.tar.getmembers():
                self.members[member.name.removeprefix("./").lstrip("/")] = member
        except (OSError, tarfile.TarError) as error:
            raise EnvironmentSpecError(path, None, f"neither a folder nor a tar: {error}") from None

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.tar is not None:
            self.tar.close()

    def has(self, name: str) -> bool:
        if self.tar is None:
            return os.path.isfile(os.path.join(self.path, name))
        member = self.members.get(name)
        return member is not None and (member.isreg() or member.issym() or member.islnk())

    def open(self, name: str) -> IO[bytes]:
        """A stream of one file's bytes.

        Raises:
            EnvironmentSpecError: no such file in the image.
        """
        try:
            if self.tar is None:
                return open(os.path.join(self.path, name), "rb")
            stream = self.tar.extractfile(self.members[name])
            if stream is not None:
                return stream
        except (OSError, KeyError, tarfile.TarError):
            pass
        raise EnvironmentSpecError(self.path, name, "missing from the image")

    def raw(self, name: str) -> bytes:
        """One file's bytes, at most MAX_DOCUMENT of them.

        Raises:
            EnvironmentSpecError: missing or larger than MAX_DOCUMENT.
        """
        with self.open(name) as stream:
            data = stream.read(MAX_DOCUMENT + 1)
        if len(data) > MAX_DOCUMENT:
            raise EnvironmentSpecError(self.path, name, f"larger than {MAX_DOCUMENT} bytes")
        return data

    def document(self, name: str, digest: str | None = None, size: object = None) -> dict:
        """One JSON object, at most MAX_DOCUMENT bytes, checked against its reference.

        Args:
            name: its path in the image.
            digest: the digest the referring descriptor gives (None: nothing refers by digest).
            size: the size the descriptor gives, checked when it is an integer.

        Raises:
            EnvironmentSpecError: missing, too large, or not a JSON object.
            ChecksumMismatch: its bytes do not have the digest or size referring to them.
        """
        data = self.raw(name)
        if digest is not None:
            found = digest_of(data, digest.split(":", 1)[0])
            if found != digest:
                raise ChecksumMismatch(digest, found)
            if isinstance(size, int) and size != len(data):
                raise ChecksumMismatch(digest, f"{len(data)} bytes where {size} are declared")
        return parse(data, self.path, name)

    def size(self, name: str) -> int:
        """The size in bytes of one file (a tar member's, links followed)."""
        if self.tar is None:
            return os.path.getsize(os.path.join(self.path, name))
        member = self.members[name]
        for _ in range(MAX_MEMBER_LINKS):
            if member.islnk():
                name = member.linkname.removeprefix("./").lstrip("/")
            elif member.issym():
                name = posixpath.normpath(posixpath.join(posixpath.dirname(name), member.linkname))
            else:
                return member.size
            if name not in self.members:
                break
            member = self.members[name]
        raise EnvironmentSpecError(self.path, name, "a link to nothing in the archive")


def digest_of(data: bytes, algorithm: str = "sha256") -> str:
    """The digest of ``data``, as ``algorithm:hex``."""
    return f"{algorithm}:{hashlib.new(algorithm, data).hexdigest()}"


def parse(data: bytes, where: str, name: str, expect: type = dict):
    """A JSON document that must be an ``expect`` (an object, or a list)."""
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, ValueError) as error:
        raise EnvironmentSpecError(where, name, f"not JSON: {error}") from None
    if not isinstance(value, expect):
        raise EnvironmentSpecError(where, name, f"not a JSON {expect.__name__}")
    return value
