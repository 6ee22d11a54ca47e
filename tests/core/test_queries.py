"""Clamped DP queries: grids, sensitivities, guarantees, accuracy at high epsilon, errors.
(Privacy loss on neighbouring datasets: test_privacy_loss.py.)"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privlab.core.queries import (
    as_numeric,
    check_bounds,
    dp_count,
    dp_histogram,
    dp_mean,
    dp_quantile,
    dp_sum,
)
from privlab.core.rng import SEEDED_NOTE
from privlab.errors import InvalidInputError

FAST = settings(max_examples=40, deadline=None)
values_st = st.lists(st.floats(min_value=-1e4, max_value=1e4, allow_nan=False), max_size=30)
bounds_st = st.tuples(st.floats(min_value=-1e3, max_value=0),
                      st.floats(min_value=0.01, max_value=1e3))
eps_st = st.floats(min_value=0.05, max_value=10.0)


def on_grid(value, g: float) -> bool:
    assert math.frexp(g)[0] == 0.5, f"granularity {g} is not a power of two"
    ratio = np.asarray(value, dtype=np.float64) / g
    return bool(np.all(ratio == np.rint(ratio)))


@FAST
@given(values_st, bounds_st, eps_st, st.integers(0, 2**32))
def test_every_query_releases_grid_values(values, bounds, eps, seed) -> None:
    for rel in (dp_sum(values, bounds, eps, rng=seed),
                dp_sum(values, bounds, eps, delta=1e-6, mechanism="gaussian", rng=seed),
                dp_mean(values, bounds, eps, rng=seed),
                dp_quantile(values, 0.5, bounds, eps, rng=seed),
                dp_histogram(values, eps, bounds=bounds, bins=4, rng=seed),
                dp_count(values, eps, rng=seed)):
        assert on_grid(rel.value, rel.granularity), rel


@FAST
@given(values_st, bounds_st, eps_st, st.integers(0, 2**32))
def test_mean_and_quantile_stay_within_bounds(values, bounds, eps, seed) -> None:
    lo, hi = bounds
    for rel in (dp_mean(values, bounds, eps, rng=seed),
                dp_quantile(values, 0.3, bounds, eps, rng=seed)):
        assert lo <= rel.value <= hi


def test_sum_grid_does_not_depend_on_the_data() -> None:
    """Regression: the grid and noise were chosen from "all values are integers", so the
    output grid told whether some record had a fraction (infinite privacy loss)."""
    a = dp_sum([1, 2, 3], (0, 10), 1.0, rng=1)
    b = dp_sum([1, 2, 3.5], (0, 10), 1.0, rng=1)
    assert a.granularity == b.granularity == 2.0**-7  # 2^floor(log2(10/1024))
    assert a.noise == b.noise
    assert a.noise["scale"] == pytest.approx((1280 + 1) * 2.0**-7)


def test_geometric_sum_rounds_values_and_needs_integer_bounds() -> None:
    rel = dp_sum([1.4, 2.6, 3.0], (0, 10), 50.0, mechanism="geometric", rng=2)
    assert rel.granularity == 1.0 and isinstance(rel.value, int)
    assert abs(rel.value - 7) <= 1  # 1 + 3 + 3, noise of scale 10/50
    assert rel.noise["scale"] == pytest.approx(10 / 50)
    with pytest.raises(InvalidInputError, match="integer bounds"):
        dp_sum([1.0], (0, 10.5), 1.0, mechanism="geometric")


def test_sum_sensitivity_and_clamping() -> None:
    rel = dp_sum([-100.0, 5.0, 100.0], (-3, 8), 1e4, rng=3)
    assert rel.noise["sensitivity"] == 8.0
    assert rel.value == pytest.approx(-3 + 5 + 8, abs=0.05)
    assert rel.details["clamped_to"] == [-3.0, 8.0]


def test_count_accuracy_and_mechanisms() -> None:
    assert dp_count(range(37), 100.0, rng=1).value == 37
    rel = dp_count(range(37), 1.0, delta=1e-6, mechanism="gaussian", rng=1)
    assert rel.guarantee.delta == 1e-6 and rel.granularity == 1.0
    assert dp_count(range(5), 1.0, mechanism="laplace", rng=1).guarantee.mechanism.startswith(
        "geometric")
    with pytest.raises(InvalidInputError, match="delta"):
        dp_count(range(5), 1.0, mechanism="gaussian")
    with pytest.raises(InvalidInputError, match="mechanism"):
        dp_count(range(5), 1.0, mechanism="nope")


def test_mean_composes_sum_and_count() -> None:
    data = np.linspace(20, 60, 2001)
    rel = dp_mean(data, (0, 100), 2.0, rng=4)
    g = rel.guarantee
    assert g.epsilon == 2.0 and "2 releases" in g.accountant
    assert any("epsilon=1" in n for n in g.notes)
    # centred sum: sensitivity half the width (50), not max(|lo|, |hi|) (100)
    assert rel.noise["sum_scale"] == pytest.approx(50 * (1 + 1 / 1024) / 1.0, rel=1e-3)
    assert rel.noise["count_scale"] == pytest.approx(1 / 1.0)
    assert rel.value == pytest.approx(40.0, abs=0.5)
    assert SEEDED_NOTE in g.notes
    assert SEEDED_NOTE not in dp_mean(data, (0, 100), 2.0).guarantee.notes


def test_mean_gaussian_splits_delta() -> None:
    rel = dp_mean([1.0, 2.0], (0, 4), 1.0, delta=1e-6, mechanism="gaussian", rng=1)
    assert rel.guarantee.delta == 1e-6 and rel.guarantee.epsilon == 1.0


def test_histogram_over_categories() -> None:
    data = ["a"] * 50 + ["b"] * 20 + ["zzz"] * 9  # 'zzz' is outside the public domain
    rel = dp_histogram(data, 50.0, categories=["a", "b", "c"], rng=5)
    assert rel.details["labels"] == ["a", "b", "c"]
    assert rel.value.tolist() == pytest.approx([50, 20, 0], abs=1)
    assert rel.noise["scale"] == pytest.approx(1 / 50)  # one count changes by one
    with pytest.raises(InvalidInputError, match="distinct"):
        dp_histogram(data, 1.0, categories=["a", "a"])


def test_histogram_over_numeric_bins() -> None:
    rel = dp_histogram([0.5, 1.5, 1.7, 9.9, 42.0], 100.0, bounds=(0, 10), bins=5, rng=6)
    assert rel.value.tolist() == [3, 0, 0, 0, 2]  # 42 is clamped into the last bin
    assert rel.details["labels"][0] == "[0, 2)" and rel.details["labels"][-1] == "[8, 10]"
    with pytest.raises(InvalidInputError, match="public domain"):
        dp_histogram([1.0], 1.0)
    with pytest.raises(InvalidInputError, match="bins"):
        dp_histogram([1.0], 1.0, bounds=(0, 1), bins=0)


def test_histogram_gaussian_uses_one_changed_coordinate() -> None:
    rel = dp_histogram(["a", "b"], 1.0, categories=["a", "b"], delta=1e-6,
                       mechanism="gaussian", rng=1)
    assert "exact discrete-Gaussian" in rel.guarantee.accountant


def test_quantile_accuracy() -> None:
    data = np.arange(1, 1001, dtype=float)
    rel = dp_quantile(data, 0.25, (0, 2000), 5.0, rng=7)
    assert rel.value == pytest.approx(250, abs=10)
    assert rel.guarantee.mechanism.startswith("quantile")
    assert dp_quantile([], 0.5, (0, 1), 1.0, rng=1).value <= 1  # empty data still releases
    for q in (-0.1, 1.5, math.nan):
        with pytest.raises(InvalidInputError, match="quantile"):
            dp_quantile(data, q, (0, 1), 1.0)


@pytest.mark.parametrize("bounds", [None, (5, 5), (6, 1), (0, math.inf), (math.nan, 1),
                                    ("a", 1), (1,)])
def test_bad_bounds_are_refused(bounds) -> None:
    with pytest.raises(InvalidInputError, match="bounds"):
        check_bounds(bounds)
    with pytest.raises(InvalidInputError, match="bounds"):
        dp_sum([1.0], bounds, 1.0)


def test_as_numeric() -> None:
    assert as_numeric(["1", "2.5", None]).tolist() == [1.0, 2.5]
    assert as_numeric([1, np.nan, 3]).tolist() == [1.0, 3.0]
    with pytest.raises(InvalidInputError, match="'city' is not numeric"):
        as_numeric(["x", "y"], "'city'")


def test_mean_and_quantile_at_the_bounds_stay_on_grid_and_inside() -> None:
    """Regression: rounding after clipping left the mean above hi (0.0500000119 for
    bounds (0, 0.05)); clipping after rounding left the quantile on hi, off the grid."""
    mean = dp_mean([10.0] * 50, (0, 0.05), 100.0, rng=1)
    assert mean.value <= 0.05 and on_grid(mean.value, mean.granularity)
    for seed in range(20):  # points drawn near hi used to be clipped onto hi itself
        quant = dp_quantile([0.25] * 20, 0.5, (0.1, 0.3), 50.0, rng=seed)
        assert 0.1 <= quant.value <= 0.3 and on_grid(quant.value, quant.granularity)
