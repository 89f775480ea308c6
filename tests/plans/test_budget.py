"""Budgets: exact decimal parsing, deterministic division."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from yyb.errors import UsageError
from yyb.plans import budget


@pytest.mark.parametrize(
    "text, micros",
    [("20", 20_000_000), ("0.000001", 1), ("12.5", 12_500_000), ("1e2", 100_000_000)],
)
def test_parse(text, micros):
    assert budget.parse_usd(text) == micros


@pytest.mark.parametrize("text", ["0", "-1", "abc", "0.0000001", "NaN", "Infinity", ""])
def test_parse_refuses(text):
    with pytest.raises(UsageError):
        budget.parse_usd(text)


@given(st.integers(1, 10**12), st.integers(1, 5000))
def test_split_sums_exactly_and_differs_by_at_most_one(total, count):
    if total < count:
        with pytest.raises(UsageError):
            budget.split(total, count)
        return
    parts = budget.split(total, count)
    assert len(parts) == count and sum(parts) == total
    assert max(parts) - min(parts) <= 1
    assert parts == sorted(parts, reverse=True)  # the remainder goes to the first attempts


def test_split_example():
    assert budget.split(10, 3) == [4, 3, 3]
