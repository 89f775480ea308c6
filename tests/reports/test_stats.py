"""Golden values for the report statistics (checked by hand against published tables)."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from yyb.evidence import cost as costs
from yyb.reports import build, stats


@pytest.mark.parametrize(
    "x, n, low, high",
    [
        # Wilson 95% intervals as published (Newcombe 1998, table I; Agresti & Coull 1998).
        (5, 10, 236593, 763407),  # 0.2366 .. 0.7634
        (0, 10, 0, 277533),  # 0 .. 0.2775
        (10, 10, 722467, 1000000),  # 0.7225 .. 1
        (8, 10, 490162, 943318),  # 0.4902 .. 0.9433
        (81, 263, 255288, 366210),  # Newcombe's example: 0.2553 .. 0.3662
    ],
)
def test_wilson_matches_known_values(x, n, low, high):
    got = stats.wilson(x, n)
    assert (got["low_ppm"], got["high_ppm"]) == (low, high)
    # And agrees with the textbook formula in floating point, to the ppm, rounded outwards.
    z, p = 1.959963984540054, x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert abs(got["low_ppm"] - max(0.0, centre - half) * 1e6) < 1
    assert abs(got["high_ppm"] - min(1.0, centre + half) * 1e6) < 1


def test_wilson_without_trials_has_no_interval():
    assert stats.wilson(0, 0) is None
    with pytest.raises(ValueError):
        stats.wilson(3, 2)


@pytest.mark.parametrize(
    "b, c, fraction",
    [
        (1, 9, (11, 512)),  # 2 * (1 + 10) / 2**10
        (0, 5, (1, 16)),  # 2 / 2**5
        (9, 1, (11, 512)),  # symmetric
        (3, 3, (1, 1)),  # capped at 1
        (0, 0, (1, 1)),  # no discordant pair
        (2, 12, (53, 4096)),  # 2 * (1 + 14 + 91) / 2**14 = 212/16384
    ],
)
def test_mcnemar_exact_matches_hand_computed_binomial_tails(b, c, fraction):
    got = stats.mcnemar_exact(b, c)
    assert (got["p_numerator"], got["p_denominator"]) == fraction
    assert got["p_ppm"] == -(-fraction[0] * 1_000_000 // fraction[1])
    assert not any(isinstance(v, float) for v in got.values())


def test_mcnemar_against_scipy_when_installed():
    scipy_stats = pytest.importorskip("scipy.stats")
    for b, c in [(1, 9), (4, 11), (7, 7), (0, 20)]:
        expected = min(1.0, scipy_stats.binomtest(min(b, c), b + c, 0.5).pvalue)
        got = stats.mcnemar_exact(b, c)
        assert abs(got["p_numerator"] / got["p_denominator"] - expected) < 1e-12


def test_nearest_rank_percentiles():
    assert stats.nearest_rank([], 50) is None
    assert stats.nearest_rank([7], 90) == 7
    values = list(range(1, 11))
    assert stats.nearest_rank(values, 50) == 5  # the lower middle: a measured value
    assert stats.nearest_rank(values, 90) == 9
    assert stats.nearest_rank([10, 20, 30], 90) == 30


def test_text_forms():
    assert stats.ppm_text(236593) == "23.7%"
    assert stats.ppm_text(1_000_000) == "100.0%"
    assert stats.ppm_text(None) == "-"
    assert stats.p_text(stats.mcnemar_exact(1, 9)) == "0.021485"


def cost(state, micros):
    return {"completeness": state, "currency": "USD", "micros": micros}


def test_costs_never_turn_unknown_into_zero():
    complete = costs.sum_costs([cost("complete", 100), cost("genuine_zero", 0)])
    assert (complete["completeness"], complete["micros"]) == ("complete", 100)
    partial = costs.sum_costs([cost("complete", 100), cost("unavailable", None)])
    assert (partial["completeness"], partial["micros"]) == ("partial", 100)
    assert partial["counts"]["unavailable"] == 1
    lower = costs.sum_costs([cost("partial", 40), cost("complete", 2)])
    assert (lower["completeness"], lower["micros"]) == ("partial", 42)
    nothing = costs.sum_costs([cost("unavailable", None), cost("unavailable", None)])
    assert (nothing["completeness"], nothing["micros"]) == ("unavailable", None)
    assert costs.sum_costs([None, None])["completeness"] == "not_applicable"
    both = costs.combine(complete, costs.sum_costs([None]))
    assert both == cost("complete", 100)
    assert costs.combine(complete, partial)["completeness"] == "partial"
    assert costs.combine(nothing, nothing)["micros"] is None


def test_paired_comparison_by_case():
    first = {f"c{i}": "resolved" for i in range(10)}
    second = {f"c{i}": "failed" for i in range(10)}
    second["c0"] = "resolved"  # both resolved
    first["c9"] = "failed"  # neither
    second["c8"] = "resolved"  # c8: both
    first["c11"], second["c11"] = "failed", "resolved"  # only second
    first["c12"], second["c12"] = None, "resolved"  # no valid attempt: unpaired
    got = build.paired(first, second)
    assert (got["cases_paired"], got["cases_unpaired"]) == (11, 1)
    assert (got["both_resolved"], got["only_first"], got["only_second"], got["neither"]) == (
        2,
        7,
        1,
        1,
    )
    # b=7, c=1: 2 * (1 + 8) / 2**8 = 18/256 = 9/128
    assert (got["mcnemar_exact"]["p_numerator"], got["mcnemar_exact"]["p_denominator"]) == (9, 128)


def test_case_outcome_is_a_strict_majority_of_valid_attempts():
    def facts(*outcomes):
        return [build.Facts(str(i), i, "m", "c", outcome=o) for i, o in enumerate(outcomes)]

    assert build.case_outcome(facts("resolved", "resolved", "failed")) == "resolved"
    assert build.case_outcome(facts("resolved", "failed")) == "failed"  # a tie fails
    assert build.case_outcome(facts("resolved", "invalid", "invalid")) == "resolved"
    assert build.case_outcome(facts("invalid", "missing")) is None


def test_mcnemar_past_64_discordant_pairs_is_rounded_up_to_fit_a_record():
    from fractions import Fraction

    from yyb.store.objects import codec

    result = stats.mcnemar_exact(40, 60)
    exact = min(Fraction(1), 2 * Fraction(sum(math.comb(100, k) for k in range(41)), 2**100))
    assert result["p_denominator"] == 10**18
    stored = Fraction(result["p_numerator"], result["p_denominator"])
    assert exact <= stored < exact + Fraction(1, 10**18)
    assert result["p_ppm"] == -(-exact.numerator * 10**6 // exact.denominator)
    codec.encode({"p": result})  # fits a record
    small = stats.mcnemar_exact(30, 33)["p_denominator"]
    assert small & (small - 1) == 0  # 63 discordant pairs: still the exact power of two


@pytest.mark.parametrize(
    "table, fraction",
    [
        # Fisher's lady tasting tea (1935; R's fisher.test(TeaTasting)): p = 0.4857.
        ((3, 1, 1, 3), (17, 35)),
        # Wikipedia's dieting example (men 1 of 10, women 11 of 14): p = 0.002759.
        ((1, 9, 11, 3), (41, 14858)),
        # scipy.stats.fisher_exact's documented example [[8, 2], [1, 5]]: p = 0.0349650.
        ((8, 2, 1, 5), (5, 143)),
        # Fisher's twins and convictions (1962; R's Convictions, two-sided): p = 0.0005367.
        ((2, 15, 10, 3), (3571, 6653325)),
        ((2, 16, 3, 15), (1, 1)),  # no table is less probable: capped at 1
        ((0, 0, 0, 0), (1, 1)),  # no attempt at all
        ((0, 5, 0, 7), (1, 1)),  # one column empty: one table only
    ],
)
def test_fisher_exact_matches_published_values(table, fraction):
    got = stats.fisher_exact(*table)
    assert (got["p_numerator"], got["p_denominator"]) == fraction
    assert got["p_ppm"] == -(-fraction[0] * 1_000_000 // fraction[1])
    assert got["table"] == [list(table[:2]), list(table[2:])]
    assert got["significant"] is (20 * fraction[0] < fraction[1])
    assert not any(isinstance(v, float) for v in got.values())


def test_fisher_exact_p_texts():
    assert stats.p_text(stats.fisher_exact(3, 1, 1, 3)) == "0.485715"
    assert stats.p_text(stats.fisher_exact(1, 9, 11, 3)) == "0.002760"


def _fisher_by_definition(a: int, b: int, c: int, d: int):
    """Two-sided Fisher p by its definition, one exact probability per table."""
    from fractions import Fraction

    first, second, column = a + b, c + d, a + c

    def probability(x: int) -> Fraction:
        return Fraction(
            math.comb(first, x) * math.comb(second, column - x),
            math.comb(first + second, column),
        )

    observed = probability(a)
    tables = range(max(0, column - second), min(first, column) + 1)
    return min(Fraction(1), sum(p for p in map(probability, tables) if p <= observed))


counts = st.integers(min_value=0, max_value=40)


@given(counts, counts, counts, counts)
@example(0, 0, 0, 1)
@example(40, 0, 0, 40)
@example(20, 20, 20, 20)
def test_fisher_exact_is_its_definition(a, b, c, d):
    from fractions import Fraction

    got = stats.fisher_exact(a, b, c, d)
    exact = _fisher_by_definition(a, b, c, d)
    stored = Fraction(got["p_numerator"], got["p_denominator"])
    if exact.denominator < 2**63:
        assert stored == exact
    else:  # rounded up to 18 decimals to fit a record
        assert got["p_denominator"] == 10**18 and exact <= stored < exact + Fraction(1, 10**18)
    assert got["significant"] is (exact < Fraction(1, 20))
    # Symmetric in rows and in columns.
    assert stats.fisher_exact(c, d, a, b)["p_ppm"] == got["p_ppm"]
    assert stats.fisher_exact(b, a, d, c)["p_ppm"] == got["p_ppm"]


def test_fisher_exact_of_large_tables_is_rounded_up_to_fit_a_record():
    from fractions import Fraction

    from yyb.store.objects import codec

    got = stats.fisher_exact(300, 700, 250, 750)
    exact = _fisher_by_definition(300, 700, 250, 750)
    assert got["p_denominator"] == 10**18
    assert exact <= Fraction(got["p_numerator"], got["p_denominator"]) < exact + Fraction(1, 10**18)
    assert got["p_ppm"] == -(-exact.numerator * 10**6 // exact.denominator)
    assert got["significant"] is (exact < Fraction(1, 20))
    codec.encode({"p": got})
    with pytest.raises(ValueError):
        stats.fisher_exact(-1, 0, 0, 0)
