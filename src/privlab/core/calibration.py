"""Noise calibration for single mechanisms: analytic Gaussian (Balle & Wang 2018), discrete
Gaussian (exact delta, Canonne-Kamath-Steinke 2020) and zCDP conversions.

The classic sigma = Delta sqrt(2 ln(1.25/delta)) / eps is loose (and invalid for eps > 1);
the analytic calibration finds the smallest sigma whose exact privacy profile meets delta.

Calibrations are pure functions of (sensitivity, epsilon, delta) that cost a root search (about
2 ms), while a query's noise draw costs microseconds; the discrete-Gaussian and zCDP ones are
cached (`CALIBRATION_CACHE` entries each), so a service answering repeated queries pays once.
"""

from __future__ import annotations

import functools
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


#: Entries kept per cached calibration (least recently used dropped first).
CALIBRATION_CACHE = 1024


def discrete_gaussian_sigma(sensitivity: int, epsilon: float, delta: float) -> float:
    """Smallest sigma (to 0.01%) of the 1-D discrete Gaussian meeting (epsilon, delta) exactly.

    Bisection on the exact delta (CKS 2020, Thm 7) between a sigma that fails and one that
    meets the target; the returned sigma always meets it. Cached per (sensitivity, epsilon,
    delta) after validation (the key is the validated int and floats, so 1 and 1.0 share it).
    """
    if float(sensitivity) != int(sensitivity) or int(sensitivity) < 1:
        raise InvalidInputError(f"sensitivity must be a positive integer (grid steps), "
                                f"got {sensitivity!r}")
    return _discrete_gaussian_sigma(int(sensitivity), float(epsilon), float(delta))


@functools.lru_cache(maxsize=CALIBRATION_CACHE)
def _discrete_gaussian_sigma(sensitivity: int, epsilon: float, delta: float) -> float:
    sigma = analytic_gaussian_sigma(float(sensitivity), epsilon, delta)

    def meets(s: float) -> bool:
        return discrete_gaussian_delta(s, sensitivity, epsilon) <= delta

    # The discrete Gaussian's privacy is essentially that of the continuous one, so the
    # analytic sigma is within a few percent of the answer; bracket it, then bisect.
    hi = sigma
    while not meets(hi):
        hi *= 1.01
    lo = hi / 1.25
    while meets(lo):
        hi, lo = lo, lo / 1.25
    while hi / lo > 1 + 1e-4:
        mid = math.sqrt(lo * hi)
        if meets(mid):
            hi = mid
        else:
            lo = mid
    return hi


def zcdp_to_approx_dp(rho: float, delta: float) -> float:
    """Epsilon of rho-zCDP at delta by the tight RDP conversion (Canonne et al. 2020, Prop. 12)."""
    if rho <= 0 or delta >= 1:
        return 0.0
    if delta <= 0:
        return math.inf  # rho-zCDP with rho > 0 implies no pure-DP epsilon

    def eps_at(alpha: float) -> float:
        return (alpha * rho + (math.log(1 / delta) + (alpha - 1) * math.log(1 - 1 / alpha)
                - math.log(alpha)) / (alpha - 1))

    res = minimize_scalar(eps_at, bounds=(1.0001, 1e6), method="bounded",
                          options={"xatol": 1e-9})
    return max(float(res.fun), 0.0)


def rho_for_target(epsilon: float, delta: float) -> float:
    """Largest rho such that rho-zCDP implies (epsilon, delta)-DP (cached per pair)."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    if delta == 0:
        raise InvalidInputError("zCDP needs delta > 0 to give an (epsilon, delta) guarantee")
    return _rho_for_target(float(epsilon), float(delta))


@functools.lru_cache(maxsize=CALIBRATION_CACHE)
def _rho_for_target(epsilon: float, delta: float) -> float:
    rho = brentq(lambda r: zcdp_to_approx_dp(r, delta) - epsilon, 1e-12, 1e6, xtol=1e-14)
    # brentq may stop a hair above the root; step below it so the conversion meets epsilon.
    return rho * (1 - 1e-9)
