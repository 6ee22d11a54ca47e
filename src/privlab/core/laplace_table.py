"""The table method for the exact discrete Laplace (issue 32): the same distribution as CKS
Algorithm 2 (`privlab.core.samplers`), from about a third of the random bits.

Vectors of more than 32 draws take it in NumPy (`_discrete_laplace_fast`); on the CSPRNG the
scalar path and short vectors take it lane by lane in Python integers
(`_discrete_laplace_scalar_fast`). The derivation is below.
"""

from __future__ import annotations

import bisect
import decimal
import fractions
import math

import numpy as np

from privlab.core.bit_pool import _BitPool

# ------------------------------------------------------------ fast exact discrete Laplace
#
# |X| = floor(N / (2^K s)) with N = t W + F ~ Geometric(exp(-1 / (2^K t))) on all integers
# >= 0: W ~ Geometric(exp(-2^-K)) (a fixed distribution, sampled by exact table inversion of
# 64-bit words) and F on {0..t-1} with P[F] ~ exp(-F / (2^K t)) (a uniform kept with
# probability exp(-F / (2^K t)) >= exp(-2^-K): CKS Algorithm 1, which stops after one
# 4-bit comparison 15 times in 16). Every n = t W + F has exactly one (W, F), so
# P[N = n] ~ exp(-W / 2^K) exp(-F / (2^K t)) = exp(-n / (2^K t)), and
# P[|X| >= g] = P[N >= 2^K s g] = exp(-g s / t) = exp(-g / scale): the same distribution as
# CKS Algorithm 2, with about two 64-bit words per draw instead of a dozen.

_K = 4  # W's parameter is exp(-1/16)
_BUCKET_BITS = 12  # the table of W is indexed by a word's top 12 bits


def _exp_floor(w: int, bits: int) -> int:
    """floor(2^bits exp(-w / 2^_K)) exactly: a correctly rounded decimal exp, its error bound,
    and more digits until the bound cannot move the floor."""
    prec = bits * 30 // 100 + 40
    while True:
        with decimal.localcontext() as ctx:
            ctx.prec = prec
            v = fractions.Fraction((decimal.Decimal(-w) / (1 << _K)).exp())  # w / 16 is exact
        err = fractions.Fraction(1, 10 ** (prec - 2))  # >> half an ulp of a value < 1
        lo, hi = math.floor((v - err) * (1 << bits)), math.floor((v + err) * (1 << bits))
        if lo == hi:
            return lo
        prec *= 2


class _WTable:
    """Exact inversion of W ~ Geometric(exp(-2^-K)) from uniform 32-bit words X.

    U = X / 2^32 + (later bits) is uniform on [0, 1) and W = #{w >= 1: U < p_w}, p_w =
    exp(-w/2^K). With T_w = floor(2^32 p_w): X < T_w implies U < p_w, X > T_w implies
    U > p_w, and X == T_w (probability 2^-32 per lane) is settled by comparing further words
    with further bits of p_w (`settle`). Buckets of the top 12 bits hold at most one threshold
    from bucket `dense` on, so two gathers and one comparison answer almost every lane; the
    lanes below (U < ~1/300) search the whole table. The table stops at p_w >= 2^-16 (so
    consecutive thresholds differ); W >= wmax is wmax plus a fresh W (memorylessness).
    """

    BITS = 32

    def __init__(self) -> None:
        thresholds = []
        w = 1
        while True:
            t_w = _exp_floor(w, self.BITS)
            if t_w < 1 << (self.BITS // 2):
                break
            thresholds.append(t_w)
            w += 1
        self.wmax = len(thresholds)  # T_1 .. T_wmax, strictly decreasing
        self.ascending = np.array(thresholds[::-1], dtype=np.uint32)
        self._ascending_list = thresholds[::-1]  # Python ints, for `draw_one`
        shift = self.BITS - _BUCKET_BITS
        nb = 1 << _BUCKET_BITS
        counts = np.bincount([x >> shift for x in thresholds], minlength=nb)
        self.dense = int(np.flatnonzero(counts > 1).max()) + 1  # buckets >= dense: <= 1
        self.dense_floor = np.uint32(self.dense << shift)  # the words of the dense buckets
        self.base = np.zeros(nb, dtype=np.int64)  # W for X above the bucket's threshold
        self.thr = np.zeros(nb, dtype=np.uint32)  # the bucket's threshold (0: none)
        for b in range(self.dense, nb):
            top = ((b + 1) << shift) - 1
            self.base[b] = sum(1 for x in thresholds if x > top)
            inside = [x for x in thresholds if (b << shift) <= x <= top]
            if inside:
                self.thr[b] = inside[0]

    def settle(self, x: int, w: int, pool: _BitPool) -> bool:
        """U < p_w, given that U's first 32 bits equal T_w exactly."""
        acc, bits = x, self.BITS
        while True:
            acc = (acc << 64) | pool.below(1 << 64)
            bits += 64
            t_w = _exp_floor(w, bits)
            if acc != t_w:
                return acc < t_w

    def draw_one(self, pool: _BitPool) -> int:
        """One exact draw of W from the pool's bits: `sample` and `_slow` for one lane (a
        32-bit word, the thresholds above it counted by bisection, a tie settled, the tail
        redrawn)."""
        ascending = self._ascending_list
        x = pool.below(1 << self.BITS)
        w = self.wmax - bisect.bisect_right(ascending, x)  # #{T_w > x}
        pos = min(bisect.bisect_left(ascending, x), self.wmax - 1)
        if ascending[pos] == x:  # x == T_(w+1): settle U < p_(w+1) with more bits
            w += int(self.settle(x, w + 1, pool))
        if w >= self.wmax:  # U < p_wmax: W = wmax + a fresh W
            return self.wmax + self.draw_one(pool)
        return w

    def sample(self, n: int, gen: np.random.Generator) -> np.ndarray:
        """n exact draws of W."""
        x = gen.bit_generator.random_raw(-(-n // 2)).view(np.uint32)[:n]
        b = (x >> np.uint32(self.BITS - _BUCKET_BITS)).astype(np.intp)
        thr = np.take(self.thr, b)
        w = np.take(self.base, b)
        w += x < thr
        # dense buckets, or a word on its bucket's threshold (thr 0 never equals x there)
        odd = np.flatnonzero((x < self.dense_floor) | (x == thr))
        if odd.size:
            w[odd] = self._slow(x[odd], gen)
        return w

    def _slow(self, x: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        """Lanes in the dense buckets or on a threshold: search, settle ties, redraw tails."""
        w = self.wmax - np.searchsorted(self.ascending, x, side="right")  # #{T_w > x}
        pos = np.minimum(np.searchsorted(self.ascending, x, side="left"), self.wmax - 1)
        pool = _BitPool(gen)
        for i in np.flatnonzero(self.ascending[pos] == x):  # x == T_(w+1): settle U < p_(w+1)
            w[i] += int(self.settle(int(x[i]), int(w[i]) + 1, pool))
        tail = np.flatnonzero(w >= self.wmax)  # U < p_wmax: W = wmax + a fresh W
        if tail.size:
            w[tail] = self.wmax + self.sample(tail.size, gen)
        return w.astype(np.int64)


_W_TABLE: _WTable | None = None


def _w_table() -> _WTable:
    global _W_TABLE
    if _W_TABLE is None:
        _W_TABLE = _WTable()
    return _W_TABLE


def _one_in_16(size: int, gen: np.random.Generator) -> np.ndarray:
    """`size` independent events of probability exactly 1/16: a random octet below 16 (its
    top 4 bits zero), octets cut from raw 64-bit words."""
    return gen.bit_generator.random_raw(-(-size // 8)).view(np.uint8)[:size] < 16


def _bernoulli_exp_tilted(u: np.ndarray, t: int, gen: np.random.Generator) -> np.ndarray:
    """Exact Bernoulli(exp(-u / (2^K t))) per lane, u integers in [0, t): CKS Algorithm 1 with
    gamma = u / (2^K t). Bernoulli(gamma) is V < u for V uniform on {0..2^K t - 1}, i.e.
    V = Q t + R with Q uniform below 2^K and R below t: Q == 0 and R < u. Q is 4 bits, so
    15 lanes in 16 stop at K = 1 (accept) without drawing R."""
    result = np.ones(u.size, dtype=bool)
    active = np.flatnonzero(_one_in_16(u.size, gen))
    active = active[gen.integers(0, t, size=active.size, dtype=np.int64) < u[active]]
    k = 2
    while active.size:
        result[active] = bool(k & 1)
        m = active.size
        step = (gen.integers(0, k, size=m, dtype=np.int64) == 0) & _one_in_16(m, gen)
        step &= gen.integers(0, t, size=m, dtype=np.int64) < u[active]
        active = active[step]
        k += 1
    return result


def _tilted_uniform(t: int, size: int, gen: np.random.Generator) -> np.ndarray:
    """F on {0..t-1} with P[F] proportional to exp(-F / (2^K t)), by rejection (>= 94% kept;
    the rejected lanes are redrawn)."""
    out = gen.integers(0, t, size=size, dtype=np.int64)
    redo = np.flatnonzero(~_bernoulli_exp_tilted(out, t, gen))
    if redo.size:
        out[redo] = _tilted_uniform(t, redo.size, gen)
    return out


def _bernoulli_exp_tilted_scalar(u: int, t: int, pool: _BitPool) -> bool:
    """`_bernoulli_exp_tilted` of one lane: Bernoulli(exp(-u / (2^K t))), u in [0, t), by CKS
    Algorithm 1; Bernoulli(u / (2^K t k)) is V < u for V uniform below k 2^K t, i.e. a
    uniform below k and one below 2^K both zero and one below t under u."""
    k = 1
    while pool.below(k) == 0 and pool.below(1 << _K) == 0 and pool.below(t) < u:
        k += 1
    return bool(k & 1)


def _discrete_laplace_scalar_fast(t: int, s: int, pool: _BitPool) -> int:
    """`_discrete_laplace_fast` of one lane in Python integers: |X| = floor((t W + F) /
    (2^K s)), a random sign, "negative zero" drawn again. About 120 bits per draw against
    CKS Algorithm 2's ~400 (`_discrete_laplace_scalar`)."""
    e = s.bit_length() - 1 + _K
    table = _w_table()
    while True:
        w = table.draw_one(pool)
        while True:  # F: a uniform below t kept with probability exp(-F / (2^K t))
            f = pool.below(t)
            if _bernoulli_exp_tilted_scalar(f, t, pool):
                break
        y = (t * w + f) >> e
        if pool.below(2):
            if y:
                return -y
            continue
        return y


def _magnitudes(t: int, w: np.ndarray, f: np.ndarray, e: int) -> np.ndarray:
    """floor((t W + F) / 2^e) exactly: uint64 while W < 2^10 (t W + F < 2^63 + 2^53), Python
    integers beyond (probability e^-64 per lane). Overwrites w (int64 >= 0, viewed unsigned)."""
    big = np.flatnonzero(w >= 1024) if w.size and w.max() >= 1024 else np.arange(0)
    exact = [(t * int(w[i]) + int(f[i])) >> e for i in big]
    n = w.view(np.uint64)
    n *= np.uint64(t)  # wraps only on the `big` lanes, replaced below
    n += f.view(np.uint64)
    if e < 64:
        n >>= np.uint64(e)
    else:
        n[:] = 0
    y = n.view(np.int64)
    y[big] = exact
    return y


#: Lanes per block of `_discrete_laplace_fast`: its temporaries (a dozen arrays) then stay in
#: the CPU cache instead of being allocated and faulted in at full size (about 1.3x faster).
_BLOCK = 1 << 17


def _discrete_laplace_fast(t: int, s: int, n: int, gen: np.random.Generator) -> np.ndarray:
    """n exact draws at scale t / s (s a power of two): |X| = floor((t W + F) / (2^K s)), a
    random sign, "negative zero" redrawn (CKS Algorithm 2's rule)."""
    e = s.bit_length() - 1 + _K
    table = _w_table()
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, _BLOCK):
        m = min(_BLOCK, n - start)
        y = _magnitudes(t, table.sample(m, gen), _tilted_uniform(t, m, gen), e)
        neg = gen.integers(0, 2, size=m, dtype=bool)
        sign = neg.view(np.int8) * np.int8(-2)
        sign += np.int8(1)  # -1 where neg, else 1
        y *= sign
        redo = np.flatnonzero(neg & (y == 0))  # "negative zero": the lane is drawn again
        if redo.size:
            y[redo] = _discrete_laplace_fast(t, s, redo.size, gen)
        out[start:start + m] = y
    return out
