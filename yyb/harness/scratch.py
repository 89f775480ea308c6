"""Scratch folders: every private folder a process makes lives under its one run folder.

An attempt's workspace and private roots, a grading's rebuilt workspace and its copied grader
files, a judgement's payload: each is a folder below ``<temp>/yyb-run-<random>/``, which belongs
to one process (it holds ``owner.lock``, flocked for its life) and is removed when that
process exits. A process killed before that leaves its run folder behind, hidden grader files
included; the next ``yyb run``, ``yyb recover``, ``regrade`` or ``rejudge`` removes every run
folder whose owner is gone (``sweep``), and ``yyb doctor`` names those of its store
(``leftovers``).
"""

from __future__ import annotations

import _thread
import atexit
import os
import stat
import sys

from yyb.store import file

PREFIX = "yyb-run-"
LOCK = "owner.lock"
STORE = "store"

_mutex = _thread.allocate_lock()
_run: dict = {}  # pid -> (run folder, lock fd): a forked worker makes its own


def run_folder(store_path: str | None = None) -> str:
    """This process's run folder, made (and locked) on first use."""
    with _mutex:
        made = _run.get(os.getpid())
        if made is not None and os.path.isdir(made[0]):
            return made[0]
        import tempfile

        folder = tempfile.mkdtemp(prefix=PREFIX)
        from yyb.harness import worktree  # not for leftovers, which doctor runs

        worktree.spread(folder)  # each attempt's and grading's folder in a block group of its own
        fd, _ = file.acquire_lock(os.path.join(folder, LOCK), 0)
        if store_path:
            with open(os.path.join(folder, STORE), "w") as handle:
                handle.write(os.path.realpath(store_path) + "\n")
        _run[os.getpid()] = (folder, fd)
        if made is None:
            atexit.register(_remove, os.getpid())
        return folder


def folder(kind: str, store_path: str | None = None) -> str:
    """A new private folder (``yyb-<kind>-<random>``) in this process's run folder."""
    import tempfile

    return tempfile.mkdtemp(prefix=f"yyb-{kind}-", dir=run_folder(store_path))


def _remove(pid: int) -> None:
    if pid != os.getpid():
        return
    made = _run.pop(pid, None)
    if made is not None:
        from yyb.harness import worktree

        worktree.remove(made[0])
        os.close(made[1])


def _owned_by_nobody(path: str) -> bool:
    state, _ = file.lock_state(os.path.join(path, LOCK))
    return state in ("abandoned", "gone")


def _store_of(path: str) -> str | None:
    try:
        with open(os.path.join(path, STORE)) as handle:
            return handle.read().strip()
    except OSError:
        return None


def temp_top() -> str:
    """Where run folders are made: ``tempfile.gettempdir()``, found the way it documents
    (the first of $TMPDIR, $TEMP, $TMP, /tmp, /var/tmp, /usr/tmp that is a folder this
    process may write, else the current folder) without importing tempfile, which with shutil
    and random would cost ``doctor`` a few milliseconds, unless something imported it already
    (and may have set ``tempfile.tempdir``)."""
    loaded = sys.modules.get("tempfile")
    if loaded is not None:
        return loaded.gettempdir()
    names = [os.environ.get(name) for name in ("TMPDIR", "TEMP", "TMP")]
    for folder in [*names, "/tmp", "/var/tmp", "/usr/tmp"]:
        if folder and os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK):
            return os.path.abspath(folder)
    return os.getcwd()


def leftovers(store_path: str | None = None) -> list[str]:
    """Run folders of processes that are gone (those tagged with ``store_path``, when given;
    a library caller that named no store leaves untagged ones, which only ``sweep`` sees)."""
    top = temp_top()
    try:
        names = sorted(n for n in os.listdir(top) if n.startswith(PREFIX))
    except OSError:
        return []
    found = []
    for name in names:
        path = os.path.join(top, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        # Another user's run folder is neither ours to judge nor ours to remove.
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            continue
        if not _owned_by_nobody(path):
            continue
        if store_path is None or _store_of(path) == os.path.realpath(store_path):
            found.append(path)
    return found


def sweep() -> list[str]:
    """Remove every run folder whose process is gone; return what was removed."""
    from yyb.harness import worktree

    removed = []
    for path in leftovers():
        worktree.remove(path)  # a candidate chose how deep it goes
        if not os.path.exists(path):
            removed.append(path)
    return removed
