"""Empirical privacy loss of every mechanism and query on neighbouring inputs.

Each test runs a mechanism many times on a dataset D and on a neighbour D' (chosen to be
worst case or close to it), histograms the outputs into bins and estimates, per bin b,
the log ratio L_b = ln(P[b | D] / P[b | D']). Its standard error comes from the delta
method on binomial counts: se_b = sqrt((1 - p)/c + (1 - p')/c'). Only bins with at least
MIN_COUNT hits on both sides are used. The statistic

    excess = max_b (|L_b| - Z se_b) - epsilon       (Z = 4: one-sided 3e-5 per bin)

is > 0 only when some bin's loss is significantly above epsilon. Every test asserts
excess <= 0 for the mechanism as written AND excess > 0 for a broken variant (noise
calibrated for half the sensitivity, i.e. half the noise, or the budget doubled where
the query has no sensitivity argument): the test can tell epsilon from 2 epsilon. For
(epsilon, delta) mechanisms P(b) <= e^eps P'(b) + delta gives the extra allowance
ln(1 + delta / (e^eps min(p, p'))) per bin. Seeds are fixed, so the outcome is
deterministic; the tolerances come from the sampling error above, not from tuning.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from privlab.core.mechanisms import (
    exponential_mechanism,
    gaussian_mechanism,
    geometric_mechanism,
    laplace_mechanism,
    randomized_response,
    report_noisy_max,
)
from privlab.core.queries import dp_count, dp_histogram, dp_mean, dp_quantile, dp_sum

Z = 4.0
MIN_COUNT = 100


def loss_excess(x: np.ndarray, y: np.ndarray, edges: np.ndarray, epsilon: float,
                delta: float = 0.0) -> tuple[float, float]:
    """(excess over epsilon of the Z-lower bound of the max bin loss, point estimate)."""
    full = np.concatenate([[-np.inf], edges, [np.inf]])
    cx, _ = np.histogram(x, bins=full)
    cy, _ = np.histogram(y, bins=full)
    keep = (cx >= MIN_COUNT) & (cy >= MIN_COUNT)
    assert keep.sum() >= 2, "too few populated bins to measure anything"
    cx, cy = cx[keep].astype(float), cy[keep].astype(float)
    px, py = cx / x.size, cy / y.size
    loss = np.abs(np.log(px / py))
    se = np.sqrt((1 - px) / cx + (1 - py) / cy)
    allowance = np.log1p(delta / (math.exp(epsilon) * np.minimum(px, py)))
    return float(np.max(loss - Z * se - allowance) - epsilon), float(loss.max())


def sample_loop(fn: Callable[[np.random.Generator], float], n: int, seed: int) -> np.ndarray:
    gen = np.random.default_rng(seed)
    return np.array([fn(gen) for _ in range(n)], dtype=np.float64)


def assert_private_and_power(run: Callable[[bool, int], tuple[np.ndarray, np.ndarray]],
                             edges: np.ndarray, epsilon: float, delta: float = 0.0,
                             tight: float | None = None) -> None:
    """run(broken, seed) -> (outputs on D, outputs on D')."""
    x, y = run(False, 1)
    excess, estimate = loss_excess(x, y, edges, epsilon, delta)
    assert excess <= 0, f"privacy loss {estimate:.3f} significantly above epsilon={epsilon}"
    if tight is not None:  # the neighbours are (near) worst case: the loss is really reached
        assert estimate >= tight * epsilon, f"loss estimate {estimate:.3f} is not tight"
    xb, yb = run(True, 2)
    excess_b, estimate_b = loss_excess(xb, yb, edges, epsilon, delta)
    assert excess_b > 0, f"broken variant not detected (loss {estimate_b:.3f})"


# ---------------------------------------------------------------------- additive noise


def test_laplace_mechanism() -> None:
    eps, n = 1.0, 200_000

    def run(broken: bool, seed: int):
        sens = 0.5 if broken else 1.0  # broken: noise for half the true sensitivity
        gen = np.random.default_rng(seed)
        x = laplace_mechanism(np.full(n, 0.3), sens, eps, rng=gen, changed_coordinates=1)
        y = laplace_mechanism(np.full(n, 1.3), sens, eps, rng=gen, changed_coordinates=1)
        return x.value, y.value

    assert_private_and_power(run, np.arange(-3.0, 4.7, 0.35), eps, tight=0.9)


def test_laplace_mechanism_scalar_path() -> None:
    eps, n = 1.0, 3000

    def run(broken: bool, seed: int):
        sens = 0.5 if broken else 1.0
        x = sample_loop(lambda g: laplace_mechanism(0.3, sens, eps, rng=g).value, n, seed)
        y = sample_loop(lambda g: laplace_mechanism(1.3, sens, eps, rng=g).value, n, seed + 50)
        return x, y

    assert_private_and_power(run, np.array([0.3, 0.8, 1.3]), eps)


def test_geometric_mechanism() -> None:
    eps, n = 0.7, 200_000

    def run(broken: bool, seed: int):
        gen = np.random.default_rng(seed)
        kw = {"rng": gen, "changed_coordinates": 1}
        if broken:  # half the noise
            x = laplace_mechanism(np.full(n, 10), 1, 2 * eps, integer_valued=True, **kw)
            y = laplace_mechanism(np.full(n, 11), 1, 2 * eps, integer_valued=True, **kw)
        else:
            x = geometric_mechanism(np.full(n, 10), 1, eps, **kw)
            y = geometric_mechanism(np.full(n, 11), 1, eps, **kw)
        return x.value, y.value

    assert_private_and_power(run, np.arange(4.5, 17.0, 1.0), eps, tight=0.95)


def test_gaussian_mechanism() -> None:
    eps, delta, n = 1.0, 1e-5, 200_000

    def run(broken: bool, seed: int):
        sens = 0.5 if broken else 1.0
        gen = np.random.default_rng(seed)
        x = gaussian_mechanism(np.full(n, 0.3), sens, eps, delta, rng=gen, changed_coordinates=1)
        y = gaussian_mechanism(np.full(n, 1.3), sens, eps, delta, rng=gen, changed_coordinates=1)
        return x.value, y.value

    assert_private_and_power(run, np.arange(-10.0, 11.6, 0.6), eps, delta)


def test_gaussian_mechanism_multivariate_zcdp_path() -> None:
    # 2 coordinates, L2 sensitivity 1, one neighbour moves both by 1/sqrt(2); the loss of
    # the projection onto (1, 1) is what an attacker would use.
    eps, delta, n = 1.0, 1e-5, 100_000
    step = 1 / math.sqrt(2)

    def run(broken: bool, seed: int):
        sens = 0.5 if broken else 1.0
        gen = np.random.default_rng(seed)
        out = []
        for base in (0.0, step):
            # n independent 2-vector releases in one call: changed_coordinates=2 gives the
            # calibration of a single 2-vector (L2 sensitivity 1, both coordinates change).
            rel = gaussian_mechanism(np.full(2 * n, base), sens, eps, delta, rng=gen,
                                     changed_coordinates=2)
            out.append(rel.value.reshape(n, 2).sum(axis=1) / math.sqrt(2))
        return out[0], out[1]

    assert_private_and_power(run, np.arange(-9.0, 10.5, 0.75), eps, delta)


# ---------------------------------------------------------------------- selection


@pytest.mark.parametrize("method", ["permute_and_flip", "gumbel"])
def test_exponential_mechanism(method: str) -> None:
    # k = 10 candidates; the neighbour raises every other score by 1 and lowers the first.
    eps, n, k = 1.0, 8000, 10
    u = np.array([1.0] + [0.0] * (k - 1))
    u2 = np.array([0.0] + [1.0] * (k - 1))
    cands = list(range(k))

    def run(broken: bool, seed: int):
        sens = 0.5 if broken else 1.0

        def one(scores):
            return lambda g: exponential_mechanism(cands, scores, sens, eps, method=method,
                                                   rng=g).value
        return sample_loop(one(u), n, seed), sample_loop(one(u2), n, seed + 100)

    assert_private_and_power(run, np.arange(0.5, k - 1, 1.0), eps,
                             tight=0.95 if method == "permute_and_flip" else 0.85)


def test_exponential_mechanism_monotonic() -> None:
    # Monotone neighbours (all scores up by at most 1): factor eps/D is allowed. The
    # broken variant claims monotonicity for neighbours that move scores both ways.
    eps, n, k = 1.0, 8000, 10
    cands = list(range(k))

    def run(broken: bool, seed: int):
        u = np.array([1.0] + [0.0] * (k - 1))
        u2 = np.array([0.0] + [1.0] * (k - 1)) if broken else np.zeros(k)

        def one(scores):
            return lambda g: exponential_mechanism(cands, scores, 1.0, eps, monotonic=True,
                                                   rng=g).value
        return sample_loop(one(u), n, seed), sample_loop(one(u2), n, seed + 100)

    assert_private_and_power(run, np.arange(0.5, k - 1, 1.0), eps)


def test_report_noisy_max() -> None:
    eps, n, k = 1.0, 5000, 4
    u = np.array([1.0] + [0.0] * (k - 1))
    u2 = np.array([0.0] + [1.0] * (k - 1))

    def run(broken: bool, seed: int):
        sens = 0.5 if broken else 1.0
        x = sample_loop(lambda g: report_noisy_max(u, sens, eps, rng=g).value, n, seed)
        y = sample_loop(lambda g: report_noisy_max(u2, sens, eps, rng=g).value, n, seed + 100)
        return x, y

    assert_private_and_power(run, np.arange(0.5, k - 1, 1.0), eps)


def test_randomized_response() -> None:
    eps, n = 1.5, 200_000
    cats = ["a", "b", "c", "d"]
    code = {c: i for i, c in enumerate(cats)}

    def run(broken: bool, seed: int):
        e = 2 * eps if broken else eps
        gen = np.random.default_rng(seed)
        x = randomized_response(["a"] * n, cats, e, rng=gen).value
        y = randomized_response(["b"] * n, cats, e, rng=gen).value
        return (np.array([code[v] for v in x], dtype=float),
                np.array([code[v] for v in y], dtype=float))

    assert_private_and_power(run, np.array([0.5, 1.5, 2.5]), eps, tight=0.97)


# ---------------------------------------------------------------------------- queries


def test_dp_count() -> None:
    # D has 20 records, D' 21. Broken variant: the same query at twice the budget.
    eps, n = 1.0, 3000
    data = list(range(20))

    def run(broken: bool, seed: int):
        e = 2 * eps if broken else eps
        x = sample_loop(lambda g: dp_count(data, e, rng=g).value, n, seed)
        y = sample_loop(lambda g: dp_count(data + [99], e, rng=g).value, n, seed + 100)
        return x, y

    assert_private_and_power(run, np.array([18.5, 19.5, 20.5, 21.5, 22.5]), eps, tight=0.9)


def test_dp_sum() -> None:
    # bounds (0, 10): sensitivity 10; D' adds a record at the bound.
    eps, n = 1.0, 3000
    data = [1.0, 2.5, 3.0]

    def run(broken: bool, seed: int):
        e = 2 * eps if broken else eps
        x = sample_loop(lambda g: dp_sum(data, (0, 10), e, rng=g).value, n, seed)
        y = sample_loop(lambda g: dp_sum(data + [10.0], (0, 10), e, rng=g).value, n,
                        seed + 100)
        return x, y

    assert_private_and_power(run, np.array([6.5, 11.5, 16.5]), eps,
                             tight=0.85)


def test_dp_mean() -> None:
    # dp_mean releases the noisy centred sum and the noisy count (in `details`) and their
    # ratio, so the loss to bound is that of the pair. D: three records at the centre 5 of
    # (0, 10), centred sum 0; D' adds one at the bound 10: sum +5 (its sensitivity, noise
    # scale ~10 at epsilon/2) and count +1 (scale 2 at epsilon/2). Both log ratios are
    # constant, +-epsilon/2, for sum <= 0 / >= 5 and count <= 3 / >= 4, so the 3 x 2 bins
    # below lose no information and the corner bins reach the full epsilon.
    eps, n, lo, hi, centre = 1.0, 3000, 0.0, 10.0, 5.0
    data = [5.0, 5.0, 5.0]

    def pair(rel) -> tuple[float, float, float]:
        count = float(rel.details["noisy_count"])
        centred = rel.details["noisy_sum"] - centre * max(count, 1.0)
        # the released mean is post-processing of the pair (within half a grid step)
        expected = min(max(centre + centred / max(count, 1.0), lo), hi)
        assert abs(rel.value - expected) <= rel.granularity / 2
        return centred, count, rel.value

    means: dict[bool, tuple[np.ndarray, np.ndarray]] = {}

    def run(broken: bool, seed: int):
        e = 2 * eps if broken else eps
        out = []
        for d, s in ((data, seed), (data + [hi], seed + 100)):
            gen = np.random.default_rng(s)
            rows = np.array([pair(dp_mean(d, (lo, hi), e, rng=gen)) for _ in range(n)])
            centred, count, mean = rows.T
            out.append((2 * np.digitize(centred, [1e-9, 5.0]) + (count >= 4), mean))  # 0..5
        means[broken] = (out[0][1], out[1][1])
        return out[0][0], out[1][0]

    assert_private_and_power(run, np.arange(0.5, 5.0, 1.0), eps, tight=0.85)
    # The mean alone loses less (~0.7 epsilon here); it must still be within epsilon.
    excess, estimate = loss_excess(*means[False], np.arange(1.0, 10.0, 1.0), eps)
    assert excess <= 0, f"privacy loss of the mean {estimate:.3f} above epsilon={eps}"


def test_dp_histogram() -> None:
    # One more 'a': only the count of 'a' changes; the loss lives in that coordinate.
    eps, n = 1.0, 3000
    cats = ["a", "b", "c"]
    data = ["a", "b", "c", "a", "c"]

    def run(broken: bool, seed: int):
        e = 2 * eps if broken else eps
        x = sample_loop(lambda g: dp_histogram(data, e, categories=cats, rng=g).value[0], n,
                        seed)
        y = sample_loop(lambda g: dp_histogram(data + ["a"], e, categories=cats,
                                               rng=g).value[0], n, seed + 100)
        return x, y

    assert_private_and_power(run, np.array([0.5, 1.5, 2.5, 3.5, 4.5]), eps, tight=0.9)


def test_dp_quantile() -> None:
    # Smith's exponential mechanism on 1..9 vs 1..9 + {10}, q = 0.9 (among the pairs we
    # tried, the one with the largest loss, ~0.63 epsilon: the sensitivity-1 bound is not
    # reached by add/remove). The broken variant therefore spends 4x the budget.
    eps, n = 1.0, 3000
    data = [float(v) for v in range(1, 10)]

    def run(broken: bool, seed: int):
        e = 4 * eps if broken else eps
        x = sample_loop(lambda g: dp_quantile(data, 0.9, (0, 10), e, rng=g).value, n, seed)
        y = sample_loop(lambda g: dp_quantile(data + [10.0], 0.9, (0, 10), e, rng=g).value,
                        n, seed + 100)
        return x, y

    assert_private_and_power(run, np.arange(0.5, 10.0, 0.5), eps)
