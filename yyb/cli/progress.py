"""How long commands tell their progress on stderr (docs/cli.md, "Progress").

One counter of steps serves every command: ``Steps`` counts k of N (N when known), the time
elapsed and an estimate of what is left; ``Progress`` is ``yyb run``'s (and release-readiness's)
count of attempts, with the resolved so far and the attempts in flight per model. Modes:
``live`` (a terminal): each finished step a line, and under them one status line redrawn in
place. ``plain`` (a file, a CI log): one line per step started and per step finished, each with
the counts, never redrawn. ``none``: nothing. ``auto``: live on a terminal, else plain.
``--json`` keeps stdout pure JSON: progress is only ever written on stderr.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from typing import TextIO

import click

MODES = ("auto", "live", "plain", "none")
CLEAR = "\r\x1b[K"
REDRAW_S = 0.1  # at most this often a live status line is redrawn between steps
PLAIN_EVERY_S = 10.0  # and a plain line written within one long phase (gc's)


def progress_option(command):
    """``--progress auto|live|plain|none``: how a long command tells its progress on stderr
    (passed to the command as ``progress_mode``)."""
    return click.option(
        "--progress",
        "progress_mode",
        type=click.Choice(MODES),
        default="auto",
        show_default=True,
        help="How progress is told on stderr: live (redrawn, a terminal), plain (a line per "
        "event), none; auto: live on a terminal, else plain.",
    )(command)


def mode_for(asked: str, stream: TextIO) -> str:
    """The mode ``asked`` comes to on ``stream`` (``auto``: live on a terminal, else plain)."""
    if asked != "auto":
        return asked
    return "live" if stream.isatty() else "plain"


def seconds(value: float) -> str:
    """A duration as a person reads it: ``42s``, ``3m05s``."""
    value = int(value)
    return f"{value // 60}m{value % 60:02d}s" if value >= 60 else f"{value}s"


class Steps:
    """Steps done of ``total`` (None: not known) as ``mode`` shows them on ``stream``
    (default: stderr).

    The time left is estimated from the steps that took time (``timed``): a step reused
    or skipped finishes at once and would make the estimate too short.
    """

    def __init__(
        self, mode: str, total: int | None, stream: TextIO | None = None, clock=time.monotonic
    ):
        self.mode, self.total, self.clock = mode, total, clock
        self.stream = stream if stream is not None else sys.stderr  # the one in use now
        self.began = self._phase_began = clock()
        self.done = self.timed = 0
        self.phase_name: str | None = None
        self._drawn = False
        self._last = self._last_plain = self.began

    def show(self) -> None:
        """Draw the status line now (live), before the first step has finished."""
        if self.mode == "live":
            self._status()

    def begin(self, text: str) -> None:
        """A step has started: ``[k/N] started TEXT`` (plain) or the status redrawn (live)."""
        if self.mode == "plain":
            self._line(f"{self._where()} started {text}")
        self.show()

    def step(self, text: str, timed: bool = True) -> None:
        """A step has finished, told by ``text``: ``[k/N] TEXT; counts`` (plain) or
        ``[k/N] TEXT`` above the status line (live)."""
        self.done += 1
        self.timed += timed
        if self.mode == "plain":
            self._line(f"{self._where()} {text}; {self._counts()}")
        elif self.mode == "live":
            self._line(f"{self._where()} {text}")

    def phase(self, name: str, total: int | None) -> None:
        """A new phase of ``total`` steps (None: not known yet; gc's): the last one's end
        and this one's start, each a line; k/N and the estimate are the phase's own."""
        self.end_phase()
        self.phase_name, self.total = name, total
        self.done = self.timed = 0
        self._phase_began = self._last_plain = self.clock()
        self.note(name + (f": {total}" if total is not None else ""))

    def advance(self, done: int, total: int | None = None) -> None:
        """``done`` steps of the phase finished (of ``total``, when it is known only now),
        told no more than every ``REDRAW_S`` (live) or ``PLAIN_EVERY_S`` (plain): a phase
        may count millions of objects."""
        self.timed = self.done = done
        if total is not None:
            self.total = total
        now = self.clock()
        if self.mode == "live" and now - self._last >= REDRAW_S:
            self._status()
        elif self.mode == "plain" and now - self._last_plain >= PLAIN_EVERY_S:
            self._last_plain = now
            self._line(self._said(f"{self.phase_name};"))

    def end_phase(self) -> None:
        """The phase under way has ended: ``[k/N] NAME done; counts``."""
        name, self.phase_name = self.phase_name, None
        if name is not None:
            self.note(self._said(f"{name} done;"))

    def note(self, text: str) -> None:
        """A line of the command's own, kept above the status line."""
        self._line(text)

    def close(self) -> None:
        """Erase the status line: the terminal's next line is clean."""
        if self._drawn:
            self.stream.write(CLEAR)
            self.stream.flush()
            self._drawn = False

    def tallies(self) -> list[str]:
        """What a kind of step counts besides k/N, before the times (none here)."""
        return []

    def _where(self) -> str:
        """``[k/N]``, ``[k]`` when N is not known, nothing before the first of an unknown N."""
        if self.total is None:
            return f"[{self.done}]" if self.done else ""
        return f"[{self.done}/{self.total}]"

    def _said(self, label: str) -> str:
        """``[k/N] LABEL counts``, without what is empty."""
        return " ".join(filter(None, (self._where(), label, self._counts())))

    def _counts(self) -> str:
        now = self.clock()
        parts = [*self.tallies(), f"elapsed {seconds(now - self.began)}"]
        spent = now - self._phase_began
        left = None if self.total is None else self.total - self.done
        if self.timed and left and spent / self.timed * left >= 1:
            parts.append(f"about {seconds(spent / self.timed * left)} left")
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
        label = f"{self.phase_name};" if self.phase_name else ""
        self.stream.write(CLEAR + self._said(label))
        self.stream.flush()
        self._drawn = True
        self._last = self.clock()


class Progress(Steps):
    """A run's progress: ``total`` attempts in the plan, each started and finished, with the
    resolved so far and the attempts in flight per model. An attempt reused (its terminal an
    earlier run wrote) counts as done, not as time spent. Attempts start and end in the
    run's threads: one lock keeps their lines whole."""

    def __init__(self, mode: str, total: int, stream: TextIO | None = None, clock=time.monotonic):
        super().__init__(mode, total, stream, clock)
        self.resolved = 0
        self.flying: Counter[str] = Counter()
        self._lock = threading.Lock()

    @property
    def ran(self) -> int:
        return self.timed

    def started(self, ordinal: int, model: str, case_id: str | None) -> None:
        with self._lock:
            self.flying[model] += 1
            self.begin(f"#{ordinal} {case_id or '-'} {model}")

    def finished(self, result) -> None:
        with self._lock:
            self.resolved += result.terminal_class == "resolved"
            ran = result.status == "ran"
            if ran:
                self.flying[result.model] -= 1
                if self.flying[result.model] <= 0:
                    del self.flying[result.model]
            self.step(
                f"#{result.ordinal} {result.case_id or '-'} {result.model}: "
                f"{result.terminal_class} ({result.wall_ms} ms, {result.status})",
                timed=ran,
            )

    def tallies(self) -> list[str]:
        parts = [f"resolved {self.resolved}"]
        if self.flying:
            parts.append(
                "in flight " + ", ".join(f"{m} {n}" for m, n in sorted(self.flying.items()))
            )
        return parts


def json_event(kind: str, **fields) -> str:
    """One event of ``yyb run --json``: a JSON object on one line."""
    return json.dumps({"event": kind, **fields}, sort_keys=True)
