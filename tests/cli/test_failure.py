"""Library errors carry the parameter at fault; the command line words it as its option."""

from __future__ import annotations

from yyb.cli.failure import worded
from yyb.errors import InvalidArgument, NotFastForward, UsageError


def test_a_refused_argument_is_named_by_its_option():
    assert worded(InvalidArgument("attempts", "must be at least 1", 0)) == (
        "--attempts: must be at least 1"
    )
    assert worded(InvalidArgument("output_path", "x")) == "--output: x"
    assert worded(InvalidArgument("held", "x")) == "--checkpoint: x"
    error = InvalidArgument("dry_run", "x", True)
    assert (worded(error), error.argument, error.value) == ("--dry-run: x", "dry_run", True)
    assert "--" not in str(InvalidArgument("attempts", "must be at least 1", 0))


def test_other_errors_keep_their_words_but_a_refused_move_names_force():
    assert worded(UsageError("plain")) == "plain"
    moved = worded(NotFastForward("refs/x", "a" * 64, "b" * 64))
    assert moved.endswith("(not a fast-forward); --force moves it anyway")
