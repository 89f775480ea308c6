"""The counter of steps every long command shares (yyb/cli/progress.py, ``Steps``)."""

from __future__ import annotations

import io

from tests.cli.test_progress import Clock, Tty
from yyb.cli.progress import CLEAR, PLAIN_EVERY_S, REDRAW_S, Steps


def test_plain_steps_say_k_of_n_and_estimate_from_the_steps_that_took_time():
    out, clock = io.StringIO(), Clock()
    shown = Steps("plain", 4, out, clock)
    shown.begin("a")
    clock.now += 10
    shown.step("a done")
    shown.step("b skipped", timed=False)  # at once: no part of the estimate
    shown.close()
    assert out.getvalue().splitlines() == [
        "[0/4] started a",
        "[1/4] a done; elapsed 10s; about 30s left",
        "[2/4] b skipped; elapsed 10s; about 20s left",
    ]


def test_an_unknown_total_says_k_alone_and_no_estimate():
    out = io.StringIO()
    shown = Steps("plain", None, out, Clock())
    shown.step("one")
    assert out.getvalue() == "[1] one; elapsed 0s\n"


def test_phases_each_count_their_own_and_end_with_a_line():
    out, clock = io.StringIO(), Clock()
    shown = Steps("plain", None, out, clock)
    shown.phase("listing", None)
    shown.advance(5, 5)
    shown.phase("packing", 100)
    clock.now += 4
    shown.advance(50)  # within PLAIN_EVERY_S of the phase's start: not told
    clock.now += PLAIN_EVERY_S
    shown.advance(60)
    shown.advance(100)
    shown.end_phase()
    shown.end_phase()  # once only
    assert out.getvalue().splitlines() == [
        "listing",
        "[5/5] listing done; elapsed 0s",
        "packing: 100",
        "[60/100] packing; elapsed 14s; about 9s left",
        "[100/100] packing done; elapsed 14s",
    ]


def test_live_redraws_a_phase_at_most_every_tenth_of_a_second():
    out, clock = Tty(), Clock()
    shown = Steps("live", None, out, clock)
    shown.phase("packing", 1000)
    drawn = out.getvalue().count(CLEAR)
    for done in range(1, 101):
        shown.advance(done)  # the clock stands still: no redraw
    assert out.getvalue().count(CLEAR) == drawn
    clock.now += 2 * REDRAW_S
    shown.advance(101)
    assert out.getvalue().endswith(f"{CLEAR}[101/1000] packing; elapsed 0s; about 1s left")
    shown.close()
    assert out.getvalue().endswith(CLEAR)


def test_none_says_nothing_whatever_happens():
    out = io.StringIO()
    shown = Steps("none", 2, out)
    shown.show()
    shown.begin("a")
    shown.step("a")
    shown.phase("p", 3)
    shown.advance(3)
    shown.end_phase()
    shown.note("n")
    shown.close()
    assert out.getvalue() == ""
