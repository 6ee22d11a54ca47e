"""The table-driven exact discrete Laplace (issue 32): each exact piece checked on its own.

W ~ Geometric(exp(-1/16)) by inversion of 32-bit words against thresholds floor(2^32 p_w);
the thresholds from an independent exact computation; the tie rule ("first bits equal a
threshold") settled with the right conditional probability; the tail beyond the table by
memorylessness; the Python-integer lanes of the magnitude; and the whole sampler's pmf
against the old CKS sampler's and the closed form. Fixed seeds; tolerances are 5 standard
errors or chi-square p > 1e-4 (test_samplers.py's rule).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from privlab.core import laplace_table, samplers
from privlab.core.samplers import laplace_scale_at_least


def exp_minus_sixteenth_bounds(bits: int) -> tuple[Fraction, Fraction]:
    """exp(-1/16) between two rationals, from the alternating Taylor series (independent of
    the decimal module the sampler uses)."""
    x, term, total, k = Fraction(-1, 16), Fraction(1), Fraction(1), 0
    while True:
        k += 1
        term *= x / k
        if abs(term) < Fraction(1, 1 << (bits + 40)):
            return total - abs(term), total + abs(term)
        total += term


@pytest.mark.parametrize("w", [1, 2, 17, 100, 177])
def test_thresholds_are_exact_floors(w) -> None:
    for bits in (32, 96, 160):
        lo, hi = exp_minus_sixteenth_bounds(bits + 4 * w)
        want_lo, want_hi = math.floor(lo**w * (1 << bits)), math.floor(hi**w * (1 << bits))
        assert want_lo == want_hi  # the bounds pin the floor
        assert laplace_table._exp_floor(w, bits) == want_lo


def test_w_matches_the_geometric_pmf() -> None:
    table = laplace_table._w_table()
    w = table.sample(400_000, np.random.default_rng(11))
    q = math.exp(-1 / 16)
    edges = np.arange(0, 200)
    probs = (1 - q) * q ** edges
    counts = np.bincount(np.minimum(w, 200), minlength=201)
    expected = np.append(probs, q**200) * w.size
    assert stats.chisquare(counts, expected * counts.sum() / expected.sum()).pvalue > 1e-4
    wrong = np.append((1 - q**1.04) * q ** (1.04 * edges), q ** (1.04 * 200)) * w.size
    assert stats.chisquare(counts, wrong * counts.sum() / wrong.sum()).pvalue < 1e-6


def test_a_word_equal_to_a_threshold_is_settled_with_the_right_probability() -> None:
    """Given U's first 32 bits == T_w, U < p_w has probability frac(2^32 p_w) exactly."""
    table = laplace_table._w_table()
    pool = samplers._BitPool(np.random.default_rng(5))
    n = 20_000
    for w in (3, 40):
        t_w = laplace_table._exp_floor(w, 32)
        p = laplace_table._exp_floor(w, 96) / 2**64 - t_w  # frac(2^32 p_w) to 64 bits
        hits = sum(table.settle(t_w, w, pool) for _ in range(n))
        assert abs(hits / n - p) < 5 * math.sqrt(p * (1 - p) / n), (w, hits / n, p)


def test_ties_and_tails_in_the_slow_path() -> None:
    table = laplace_table._w_table()
    gen = np.random.default_rng(9)
    # below the smallest threshold: W = wmax + a fresh geometric
    w = table._slow(np.zeros(100_000, dtype=np.uint32), gen)
    extra = w - table.wmax
    assert extra.min() >= 0
    q = math.exp(-1 / 16)
    assert abs(extra.mean() - q / (1 - q)) < 5 * math.sqrt(q) / (1 - q) / math.sqrt(extra.size)
    # exactly on threshold T_5: W is 5 or 4, never anything else
    t5 = np.full(2000, laplace_table._exp_floor(5, 32), dtype=np.uint32)
    assert set(np.unique(table._slow(t5, gen)).tolist()) == {4, 5}


def test_magnitudes_beyond_int64_use_python_integers() -> None:
    t = (1 << 53) - 1
    w = np.array([0, 1, 1023, 1024, 5000, 2**40], dtype=np.int64)
    f = np.array([5, t - 1, 7, 9, t - 1, 3], dtype=np.int64)
    want = [(t * int(a) + int(b)) >> 40 for a, b in zip(w, f, strict=True)]
    assert laplace_table._magnitudes(t, w.copy(), f, 40).tolist() == want
    assert not laplace_table._magnitudes(t, w.copy(), f, 70)[:3].any()  # 2^70 > every small lane


@pytest.mark.parametrize("scale", [0.7, laplace_scale_at_least(1025, 1.0), 3.3e9])
def test_fast_and_cks_samplers_have_one_distribution(scale) -> None:
    """Two-sample chi-square between the new sampler and the old CKS one (the streams
    differ, the distribution may not), and each against the closed-form pmf."""
    n = 200_000
    fast = samplers.discrete_laplace(scale, size=n, rng=21)
    cks = samplers._discrete_laplace_cks(scale, n, np.random.default_rng(22))
    edges = np.unique(np.round(scale * np.linspace(-5, 5, 31)))
    a = np.bincount(np.searchsorted(edges, fast, side="right"), minlength=edges.size + 1)
    b = np.bincount(np.searchsorted(edges, cks, side="right"), minlength=edges.size + 1)
    keep = (a + b) >= 20
    assert stats.chi2_contingency(np.vstack([a[keep], b[keep]]))[1] > 1e-4
    q = math.exp(-1 / scale)
    for k in (0, 1, -1):
        p = (1 - q) / (1 + q) * q ** abs(k)
        assert abs((fast == k).mean() - p) < 5 * math.sqrt(p * (1 - p) / n) + 1e-12
