"""Store-wide locks: ``<store>/locks/<name>.lock``, held by one process at a time.

Here rather than in repo.py so that the packed refs, which take one, need not import the
store that holds them.
"""

from __future__ import annotations

import os

from yyb.errors import LockHeld
from yyb.store import file


class store_lock:  # lowercase: used as a function, ``with store_lock(...) as broken:``
    """Hold ``<root>/locks/<name>.lock`` (``Store.exclusive``, whose caller checked the name)
    for the ``with`` block; its value is the holder of an abandoned lock this one replaced,
    or None. A store in memory (``root`` None) has no other process to keep out: it holds
    nothing. (A class rather than a generator: plumbing imports no contextlib.)

    Raises (on entry):
        LockHeld: another live process holds it past ``timeout`` seconds.
        StoreIOError: the file system refused.
    """

    __slots__ = ("root", "name", "timeout", "path", "fd")

    def __init__(self, root: str | None, name: str, timeout: float = 0.0) -> None:
        self.root, self.name, self.timeout = root, name, timeout
        self.path = self.fd = None

    def __enter__(self) -> dict | None:
        if self.root is None:
            return None
        folder = os.path.join(self.root, "locks")
        try:
            file.ensure_dir(folder)
        except OSError as exc:
            raise file.io_error(folder, exc) from exc
        path = os.path.join(folder, self.name + ".lock")
        try:
            self.fd, broken = file.acquire_lock(path, self.timeout)
        except FileExistsError:
            raise LockHeld(self.name, path, file.lock_state(path)[1]) from None
        except OSError as exc:
            raise file.io_error(path, exc) from exc
        self.path = path
        return broken

    def __exit__(self, *exc_info) -> None:
        if self.fd is not None:
            file.release_lock(self.path, self.fd)
            self.path = self.fd = None
