"""A channel only the process the controller starts holds: an inherited pipe, not a path.

Evidence a sandboxed program hands back (a harness's execution envelope) must not travel
through a file: every process in the sandbox runs as the same uid, so a file the harness can
write, the tools it starts can write too. A channel is the write end of a pipe that the
started process inherits at a descriptor number the controller names
(``YYB_ENVELOPE_FD``, say); nothing in the sandbox can open it by path. ``/dev/fd/N`` is
given as its path to programs that insist on a path: opening it duplicates the inherited
pipe, which works for the process that holds descriptor N and for no other.

What keeps the channel the harness's alone after that is the harness's own duty
(docs/attempts.md, "Harness protocols"): it does not pass the descriptor to the processes it
starts, and it makes itself non-dumpable, so that none of them can reopen the pipe through
``/proc/PID/fd`` or write into its memory. The sandbox refuses tracing (yyb/harness/seccomp).

The controller drains the pipe from a thread while the process runs (a harness is never
blocked on a full pipe), keeps at most ``limit`` + 1 bytes, and reads the end of the stream
once every holder is gone.
"""

from __future__ import annotations

import os
import threading

from yyb.harness import sandbox


class Channel:
    """The read side, the controller's; ``fd`` is the write end a child is to inherit."""

    def __init__(self, limit: int):
        self._read, self.fd = os.pipe()
        # Under root, the sandboxed process runs as the sandbox uid: the pipe must be its to
        # reopen as /dev/fd/N (a descriptor it writes directly needs no such permission).
        uid = sandbox.sandbox_uid()
        if uid is not None:
            os.fchown(self.fd, uid, uid)
        self._limit = limit
        self._kept = bytearray()
        self._total = 0
        self._collected: tuple[bytes | None] | None = None  # collect()'s answer, once given
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    @property
    def path(self) -> str:
        return f"/dev/fd/{self.fd}"

    def _drain(self) -> None:
        while chunk := os.read(self._read, 1 << 16):
            self._total += len(chunk)
            room = self._limit + 1 - len(self._kept)
            if room > 0:
                self._kept += chunk[:room]

    def collect(self, wait_s: float = 5.0) -> bytes | None:
        """What was written (at most ``limit`` + 1 bytes; None when nothing was), once the
        controller's copy of the write end is closed and every other holder is gone; a second
        call gives the same answer.

        Call it after the process and everything it started have ended; a holder that
        somehow outlives them gets ``wait_s`` before what has arrived is taken as the whole.
        """
        if self._collected is not None:
            return self._collected[0]
        self.close_writer()
        self._thread.join(wait_s)
        data = bytes(self._kept) if self._total else None
        if not self._thread.is_alive():
            os.close(self._read)
        self._collected = (data,)
        return data

    def close_writer(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    @property
    def total(self) -> int:
        """Bytes written so far, kept or not."""
        return self._total
