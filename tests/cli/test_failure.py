"""Library errors carry the parameter at fault; the command line words it as its option."""

from __future__ import annotations

import pytest

from yyb.cli.failure import worded
from yyb.errors import InvalidArgument, NotFastForward, StoreNotFound, UsageError


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


@pytest.mark.parametrize(
    "args, option",
    [
        (["--attempts", "0"], "--attempts"),
        (["--max-usd", "-1"], "--max-usd"),
        (["--models", "vendor/a,vendor/a"], "--models"),
        (["--models", "vendor/a,,vendor/b"], "--models"),
    ],
)
def test_plan_words_each_refused_argument_as_its_option(project, tmp_path, args, option):
    """The plan library refuses by parameter name; the one line on stderr names the flag."""
    base = {"--task": str(project.task()), "--models": "vendor/a", "--output": "out.json"}
    given = dict(base, **dict(zip(args[::2], args[1::2], strict=True)))
    result = project.yyb("plan", *[x for pair in given.items() for x in pair])
    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith(f"yyb: error: {option}: "), result.stderr


def test_no_store_and_no_repository_says_how_to_name_one(tmp_path, monkeypatch):
    from yyb.store.location import default_store

    with pytest.raises(StoreNotFound) as caught:
        default_store(str(tmp_path), {})
    assert caught.value.named is False and "--" not in caught.value.message
    assert worded(caught.value).endswith("name one with --store DIR or YYB_STORE")
