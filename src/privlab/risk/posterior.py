"""Beta-binomial posterior for an attack's membership-guess success rate, and normalised risk.

Each membership guess of attack a at privacy level eps is modelled as Bernoulli(theta), theta
the attack's success rate. With prior Beta(alpha, beta) and k correct guesses out of N the
posterior is Beta(alpha + k, beta + N - k) (conjugacy), mean (alpha + k) / (alpha + beta + N).
(A worked table in the design this module follows does not match this formula: Beta(1,1),
N=10, k=3 has mean 1/3, not 0.375; we implement the mathematics.)

Risk is normalised to [0, 1] as the success rate above the 0.5 guessing rate,
r = max(0, 2 theta - 1), i.e. the attack's membership advantage on a balanced challenge.
Its posterior mean and quantiles have closed forms through the regularised incomplete beta.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from privlab.errors import InvalidInputError

#: Named priors on theta. "uniform" is the default; the others are used by the sensitivity
#: check. "chance" is informative: it centres the success rate on guessing (0.5) with the weight
#: of 20 pseudo-guesses, i.e. it expresses the belief that DP-trained models leak little.
PRIORS: dict[str, tuple[float, float]] = {
    "uniform": (1.0, 1.0),
    "jeffreys": (0.5, 0.5),
    "chance": (10.0, 10.0),
    "pessimistic": (6.0, 2.0),
}


def parse_prior(prior: str | tuple[float, float]) -> tuple[float, float]:
    """A named prior or an explicit (alpha, beta) pair, both > 0."""
    if isinstance(prior, str):
        if prior not in PRIORS:
            raise InvalidInputError(
                f"prior: unknown name {prior!r}; use one of {sorted(PRIORS)} or (alpha, beta)")
        return PRIORS[prior]
    try:
        a, b = (float(v) for v in prior)
    except (TypeError, ValueError):
        raise InvalidInputError("prior: give a name or a pair (alpha, beta) of numbers") from None
    if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)):
        raise InvalidInputError(f"prior: alpha and beta must be finite and > 0, got ({a}, {b})")
    return a, b


def _check_counts(k: int, n: int) -> tuple[int, int]:
    if isinstance(k, bool) or isinstance(n, bool):
        raise InvalidInputError("counts: successes and trials must be integers, not booleans")
    k_i, n_i = int(k), int(n)
    if k_i != k or n_i != n:
        raise InvalidInputError(f"counts: successes and trials must be integers, got ({k}, {n})")
    if n_i < 0 or k_i < 0 or k_i > n_i:
        raise InvalidInputError(f"counts: need 0 <= successes <= trials, got k={k_i}, N={n_i}")
    return k_i, n_i


@dataclass(frozen=True)
class BetaPosterior:
    """Beta(alpha, beta) posterior on an attack's success rate theta."""

    alpha: float
    beta: float
    successes: int = 0
    trials: int = 0

    @classmethod
    def from_counts(cls, successes: int, trials: int,
                    prior: str | tuple[float, float] = "uniform") -> BetaPosterior:
        """Conjugate update: Beta(a + k, b + N - k)."""
        k, n = _check_counts(successes, trials)
        a, b = parse_prior(prior)
        return cls(a + k, b + n - k, k, n)

    @property
    def mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    @property
    def var(self) -> float:
        s = self.alpha + self.beta
        return self.alpha * self.beta / (s * s * (s + 1.0))

    def quantile(self, q: float) -> float:
        return float(stats.beta.ppf(q, self.alpha, self.beta))

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """Equal-tailed credible interval for theta."""
        t = (1.0 - level) / 2.0
        return self.quantile(t), self.quantile(1.0 - t)

    # --- normalised risk r = max(0, 2 theta - 1) ---------------------------------------------
    @property
    def risk_mean(self) -> float:
        """E[max(0, 2 theta - 1)] = 2 (E[theta 1{theta>1/2}] - P(theta>1/2)/2), in closed form."""
        a, b = self.alpha, self.beta
        upper_theta = self.mean * special.betaincc(a + 1.0, b, 0.5)  # E[theta; theta > 1/2]
        upper_p = special.betaincc(a, b, 0.5)  # P(theta > 1/2)
        return float(max(0.0, 2.0 * upper_theta - upper_p))

    def risk_quantile(self, q: float) -> float:
        """Quantile of r: r is a non-decreasing function of theta, so it maps quantiles."""
        return max(0.0, 2.0 * self.quantile(q) - 1.0)

    def sample_risk(self, size: int, rng: np.random.Generator) -> np.ndarray:
        theta = rng.beta(self.alpha, self.beta, size=size)
        return np.maximum(0.0, 2.0 * theta - 1.0)

    def summary(self, level: float = 0.95) -> dict[str, float | int]:
        lo, hi = self.interval(level)
        return {
            "alpha": self.alpha, "beta": self.beta, "successes": self.successes,
            "trials": self.trials, "success_mean": self.mean, "success_lower": lo,
            "success_upper": hi, "risk_mean": self.risk_mean,
            "risk_lower": self.risk_quantile((1 - level) / 2),
            "risk_upper": self.risk_quantile(1 - (1 - level) / 2),
        }


def risk_from_auc(auc: float) -> float:
    """Normalised risk from an attack AUC: 2 AUC - 1 clipped to [0, 1] (point estimate only)."""
    if not (0.0 <= auc <= 1.0):
        raise InvalidInputError(f"auc: must lie in [0, 1], got {auc}")
    return max(0.0, 2.0 * auc - 1.0)


def privacy_loss_from_advantage(adv: float) -> float:
    """The seed's "privacy loss" log(1 + Adv)."""
    return math.log1p(max(0.0, adv))
