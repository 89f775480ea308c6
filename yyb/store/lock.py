"""Store-wide locks: ``<store>/locks/<name>.lock``, held by one process at a time.

Here rather than in repo.py so that the packed refs, which take one, need not import the
store that holds them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from yyb.errors import LockHeld
from yyb.store import file


@contextlib.contextmanager
def store_lock(root: str, name: str, timeout: float = 0.0) -> Iterator[dict | None]:
    """Hold ``<root>/locks/<name>.lock`` (``Store.exclusive``, whose caller checked the name);
    yield the holder of an abandoned lock this one replaced, or None.

    Raises:
        LockHeld: another live process holds it past ``timeout`` seconds.
        StoreIOError: the file system refused.
    """
    folder = os.path.join(root, "locks")
    try:
        file.ensure_dir(folder)
    except OSError as exc:
        raise file.io_error(folder, exc) from exc
    path = os.path.join(folder, name + ".lock")
    try:
        fd, broken = file.acquire_lock(path, timeout)
    except FileExistsError:
        raise LockHeld(name, path, file.lock_state(path)[1]) from None
    except OSError as exc:
        raise file.io_error(path, exc) from exc
    try:
        yield broken
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)
