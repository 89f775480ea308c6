"""A forked helper that proves a share of a bulk read of a pack while its parent does the rest.

``cat-object --batch`` proves every object it prints by its SHA-256. For small objects that
work (finding each entry, hashing its bytes, checking its header) is most of the reader's time,
and it splits: given a second CPU, a reader that reads a pack in bulk forks one helper for that
pack. The helper inherits the pack as the parent has it mapped (the very bytes the parent will
print, not a file opened again by name, which could have been replaced in between) and runs
the same code on its share of the oids, ``work(keys) -> (body starts, body stops)``, where 0
and 0 mean "not proved here". It reads and never writes; a helper that dies or answers
wrongly only sends its parent back to doing the whole list itself.

Over the pipes, integers are little-endian: a request is ``n`` (u64) then ``n`` keys of 32
bytes; the answer is ``n`` body starts then ``n`` body stops (u64 each), in the keys' order.
"""

from __future__ import annotations

# The C module under ``signal``, whose Python side builds enums; nor contextlib nor
# collections: a reader of a pack pays for none of them (docs/performance.md: start-up).
import _signal
import array
import os
import struct
import sys

TYPE_CHECKING = False  # typing is not imported at run time (docs/performance.md)
if TYPE_CHECKING:
    from collections.abc import Callable

    Work = Callable[[bytes], tuple[list[int], list[int]]]

COUNT = struct.Struct("<Q")
KEY = 32
ANSWER = 16  # a start and a stop
PIPE_SIZE = 1 << 20  # Linux's default /proc/sys/fs/pipe-max-size


def wanted() -> bool:
    """Whether a bulk reader should fork a helper: when ``YYB_WORKERS`` is above 1, or, unset,
    when this process may use more than one CPU.

    Raises:
        UsageError: ``YYB_WORKERS`` is set to anything but a positive integer.
    """
    from yyb.store import fanout  # its pickle is not for every reader of a pack

    return (fanout.configured_workers() or fanout.usable_cpus()) > 1 and hasattr(os, "fork")


class Prover:
    """One helper process running ``work`` on the keys it is sent, in the order sent."""

    def __init__(self, pid: int, requests: int, answers: int) -> None:
        self.pid = pid
        self._requests = requests
        self._answers = answers
        self._asked: list[int] = []  # key counts unanswered, oldest first (a handful)
        self._room = (_widen(requests), _widen(answers))  # what each pipe holds unread

    @classmethod
    def start(cls, work: Work) -> Prover | None:
        """Fork the helper; None when the system refuses a process or a pipe."""
        fds: list[int] = []
        try:
            fds += os.pipe()
            fds += os.pipe()
            pid = os.fork()
        except OSError:
            for fd in fds:
                os.close(fd)
            return None
        down_r, down_w, up_r, up_w = fds
        if pid == 0:  # the helper: serve until the parent closes its end, then leave at once
            status = 1
            try:
                os.close(down_w)
                os.close(up_r)
                _serve(work, down_r, up_w)
                status = 0
            finally:
                os._exit(status)
        os.close(down_r)
        os.close(up_w)
        return cls(pid, down_w, up_r)

    @property
    def open(self) -> bool:
        return self.pid != 0

    def ask(self, keys: bytes) -> bool:
        """Send ``keys`` (joined, KEY bytes each); False when it is not sent: the helper is
        gone (it is then closed), or requests are waiting and this one would not fit beside
        them in the pipes (a request sent while the helper could be blocked writing an answer
        nobody reads yet could wait for ever)."""
        count = len(keys) // KEY
        if self._asked:
            requests = sum(COUNT.size + KEY * n for n in self._asked)
            answers = sum(ANSWER * n for n in self._asked)
            if (
                requests + COUNT.size + len(keys) > self._room[0]
                or answers + ANSWER * count > self._room[1]
            ):
                return False
        try:
            _write_all(self._requests, COUNT.pack(count) + keys)
        except OSError:
            self.close()
            return False
        self._asked.append(count)
        return True

    def ready(self) -> bool:
        """Whether the oldest answer has begun to arrive (the helper is done, or nearly)."""
        if not self.pid:
            return True
        import select

        poll = select.poll()
        poll.register(self._answers, select.POLLIN)
        return bool(poll.poll(0))

    def answer(self) -> tuple[list[int], list[int]] | None:
        """The spans for the oldest request unanswered, or None when the helper died before
        answering (it is then closed)."""
        if not self.pid or not self._asked:
            return None
        count = self._asked.pop(0)
        try:
            data = _read_exact(self._answers, ANSWER * count)
        except OSError:
            data = None
        if data is None:
            self.close()
            return None
        starts = _little(array.array("Q", data[: 8 * count]))
        stops = _little(array.array("Q", data[8 * count :]))
        return starts.tolist(), stops.tolist()

    def close(self) -> None:
        """Close the pipes, stop the helper and reap it. (It would leave by itself at the end
        of its requests, but another process forked meanwhile may hold the pipe open: a
        helper only reads, so stopping it loses nothing.)"""
        if not self.pid:
            return
        for fd in (self._requests, self._answers):
            _quietly(os.close, fd)
        _quietly(os.kill, self.pid, _signal.SIGKILL)
        _quietly(os.waitpid, self.pid, 0)
        self.pid = 0
        self._asked.clear()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit, modules may be gone
            pass


def _quietly(call: Callable, *args) -> None:
    """``call(*args)``, an OSError ignored (the descriptor or process may be gone already)."""
    try:
        call(*args)
    except OSError:
        pass


def _widen(fd: int) -> int:
    """Ask for a pipe of PIPE_SIZE bytes; what it holds (Linux), else POSIX's least."""
    try:
        import fcntl

        _quietly(fcntl.fcntl, fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        return fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
    except (ImportError, AttributeError, OSError):
        return 512  # what POSIX promises (PIPE_BUF)


def _serve(work: Work, requests: int, answers: int) -> None:
    # Ctrl-C reaches the whole process group: the parent stops, and this sees its pipe close.
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # never hold the reader's pipes open once the parent is gone
        os.dup2(null, fd)
    low, high = sorted((requests, answers))  # nor any other descriptor: another helper's pipe
    os.closerange(3, low)  # held here would keep that helper from seeing its requests end
    os.closerange(low + 1, high)
    os.closerange(high + 1, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1 << 16)
    while True:
        head = _read_exact(requests, COUNT.size)
        if head is None:
            return
        (count,) = COUNT.unpack(head)
        body = _read_exact(requests, KEY * count)
        if body is None:
            return
        starts, stops = work(body)
        answer = _little(array.array("Q", starts)).tobytes()
        _write_all(answers, answer + _little(array.array("Q", stops)).tobytes())


def _little(numbers: array.array) -> array.array:
    if sys.byteorder != "little":
        numbers.byteswap()
    return numbers


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data``; a helper gone is an OSError (EPIPE), never the SIGPIPE that would
    end this process where its disposition is the default (the CLI restores it, so that
    ``yyb ... | head`` ends quietly): the signal is blocked while writing, and one the write
    raised is taken before it is unblocked."""
    view = memoryview(data)
    before = _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGPIPE})
    try:
        while view:
            view = view[os.write(fd, view) :]
    finally:
        if _signal.SIGPIPE in _signal.sigpending():
            _signal.sigtimedwait({_signal.SIGPIPE}, 0)
        _signal.pthread_sigmask(_signal.SIG_SETMASK, before)


def _read_exact(fd: int, size: int) -> bytes | None:
    """``size`` bytes, or None at an end of file before them."""
    parts = []
    while size:
        part = os.read(fd, min(size, 1 << 20))
        if not part:
            return None
        parts.append(part)
        size -= len(part)
    return b"".join(parts)
