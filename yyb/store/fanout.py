"""Spread read-only work over a list across forked worker processes, results in order.

Reading a warm store is CPU-bound Python (hashing, decoding, checking), where threads do not
help; reading a cold one waits on the disk, where several readers do. A forked child inherits
the caller's open store, arguments and items without pickling them: only the results come
back, through a pipe per child. Nothing here writes: a caller that must
write does so in the parent, after the results are in.
"""

from __future__ import annotations

import _signal  # signal without its enums (docs/performance.md: start-up)
import os

from yyb.errors import UsageError, YybError
from yyb.store import heap

TYPE_CHECKING = False  # typing is not imported at run time (docs/performance.md)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

# Below MINIMUM items everything runs in the calling process; above, workers take CHUNK items
# at a time (read when map_chunks is called, so tests can make them small).
MINIMUM = 4000
CHUNK = 1000


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
    if wanted < 2 or len(items) < minimum or not hasattr(os, "fork"):
        return [function(*args, part) for part in parts]
    return _forked(function, args, parts, wanted)


def _forked(function: Callable, args: tuple, parts: list, workers: int) -> list:
    """Fork ``workers`` children; child k computes parts k, k + workers, ... and sends its
    results back through a pipe. A child that dies without sending them fails the whole call
    (nothing waits for it forever); on any failure or Ctrl-C every child is killed."""
    import pickle  # here, before the fork: a command that forks no workers never loads it

    results: list = [None] * len(parts)
    children: dict[int, tuple[int, list[int]]] = {}
    try:
        for k in range(workers):
            indexes = list(range(k, len(parts), workers))
            reader, writer = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: compute, send, and leave without running any cleanup
                os.close(reader)
                _child(function, args, parts, indexes, writer)
            os.close(writer)
            children[pid] = (reader, indexes)
        for pid, (reader, indexes) in list(children.items()):
            with os.fdopen(reader, "rb") as stream:
                data = stream.read()
            os.waitpid(pid, 0)
            del children[pid]
            if not data:
                raise YybError(
                    "a worker process reading the store ended without its results (killed, or "
                    "out of memory?); YYB_WORKERS=1 reads in this process alone"
                )
            kind, value = pickle.loads(data)
            if kind == "error":
                raise value
            for index, result in zip(indexes, value, strict=True):
                results[index] = result
    finally:
        for pid, (reader, _) in children.items():
            try:
                os.kill(pid, _signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
            try:
                os.close(reader)
            except OSError:
                pass
    return results


def _child(function: Callable, args: tuple, parts: list, indexes: list[int], writer: int):
    # Ctrl-C reaches the whole process group: the caller stops the workers and says so once.
    import pickle  # loaded already, by _forked

    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    try:
        payload = pickle.dumps(("ok", [function(*args, parts[i]) for i in indexes]))
    except BaseException as exc:  # noqa: BLE001 - carried to the caller, raised there
        try:
            payload = pickle.dumps(("error", exc))
        except Exception:  # noqa: BLE001 - an exception that cannot travel: say what it was
            payload = pickle.dumps(("error", YybError(f"a worker process failed: {exc!r}")))
    try:
        with os.fdopen(writer, "wb") as stream:
            stream.write(payload)
    finally:
        os._exit(0)
