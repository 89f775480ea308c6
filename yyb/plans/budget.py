"""Spend ceilings in integer micro-USD, divided deterministically across an attempt matrix."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from yyb.errors import InvalidArgument, UsageError

CURRENCY = "USD"
MICROS = 1_000_000
DEFAULT_TOTAL_MICROS = 20 * MICROS


def parse_usd(text: str) -> int:
    """Exact micro-USD for a decimal amount such as ``12.5`` (never through a float).

    Raises:
        UsageError: not a positive amount with at most 6 decimal places.
    """
    try:
        amount = Decimal(text.strip())
    except (InvalidOperation, AttributeError):
        raise InvalidArgument("max_usd", f"{text!r} is not a number", text) from None
    if not amount.is_finite() or amount <= 0:
        raise InvalidArgument("max_usd", f"{text!r} must be a positive amount", text)
    micros = amount * MICROS
    if micros != micros.to_integral_value():
        raise InvalidArgument("max_usd", f"{text!r} has more than 6 decimal places", text)
    return int(micros)


def split(total_micros: int, count: int) -> list[int]:
    """Per-attempt ceilings summing exactly to ``total_micros``.

    Every attempt gets ``total // count``; the remainder goes one micro-USD each to the first
    ``total % count`` attempts in plan order.

    Raises:
        UsageError: the total cannot give every attempt at least one micro-USD.
    """
    if total_micros < count:
        raise UsageError(
            f"a budget of {format_usd(total_micros)} cannot cover {count} attempts "
            "(each needs at least 0.000001 USD)"
        )
    base, remainder = divmod(total_micros, count)
    return [base + 1] * remainder + [base] * (count - remainder)


def format_usd(micros: int) -> str:
    return f"{micros // MICROS}.{micros % MICROS:06d} {CURRENCY}"
