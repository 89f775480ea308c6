"""Spread read-only work over a list across forked worker processes, results in order.

Reading a warm store is CPU-bound Python (hashing, decoding, checking), where threads do not
help; reading a cold one waits on the disk, where several readers do. A forked child inherits
the caller's open store and arguments without pickling them: only the chunks of items travel
to the workers and only their results come back. Nothing here writes: a caller that must
write does so in the parent, after the results are in.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from typing import Any

from yyb.errors import UsageError
from yyb.store import heap

# Below MINIMUM items everything runs in the calling process; above, workers take CHUNK items
# at a time (read when map_chunks is called, so tests can make them small).
MINIMUM = 4000
CHUNK = 1000

# Set by map_chunks just before forking: the function and its fixed arguments, inherited by
# the workers (a fork shares them as they are; nothing is pickled).
_JOB: tuple[Callable, tuple] | None = None


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def configured_workers() -> int | None:
    """``YYB_WORKERS`` as a number of processes, None when unset or empty.

    Raises:
        UsageError: it is set to anything but a positive integer.
    """
    text = os.environ.get("YYB_WORKERS", "")
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"YYB_WORKERS must be a positive integer, not {text!r}")
    return int(text)


def _ignore_interrupts() -> None:
    # Ctrl-C reaches the whole process group: the caller stops the workers and says so once;
    # the workers themselves must not each print a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run(chunk: Sequence) -> Any:
    function, args = _JOB
    return function(*args, chunk)


@heap.without_gc
def map_chunks(
    function: Callable,
    args: tuple,
    items: Sequence,
    *,
    scale: int = 1,
    workers: int | None = None,
) -> list:
    """``[function(*args, part) for part in chunks of items]``, computed by worker processes.

    Chunks hold ``scale * CHUNK`` items (a larger ``scale`` for cheaper items). Runs in this
    process when there are fewer than ``scale * MINIMUM`` items, fewer than two chunks,
    or no ``fork`` start method; ``YYB_WORKERS=N`` sets the number of workers (1: none).
    ``function`` must only read: each worker sees the store as it was at the fork.
    """
    chunk, minimum = scale * CHUNK, scale * MINIMUM
    parts = [items[i : i + chunk] for i in range(0, len(items), chunk)]
    # Four workers per CPU, at most eight: from a cold page cache each loose object read waits
    # on the disk, and several readers keep it busy (docs/performance.md measures this).
    wanted = min(workers or configured_workers() or min(4 * usable_cpus(), 8), len(parts))
    if wanted < 2 or len(items) < minimum or "fork" not in multiprocessing.get_all_start_methods():
        return [function(*args, part) for part in parts]
    global _JOB
    _JOB = (function, args)
    try:
        with multiprocessing.get_context("fork").Pool(wanted, _ignore_interrupts) as pool:
            return pool.map(_run, parts, chunksize=1)
    finally:
        _JOB = None
