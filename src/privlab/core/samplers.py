"""Grid-valued noise samplers: discrete Laplace and discrete Gaussian, vectorised.

Why integers: textbook floating-point Laplace leaks the input through the low-order bits
of the output (Mironov 2012). Here noise is an integer number of grid steps, added to a
true value that was first rounded onto the same grid, so every released value is
`k * granularity` for an integer k and carries no input-dependent low bits.

Discrete Laplace with scale t (P[x] proportional to exp(-|x|/t)) is sampled EXACTLY, in
integer arithmetic (Canonne, Kamath & Steinke 2020, Algorithms 1 and 2: Bernoulli(exp(-gamma))
by comparisons of uniform integers, a geometric magnitude, a random sign, "negative zero"
rejected), so pure epsilon-DP claims built on it hold exactly: no float rounding and no
truncated tail. Vectors of more than 32 draws take a faster exact route to the same
distribution (issue 32; `privlab.core.laplace_table`): the geometric magnitude is split into a
fixed geometric, inverted from 32-bit words against exact integer thresholds, plus a nearly
uniform remainder, about two 64-bit words per draw instead of a dozen. The discrete Gaussian
follows CKS Algorithm 3, rejection sampling from the CKS discrete Laplace proposal; its
acceptance step is computed in float64, which can move the output distribution by at most
`GAUSSIAN_SAMPLER_TV` in total variation per sample, and `sampler_delta` turns that into the
delta the Gaussian mechanism charges inside its stated delta. Both run on whatever bit
generator the caller passes (a CSPRNG by default, see `privlab.core.rng`); NumPy's bounded
integers and raw words are exactly uniform given uniform bits. A fixed seed gives a fixed
output (the fast route changed the seeded streams of vectors above 32 draws, not their
distribution).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from scipy.special import ndtr

from privlab.core.bit_pool import _BitPool, pool_for
from privlab.core.laplace_table import (
    _discrete_laplace_fast,
    _discrete_laplace_scalar_fast,
)
from privlab.core.rng import RngLike, make_rng
from privlab.errors import InvalidInputError


def _check_scale(scale: float, name: str) -> float:
    if not (isinstance(scale, (int, float, np.floating)) and math.isfinite(scale) and scale > 0):
        raise InvalidInputError(f"{name} must be a finite number > 0, got {scale!r}")
    return float(scale)


#: Largest noise scale (in grid steps) the int64 samplers accept: sums of a grid index and
#: noise then stay far from int64 overflow. Finer grids at larger scales are refused.
MAX_SCALE_STEPS = 2.0**52


def _bernoulli_exp(u: np.ndarray | None, t: int, size: int, gen: np.random.Generator
                   ) -> np.ndarray:
    """Exact Bernoulli(exp(-u/t)) per lane, u integers in [0, t] (None: gamma = 1).

    CKS 2020 Algorithm 1: K = 1, 2, ...; go on while Bernoulli(gamma / K); return K odd.
    Bernoulli(gamma / K) = Bernoulli(1/K) and Bernoulli(u/t), each an exact comparison of a
    uniform integer (NumPy's bounded integers are exactly uniform), so no float is involved.
    All lanes still looping share K, so each step is one vectorised draw.
    """
    result = np.ones(size, dtype=bool)
    if u is None:
        active = np.arange(size)  # Bernoulli(1/1) always passes
    else:
        active = np.flatnonzero(gen.integers(0, t, size=size, dtype=np.int64) < u)
    k = 2
    while active.size:
        result[active] = bool(k & 1)  # a lane that stops at this K returns "K odd"
        step = gen.integers(0, k, size=active.size, dtype=np.int64) == 0
        if u is not None:
            step &= gen.integers(0, t, size=active.size, dtype=np.int64) < u[active]
        active = active[step]
        k += 1
    return result


def _bernoulli_exp_scalar(u: int, t: int, pool: _BitPool) -> bool:
    """Exact Bernoulli(exp(-u/t)), u in [0, t] (CKS Algorithm 1), one lane."""
    k = 1
    while pool.below(k) == 0 and pool.below(t) < u:
        k += 1
    return bool(k & 1)


def _discrete_laplace_scalar(t: int, s: int, pool: _BitPool) -> int:
    """One exact draw of CKS Algorithm 2 at scale t / s, in Python integers."""
    while True:
        u = pool.below(t)
        if not _bernoulli_exp_scalar(u, t, pool):
            continue
        v = 0
        while _bernoulli_exp_scalar(1, 1, pool):
            v += 1
        y = (u + t * v) // s
        if pool.below(2):
            if y == 0:
                continue
            return -y
        return y


def _geometric_steps(u: np.ndarray, v: np.ndarray, t: int, s: int) -> np.ndarray:
    """floor((u + t v) / s) exactly (Python integers for the lanes int64 could overflow)."""
    y = np.zeros(u.size, dtype=np.int64)
    big = v >= 512  # u, t < 2^53 and v < 512 keep u + t v below 2^62
    small = ~big
    if s <= 2**62:
        y[small] = (u[small] + t * v[small]) // s
    # else u + t v < 2^62 < s: floor is 0 on the small lanes
    for i in np.flatnonzero(big):  # probability e^-512 per lane: kept exact, never fast
        y[i] = (int(u[i]) + t * int(v[i])) // s
    return y


def laplace_scale_at_least(l1: float, epsilon: float) -> float:
    """A float scale >= the exact l1 / epsilon: the rounded quotient plus one ulp (rounding
    to nearest is off by at most half an ulp). The exact discrete Laplace sampler then runs at
    a scale no smaller than the true ratio, so the privacy loss is at most epsilon exactly;
    every caller that derives a discrete-Laplace scale from (sensitivity, epsilon) uses it."""
    return math.nextafter(l1 / epsilon, math.inf)


def discrete_laplace(scale: float, size: int | tuple[int, ...] | None = None,
                     rng: RngLike = None) -> np.ndarray:
    """Integers with P[x] = (1 - a) / (1 + a) a^|x|, a = exp(-1 / scale), sampled EXACTLY.

    CKS 2020 Algorithm 2 in integer arithmetic: the float `scale` is the dyadic rational
    t / s (t = its 53-bit mantissa, s a power of two) exactly; U uniform on {0..t-1} is kept
    with probability exp(-U/t), V counts Bernoulli(exp(-1)) successes, |X| = floor((U + t V)
    / s), a random sign, "negative zero" rejected. Every step compares uniform integers, so
    the output distribution is the ideal one for this scale (no float rounding, no truncated
    tail): a mechanism with scale >= D / epsilon is exactly epsilon-DP.
    """
    t, s, gen = _laplace_setup(scale, rng)
    if size is None:  # one draw (the gateway's scalar query): no list, no array
        pool = pool_for(gen)
        return np.int64(_one_draw(pool)(t, s, pool))
    n = int(np.prod(size))
    if n <= _SMALL:
        out = np.array(_small_laplace(t, s, n, gen), dtype=np.int64)
    else:
        out = _discrete_laplace_fast(t, s, n, gen)
    return out.reshape(size)


def discrete_laplace_ints(scale: float, n: int, rng: RngLike = None) -> list[int]:
    """`discrete_laplace(scale, size=n, rng=rng).tolist()`: the same checks, the same draws
    from `rng`, the same values; a short vector is never an array (the gateway's small
    GROUP BY answers, issue 32)."""
    t, s, gen = _laplace_setup(scale, rng)
    if n <= _SMALL:
        return _small_laplace(t, s, n, gen)
    return _discrete_laplace_fast(t, s, n, gen).tolist()  # type: ignore[no-any-return]


#: up to this many draws the samplers run in Python integers: they beat dozens of tiny NumPy
#: calls
_SMALL = 32


def _laplace_setup(scale: float, rng: RngLike) -> tuple[int, int, np.random.Generator]:
    """The checked scale as t / s exactly, and the generator."""
    # memoised for floats (the calibrated scales); anything else is checked as it comes
    # (an unhashable or odd value gets the check's own message)
    t, s = _checked_fraction(scale) if type(scale) is float else \
        _checked_fraction.__wrapped__(scale)
    return t, s, make_rng(rng)


@functools.lru_cache(maxsize=1024)
def _checked_fraction(scale: float) -> tuple[int, int]:
    """`scale` checked, as t / s exactly (`_scale_fraction`): a pure function of the scale,
    memoised (a caller draws again and again at its calibrated scale; a refusal raises and
    is not cached)."""
    scale = _check_scale(scale, "scale")
    if scale > MAX_SCALE_STEPS:
        raise InvalidInputError(f"noise scale {scale:g} grid steps exceeds 2^52: the grid is too "
                                "fine for this noise; pass a coarser granularity")
    return _scale_fraction(scale)


def _small_laplace(t: int, s: int, n: int, gen: np.random.Generator) -> list[int]:
    """n draws at scale t / s in Python integers, from one bit pool."""
    pool = pool_for(gen)
    draw = _one_draw(pool)
    return [draw(t, s, pool) for _ in range(n)]


def _one_draw(pool: _BitPool) -> Callable[[int, int, _BitPool], int]:
    """The scalar sampler for this pool: on the CSPRNG (a stream nobody reproduces) the
    table method of `_discrete_laplace_fast` lane by lane, a third of the bits; on a seeded
    generator CKS Algorithm 2 (`_discrete_laplace_scalar`), whose recorded streams (seeded
    answers, tests) stay as they were. Both are exact."""
    return _discrete_laplace_scalar_fast if pool.raw else _discrete_laplace_scalar


def _scale_fraction(scale: float) -> tuple[int, int]:
    """(t, s) with t / s == scale exactly: t its 53-bit mantissa, s a power of two."""
    mantissa, exponent = math.frexp(scale)
    return int(mantissa * 2.0**53), 1 << (53 - exponent)


def _discrete_laplace_cks(scale: float, n: int, gen: np.random.Generator) -> np.ndarray:
    """n exact draws by CKS Algorithm 2 lane by lane (the sampler before issue 32: about a
    dozen words per draw). The discrete Gaussian still proposes from it, which keeps its
    seeded streams (and the recorded AIM / MST outputs) as they were."""
    t, s = _scale_fraction(scale)
    out = np.empty(n, dtype=np.int64)
    if n <= 32:
        pool = _BitPool(gen)
        out[:] = [_discrete_laplace_scalar(t, s, pool) for _ in range(n)]
        return out
    pending = np.arange(n)
    while pending.size:
        m = pending.size
        u = gen.integers(0, t, size=m, dtype=np.int64)
        kept = np.flatnonzero(_bernoulli_exp(u, t, m, gen))
        u = u[kept]
        v = np.zeros(kept.size, dtype=np.int64)
        live = np.arange(kept.size)
        while live.size:
            live = live[_bernoulli_exp(None, 1, live.size, gen)]
            v[live] += 1
        y = _geometric_steps(u, v, t, s)
        neg = gen.integers(0, 2, size=kept.size, dtype=bool)
        ok = ~(neg & (y == 0))
        out[pending[kept[ok]]] = np.where(neg[ok], -y[ok], y[ok])
        done = np.zeros(m, dtype=bool)
        done[kept[ok]] = True
        pending = pending[~done]
    return out


#: A bound on the total variation distance between `discrete_gaussian`'s output and the exact
#: discrete Gaussian, per sample. The proposal (`discrete_laplace`) is exact; the acceptance
#: probability exp(-(|y| - sigma^2/t)^2 / (2 sigma^2)) is computed in float64 (absolute error
#: below ~5 x 2^-53 for every y: a few roundings of the argument, amplified at most by
#: e^-z (sqrt(2z) + z) <= 1, plus exp's own) and compared with a 53-bit uniform (2^-53 more):
#: eta <= 6 x 2^-53 < 7e-16 per proposal, and TV <= 2 eta / P[accept] with P[accept] >= 0.44
#: (its minimum over sigma, near sigma = 0.3). 1e-14 keeps a factor 2.9 of margin over
#: 2 x 7e-16 / 0.44 = 3.2e-15.
GAUSSIAN_SAMPLER_TV = 1e-14


def sampler_delta(epsilon: float, samples: int) -> float:
    """The delta that `samples` float-accepted discrete-Gaussian draws can add to an
    (epsilon, delta) claim: P_impl[S] <= P[S] + TV <= e^eps P'[S] + delta + TV <=
    e^eps P_impl'[S] + delta + (1 + e^eps) TV, with TV <= samples x GAUSSIAN_SAMPLER_TV."""
    return (1.0 + math.exp(min(epsilon, 700.0))) * max(int(samples), 1) * GAUSSIAN_SAMPLER_TV


def discrete_gaussian(sigma: float, size: int | tuple[int, ...] | None = None,
                      rng: RngLike = None) -> np.ndarray:
    """Integers with P[x] proportional to exp(-x^2 / (2 sigma^2)) (CKS 2020, Algorithm 3)."""
    sigma = _check_scale(sigma, "sigma")
    gen = make_rng(rng)
    n = 1 if size is None else int(np.prod(size))
    t = math.floor(sigma) + 1
    sigma2 = sigma * sigma
    if size is None:
        # One scalar query: propose one integer-scale Laplace at a time (about two proposals)
        # instead of a vector batch of 17; the same proposal and acceptance step. (Vectors,
        # even short ones, keep the batch path and its seeded stream.)
        pool = pool_for(gen)
        draw = _one_draw(pool)
        while True:
            y = draw(t, 1, pool)
            if gen.random() < math.exp(-((abs(y) - sigma2 / t) ** 2) / (2.0 * sigma2)):
                return np.int64(y)
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        # The acceptance rate is at least ~0.44 (0.76 for large sigma); oversample to finish fast.
        batch = max(16, int((n - filled) * 1.7) + 16)
        y = _discrete_laplace_cks(float(t), batch, gen)
        accept_p = np.exp(-((np.abs(y) - sigma2 / t) ** 2) / (2.0 * sigma2))
        keep = y[gen.random(batch) < accept_p]
        take = min(len(keep), n - filled)
        out[filled:filled + take] = keep[:take]
        filled += take
    if size is None:
        return out[0]
    return out.reshape(size)


#: From this sigma on, discrete-Gaussian tails come from the Euler-Maclaurin formula (O(1))
#: instead of summing the pmf (O(sigma)); below it, direct summation costs < 0.2M terms.
_EULER_MACLAURIN_SIGMA = 4096.0


def _tail_direct(sigma: float, starts: list[int]) -> list[float]:
    """P[Y >= m] for Y ~ N_Z(0, sigma^2), by summing the normalised pmf over |k| <= 14 sigma.

    The mass beyond 14 sigma (< 1e-44) is dropped; the caller adds 1e-40 to cover it.
    """
    radius = int(math.ceil(14 * sigma)) + 1
    ks = np.arange(-radius, radius + 1, dtype=np.float64)
    w = np.exp(-(ks * ks) / (2 * sigma * sigma))
    w /= w.sum()
    tail = np.cumsum(w[::-1])[::-1]  # tail[i] = P[Y >= ks[i]], summed from the small end
    return [0.0 if m > radius else 1.0 if m < -radius else float(tail[m + radius])
            for m in starts]


def _tail_euler_maclaurin(sigma: float, m: int) -> tuple[float, float]:
    """P[Y >= m] for Y ~ N_Z(0, sigma^2), sigma >= 4096, and a bound on its absolute error.

    Euler-Maclaurin to order p = 3: sum_{k>=m} f(k) = int_m^inf f + f(m)/2 - sum_j B_2j/(2j)!
    f^(2j-1)(m) + R, with f^(n)(t) = (-1/sigma)^n He_n(t/sigma) f(t) and |R| <= 1/30240
    int |f^(6)| <= 1/30240 * sqrt(2 pi 720) / sigma^5. The normaliser is sigma sqrt(2 pi)
    exactly in float64 (Poisson summation: the correction is exp(-2 pi^2 sigma^2) = 0).
    """
    x = m / sigma
    z = sigma * math.sqrt(2 * math.pi)
    f = math.exp(-x * x / 2)
    he3 = x**3 - 3 * x
    he5 = x**5 - 10 * x**3 + 15 * x
    corr = f * (0.5 + x / (12 * sigma) - he3 / (720 * sigma**3) + he5 / (30240 * sigma**5))
    prob = float(ndtr(-x)) + corr / z
    err = math.sqrt(2 * math.pi * 720) / (30240 * sigma**5) / z
    return min(max(prob, 0.0), 1.0), err


def discrete_gaussian_delta(sigma: float, sensitivity: int, epsilon: float) -> float:
    """Exact delta of the 1-D discrete Gaussian for integer sensitivity (CKS 2020, Theorem 7).

    delta = P[Y > eps sigma^2 / D - D/2] - e^eps P[Y > eps sigma^2 / D + D/2], Y ~ N_Z(0, sigma^2).
    Tails are summed directly for small sigma and by Euler-Maclaurin (with its remainder
    bound added) for large sigma; 1e-40 is added for the truncated or rounded mass.
    """
    sigma = _check_scale(sigma, "sigma")
    if float(sensitivity) != int(sensitivity) or int(sensitivity) < 1:
        raise InvalidInputError(f"sensitivity must be a positive integer (grid steps), "
                                f"got {sensitivity!r}")
    d = int(sensitivity)
    a = epsilon * sigma * sigma / d
    # P[Y > x] = P[Y >= floor(x) + 1]
    starts = [math.floor(a - d / 2) + 1, math.floor(a + d / 2) + 1]
    if sigma < _EULER_MACLAURIN_SIGMA:
        p1, p2 = _tail_direct(sigma, starts)
        err = 0.0
    else:
        (p1, e1), (p2, e2) = (_tail_euler_maclaurin(sigma, m) for m in starts)
        err = e1 + (math.exp(epsilon) * e2 if epsilon < 700 else math.inf)
    second = math.exp(epsilon + math.log(p2)) if p2 > 0 else 0.0
    return max(p1 - second, 0.0) + err + 1e-40


def power_of_two_at_most(x: float) -> float:
    """The largest power of two <= x (x > 0)."""
    if not (math.isfinite(x) and x > 0):
        raise InvalidInputError(f"granularity base must be a finite number > 0, got {x!r}")
    return math.ldexp(1.0, math.floor(math.log2(x)))


def round_to_grid(values: np.ndarray | float, granularity: float) -> np.ndarray:
    """Round to the nearest integer multiple of `granularity`; returns the integer multipliers.

    Refuses values more than 2^52 grid steps from zero (int64 and float64 would round them).
    """
    arr = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise InvalidInputError("values to release must be finite (no NaN or infinity)")
    steps = np.rint(arr / granularity)
    if steps.size and float(np.max(np.abs(steps))) > 2.0**52:
        raise InvalidInputError(f"a value is more than 2^52 grid steps of {granularity:g} from 0; "
                                "pass a coarser granularity or rescale the data")
    return steps.astype(np.int64)
