"""SIGPIPE while a server of this process serves (the gateway, the viewer).

``yyb.cli.main`` sets SIGPIPE to its default, so that ``yyb ... | head`` ends quietly. A
server must not inherit that: a client that goes away while its answer is written makes the
write fail with EPIPE, and the kernel also sends SIGPIPE, which would end the whole process.
While any server of the process serves, SIGPIPE is ignored; when the last one stops, what was
there before is put back.
"""

from __future__ import annotations

import signal
import threading

from yyb.errors import InvalidArgument

# How many servers this process runs, and the SIGPIPE disposition found before the first.
_serving = {"count": 0, "before": None}
_lock = threading.Lock()


def ignore_sigpipe(what: str) -> None:
    """Ignore SIGPIPE until the matching ``restore_sigpipe`` (counted: servers nest).

    Raises:
        InvalidArgument: called outside the main thread of a process that does not ignore
            SIGPIPE already (only the main thread may change a disposition); ``what`` names
            the server in the message.
    """
    main = threading.current_thread() is threading.main_thread()
    with _lock:
        _serving["count"] += 1
        if _serving["count"] > 1:
            return
        if main:
            _serving["before"] = signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        elif signal.getsignal(signal.SIGPIPE) != signal.SIG_IGN:
            _serving["count"] -= 1
            raise InvalidArgument(
                what, "started in the main thread, or in a process ignoring SIGPIPE"
            )


def restore_sigpipe() -> None:
    """One server stopped: when it was the last, SIGPIPE is put back as it was."""
    main = threading.current_thread() is threading.main_thread()
    with _lock:
        _serving["count"] -= 1
        if _serving["count"] == 0 and main and _serving["before"] is not None:
            signal.signal(signal.SIGPIPE, _serving["before"])
            _serving["before"] = None
