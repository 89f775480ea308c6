"""Durable file writes: temp file in the same folder, fsync, rename, fsync the folder."""

from __future__ import annotations

import errno
import os
import tempfile

from yyb.errors import StoreIOError

TEMP_PREFIX = ".tmp-"


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(path: str) -> None:
    """Create ``path`` (one level) if missing, durably: the parent is fsynced after a mkdir."""
    try:
        os.mkdir(path)
    except FileExistsError:
        return
    fsync_dir(os.path.dirname(path) or ".")


def io_error(path: str, exc: OSError) -> StoreIOError:
    """Turn an OSError into the one-line StoreIOError the CLI shows."""
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    if exc.errno == errno.ENOSPC:
        reason = "no space left on the device"
    elif exc.errno == errno.EROFS:
        reason = "the file system is read-only"
    return StoreIOError(path, reason)


def write_atomic(path: str, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one.

    Raises:
        StoreIOError: the write failed; no partial file is left at ``path``.
    """
    folder = os.path.dirname(path) or "."
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=TEMP_PREFIX)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, path)
        tmp = None
        fsync_dir(folder)
    except OSError as exc:
        raise io_error(path, exc) from exc
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def commit_temp(tmp: str, path: str) -> None:
    """Rename a finished, fsynced temp file onto ``path`` and fsync the destination folder."""
    try:
        os.rename(tmp, path)
        fsync_dir(os.path.dirname(path))
    except OSError as exc:
        raise io_error(path, exc) from exc
