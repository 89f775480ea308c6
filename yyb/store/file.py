"""Durable file writes: temp file in the same folder, fsync, rename, fsync the folder."""

from __future__ import annotations

import errno
import os

from yyb.errors import StoreIOError, UsageError

TEMP_PREFIX = ".tmp-"

# Test-only fault injection (docs/testing.md): with YYB_FAULT_KILL_AT=N set, the process kills
# itself with SIGKILL right after its N-th durable write, so tests can interrupt a run at every
# write point. Inert unless the variable is set.
FAULT_ENV = "YYB_FAULT_KILL_AT"
_durable_writes = 0


def durable_point() -> None:
    """Mark that one durable write has completed (object, log head, ref, plan file...)."""
    global _durable_writes
    target = os.environ.get(FAULT_ENV)
    if not target:
        return
    _durable_writes += 1
    if _durable_writes == int(target):
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


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
        fd, tmp = _mkstemp(folder)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
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
        discard(tmp)
    durable_point()


def discard(path: str | None) -> None:
    """Remove a temp file if it is still there (cleanup must never hide the real error)."""
    if path is not None:
        try:
            os.unlink(path)
        except OSError:
            pass


def remove(path: str) -> bool:
    """Remove a file; False when it was already gone.

    Raises:
        StoreIOError: the file system refused.
    """
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise io_error(path, exc) from exc
    return True


def read_input(path: str) -> bytes:
    """The bytes of a file a user named; an unreadable one is their mistake (UsageError)."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except IsADirectoryError:
        raise UsageError(f"cannot read {path}: it is a folder") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


def write_new(path: str, data: bytes) -> None:
    """Create ``path`` holding ``data`` atomically; never replace anything already there.

    Raises:
        UsageError: ``path`` exists. StoreIOError: the file system refused.
    """
    folder = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        fd, tmp = _mkstemp(folder)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), 0o644)
            os.fsync(handle.fileno())
        os.link(tmp, path)  # fails if path exists: never an overwrite
        fsync_dir(folder)
    except FileExistsError:
        raise UsageError(f"{path} exists; it is never overwritten") from None
    except OSError as exc:
        raise io_error(path, exc) from exc
    finally:
        discard(tmp)


def commit_temp(tmp: str, path: str) -> None:
    """Rename a finished, fsynced temp file onto ``path`` and fsync the destination folder."""
    try:
        os.rename(tmp, path)
        fsync_dir(os.path.dirname(path))
    except OSError as exc:
        raise io_error(path, exc) from exc
    durable_point()


# --- lock files -------------------------------------------------------------------------------
#
# A lock is a file created with O_CREAT|O_EXCL. While held, its holder keeps an flock on it and
# its content names the holder: "yyb-lock pid=<pid> host=<host> boot=<boot id>". The kernel drops
# the flock when the holder dies, so a lock that can be flocked and whose named process is gone
# (same host, same boot) was abandoned by a crash; anything else is treated as held.

LOCK_PREFIX = b"yyb-lock "


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _holder_line() -> bytes:
    return b"yyb-lock pid=%d host=%s boot=%s\n" % (
        os.getpid(),
        os.uname().nodename.encode(),
        _boot_id().encode(),
    )


def parse_holder(data: bytes) -> dict | None:
    """The holder named by a lock file's first line, or None when it names none (what follows
    that line, a holder's own record, never counts)."""
    if b"\n" in data:
        data = data[: data.index(b"\n") + 1]
    if not data.startswith(LOCK_PREFIX) or not data.endswith(b"\n"):
        return None
    fields = dict(
        part.split("=", 1)
        for part in data[len(LOCK_PREFIX) : -1].decode(errors="replace").split()
        if "=" in part
    )
    if not fields.get("pid", "").isdigit():
        return None
    return {
        "pid": int(fields["pid"]),
        "host": fields.get("host", ""),
        "boot": fields.get("boot", ""),
    }


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _judge(fd: int) -> tuple[str, dict | None]:
    """Classify a lock file whose flock the caller has just obtained (so no live holder)."""
    holder = parse_holder(os.pread(fd, 512, 0))
    if holder is None:
        return "unknown", None
    local = holder["host"] == os.uname().nodename and holder["boot"] == _boot_id()
    if local and not alive(holder["pid"]):
        return "abandoned", holder
    return ("held" if local else "unknown"), holder


def lock_state(path: str) -> tuple[str, dict | None]:
    """("held" | "abandoned" | "unknown" | "gone", holder) for the lock file at ``path``."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return "gone", None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return "held", parse_holder(os.pread(fd, 512, 0))
        return _judge(fd)
    finally:
        os.close(fd)


def break_abandoned(path: str) -> dict | None:
    """Remove the lock at ``path`` if its holder crashed; return that holder, else None."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        state, holder = _judge(fd)
        # Still the same file we hold, still abandoned: only then is it ours to remove.
        if state != "abandoned" or os.stat(path).st_ino != os.fstat(fd).st_ino:
            return None
        os.unlink(path)
        return holder
    except FileNotFoundError:
        return None
    finally:
        os.close(fd)


def release_lock(path: str, fd: int) -> None:
    """Let a lock ``acquire_lock`` took go: the file is removed while still locked, then
    closed, so a waiter finds either the lock held or no lock at all."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    os.close(fd)


def acquire_lock(path: str, timeout: float) -> tuple[int, dict | None]:
    """Create the lock file ``path``; return (fd, holder of an abandoned lock it replaced).

    Waits up to ``timeout`` seconds for a live holder. Raises FileExistsError when the lock
    stays held (or is of unknown origin) past that.
    """
    import fcntl
    import time

    deadline = time.monotonic() + timeout
    delay = 0.001
    broken = None
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            holder = break_abandoned(path)
            if holder is not None:
                broken = holder
                continue
            if time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
            continue
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, _holder_line())
        return fd, broken


def _mkstemp(folder: str) -> tuple[int, str]:
    import tempfile  # readers never pay for it

    return tempfile.mkstemp(dir=folder, prefix=TEMP_PREFIX)
