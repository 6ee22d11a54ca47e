"""Sampler distributions and noise calibration, checked against exact formulas.

Goodness of fit: chi-square over bins whose probabilities come from the exact pmf (not
from the code under test), fixed seeds, p > 1e-4 required; each fit test also shows
power by rejecting a slightly wrong pmf on the same samples.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from privlab.core import calibration, laplace_table, samplers
from privlab.core.calibration import (
    analytic_gaussian_sigma,
    discrete_gaussian_sigma,
    gaussian_delta,
    rho_for_target,
    zcdp_to_approx_dp,
)
from privlab.core.samplers import (
    discrete_gaussian,
    discrete_gaussian_delta,
    discrete_laplace,
    power_of_two_at_most,
    round_to_grid,
)
from privlab.errors import InvalidInputError

N = 200_000


# ----------------------------------------------------------------- exact reference pmfs


def dlap_ge(k: np.ndarray, t: float) -> np.ndarray:
    """P[X >= k] for P[x] = (1-a)/(1+a) a^|x|, a = e^(-1/t), from the closed form."""
    k = np.asarray(k, dtype=np.float64)
    a = math.exp(-1.0 / t)
    upper = np.exp(-np.maximum(k, 1) / t) / (1 + a)  # k >= 1: a^k / (1 + a)
    lower = 1 - np.exp(-np.maximum(1 - k, 1) / t) / (1 + a)  # k <= 0: 1 - P[X >= 1 - k]
    return np.where(k >= 1, upper, lower)


def dgauss_ge(k: np.ndarray, sigma: float) -> np.ndarray:
    """P[Y >= k] for Y ~ N_Z(0, sigma^2): normalised direct sum (sigma <= 1000), else the
    midpoint rule Phi(-(k - 1/2)/sigma), whose error is O(sigma^-2) relative."""
    k = np.asarray(k, dtype=np.float64)
    if sigma > 1000:
        return stats.norm.sf((k - 0.5) / sigma)
    r = int(40 * sigma) + 5
    support = np.arange(-r, r + 1)
    w = np.exp(-(support.astype(float) ** 2) / (2 * sigma * sigma))
    w /= w.sum()
    tail = np.concatenate([np.cumsum(w[::-1])[::-1], [0.0]])
    return tail[np.clip(k.astype(np.int64) + r, 0, 2 * r + 1)]


def chi2_pvalue(samples: np.ndarray, ge, edges: np.ndarray) -> float:
    """Chi-square p-value of integer samples over bins (-inf, e0), [e0, e1), ..., [e_last, inf),
    bins with expected count < 20 merged into their neighbour."""
    edges = np.unique(edges.astype(np.int64))
    probs = -np.diff(np.concatenate([[1.0], ge(edges), [0.0]]))
    counts = np.bincount(np.searchsorted(edges, samples, side="right"), minlength=len(probs))
    exp_, obs = [], []
    acc_e = acc_o = 0.0
    for p, c in zip(probs * samples.size, counts, strict=True):
        acc_e, acc_o = acc_e + p, acc_o + c
        if acc_e >= 20:
            exp_.append(acc_e)
            obs.append(acc_o)
            acc_e = acc_o = 0.0
    if acc_e or acc_o:
        exp_[-1] += acc_e
        obs[-1] += acc_o
    exp_a, obs_a = np.array(exp_), np.array(obs)
    assert len(exp_a) >= 2
    return float(stats.chisquare(obs_a, exp_a * obs_a.sum() / exp_a.sum()).pvalue)


def check_variance(x: np.ndarray, expected: float) -> None:
    dev = (x - x.mean()) ** 2
    se = dev.std() / math.sqrt(x.size)
    assert abs(dev.mean() - expected) <= 5 * se, (dev.mean(), expected, se)


# ---------------------------------------------------------------------- discrete Laplace


@pytest.mark.parametrize("scale", [0.2, 1.0, 3.7, 100.0, 1e6, 1e12])
def test_discrete_laplace_matches_exact_pmf(scale: float) -> None:
    x = discrete_laplace(scale, size=N, rng=20240 + int(math.log2(scale) * 7))
    assert x.dtype == np.int64 and x.shape == (N,)
    edges = np.round(scale * np.linspace(-6, 6, 41))
    p = chi2_pvalue(x, lambda k: dlap_ge(k, scale), edges)
    assert p > 1e-4, p
    a = math.exp(-1.0 / scale)
    check_variance(x, 2 * a / (1 - a) ** 2 if scale < 1e5 else 2 * scale * scale)
    # Power: the same samples reject a pmf whose scale is 4% off.
    if scale >= 1:
        assert chi2_pvalue(x, lambda k: dlap_ge(k, scale * 1.04), edges) < 1e-6


def test_discrete_laplace_tiny_scale_is_exactly_zero() -> None:
    # a = e^-1000 underflows: P[0] = 1 - 1e-434, so every draw must be 0.
    assert not np.any(discrete_laplace(1e-3, size=10_000, rng=1))


def test_discrete_laplace_shapes_and_symmetry() -> None:
    assert discrete_laplace(2.0, size=(3, 4), rng=1).shape == (3, 4)
    assert np.ndim(discrete_laplace(2.0, rng=1)) == 0
    one = discrete_laplace(2.0, rng=np.random.default_rng(9))
    assert type(one) is np.int64  # as the one-element array's item was
    assert one == discrete_laplace(2.0, size=1, rng=np.random.default_rng(9))[0]
    assert discrete_laplace(2.0, size=0, rng=1).shape == (0,)
    x = discrete_laplace(5.0, size=N, rng=7)
    # mean 0 within 5 standard errors
    assert abs(x.mean()) < 5 * x.std() / math.sqrt(N)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, "1", [1.0], 2.0**60])
def test_discrete_laplace_rejects_bad_scale(bad) -> None:
    """Refused with one message, scalar or vector, again on a second call (the checked scale
    is memoised for floats; a refusal is not)."""
    for size in (3, None, 3):
        with pytest.raises(InvalidInputError, match="scale"):
            discrete_laplace(bad, size=size, rng=1)


def test_discrete_laplace_refuses_scales_that_could_overflow() -> None:
    with pytest.raises(InvalidInputError, match="coarser granularity"):
        discrete_laplace(2.0**60, size=3, rng=1)


# --------------------------------------------------------------------- discrete Gaussian


@pytest.mark.parametrize("sigma", [0.3, 1.0, 2.5, 10.0, 1000.0, 1e6])
def test_discrete_gaussian_matches_exact_pmf(sigma: float) -> None:
    y = discrete_gaussian(sigma, size=N, rng=4242 + int(sigma * 10) % 997)
    assert y.dtype == np.int64 and y.shape == (N,)
    edges = np.round(sigma * np.linspace(-4.5, 4.5, 37))
    p = chi2_pvalue(y, lambda k: dgauss_ge(k, sigma), edges)
    assert p > 1e-4, p
    r = int(40 * sigma) + 5 if sigma <= 1000 else 0
    if r:
        ks = np.arange(-r, r + 1, dtype=float)
        w = np.exp(-ks * ks / (2 * sigma * sigma))
        var = float((ks * ks * w).sum() / w.sum())
    else:
        var = sigma * sigma  # Poisson summation: exact to double precision for sigma >= 3
    check_variance(y, var)
    if sigma >= 1:
        assert chi2_pvalue(y, lambda k: dgauss_ge(k, sigma * 1.04), edges) < 1e-6


@pytest.mark.parametrize("sigma", [0.7, 3.0])
@pytest.mark.parametrize("secure", [False, True])
def test_scalar_discrete_gaussian_matches_exact_pmf(sigma: float, secure: bool) -> None:
    """The scalar path (size None: one proposal at a time) has the same distribution, with
    CKS proposals (a seed) and the table method's (the CSPRNG)."""
    from randomgen import ChaCha

    gen = np.random.Generator(ChaCha(key=77 + int(sigma), counter=0, rounds=20)) if secure \
        else np.random.default_rng(77 + int(sigma))
    y = np.array([discrete_gaussian(sigma, rng=gen) for _ in range(N // 2)])
    edges = np.arange(-int(5 * sigma) - 1, int(5 * sigma) + 2)
    assert chi2_pvalue(y, lambda k: dgauss_ge(k, sigma), edges) > 1e-4
    assert chi2_pvalue(y, lambda k: dgauss_ge(k, sigma * 1.04), edges) < 1e-6


def test_discrete_gaussian_shapes() -> None:
    assert discrete_gaussian(3.0, size=(2, 5), rng=1).shape == (2, 5)
    assert np.ndim(discrete_gaussian(3.0, rng=1)) == 0
    assert discrete_gaussian(3.0, size=0, rng=1).shape == (0,)


# ------------------------------------------------------------- exact discrete-Gaussian delta


def hockey_stick(sigma: float, d: int, eps: float) -> float:
    """delta(eps) = sum_y max(0, P[Y = y] - e^eps P[Y + d = y]), straight from the definition."""
    r = int(40 * sigma) + d + 5
    ks = np.arange(-r, r + 1, dtype=float)
    w = np.exp(-ks * ks / (2 * sigma * sigma))
    w /= w.sum()
    p, q = w[d:], w[:-d]  # P[Y = y] and P[Y + d = y] on the same y
    return float(np.maximum(p - math.exp(eps) * q, 0).sum())


@pytest.mark.parametrize("sigma,d,eps", [(0.7, 1, 1.0), (3.0, 1, 0.5), (12.5, 4, 0.3),
                                         (40.0, 25, 2.0), (200.0, 1025, 1.0)])
def test_discrete_gaussian_delta_matches_definition(sigma: float, d: int, eps: float) -> None:
    exact = hockey_stick(sigma, d, eps)
    got = discrete_gaussian_delta(sigma, d, eps)
    assert got >= exact - 1e-15
    assert got == pytest.approx(exact, rel=1e-9, abs=1e-14)


def test_euler_maclaurin_tails_match_direct_sums() -> None:
    for sigma in (4096.0, 5000.3):
        for m in (-9000, 0, 1, 7, 12_500, 25_501, 40_002):
            (direct,) = samplers._tail_direct(sigma, [m])
            em, err = samplers._tail_euler_maclaurin(sigma, m)
            assert err < 1e-24
            assert em == pytest.approx(direct, rel=2e-14, abs=1e-17)
    # and the switch between the two methods is seamless
    below = discrete_gaussian_delta(4095.999, 1025, 0.5)
    above = discrete_gaussian_delta(4096.001, 1025, 0.5)
    assert above == pytest.approx(below, rel=1e-5)


def test_discrete_gaussian_delta_handles_extremes() -> None:
    assert discrete_gaussian_delta(0.5, 1, 800.0) <= 1e-30  # e^800 would overflow
    assert discrete_gaussian_delta(1e-3, 1, 1.0) == pytest.approx(1.0)  # a point mass leaks
    with pytest.raises(InvalidInputError, match="sensitivity"):
        discrete_gaussian_delta(1.0, 0, 1.0)


# ---------------------------------------------------------------------------- calibration


CASES = [(1.0, 0.1, 1e-5), (1.0, 0.5, 1e-6), (1.0, 1.0, 1e-5), (3.0, 2.0, 1e-8),
         (0.01, 0.9, 1e-3), (1025.0, 8.0, 1e-10)]


def delta_by_integration(sigma: float, d: float, eps: float) -> float:
    """Hockey-stick divergence of N(d, s^2) from N(0, s^2), integrated numerically."""
    y0 = eps * sigma * sigma / d + d / 2  # beyond y0 the density ratio exceeds e^eps

    def f(y: float) -> float:
        return stats.norm.pdf(y, d, sigma) - math.exp(eps) * stats.norm.pdf(y, 0, sigma)

    val, _ = integrate.quad(f, y0, y0 + 40 * sigma, epsabs=1e-16, epsrel=1e-11, limit=200)
    return val


@pytest.mark.parametrize("d,eps,delta", CASES)
def test_analytic_gaussian_round_trip(d: float, eps: float, delta: float) -> None:
    sigma = analytic_gaussian_sigma(d, eps, delta)
    got = gaussian_delta(sigma, d, eps)
    assert got <= delta
    # The 1e-9 safety factor on sigma moves delta by at most ~1e-7 relative.
    assert got == pytest.approx(delta, rel=1e-6)
    assert delta_by_integration(sigma, d, eps) == pytest.approx(got, rel=1e-6)
    assert gaussian_delta(sigma * 0.99, d, eps) > delta  # 1% less noise fails
    if eps < 1:  # the classic bound is valid there, and looser
        classic = d * math.sqrt(2 * math.log(1.25 / delta)) / eps
        assert sigma < classic
        assert gaussian_delta(classic, d, eps) <= delta


@pytest.mark.parametrize("d,eps,delta", [(1, 1.0, 1e-6), (1, 0.1, 1e-5), (3, 20.0, 1e-6),
                                         (1025, 1.0, 1e-6), (1025, 0.01, 1e-6),
                                         (1, 1.0, 0.5)])
def test_discrete_gaussian_sigma_is_smallest_that_meets_delta(d: int, eps: float,
                                                              delta: float) -> None:
    sigma = discrete_gaussian_sigma(d, eps, delta)
    assert discrete_gaussian_delta(sigma, d, eps) <= delta
    assert discrete_gaussian_delta(sigma * (1 - 2e-4), d, eps) > delta
    if sigma < 300:
        assert hockey_stick(sigma, d, eps) <= delta


def test_discrete_gaussian_sigma_never_sums_the_pmf_on_fine_grids(monkeypatch) -> None:
    # sensitivity 1025 grid steps at epsilon 0.001: sigma ~ 4e6 steps; summing the pmf
    # would take gigabytes, so every delta evaluated must come from the Euler-Maclaurin tails.
    def direct(*args: object) -> None:
        raise AssertionError("the pmf was summed directly for a sigma of millions of steps")

    calls = []
    em = samplers._tail_euler_maclaurin
    calibration._discrete_gaussian_sigma.cache_clear()  # an earlier test may have cached it
    monkeypatch.setattr(samplers, "_tail_direct", direct)
    monkeypatch.setattr(samplers, "_tail_euler_maclaurin",
                        lambda sigma, m: calls.append(sigma) or em(sigma, m))
    sigma = discrete_gaussian_sigma(1025, 0.001, 1e-9)
    assert calls and min(calls) > 1e6
    assert sigma == pytest.approx(analytic_gaussian_sigma(1025, 0.001, 1e-9), rel=1e-3)


def test_calibrations_are_computed_once_per_parameters(monkeypatch) -> None:
    """A repeated query does not redo the root search (77% of a Gaussian query's time)."""
    calls = []
    real = calibration.discrete_gaussian_delta
    monkeypatch.setattr(calibration, "discrete_gaussian_delta",
                        lambda *a: calls.append(a) or real(*a))
    first = discrete_gaussian_sigma(3, 0.75, 3e-7)
    assert calls
    calls.clear()
    assert discrete_gaussian_sigma(3.0, 0.75, 3e-7) == first and not calls
    rho = rho_for_target(0.625, 7e-7)
    monkeypatch.setattr(calibration, "zcdp_to_approx_dp", lambda *a: calls.append(a))
    assert rho_for_target(0.625, 7e-7) == rho and not calls
    with pytest.raises(InvalidInputError, match="sensitivity"):
        discrete_gaussian_sigma(1.5, 0.75, 3e-7)  # validation still runs before the cache


@pytest.mark.parametrize("eps,delta", [(0.1, 1e-6), (1.0, 1e-5), (8.0, 1e-9)])
def test_rho_for_target_round_trip(eps: float, delta: float) -> None:
    rho = rho_for_target(eps, delta)
    assert zcdp_to_approx_dp(rho, delta) <= eps
    assert zcdp_to_approx_dp(rho * 1.001, delta) > eps
    # the tight conversion allows more rho than the simple eps = rho + 2 sqrt(rho ln 1/delta)
    simple = (math.sqrt(math.log(1 / delta) + eps) - math.sqrt(math.log(1 / delta))) ** 2
    assert rho > simple


@pytest.mark.parametrize("args", [(1.0, 0.0, 1e-5), (1.0, 1.0, 0.0), (0.0, 1.0, 1e-5),
                                  (1.0, math.nan, 1e-5), (1.0, 1.0, 1.0)])
def test_analytic_gaussian_rejects_bad_parameters(args) -> None:
    with pytest.raises(InvalidInputError):
        analytic_gaussian_sigma(*args)


def test_zcdp_conversion_edges() -> None:
    assert zcdp_to_approx_dp(0.0, 1e-6) == 0.0
    assert zcdp_to_approx_dp(0.5, 0.0) == math.inf
    # for rho-zCDP the simple bound rho + 2 sqrt(rho ln(1/delta)) is valid, the tight one lower
    rho, delta = 0.1, 1e-6
    assert zcdp_to_approx_dp(rho, delta) < rho + 2 * math.sqrt(rho * math.log(1 / delta))


def test_rho_for_target_needs_delta() -> None:
    with pytest.raises(InvalidInputError, match="delta"):
        rho_for_target(1.0, 0.0)


# --------------------------------------------------------------------------------- grids


def test_power_of_two_at_most() -> None:
    assert power_of_two_at_most(1.0) == 1.0
    assert power_of_two_at_most(1000.0) == 512.0
    assert power_of_two_at_most(1 / 1024) == 2.0**-10
    assert power_of_two_at_most(0.001) == 2.0**-10
    with pytest.raises(InvalidInputError):
        power_of_two_at_most(0.0)


def test_round_to_grid() -> None:
    assert round_to_grid([0.3, -0.76, 2.0], 0.5).tolist() == [1, -2, 4]
    with pytest.raises(InvalidInputError, match="finite"):
        round_to_grid([1.0, math.nan], 1.0)
    with pytest.raises(InvalidInputError, match="coarser granularity"):
        round_to_grid([1e300], 2.0**-10)


@pytest.mark.parametrize("scale", [0.3, 1.0, 37.5, 1e6])
@pytest.mark.parametrize("vector", [False, True])
def test_scalar_discrete_laplace_on_the_csprng_matches_exact_pmf(scale: float,
                                                                 vector: bool) -> None:
    """The scalar path on the CSPRNG (ChaCha, keyed here for a fixed test), one draw at a time
    and in short vectors (<= 32 draws), takes its bits as raw 64-bit words (`_BitPool`) and
    samples by the table method lane by lane (`_discrete_laplace_scalar_fast`): the same
    exact distribution."""
    from randomgen import ChaCha

    gen = np.random.Generator(ChaCha(key=2026 + int(scale) + vector, counter=0, rounds=20))
    if vector:
        x = np.concatenate([discrete_laplace(scale, size=25, rng=gen) for _ in range(N // 100)])
    else:
        x = np.array([discrete_laplace(scale, rng=gen) for _ in range(N // 4)])
    edges = np.round(scale * np.linspace(-6, 6, 41)) if scale > 5 else np.arange(-9, 10)
    assert chi2_pvalue(x, lambda k: dlap_ge(k, scale), edges) > 1e-4
    a = math.exp(-1.0 / scale)
    check_variance(x, 2 * a / (1 - a) ** 2 if scale < 1e5 else 2 * scale * scale)
    if scale >= 1:  # power, on a quarter of the samples: a scale 8% off is rejected
        assert chi2_pvalue(x, lambda k: dlap_ge(k, scale * 1.08), edges) < 1e-6


def test_the_csprng_scalar_path_samples_by_the_table_and_a_seed_by_cks(monkeypatch) -> None:
    """Which scalar sampler runs: the table method on the CSPRNG, CKS Algorithm 2 on a seeded
    generator (its recorded streams unchanged); the discrete Gaussian proposes alike."""
    from randomgen import ChaCha

    calls: list[str] = []
    for name in ("_discrete_laplace_scalar", "_discrete_laplace_scalar_fast"):
        original = getattr(samplers, name)
        monkeypatch.setattr(samplers, name, lambda *a, _o=original, _n=name: (
            calls.append(_n), _o(*a))[1])
    chacha = np.random.Generator(ChaCha(key=5, counter=0, rounds=20))
    discrete_laplace(3.0, rng=chacha)
    discrete_gaussian(3.0, rng=chacha)
    assert set(calls) == {"_discrete_laplace_scalar_fast"}
    calls.clear()
    discrete_laplace(3.0, rng=np.random.default_rng(1))
    discrete_gaussian(3.0, rng=np.random.default_rng(1))
    assert set(calls) == {"_discrete_laplace_scalar"}


class _Words:
    """A stand-in for `_BitPool` that serves given 32-bit words first, then real bits."""

    def __init__(self, words: list[int], seed: int = 3) -> None:
        self.words = list(words)
        self.pool = samplers._BitPool(np.random.default_rng(seed))

    def below(self, k: int) -> int:
        if k == 1 << 32 and self.words:
            return self.words.pop(0)
        return self.pool.below(k)


def test_the_w_tables_one_draw_is_exact() -> None:
    """`_WTable.draw_one`: P[W >= w] = exp(-w / 16) for W from uniform words (chi-square);
    a word on a threshold settles U < p_w with more bits; the tail beyond the table is the
    table's size plus a fresh W."""
    table = laplace_table._w_table()
    pool = samplers._BitPool(np.random.default_rng(11))
    w = np.array([table.draw_one(pool) for _ in range(N // 2)])
    edges = np.arange(0, 120, 4)
    assert chi2_pvalue(w, lambda k: np.exp(-np.maximum(k, 0) / 16.0), edges) > 1e-4
    assert chi2_pvalue(w, lambda k: np.exp(-np.maximum(k, 0) / 16.6), edges) < 1e-6
    ascending = table._ascending_list
    # x just above T_3 (and below T_2): exactly 2 thresholds exceed it
    t3 = ascending[table.wmax - 3]
    assert table.draw_one(_Words([t3 + 1])) == 2
    # x == T_3: W is 2 or 3, as the following bits say (both occur)
    settled = {table.draw_one(_Words([t3], seed=s)) for s in range(40)}
    assert settled == {2, 3}
    # x = 0: below every threshold, so the table's size plus a fresh draw from the next word
    assert table.draw_one(_Words([0, t3 + 1])) == table.wmax + 2


def test_bit_pool_reads_raw_words_from_the_csprng_and_bytes_from_a_seed() -> None:
    """CSPRNG: the pool's 512 bits are the next eight raw words; a seeded generator keeps
    `Generator.bytes`, which reads NumPy's buffered 32-bit halves (after a draw that leaves
    half a PCG64 word buffered it differs from the raw words), so a recorded seeded stream
    stays as it was."""
    from randomgen import ChaCha

    from privlab.core.rng import is_secure, secure_generator

    assert is_secure(secure_generator()) and not is_secure(np.random.default_rng(1))
    secure, twin = (np.random.Generator(ChaCha(key=7, counter=0, rounds=20)) for _ in range(2))
    for gen in (secure, twin):
        gen.integers(0, 7, size=3, dtype=np.uint32)  # 32-bit draws: one half left buffered
    pool = samplers._BitPool(secure)
    assert pool.below(2 ** 20) == int(twin.bit_generator.random_raw(1)[0]) & (2 ** 20 - 1)
    seeded, twin = np.random.default_rng(5), np.random.default_rng(5)
    for gen in (seeded, twin):
        gen.integers(0, 7, size=3, dtype=np.uint32)  # 32-bit draws: one half left buffered
    pool = samplers._BitPool(seeded)
    raw = np.random.default_rng(5)
    raw.integers(0, 7, size=3, dtype=np.uint32)
    assert twin.bytes(64) != raw.bit_generator.random_raw(8).tobytes()  # the case is real
    twin = np.random.default_rng(5)
    twin.integers(0, 7, size=3, dtype=np.uint32)
    assert pool.below(2 ** 20) == int.from_bytes(twin.bytes(64), "little") & (2 ** 20 - 1)


def test_the_csprng_bit_pool_is_kept_per_thread_between_draws() -> None:
    """`pool_for`: on the CSPRNG one pool per thread and generator, kept between calls (a
    scalar draw leaves bits for the next: 20 scalar draws refill about 5 times, not 20); a
    seeded generator gets a fresh pool per call (its recorded stream); another thread or
    another generator, another pool."""
    import threading

    from randomgen import ChaCha

    from privlab.core.bit_pool import pool_for

    gen = np.random.Generator(ChaCha(key=9, counter=0, rounds=20))
    assert pool_for(gen) is pool_for(gen)
    other = np.random.Generator(ChaCha(key=10, counter=0, rounds=20))
    assert pool_for(other) is not pool_for(gen)
    seeded = np.random.default_rng(3)
    assert pool_for(seeded) is not pool_for(seeded)
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(pool_for(gen)))
    thread.start()
    thread.join()
    assert seen[0] is not pool_for(gen)
    calls: list[int] = []
    raw = gen.bit_generator.random_raw
    pool = pool_for(gen)
    pool._raw = lambda n: (calls.append(n), raw(n))[1]
    pool.bits = pool.left = 0
    for _ in range(20):
        discrete_laplace(37.5, rng=gen)
    assert 3 <= len(calls) <= 8, len(calls)  # about 120 bits a draw, 512 a refill
