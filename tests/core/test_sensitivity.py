"""Sensitivity helpers: hand-computed figures, exhaustive neighbours, float bounds, errors."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from privlab.core import sensitivity as sens
from privlab.core.queries import dp_count, dp_histogram, dp_mean, dp_sum
from privlab.core.sensitivity import Sensitivity
from privlab.errors import InvalidInputError

AR, RP = "add_remove_record", "replace_record"
R2, R3, R6 = math.sqrt(2), math.sqrt(3), math.sqrt(6)


@pytest.mark.parametrize("got, l1, l2, changed", [
    (sens.count(), 1, 1, 1),
    (sens.count(RP), 0, 0, 0),                       # n is public under replace
    (sens.count(RP, condition=True), 1, 1, 1),
    (sens.clamped_sum((-3, 8)), 8, 8, 1),            # max(|-3|, |8|)
    (sens.clamped_sum((-3, 8), RP), 11, 11, 1),      # 8 - (-3)
    (sens.clamped_sum((2, 6), centre=4), 2, 2, 1),   # values - 4 lie in [-2, 2]
    (sens.clamped_sum((2, 6), RP, centre=4), 4, 4, 1),
    (sens.clamped_sum((-10, -4)), 10, 10, 1),
    (sens.clamped_mean((0, 10), 4, RP), 2.5, 2.5, 1),  # 10 / 4
    (sens.clamped_mean((0, 10), 4), 2, 2, 1),          # 10 / (4 + 1)
    (sens.histogram(), 1, 1, 1),
    (sens.histogram(RP), 2, R2, 2),                  # -1 in one bin, +1 in another
    (sens.histogram(contributions=3), 3, 3, 3),      # all 3 rows may land in one bin
    (sens.histogram(contributions=3, distinct_bins=True), 3, R3, 3),
    (sens.histogram(RP, contributions=3), 6, 3 * R2, 6),
    (sens.histogram(RP, contributions=3, distinct_bins=True), 6, R6, 6),
    (sens.histogram(contributions=4, distinct_bins=True), 4, 2, 4),
    (sens.bounded_contributions(Sensitivity(8, 8, 1), 5), 40, 40, 5),
    (sens.bounded_contributions(Sensitivity(2, R2, 2), 3), 6, 3 * R2, 6),
])
def test_hand_computed(got: Sensitivity, l1: float, l2: float, changed: int) -> None:
    assert got.l1 == pytest.approx(l1, rel=1e-15)
    assert got.l2 == pytest.approx(l2, rel=1e-15)
    assert got.changed == changed


def test_relation_changes_the_answer_and_unknown_relations_are_refused() -> None:
    assert sens.clamped_sum((0, 10), AR).l1 == 10 and sens.clamped_sum((0, 10), RP).l1 == 10
    assert sens.clamped_sum((5, 10), AR).l1 == 10 and sens.clamped_sum((5, 10), RP).l1 == 5
    for call in (lambda: sens.count("user"), lambda: sens.clamped_sum((0, 1), "replace"),
                 lambda: sens.clamped_mean((0, 1), 3, "none"), lambda: sens.histogram("x")):
        with pytest.raises(InvalidInputError, match="neighbouring must be one of") as err:
            call()
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("call, message", [
    (lambda: sens.clamped_sum(None), "bounds are required"),
    (lambda: sens.clamped_sum((3, 1)), "inverted"),
    (lambda: sens.clamped_sum((0, math.inf)), "finite"),
    (lambda: sens.clamped_sum((0, 1), centre=math.nan), "centre must be a finite"),
    (lambda: sens.clamped_mean((0, 1), 0), "n must be a positive integer"),
    (lambda: sens.clamped_mean((0, 1), 2.0), "n must be a positive integer"),
    (lambda: sens.histogram(contributions=0), "contributions must be a positive integer"),
    (lambda: sens.histogram(contributions=True), "contributions must be a positive integer"),
    (lambda: sens.bounded_contributions(Sensitivity(1, 1), 1.5), "contributions must be"),
    (lambda: sens.check_sensitivity(0), "sensitivity must be a finite number > 0"),
    (lambda: sens.check_sensitivity("a"), "sensitivity must be a number > 0"),
])
def test_bad_input(call, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        call()


def _neighbours(data: tuple[float, ...], values: list[float], relation: str):
    """Every neighbour of `data` under `relation` with new records drawn from `values`."""
    if relation == AR:
        yield from (data + (v,) for v in values)
        yield from (data[:i] + data[i + 1:] for i in range(len(data)))
    else:
        yield from (data[:i] + (v,) + data[i + 1:] for i in range(len(data)) for v in values)


@pytest.mark.parametrize("bounds, centre", [((-3, 8), 0.0), ((2, 6), 4.0), ((-10, -4), 0.0),
                                            ((-3, 8), 2.5)])
@pytest.mark.parametrize("relation", [AR, RP])
def test_sum_bound_is_the_exact_worst_case(bounds, centre, relation) -> None:
    """Exhaustive: every dataset of up to 3 records over a value set that includes the
    bounds and values outside them (clamped); the largest change equals the helper."""
    lo, hi = bounds
    values = [lo - 5, lo, (lo + hi) / 2, hi - 0.5, hi, hi + 7]

    def f(d):
        return float(sum(np.clip(d, lo, hi) - centre)) if d else 0.0

    worst = 0.0
    for size in range(4):
        for data in itertools.combinations_with_replacement(values, size):
            for other in _neighbours(data, values, relation):
                worst = max(worst, abs(f(other) - f(data)))
    assert worst == sens.clamped_sum(bounds, relation, centre=centre).l1


@pytest.mark.parametrize("relation", [AR, RP])
def test_mean_bound_is_the_exact_worst_case(relation: str) -> None:
    lo, hi, n = 1, 9, 3
    values = [Fraction(v) for v in (lo, 2, 5, hi)]
    worst = Fraction(0)
    for data in itertools.combinations_with_replacement(values, n):
        for other in _neighbours(data, values, relation):
            if len(other) >= n:  # n is a public lower bound on the size
                worst = max(worst, abs(sum(other) / len(other) - sum(data) / len(data)))
    assert worst == Fraction(hi - lo, n if relation == RP else n + 1)
    got = sens.clamped_mean((lo, hi), n, relation).l1  # the smallest float >= worst
    assert Fraction(got) >= worst > Fraction(math.nextafter(got, 0))


@pytest.mark.parametrize("m", [1, 2, 3])
@pytest.mark.parametrize("distinct", [False, True])
@pytest.mark.parametrize("relation", [AR, RP])
def test_histogram_bound_is_the_exact_worst_case(m: int, distinct: bool, relation: str) -> None:
    """Every unit with up to m rows over 6 bins: the largest L1 / L2 change and changed bins."""
    bins = 6  # enough for two units with disjoint bins (the worst case under replace)
    units = [np.bincount(rows, minlength=bins)
             for size in range(m + 1)
             for rows in (itertools.combinations(range(bins), size) if distinct
                          else itertools.combinations_with_replacement(range(bins), size))]
    deltas = units if relation == AR else [a - b for a in units for b in units]
    got = sens.histogram(relation, contributions=m, distinct_bins=distinct)
    assert max(np.abs(d).sum() for d in deltas) == got.l1
    assert max(math.sqrt((d ** 2).sum()) for d in deltas) == pytest.approx(got.l2, rel=1e-15)
    assert max(np.count_nonzero(d) for d in deltas) == got.changed


def test_float_bounds_are_rounded_up() -> None:
    """The centred values the code sums are fl(x - c); (hi - lo) / 2 can be one ulp below
    them (regression: dp_mean used it), and fl(hi - lo) can be below the true width."""
    lo, hi = -0.09513786685737972, 0.0017522913084037554
    c = (lo + hi) / 2
    shifted = np.clip(np.array([lo, hi]), lo, hi) - c
    assert np.abs(shifted).max() > (hi - lo) / 2  # the old formula misses it
    assert np.abs(shifted).max() == sens.clamped_sum((lo, hi), centre=c).l1
    rng = np.random.default_rng(7)
    for _ in range(2000):
        lo, hi = np.sort(rng.uniform(-50, 50, 2) * 10.0 ** rng.integers(-4, 4))
        c = (lo + hi) / 2
        got = sens.clamped_sum((lo, hi), centre=c)
        assert np.abs(np.linspace(lo, hi, 9) - c).max() <= got.l1
        d = sens.clamped_sum((lo, hi), RP).l1
        assert Fraction(d) >= Fraction(float(hi)) - Fraction(float(lo))
        assert Fraction(math.nextafter(d, 0)) < Fraction(float(hi)) - Fraction(float(lo))
        m = sens.clamped_mean((lo, hi), 7, RP).l1
        assert Fraction(m) >= (Fraction(float(hi)) - Fraction(float(lo))) / 7


def test_for_mechanism_and_queries_use_the_helpers() -> None:
    s = sens.histogram(RP)
    assert s.for_mechanism("gaussian") == s.l2 and s.for_mechanism("laplace") == s.l1 == 2
    assert dp_sum([1.0], (-3, 8), 1.0, rng=1).noise["sensitivity"] == 8.0
    assert dp_count([1, 2], 1.0, rng=1).noise["sensitivity"] == 1
    assert dp_histogram(["a"], 1.0, categories=["a", "b"], rng=1).noise["sensitivity"] == 1
    # dp_mean's sum is released with the centred bound: its noise scale at epsilon / 2 is
    # (floor(D / g) + 1) g / (epsilon / 2) with D = 5, g = 2^-8 for bounds (0, 10).
    rel = dp_mean([1.0, 2.0], (0, 10), 1.0, rng=1)
    assert rel.noise["sum_scale"] == pytest.approx((5 * 256 + 1) / 256 / 0.5)
