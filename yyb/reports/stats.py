"""Exact, float-free statistics for reports: Wilson intervals, exact tests, percentiles.

Every figure is an integer (parts per million, milliseconds, micro-USD) or a fraction of two
integers, so a report record has one encoding on every machine. Wilson bounds are computed
with 50-digit decimals and rounded outwards (the low bound down, the high bound up), so a
stored interval never claims more precision than it has; the McNemar and Fisher p-values are
exact fractions from integer binomial coefficients, shown rounded up.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction

# The 0.975 quantile of the standard normal distribution (a two-sided 95% interval).
Z95 = Decimal("1.959963984540054")
PPM = 1_000_000
MAX_STORED = 2**63 - 1  # the largest integer every record field may hold
ROUNDED = 10**18  # the denominator of a McNemar p too precise to store exactly


def wilson(successes: int, trials: int) -> dict | None:
    """The 95% Wilson score interval of ``successes`` out of ``trials``, in parts per million.

    Returns ``{"method": "wilson", "confidence": "95%", "low_ppm": int, "high_ppm": int}``, or
    None when there is no trial (no interval exists).

    Raises:
        ValueError: counts out of range.
    """
    if trials < 0 or successes < 0 or successes > trials:
        raise ValueError(f"wilson({successes}, {trials}): counts out of range")
    return wilson_halves(2 * successes, trials)


def wilson_halves(half_successes: int, trials: int) -> dict | None:
    """``wilson`` of ``half_successes / 2`` successes out of ``trials``: a count in halves, for
    outcomes where a tie is half a success.

    Raises:
        ValueError: counts out of range.
    """
    if trials < 0 or half_successes < 0 or half_successes > 2 * trials:
        raise ValueError(f"wilson_halves({half_successes}, {trials}): counts out of range")
    if trials == 0:
        return None
    with localcontext() as ctx:
        ctx.prec = 50
        n, x, z2 = Decimal(trials), Decimal(half_successes) / 2, Z95 * Z95
        centre = (x + z2 / 2) / (n + z2)
        half = Z95 / (n + z2) * (x * (n - x) / n + z2 / 4).sqrt()
        low = max(Decimal(0), centre - half) * PPM
        high = min(Decimal(1), centre + half) * PPM
        low_ppm = int(low.to_integral_value(rounding=ROUND_FLOOR))
        high_ppm = int(high.to_integral_value(rounding=ROUND_CEILING))
    return {"method": "wilson", "confidence": "95%", "low_ppm": low_ppm, "high_ppm": high_ppm}


def rate(numerator: int, denominator: int) -> dict:
    """A rate as a report stores it: its numerator, denominator and parts per million."""
    return {
        "numerator": numerator,
        "denominator": denominator,
        "ppm": rate_ppm(numerator, denominator),
    }


def rate_ppm(numerator: int, denominator: int) -> int | None:
    """``numerator / denominator`` in parts per million, rounded half up; None for 0/0."""
    if denominator == 0:
        return None
    return (2 * numerator * PPM + denominator) // (2 * denominator)


def mcnemar_exact(only_first: int, only_second: int) -> dict:
    """The exact two-sided McNemar test of paired binary outcomes.

    Args:
        only_first: discordant pairs where only the first member succeeded (b).
        only_second: discordant pairs where only the second member succeeded (c).

    Returns:
        ``{"b", "c", "discordant", "p_numerator", "p_denominator", "p_ppm"}``: under the null
        hypothesis b ~ Binomial(b + c, 1/2), p = min(1, 2 * P(X <= min(b, c))) as a reduced
        fraction (rounded up to a fraction over 10**18 when the exact denominator would not
        fit in a record's 64-bit integers), and rounded up to parts per million. With no
        discordant pair p = 1.
    """
    if only_first < 0 or only_second < 0:
        raise ValueError("discordant counts are never negative")
    n = only_first + only_second
    tail = sum(math.comb(n, k) for k in range(min(only_first, only_second) + 1))
    # Past 63 discordant pairs the exact denominator 2**n does not fit; the rounded form's
    # 10**18 is never a power of two, so a reader can tell the two apart.
    return {"b": only_first, "c": only_second, "discordant": n, **_stored_p(2 * tail, 2**n)}


def _stored_p(numerator: int, denominator: int) -> dict:
    """``{"p_numerator", "p_denominator", "p_ppm"}`` of p = min(1, numerator / denominator):
    reduced, rounded up to a fraction over 10**18 when the reduced denominator would not fit
    in a record's 64-bit integers, and rounded up to parts per million (from the exact value)."""
    if numerator >= denominator:
        numerator, denominator = 1, 1
    common = math.gcd(numerator, denominator)
    numerator, denominator = numerator // common, denominator // common
    p_ppm = -(-numerator * PPM // denominator)
    if denominator > MAX_STORED:
        # A record holds integers below 2**64: store p rounded up to 18 decimals instead.
        numerator, denominator = -(-numerator * ROUNDED // denominator), ROUNDED
    return {"p_numerator": numerator, "p_denominator": denominator, "p_ppm": p_ppm}


def fisher_exact(a: int, b: int, c: int, d: int) -> dict:
    """The exact two-sided Fisher test of a 2x2 table of counts.

    Args:
        a, b: the first row (for a report: the first model's invalid and valid attempts).
        c, d: the second row (the second model's).

    Returns:
        ``{"table": [[a, b], [c, d]], "p_numerator", "p_denominator", "p_ppm",
        "significant"}``. With the margins fixed, the top-left cell x has the hypergeometric
        weight C(a+b, x) * C(c+d, a+c-x) out of C(n, a+c); p is the total weight of every
        table no more probable than the observed one (R's ``fisher.test``, without its
        floating-point tolerance: the weights are exact integers), stored as
        ``mcnemar_exact`` stores its p. ``significant``: p < 0.05, decided on the exact
        fraction.

    Raises:
        ValueError: a negative count.
    """
    if min(a, b, c, d) < 0:
        raise ValueError(f"fisher_exact({a}, {b}, {c}, {d}): counts are never negative")
    first, second, column = a + b, c + d, a + c
    low, high = max(0, column - second), min(first, column)
    # w(x) = C(first, x) * C(second, column - x), stepped from w(low) by the exact ratio
    # w(x+1)/w(x): each step is an exact integer division, so no factorial is recomputed.
    weight = math.comb(first, low) * math.comb(second, column - low)
    observed, tail, total = math.comb(first, a) * math.comb(second, c), 0, 0
    for x in range(low, high + 1):
        total += weight
        if weight <= observed:
            tail += weight
        weight = weight * (first - x) * (column - x) // ((x + 1) * (second - column + x + 1))
    return {
        "table": [[a, b], [c, d]],
        **_stored_p(tail, total),
        "significant": 20 * tail < total,  # p < 1/20, on the exact fraction
    }


def nearest_rank(sorted_values: list[int], percent: int) -> int | None:
    """The nearest-rank ``percent``-th percentile of an ascending list (None when empty).

    The median is the 50th: the lower middle value of an even count, always a measured value.
    """
    if not sorted_values:
        return None
    rank = max(1, -(-percent * len(sorted_values) // 100))
    return sorted_values[rank - 1]


def ppm_text(ppm: int | None, places: int = 1) -> str:
    """Parts per million as a percentage string with ``places`` decimals (``-`` for None)."""
    if ppm is None:
        return "-"
    scale = 10 ** (4 - places)  # ppm per displayed unit of the last place
    shown = (ppm + scale // 2) // scale
    whole, frac = divmod(shown, 10**places)
    return f"{whole}.{frac:0{places}d}%" if places else f"{whole}%"


def p_text(result: dict) -> str:
    """A McNemar p-value for people: 6 decimals, rounded up, from the exact fraction."""
    micro = result["p_ppm"]
    return f"{micro // PPM}.{micro % PPM:06d}"


def pass_at_k(cells: list[tuple[int, int]]) -> list[dict]:
    """pass@k for every k from 1 to the most valid attempts of a case: the unbiased
    estimator 1 - C(n - c, k) / C(n, k) of a case with n valid attempts, c of them resolved,
    averaged exactly over the cases with at least k (``cells``: each case's (n, c)).

    Each entry: ``k``, ``cases`` (those counted) and ``ppm`` (rounded half up).
    """
    most = max((n for n, _ in cells), default=0)
    figures = []
    for k in range(1, most + 1):
        counted = [(n, c) for n, c in cells if n >= k]
        misses = (Fraction(math.comb(n - c, k), math.comb(n, k)) for n, c in counted)
        total = sum((1 - miss for miss in misses), Fraction(0))
        mean = total / len(counted)
        figures.append(
            {"k": k, "cases": len(counted), "ppm": rate_ppm(mean.numerator, mean.denominator)}
        )
    return figures
