"""k-fold composition of one (epsilon, delta)-DP mechanism in closed form:
`advanced_composition` (Dwork-Rothblum-Vadhan 2010) and `optimal_homogeneous_composition`
(Kairouz-Oh-Viswanath 2015, exact for k-fold (eps, delta)-DP)."""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.special import gammaln, logsumexp

from privlab.core.accounting.base import _check_count
from privlab.core.guarantee import PrivacyGuarantee, check_delta, check_epsilon
from privlab.errors import InvalidInputError


def _check_homogeneous(epsilon: float, delta: float, k: int, delta_prime: float) -> tuple:
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    k = _check_count(k, "k")
    delta_prime = check_delta(delta_prime, "delta_prime")
    if delta_prime <= 0:
        raise InvalidInputError("delta_prime must be > 0 (the slack, e.g. 1e-6)")
    if k * delta + delta_prime >= 1:
        raise InvalidInputError(
            f"k*delta + delta_prime = {k * delta + delta_prime:.3g} >= 1: no guarantee; "
            "lower delta or delta_prime"
        )
    return epsilon, delta, k, delta_prime


def advanced_composition(
    epsilon: float,
    delta: float,
    k: int,
    delta_prime: float,
    *,
    neighbouring: str = "add_remove_record",
    model: str = "central",
    mechanism: str = "",
) -> PrivacyGuarantee:
    """k-fold adaptive composition of (eps, delta)-DP (Dwork, Rothblum & Vadhan 2010).

    eps' = sqrt(2k ln(1/delta')) eps + k eps (e^eps - 1), delta_total = k delta + delta'.
    It is only better than basic composition (k eps) for many small-epsilon steps.
    """
    epsilon, delta, k, delta_prime = _check_homogeneous(epsilon, delta, k, delta_prime)
    eps_total = math.sqrt(2 * k * math.log(1 / delta_prime)) * epsilon + k * epsilon * math.expm1(
        epsilon
    )
    return PrivacyGuarantee(
        epsilon=eps_total,
        delta=k * delta + delta_prime,
        neighbouring=neighbouring,
        model=model,  # type: ignore[arg-type]
        mechanism=mechanism or f"{k} x ({epsilon:g}, {delta:g})-DP",
        accountant="advanced composition (Dwork-Rothblum-Vadhan 2010)",
        notes=(
            f"advanced composition of k={k} ({epsilon:g}, {delta:g})-DP steps with slack "
            f"delta'={delta_prime:g}; basic composition gives epsilon={k * epsilon:.4g}",
        ),
    )


def _log_rr_hockey_stick(eps_prime: float, epsilon: float, k: int) -> float:
    """log delta(eps') of the k-fold randomized-response pair (the (eps, 0) extremal one)."""
    lvals = np.arange(k + 1, dtype=float)
    # outcome with l "flipped" coordinates: P = e^{(k-l)eps}/(1+e^eps)^k, Q = e^{l eps}/(...)
    gap = (k - 2 * lvals) * epsilon - eps_prime  # log(P/Q) - eps'
    keep = gap > 0
    if not keep.any():
        return -math.inf
    lv = lvals[keep]
    log_terms = (
        gammaln(k + 1) - gammaln(lv + 1) - gammaln(k - lv + 1)
        + (k - lv) * epsilon - k * np.logaddexp(0.0, epsilon)
        + np.log(-np.expm1(-gap[keep]))
    )
    return float(logsumexp(log_terms))


def optimal_homogeneous_composition(
    epsilon: float,
    delta: float,
    k: int,
    delta_prime: float,
    *,
    neighbouring: str = "add_remove_record",
    model: str = "central",
    mechanism: str = "",
) -> PrivacyGuarantee:
    """Tightest epsilon for k-fold composition of (eps, delta)-DP (Kairouz, Oh & Viswanath 2015).

    Every (eps, delta)-DP mechanism is dominated by one 4-outcome pair, whose k-fold product
    has delta(eps') = 1 - (1-delta)^k (1 - delta_RR(eps')) exactly. We return the smallest eps'
    with delta(eps') <= k delta + delta' (the same total delta as `advanced_composition`), so
    the result is never worse than advanced or basic composition.
    """
    epsilon, delta, k, delta_prime = _check_homogeneous(epsilon, delta, k, delta_prime)
    if k > 1_000_000:
        raise InvalidInputError(f"k must be <= 1,000,000 for the exact computation, got {k}")
    target = k * delta + delta_prime
    log_keep = k * math.log1p(-delta) if delta > 0 else 0.0  # log (1-delta)^k

    def excess(eps_prime: float) -> float:
        log_rr = _log_rr_hockey_stick(eps_prime, epsilon, k)
        total = -math.expm1(log_keep + math.log1p(-math.exp(log_rr)) if log_rr > -math.inf
                            else log_keep)
        return total - target

    upper = k * epsilon  # delta_RR(k eps) = 0, so the total is 1-(1-delta)^k <= k delta
    if excess(0.0) <= 0:
        eps_opt = 0.0
    else:
        eps_opt = brentq(excess, 0.0, upper, xtol=1e-12 * max(upper, 1.0), rtol=1e-12)
        # brentq's root may sit a hair below the true one; step up until the bound holds.
        while excess(eps_opt) > 0:
            eps_opt = min(upper, eps_opt * (1 + 1e-10) + 1e-15)
    notes = [
        f"optimal composition of k={k} ({epsilon:g}, {delta:g})-DP steps "
        f"(Kairouz-Oh-Viswanath 2015); basic composition gives epsilon={k * epsilon:.4g}",
    ]
    if eps_opt <= 0:  # the slack alone covers the total variation distance
        eps_opt = 1e-12
        notes.append("delta alone covers the composition; epsilon reported as 1e-12")
    return PrivacyGuarantee(
        epsilon=eps_opt,
        delta=target,
        neighbouring=neighbouring,
        model=model,  # type: ignore[arg-type]
        mechanism=mechanism or f"{k} x ({epsilon:g}, {delta:g})-DP",
        accountant="optimal homogeneous composition (Kairouz-Oh-Viswanath 2015)",
        notes=tuple(notes),
    )
