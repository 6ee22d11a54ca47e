"""Empirical epsilon: lower bounds on a training run's epsilon from a membership attack.

If training is (eps, delta)-DP, ANY test deciding "member" vs "non-member" for a record has
FPR + e^eps FNR >= 1 - delta and FNR + e^eps FPR >= 1 - delta (Kairouz et al. 2015), so

    eps >= max( ln((1 - delta - FPR) / FNR), ln((1 - delta - FNR) / FPR) ).

FPR and FNR are only estimated from finitely many trials, so the bound comes with an interval:

- Clopper-Pearson: exact binomial bounds FPR_hi, FNR_hi (each at one quarter of the miss
  probability, union bound) give a lower end that holds with probability >= (1 + level) / 2.
  The upper end uses FPR_lo, FNR_lo likewise (often infinite: no upper claim).
- Bayesian (Zanella-Beguelin et al. 2023, "Bayesian estimation of differential privacy"):
  Beta posteriors FPR ~ Beta(a + FP, b + TN), FNR ~ Beta(a + FN, b + TP) (Jeffreys prior
  a = b = 1/2 by default) induce a posterior on the bound; we report its equal-tailed credible
  interval, computed by quadrature (no Monte Carlo noise).

Choosing the threshold by looking at the same trials that estimate (FPR, FNR) would bias the
bound upward. Two honest procedures are offered:

- "holdout" (default): members and non-members are split in half at random; the threshold
  maximising the Clopper-Pearson lower bound on the first half is evaluated on the second.
- "bonferroni": T thresholds fixed in advance (score quantiles), all trials used, every interval
  at level 1 - (1 - level) / T, maximum over thresholds (a multiple-testing-aware interval).

Caveat (documented, not hidden): trials here are the records of ONE trained model (members
chosen at random from the same population as non-members). This is the usual audit of
Carlini et al. / Jagielski et al.; it lower-bounds the epsilon the model "behaves like" on
these records, which the DP guarantee must dominate.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import optimize, stats

from privlab.audit.metrics import check_scores
from privlab.errors import InvalidInputError

DEFAULT_PRIOR = (0.5, 0.5)  # Jeffreys


@functools.lru_cache(maxsize=4)
def _nodes(count: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes mapped to (0, 1) and their weights (cached: costly to build)."""
    x, w = np.polynomial.legendre.leggauss(count)
    return 0.5 * (x + 1.0), 0.5 * w


def epsilon_from_rates(fpr: Any, fnr: Any, delta: float = 0.0) -> np.ndarray:
    """max(0, ln((1-delta-FPR)/FNR), ln((1-delta-FNR)/FPR)), elementwise (inf where a rate is 0
    and the numerator positive)."""
    fpr = np.asarray(fpr, dtype=np.float64)
    fnr = np.asarray(fnr, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.clip(1.0 - delta - fpr, 0, None)) - np.log(fnr)
        b = np.log(np.clip(1.0 - delta - fnr, 0, None)) - np.log(fpr)
    out = np.fmax(np.nan_to_num(a, nan=0.0, posinf=np.inf, neginf=0.0),
                  np.nan_to_num(b, nan=0.0, posinf=np.inf, neginf=0.0))
    return np.maximum(out, 0.0)


def cp_upper(k: Any, n: Any, alpha: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper bound: P(true rate <= bound) >= 1 - alpha."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    return np.where(k >= n, 1.0, stats.beta.ppf(1 - alpha, k + 1, np.maximum(n - k, 1e-12)))


def cp_lower(k: Any, n: Any, alpha: float) -> np.ndarray:
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    return np.where(k <= 0, 0.0, stats.beta.ppf(alpha, np.maximum(k, 1e-12), n - k + 1))


def clopper_pearson_interval(fp: int, n_out: int, fn: int, n_in: int, delta: float,
                             level: float) -> tuple[float, float]:
    """(lower, upper) on the epsilon bound; each end fails with prob <= (1 - level) / 2."""
    tail = (1.0 - level) / 4.0  # two rates per end
    lo = epsilon_from_rates(cp_upper(fp, n_out, tail), cp_upper(fn, n_in, tail), delta)
    hi = epsilon_from_rates(cp_lower(fp, n_out, tail), cp_lower(fn, n_in, tail), delta)
    return float(lo), float(hi)


class _Posterior:
    """Posterior of E = max(0, ln((1-d-F)/N), ln((1-d-N)/F)), F ~ Beta(fa, fb), N ~ Beta(na, nb).

    E <= t  <=>  N >= (1-d-F) e^-t  and  N >= 1 - d - F e^t, so
    P(E <= t) = E_F[ P(N >= max((1-d-F) e^-t, 1 - d - F e^t)) ], integrated over F's
    quantiles with Gauss-Legendre nodes (smooth integrand in u, no sampling noise)."""

    def __init__(self, fp: int, n_out: int, fn: int, n_in: int, delta: float,
                 prior: tuple[float, float], nodes: int = 400) -> None:
        a, b = prior
        self.f = stats.beta(a + fp, b + n_out - fp)
        self.n = stats.beta(a + fn, b + n_in - fn)
        self.delta = delta
        u, self.w = _nodes(nodes)
        self.fq = self.f.ppf(u)

    def cdf(self, t: float) -> float:
        if t < 0:
            return 0.0
        d, f = self.delta, self.fq
        need = np.maximum((1.0 - d - f) * math.exp(-t), 1.0 - d - f * math.exp(t))
        mass = self.n.sf(np.clip(need, 0.0, 1.0))
        return float(np.clip((self.w * mass).sum(), 0.0, 1.0))

    def quantile(self, p: float) -> float:
        if self.cdf(0.0) >= p:
            return 0.0
        hi = 1.0
        while self.cdf(hi) < p:
            hi *= 2.0
            if hi > 1e3:
                return math.inf
        return float(optimize.brentq(lambda t: self.cdf(t) - p, 0.0, hi, xtol=1e-6))

    def mean(self) -> float:
        """Posterior mean by a tensor-product quadrature over both rates' quantiles."""
        u, w = _nodes(200)
        f = self.f.ppf(u)[:, None]
        n = self.n.ppf(u)[None, :]
        vals = epsilon_from_rates(f, n, self.delta)
        ww = w[:, None] * w[None, :]
        return float((ww * vals).sum()) if np.all(np.isfinite(vals)) else math.inf


def bayesian_interval(fp: int, n_out: int, fn: int, n_in: int, delta: float, level: float,
                      prior: tuple[float, float] = DEFAULT_PRIOR) -> tuple[float, float, float]:
    """(lower, upper, posterior mean) of the epsilon bound: equal-tailed credible interval."""
    post = _Posterior(fp, n_out, fn, n_in, delta, prior)
    tail = (1.0 - level) / 2.0
    return post.quantile(tail), post.quantile(1.0 - tail), post.mean()


@dataclass
class EmpiricalEpsilon:
    """An empirical lower bound on epsilon with its intervals and the counts behind it."""

    point: float
    clopper_pearson: tuple[float, float]
    bayesian: tuple[float, float]
    bayesian_mean: float
    level: float
    delta: float
    method: str
    threshold: float
    counts: dict[str, int]
    prior: tuple[float, float] = DEFAULT_PRIOR
    notes: list[str] = field(default_factory=list)

    @property
    def lower(self) -> float:
        """The figure to compare with an accounted epsilon: the CP interval's lower end."""
        return self.clopper_pearson[0]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["lower"] = self.lower
        d["clopper_pearson"] = list(self.clopper_pearson)
        d["bayesian"] = list(self.bayesian)
        d["prior"] = list(self.prior)
        return d


def _check(delta: float, level: float, prior: tuple[float, float]) -> None:
    if not (0 <= delta < 1):
        raise InvalidInputError(f"delta must be in [0, 1), got {delta!r}")
    if not (0 < level < 1):
        raise InvalidInputError(f"level must be in (0, 1), got {level!r}")
    if len(prior) != 2 or min(prior) <= 0:
        raise InvalidInputError(f"prior must be two positive Beta parameters, got {prior!r}")


def _counts_at(a: np.ndarray, b: np.ndarray, thr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(FP, FN) of the rule `score >= thr` for each threshold (vectorised by sorting)."""
    sa, sb = np.sort(a), np.sort(b)
    fn = np.searchsorted(sa, thr, side="left")          # members below the threshold
    fp = sb.size - np.searchsorted(sb, thr, side="left")  # non-members at or above
    return fp, fn


def _candidates(scores: np.ndarray, limit: int = 2000) -> np.ndarray:
    """Midpoints between consecutive distinct scores (a threshold inside a gap generalises to
    fresh trials better than one sitting on an observed score), plus both extremes."""
    uniq = np.unique(scores)
    if uniq.size > limit:
        uniq = np.unique(np.quantile(scores, np.linspace(0, 1, limit)))
    mids = 0.5 * (uniq[1:] + uniq[:-1])
    return np.r_[-np.inf, mids, np.inf]


def empirical_epsilon(scores_in: Any, scores_out: Any, delta: float = 0.0, *,
                      level: float = 0.95, method: str = "holdout",
                      prior: tuple[float, float] = DEFAULT_PRIOR, rng: int = 0,
                      n_thresholds: int = 100) -> EmpiricalEpsilon:
    """Lower bound on epsilon from attack scores (higher = member); see the module docstring.

    `rng` only splits trials for the holdout method (a statistical choice, not noise)."""
    _check(delta, level, prior)
    a, b = check_scores(scores_in, scores_out)
    if method == "holdout":
        if a.size < 4 or b.size < 4:
            raise InvalidInputError("the holdout epsilon needs at least 4 members and 4 "
                                    "non-members (half to choose the threshold, half to test)")
        gen = np.random.default_rng(rng)
        pa, pb = gen.permutation(a), gen.permutation(b)
        a1, a2 = pa[: a.size // 2], pa[a.size // 2:]
        b1, b2 = pb[: b.size // 2], pb[b.size // 2:]
        thr = _candidates(np.r_[a1, b1])
        fp, fn = _counts_at(a1, b1, thr)
        tail = (1.0 - level) / 4.0
        lows = epsilon_from_rates(cp_upper(fp, b1.size, tail), cp_upper(fn, a1.size, tail), delta)
        # ties (e.g. no evidence anywhere): the threshold with the largest |TPR - FPR| on A
        adv = np.abs((1 - fn / a1.size) - fp / b1.size)
        best = float(thr[np.lexsort((-adv, -lows))[0]])
        fp2, fn2 = _counts_at(a2, b2, np.array([best]))
        fp_, fn_, n_out, n_in = int(fp2[0]), int(fn2[0]), b2.size, a2.size
        eff_level = level
        notes = [f"threshold chosen on a random half ({a1.size} members, {b1.size} non-members), "
                 f"rates measured on the other half ({n_in}, {n_out})"]
    elif method == "bonferroni":
        if not (isinstance(n_thresholds, int) and n_thresholds >= 1):
            raise InvalidInputError(f"n_thresholds must be a positive integer, got {n_thresholds}")
        pooled = np.r_[a, b]
        thr = np.unique(np.quantile(pooled, np.linspace(0, 1, n_thresholds + 1)[1:]))
        eff_level = 1.0 - (1.0 - level) / thr.size
        fp, fn = _counts_at(a, b, thr)
        tail = (1.0 - eff_level) / 4.0
        lows = epsilon_from_rates(cp_upper(fp, b.size, tail), cp_upper(fn, a.size, tail), delta)
        i = int(np.argmax(lows))
        best = float(thr[i])
        fp_, fn_, n_out, n_in = int(fp[i]), int(fn[i]), b.size, a.size
        notes = [f"maximum over {thr.size} pre-set score quantiles; intervals at level "
                 f"{eff_level:.6g} (Bonferroni) so the maximum keeps overall level {level:g}"]
    else:
        raise InvalidInputError(f"method must be 'holdout' or 'bonferroni', got {method!r}")
    point = float(epsilon_from_rates(fp_ / n_out, fn_ / n_in, delta))
    cp = clopper_pearson_interval(fp_, n_out, fn_, n_in, delta, eff_level)
    blo, bhi, bmean = bayesian_interval(fp_, n_out, fn_, n_in, delta, eff_level, prior)
    counts = {"fp": fp_, "tn": n_out - fp_, "fn": fn_, "tp": n_in - fn_,
              "n_nonmembers": n_out, "n_members": n_in}
    return EmpiricalEpsilon(point, cp, (blo, bhi), bmean, level, delta, method, best, counts,
                            tuple(prior), notes)


def max_attainable(n_in: int, n_out: int, level: float = 0.95, delta: float = 0.0) -> float:
    """The largest CP lower bound these trial counts could ever give (a perfect attack):
    with n trials the bound saturates near ln(n / 3.7) however strong the attack."""
    tail = (1.0 - level) / 4.0
    return float(epsilon_from_rates(cp_upper(0, n_out, tail), cp_upper(0, n_in, tail), delta))
