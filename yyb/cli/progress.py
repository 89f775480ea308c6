"""How ``yyb run`` tells its progress on stderr (docs/cli.md, "Progress").

``live`` (a terminal): each finished attempt a line, and under them one status line redrawn
in place: done of all, resolved so far, in flight per model, elapsed and an estimate of what
is left. ``plain`` (a file, a CI log): one line per attempt started and per attempt finished,
each with the same counts, never redrawn. ``none``: nothing. ``auto``: live on a terminal,
else plain. ``--json`` streams the same events as JSON lines on stdout instead.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from typing import TextIO

MODES = ("auto", "live", "plain", "none")
CLEAR = "\r\x1b[K"


def mode_for(asked: str, stream: TextIO) -> str:
    """The mode ``asked`` comes to on ``stream`` (``auto``: live on a terminal, else plain)."""
    if asked != "auto":
        return asked
    return "live" if stream.isatty() else "plain"


def _seconds(value: float) -> str:
    value = int(value)
    return f"{value // 60}m{value % 60:02d}s" if value >= 60 else f"{value}s"


class Progress:
    """The run's progress as ``mode`` shows it: ``total`` attempts in the plan, ``done``
    already finished before this run (their terminals reused)."""

    def __init__(self, mode: str, total: int, stream: TextIO | None = None, clock=time.monotonic):
        self.mode, self.total, self.clock = mode, total, clock
        self.stream = stream if stream is not None else sys.stderr  # the one in use now
        self.began = clock()
        self.done = self.resolved = self.ran = 0
        self.flying: Counter[str] = Counter()
        self._drawn = False

    def started(self, ordinal: int, model: str, case_id: str | None) -> None:
        self.flying[model] += 1
        if self.mode == "plain":
            self._line(f"[{self.done}/{self.total}] started #{ordinal} {case_id or '-'} {model}")
        elif self.mode == "live":
            self._status()

    def finished(self, result) -> None:
        self.done += 1
        self.resolved += result.terminal_class == "resolved"
        if result.status == "ran":
            self.ran += 1
            self.flying[result.model] -= 1
            if self.flying[result.model] <= 0:
                del self.flying[result.model]
        if self.mode in ("plain", "live"):
            said = (
                f"[{self.done}/{self.total}] #{result.ordinal} {result.case_id or '-'} "
                f"{result.model}: {result.terminal_class} ({result.wall_ms} ms, {result.status})"
            )
            self._line(said if self.mode == "live" else f"{said}; {self._counts()}")

    def note(self, text: str) -> None:
        """A line of the run's own (a worker probed, the checkpoint), kept above the status."""
        self._line(text)

    def close(self) -> None:
        if self._drawn:
            self.stream.write(CLEAR)
            self.stream.flush()
            self._drawn = False

    def _counts(self) -> str:
        elapsed = self.clock() - self.began
        parts = [f"resolved {self.resolved}", f"elapsed {_seconds(elapsed)}"]
        if self.flying:
            flying = ", ".join(f"{m} {n}" for m, n in sorted(self.flying.items()))
            parts.insert(1, f"in flight {flying}")
        left = self.total - self.done
        if self.ran and left > 0 and elapsed / self.ran * left >= 1:
            parts.append(f"about {_seconds(elapsed / self.ran * left)} left")
        return "; ".join(parts)

    def _line(self, text: str) -> None:
        if self.mode == "none":
            return
        if self._drawn:
            self.stream.write(CLEAR)
        self.stream.write(text + "\n")
        self._drawn = False
        if self.mode == "live":
            self._status()
        self.stream.flush()

    def _status(self) -> None:
        self.stream.write(f"{CLEAR}[{self.done}/{self.total}] {self._counts()}")
        self.stream.flush()
        self._drawn = True


def json_event(kind: str, **fields) -> str:
    """One event of ``yyb run --json``: a JSON object on one line."""
    return json.dumps({"event": kind, **fields}, sort_keys=True)
