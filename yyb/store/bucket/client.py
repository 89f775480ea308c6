"""The S3 calls a store kept in a bucket makes, through obstore (docs/remotes.md, "A store in
a bucket").

obstore was chosen over boto3 and s3fs (tools/probe_s3.py, docs/performance.md): it sends
create-only (``If-None-Match: *``) and compare-and-swap (``If-Match``) PUTs as such, is the
fastest of the three at small PUTs and GETs, imports in 4 ms, and reads its configuration
from the same ``AWS_*`` environment variables the AWS tools read. Every failure of the bucket
becomes one ``BucketError`` line; a missing key is ``None``, a refused create is ``False``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

from yyb.errors import UsageError, YybError

# S3's own rule for bucket names (3-63 of lowercase letters, digits, '.' and '-').
BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
PREFIX_PART = re.compile(r"[A-Za-z0-9._-]+")
CHUNK = 1 << 20
# Server errors, dropped connections and timeouts are retried with exponential backoff and
# jitter (obstore's), five times within 30 s: an unreachable endpoint fails in a few seconds.
RETRIES = {"max_retries": 5, "retry_timeout": timedelta(seconds=30)}


class BucketError(YybError):
    """The bucket could not be read or written (unreachable, refused, denied)."""

    exit_code = 1


@dataclass(frozen=True)
class Location:
    """``s3://bucket/prefix``: where a store in a bucket lies (``prefix`` may be empty)."""

    bucket: str
    prefix: str

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"


def parse(url: str) -> Location:
    """The bucket and prefix an ``s3://`` URL names.

    Raises:
        UsageError: a malformed bucket name or prefix.
    """
    rest = url.removeprefix("s3://")
    bucket, _, prefix = rest.partition("/")
    prefix = prefix.strip("/")
    if not BUCKET_NAME.fullmatch(bucket):
        raise UsageError(f"{url}: expected s3://bucket[/prefix], with an S3 bucket name")
    parts = prefix.split("/") if prefix else []
    if not all(PREFIX_PART.fullmatch(p) and p not in (".", "..") for p in parts):
        raise UsageError(
            f"{url}: a prefix is '/'-separated names of letters, digits, '.', '_', '-'"
        )
    return Location(bucket, "/".join(parts))


class Bucket:
    """The keys below one prefix of one bucket, with counts of the bytes moved."""

    def __init__(self, location: Location) -> None:
        try:
            import obstore
            from obstore import exceptions
            from obstore.store import S3Store
        except ImportError:
            raise UsageError(
                "s3:// stores need the obstore library (pip install 'yyb[s3]')"
            ) from None
        self.location = location
        self._obstore, self._exceptions = obstore, exceptions
        options = {"timeout": "120s", "connect_timeout": "10s"}
        if os.environ.get("AWS_ALLOW_HTTP", "").lower() in ("1", "true", "yes"):
            options["allow_http"] = True  # obstore reads it only when no options are given
        try:
            self._store = S3Store(
                location.bucket,
                prefix=location.prefix or None,
                client_options=options,
                retry_config=RETRIES,
            )
        except exceptions.BaseError as exc:
            raise BucketError(f"{location.url}: {_reason(exc)}") from None
        except ValueError as exc:
            raise UsageError(f"{location.url}: {_reason(exc)}") from None
        self.sent = self.received = 0

    def _fail(self, key: str, exc: Exception) -> BucketError:
        return BucketError(f"{self.location.url}/{key}: {_reason(exc)}")

    def get(self, key: str) -> bytes | None:
        """The bytes at ``key``, or None when there is no such key."""
        try:
            data = bytes(self._obstore.get(self._store, key).bytes())
        except (self._exceptions.NotFoundError, FileNotFoundError):
            return None
        except Exception as exc:  # obstore raises its own errors and the OS's
            raise self._fail(key, exc) from None
        self.received += len(data)
        return data

    def download(self, key: str, path: str) -> int | None:
        """Stream ``key`` into a new file at ``path``; its size, or None when absent."""
        try:
            got = self._obstore.get(self._store, key)
            size = 0
            with open(path, "xb") as out:
                for chunk in got.stream(min_chunk_size=CHUNK):
                    out.write(chunk)
                    size += len(chunk)
        except (self._exceptions.NotFoundError, FileNotFoundError):
            return None
        except Exception as exc:
            raise self._fail(key, exc) from None
        self.received += size
        return size

    def put(self, key: str, data: bytes | str) -> None:
        """Write ``key`` (bytes, or the file at a path, streamed in parts), replacing it."""
        size = len(data) if isinstance(data, bytes) else os.path.getsize(data)
        try:
            if isinstance(data, bytes):
                self._obstore.put(self._store, key, data)
            else:
                with open(data, "rb") as handle:
                    self._obstore.put(self._store, key, handle)
        except Exception as exc:
            raise self._fail(key, exc) from None
        self.sent += size

    def create(self, key: str, data: bytes) -> bool:
        """Write ``key`` only if it does not exist (``If-None-Match: *``): whether it did."""
        try:
            self._obstore.put(self._store, key, data, mode="create")
        except (self._exceptions.AlreadyExistsError, self._exceptions.PreconditionError):
            return False
        except Exception as exc:
            raise self._fail(key, exc) from None
        self.sent += len(data)
        return True

    def size(self, key: str) -> int | None:
        try:
            return int(self._obstore.head(self._store, key)["size"])
        except (self._exceptions.NotFoundError, FileNotFoundError):
            return None
        except Exception as exc:
            raise self._fail(key, exc) from None

    def list(self, under: str = "", after: str | None = None) -> Iterator[tuple[str, int]]:
        """(key, size) of every key below ``under`` (relative to the prefix), in key order;
        ``after``: only the keys that sort after it (S3's start-after)."""
        try:
            found = [
                (meta["path"], int(meta["size"]))
                for batch in self._obstore.list(
                    self._store, under or None, offset=after, chunk_size=1000
                )
                for meta in batch
            ]
        except Exception as exc:
            raise self._fail(under, exc) from None
        yield from sorted(found)


def _reason(exc: Exception) -> str:
    """The first line of an obstore error, which carries the whole chain of causes."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
