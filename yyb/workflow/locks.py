"""Typed exclusive locks on production resources, for the governed workflow lane.

A step of a governed workflow that touches a production resource (a database, a queue, a
bucket: the workflow policy names each by a type and a name) holds that resource's lock for
as long as it runs. The locks live in a **lock store**, a folder the governed configuration
names, shared by every plan, store and process on the machine that names the same folder:
two runs touching the same resource never hold it at once, whatever evidence store each
writes to.

A lock is the file ``<lock store>/<type>/<sha256 of name>.lock``, created exclusively and
``flock``-ed by its holder for its life (yyb/store/file.py, the locks refs use): its first
line names the holder process (pid, host, boot), its second is a JSON holder record (the
resource, and what the caller says: plan, step, attempt). A holder that died (its pid gone on
this host since the same boot) leaves an **abandoned** lock, which the next ``acquire``
replaces and reports; one held by a live process, or written on another host or before a
reboot (``unknown``: it cannot be told from a live one), is never taken.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass

from yyb.errors import UsageError
from yyb.store import file

TYPE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
MAX_NAME = 1024
MAX_RECORD = 64 << 10


class ResourceHeld(UsageError):
    """The resource's lock is held by another live holder (or one that cannot be judged)."""

    def __init__(self, kind: str, name: str, state: str, holder: dict | None):
        who = (
            f"process {holder['pid']} on {holder['host'] or 'an unnamed host'}"
            if holder
            else "a holder that cannot be named"
        )
        super().__init__(f"resource {kind}:{name} is {state}, by {who}")
        self.state, self.holder = state, holder


@dataclass
class Lease:
    """A held lock: release it (or exit) to let the resource go."""

    kind: str
    name: str
    path: str
    fd: int
    replaced: dict | None  # the holder of an abandoned lock this one replaced

    def release(self) -> None:
        """Let the resource go (``file.release_lock``). (A lock whose descriptor was
        handed to a dispatch that outlives this process is never released: it stays held by
        them, and is abandoned, to be replaced, once the last of them is gone.)"""
        if self.fd >= 0:
            file.release_lock(self.path, self.fd)
            self.fd = -1

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def lock_path(lock_store: str, kind: str, name: str) -> str:
    """Where the lock of resource ``kind``:``name`` lives.

    Raises:
        UsageError: a type that is not ``[a-z][a-z0-9_-]*`` (at most 64 characters), or a name
            that is empty or over 1024 bytes.
    """
    check_resource(kind, name)
    digest = hashlib.sha256(name.encode()).hexdigest()
    return os.path.join(lock_store, kind, digest + ".lock")


def check_resource(kind, name) -> None:
    """Refuse (UsageError) a resource type or name ``lock_path`` cannot name a lock for."""
    if not isinstance(kind, str) or not TYPE.match(kind):
        raise UsageError(f"resource type {kind!r} must match [a-z][a-z0-9_-]* (1-64 characters)")
    if not isinstance(name, str) or not name or len(name.encode()) > MAX_NAME:
        raise UsageError(f"resource name {name!r} must be 1 to {MAX_NAME} bytes")


def acquire(
    lock_store: str, kind: str, name: str, record: dict | None = None, timeout: float = 0.0
) -> Lease:
    """Hold resource ``kind``:``name`` exclusively, waiting up to ``timeout`` seconds for a
    live holder to let it go; ``record`` (JSON) is kept in the lock for whoever looks.

    Raises:
        ResourceHeld: another holder keeps it past ``timeout``.
        UsageError: a bad type or name, or a record over 64 KiB.
    """
    path = lock_path(lock_store, kind, name)
    data = json.dumps({"resource": {"type": kind, "name": name}, **(record or {})}, sort_keys=True)
    if len(data) > MAX_RECORD:
        raise UsageError("a lock's holder record must be at most 64 KiB")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fd, replaced = file.acquire_lock(path, max(0.0, deadline - time.monotonic()))
        except FileExistsError:
            state, holder = file.lock_state(path)
            if state == "gone":  # released between the two looks: try again
                continue
            raise ResourceHeld(kind, name, state, holder) from None
        os.write(fd, data.encode() + b"\n")
        os.fsync(fd)
        return Lease(kind, name, path, fd, replaced)


def state(lock_store: str, kind: str, name: str) -> str:
    """The state of resource ``kind``:``name``'s lock: held, abandoned, unknown, or gone (none:
    free). A held or unknown one cannot be taken; an abandoned one would be replaced."""
    return file.lock_state(lock_path(lock_store, kind, name))[0]


def holders(lock_store: str) -> list[dict]:
    """Every lock in the store: its resource, state (held, abandoned, unknown) and holder
    (process and record), sorted by resource."""
    found = []
    try:
        kinds = sorted(os.listdir(lock_store))
    except FileNotFoundError:
        return []
    for kind in kinds:
        folder = os.path.join(lock_store, kind)
        if not TYPE.match(kind) or not os.path.isdir(folder):
            continue
        for entry in sorted(os.listdir(folder)):
            if not entry.endswith(".lock"):
                continue
            path = os.path.join(folder, entry)
            state, holder = file.lock_state(path)
            if state == "gone":
                continue
            found.append({"state": state, "process": holder, **_record(path)})
    return sorted(found, key=lambda h: (h["resource"]["type"], h["resource"]["name"]))


def _record(path: str) -> dict:
    try:
        with open(path, "rb") as handle:
            lines = handle.read(MAX_RECORD + 1024).split(b"\n")
        value = json.loads(lines[1]) if len(lines) > 1 and lines[1] else {}
    except (OSError, ValueError):
        value = {}
    if not isinstance(value, dict) or not isinstance(value.get("resource"), dict):
        value = {"resource": {"type": os.path.basename(os.path.dirname(path)), "name": None}}
    return value
