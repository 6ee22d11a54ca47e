"""Noise calibration for single mechanisms: analytic Gaussian (Balle & Wang 2018), discrete
Gaussian (exact delta, Canonne-Kamath-Steinke 2020) and zCDP conversions.

The classic sigma = Delta sqrt(2 ln(1.25/delta)) / eps is loose (and invalid for eps > 1);
the analytic calibration finds the smallest sigma whose exact privacy profile meets delta.
"""

from __future__ import annotations

import math

from scipy.optimize import brentq, minimize_scalar
from scipy.special import log_ndtr

from privlab.core.guarantee import check_delta, check_epsilon
from privlab.core.samplers import discrete_gaussian_delta
from privlab.errors import InvalidInputError


def gaussian_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    """Exact delta(epsilon) of the continuous Gaussian mechanism (Balle & Wang, Theorem 8)."""
    a = sensitivity / (2 * sigma)
    b = epsilon * sigma / sensitivity
    first = math.exp(log_ndtr(a - b))
    second = math.exp(epsilon + log_ndtr(-a - b))
    return max(first - second, 0.0)


def analytic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Smallest sigma for which N(0, sigma^2) noise gives (epsilon, delta)-DP at L2 sensitivity."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    if delta == 0:
        raise InvalidInputError("the Gaussian mechanism needs delta > 0; use Laplace for pure DP")
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise InvalidInputError(f"sensitivity must be a finite number > 0, got {sensitivity!r}")

    def gap(log_sigma: float) -> float:
        return gaussian_delta(math.exp(log_sigma), sensitivity, epsilon) - delta

    lo, hi = math.log(sensitivity) - 20, math.log(sensitivity) + 20
    if gap(hi) > 0:
        raise InvalidInputError(f"delta={delta} is too small to calibrate at epsilon={epsilon}")
    return math.exp(brentq(gap, lo, hi, xtol=1e-12, rtol=1e-12)) * (1 + 1e-9)


def discrete_gaussian_sigma(sensitivity: int, epsilon: float, delta: float) -> float:
    """Smallest sigma (to 0.01%) of the 1-D discrete Gaussian meeting (epsilon, delta) exactly."""
    sigma = analytic_gaussian_sigma(float(sensitivity), epsilon, delta)
    # The discrete Gaussian's privacy is essentially that of the continuous one; verify exactly.
    lo = sigma * 0.8
    if discrete_gaussian_delta(lo, sensitivity, epsilon) <= delta:
        sigma = lo
    else:
        while discrete_gaussian_delta(sigma, sensitivity, epsilon) > delta:
            sigma *= 1.01
        lo_s, hi_s = lo, sigma
        for _ in range(40):
            mid = (lo_s + hi_s) / 2
            if discrete_gaussian_delta(mid, sensitivity, epsilon) <= delta:
                hi_s = mid
            else:
                lo_s = mid
            if hi_s / lo_s < 1 + 1e-4:
                break
        sigma = hi_s
    return sigma


def zcdp_to_approx_dp(rho: float, delta: float) -> float:
    """Epsilon of rho-zCDP at delta, via the tight RDP conversion (Canonne et al. 2020, Prop. 12)."""
    if rho <= 0:
        return 0.0

    def eps_at(alpha: float) -> float:
        return (alpha * rho + (math.log(1 / delta) + (alpha - 1) * math.log(1 - 1 / alpha)
                - math.log(alpha)) / (alpha - 1))

    res = minimize_scalar(eps_at, bounds=(1.0001, 1e6), method="bounded",
                          options={"xatol": 1e-9})
    return max(float(res.fun), 0.0)


def rho_for_target(epsilon: float, delta: float) -> float:
    """Largest rho such that rho-zCDP implies (epsilon, delta)-DP."""
    check_epsilon(epsilon)
    check_delta(delta)
    return brentq(lambda r: zcdp_to_approx_dp(r, delta) - epsilon, 1e-12, 1e6, xtol=1e-14)
