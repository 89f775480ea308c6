"""``yyb run``'s progress (yyb/cli/progress.py): what each mode writes, from events."""

from __future__ import annotations

import io
from dataclasses import dataclass

from yyb.cli.progress import CLEAR, Progress, mode_for


@dataclass
class Done:
    ordinal: int
    model: str
    terminal_class: str
    status: str = "ran"
    case_id: str | None = "calc-add"
    wall_ms: int = 120


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_auto_is_live_on_a_terminal_and_plain_elsewhere():
    assert mode_for("auto", Tty()) == "live"
    assert mode_for("auto", io.StringIO()) == "plain"
    assert mode_for("none", Tty()) == "none"


def test_plain_says_each_event_on_its_own_line_with_the_counts():
    out, clock = io.StringIO(), Clock()
    shown = Progress("plain", 3, out, clock)
    shown.started(0, "m/a", "calc-add")
    shown.started(1, "m/b", "calc-add")
    clock.now += 10
    shown.finished(Done(0, "m/a", "resolved"))
    clock.now += 20
    shown.finished(Done(1, "m/b", "model_failure"))
    shown.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "[0/3] started #0 calc-add m/a"
    assert lines[2] == (
        "[1/3] #0 calc-add m/a: resolved (120 ms, ran); resolved 1; in flight m/b 1; "
        "elapsed 10s; about 20s left"
    )
    assert lines[3].startswith("[2/3] #1 calc-add m/b: model_failure") and "elapsed 30s" in lines[3]
    assert "in flight" not in lines[3] and "about 15s left" in lines[3]
    assert CLEAR not in out.getvalue()


def test_live_redraws_one_status_line_under_the_finished_ones():
    out, clock = Tty(), Clock()
    shown = Progress("live", 2, out, clock)
    shown.started(0, "m/a", None)
    clock.now += 75
    shown.finished(Done(0, "m/a", "resolved", case_id=None))
    shown.close()
    text = out.getvalue()
    assert text.startswith(CLEAR + "[0/2] resolved 0; in flight m/a 1; elapsed 0s")
    assert CLEAR + "[1/2] #0 - m/a: resolved (120 ms, ran)\n" in text
    assert text.endswith(CLEAR + "[1/2] resolved 1; elapsed 1m15s; about 1m15s left" + CLEAR)


def test_none_says_nothing():
    out = io.StringIO()
    shown = Progress("none", 1, out)
    shown.started(0, "m/a", None)
    shown.finished(Done(0, "m/a", "resolved"))
    shown.note("checkpoint: 3 updates")
    shown.close()
    assert out.getvalue() == ""
