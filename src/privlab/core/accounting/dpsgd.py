"""DP-SGD's accounting: its event (`dpsgd_event`), epsilon (`dpsgd_epsilon`), the noise
multiplier for a target epsilon (`calibrate_dpsgd`: sigma bracketed on coarse PLD grids, solved
on the fine one last; `calibrate_noise_multiplier`) and the run's `PrivacyGuarantee`."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dp_accounting import DpEvent, GaussianDpEvent, PoissonSampledDpEvent, SelfComposedDpEvent
from dp_accounting.privacy_accountant import UnsupportedEventError
from scipy.optimize import brentq
from scipy.special import log_ndtr

from privlab.core.accounting.base import (
    _SIGMA_MAX,
    _SIGMA_MIN,
    DEFAULT_REL_ACCURACY,
    DEFAULT_SIGMA_TOL,
    _check_accountant,
    _check_count,
    _check_interval,
    _check_positive,
    _check_rel,
    _check_sample_rate,
    _EventKey,
    _key,
    _relation,
    _unsupported,
)
from privlab.core.accounting.events import _estimate, epsilon_for
from privlab.core.accounting.pld import _RUNGS, _adaptive_pld, _pld_value, _start_rung, pld_label
from privlab.core.accounting.rdp import _rdp_value
from privlab.core.guarantee import PrivacyGuarantee, check_delta, check_epsilon
from privlab.errors import InvalidInputError


def _gaussian_delta(delta: float) -> float:
    """A DP-SGD delta: checked, and > 0 (the Gaussian mechanism is never (eps, 0)-DP)."""
    delta = check_delta(delta)
    if delta == 0:
        raise InvalidInputError("delta must be > 0: the Gaussian mechanism is never (eps, 0)-DP")
    return delta


def dpsgd_event(noise_multiplier: float, sample_rate: float, steps: int) -> DpEvent:
    """DP-SGD as an event: `steps` rounds of a Poisson-subsampled Gaussian (sensitivity 1).

    noise_multiplier is the noise std divided by the clipping norm.
    """
    sigma = _check_positive(noise_multiplier, "noise_multiplier",
                            " (noise std / clipping norm)")
    q = _check_sample_rate(sample_rate)
    steps = _check_count(steps, "steps")
    return SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), steps)


def dpsgd_epsilon(
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    delta: float,
    accountant: str = "pld",
    *,
    neighbouring: str = "add_remove_record",
    value_discretization_interval: float | None = None,
    rel_accuracy: float = DEFAULT_REL_ACCURACY,
) -> float:
    """Epsilon of DP-SGD (Poisson sampling) at the given delta."""
    return epsilon_for(
        dpsgd_event(noise_multiplier, sample_rate, steps), delta, accountant,
        neighbouring=neighbouring, value_discretization_interval=value_discretization_interval,
        rel_accuracy=rel_accuracy,
    )


@dataclass(frozen=True)
class NoiseCalibration:
    """Result of `calibrate_dpsgd`: the noise multiplier and how it was certified."""

    noise_multiplier: float
    epsilon: float  # epsilon at noise_multiplier, by the accountant below (<= target)
    target_epsilon: float
    delta: float
    sample_rate: float
    steps: int
    accountant: str  # "pld" or "rdp"
    value_discretization_interval: float | None  # PLD grid the answer was solved on
    rel_tol: float
    evaluations: int  # PLD/RDP evaluations that were not cache hits
    seconds: float
    converged: bool = True  # False: the grid ladder ended before rel_accuracy was reached

    @property
    def label(self) -> str:
        return pld_label(self.value_discretization_interval, self.converged)


class _Unreachable(Exception):
    def __init__(self, sigma: float, epsilon: float) -> None:
        super().__init__(sigma, epsilon)
        self.sigma, self.epsilon = sigma, epsilon


@dataclass
class _LogEps:
    """g(x) = log eps(sigma = e^x) - log target: decreasing in x; counts evaluations."""

    eps: Callable[[float], float]
    log_target: float
    calls: int = 0

    def __call__(self, x: float) -> float:
        self.calls += 1
        value = self.eps(x)
        return math.inf if not value > 0 or not math.isfinite(value) else (
            math.log(value) - self.log_target)


_LO_X, _HI_X = math.log(_SIGMA_MIN), math.log(_SIGMA_MAX)


def _solve_log(g: _LogEps, x: float, gx: float | None, slope: float,
               tol: float) -> tuple[float, float, float, float]:
    """Bracket lo < hi (log sigma) with g(lo) > 0 >= g(hi) and hi - lo <= tol.

    Secant steps in (log sigma, log eps), where the curve is nearly straight, aimed a little
    past the root so that two evaluations usually close the bracket; bisection as fallback.
    """
    lo = hi = None
    glo = ghi = 0.0
    last: tuple[float, float] | None = None
    for _ in range(200):
        if gx is None:
            gx = g(x)
        if gx > 0:
            if lo is None or x > lo:
                lo, glo = x, gx
            if x >= _HI_X:
                raise _Unreachable(math.exp(x), math.exp(gx + g.log_target))
        else:
            if hi is None or x < hi:
                hi, ghi = x, gx
            if x <= _LO_X:
                return x, gx, x, gx  # the smallest sigma searched already meets the target
        if math.isfinite(gx) and last is not None and math.isfinite(last[1]) and x != last[0]:
            secant = (gx - last[1]) / (x - last[0])
            if secant < 0:
                slope = secant
        if math.isfinite(gx):
            last = (x, gx)
        if lo is not None and hi is not None:
            if hi - lo <= tol:
                return lo, glo, hi, ghi
            finite = math.isfinite(glo)
            root = lo + glo * (hi - lo) / (glo - ghi) if finite else (lo + hi) / 2
            if root - lo < 0.9 * tol:
                x = lo + 0.9 * tol
            elif hi - root < 0.9 * tol:
                x = hi - 0.9 * tol
            else:
                x = root + (0.45 * tol if gx > 0 else -0.45 * tol)
            width = hi - lo
            if not lo + 0.02 * width < x < hi - 0.02 * width:
                x = (lo + hi) / 2
        elif not math.isfinite(gx):
            x = x + 1.0  # eps infinite: far too little noise
        else:
            step = -gx / slope
            step += math.copysign(0.45 * tol, step)
            step = max(min(step, 2.0), -2.0)
            x = min(max(x + step, _LO_X), _HI_X)
        gx = None
    raise RuntimeError("noise calibration did not converge")  # pragma: no cover


def _gdp_guess(target: float, delta: float, q: float, steps: int) -> float:
    """log sigma from the central-limit approximation (Bu, Dong, Long & Su 2020).

    Poisson-subsampled Gaussian DP-SGD is close to mu-GDP with
    mu = q sqrt(T (e^(1/sigma^2) - 1)); only a starting point for the exact PLD solve.
    """

    def gdp_delta(mu: float) -> float:
        a = -target / mu
        return math.exp(log_ndtr(a + mu / 2)) - math.exp(target + log_ndtr(a - mu / 2))

    lo, hi = 1e-6, 1.0
    while gdp_delta(hi) < delta and hi < 1e4:
        hi *= 2
    if gdp_delta(hi) < delta or gdp_delta(lo) > delta:
        return 0.0
    mu = brentq(lambda m: gdp_delta(m) - delta, lo, hi, xtol=1e-10)
    inner = math.log1p((mu / q) ** 2 / steps)
    return min(max(-0.5 * math.log(inner), _LO_X), _HI_X) if inner > 0 else _HI_X


def calibrate_dpsgd(
    target_epsilon: float,
    delta: float,
    sample_rate: float,
    steps: int,
    accountant: str = "pld",
    *,
    neighbouring: str = "add_remove_record",
    rel_tol: float = DEFAULT_SIGMA_TOL,
    rel_accuracy: float = DEFAULT_REL_ACCURACY,
    value_discretization_interval: float | None = None,
) -> NoiseCalibration:
    """Smallest noise multiplier (to relative tolerance rel_tol) whose epsilon <= target.

    PLD with the default adaptive grid: (a) solve on a coarse grid (cheap, pessimistic);
    (b) at that sigma refine the grid as `epsilon_for` does, which picks the grid;
    (c) re-solve there, seeded with the coarse root and slope; (d) confirm that
    `dpsgd_epsilon(sigma)` with default settings meets the target (nudging sigma up if not).
    On the chosen grid, eps(sigma) <= target < eps(sigma * (1 - rel_tol)). Sigma is searched
    in [1e-3, 1e6]; if even 1e-3 meets the target, 1e-3 is returned.
    """
    started = time.perf_counter()
    target = check_epsilon(target_epsilon, "target_epsilon")
    delta = _gaussian_delta(delta)
    q = _check_sample_rate(sample_rate)
    steps = _check_count(steps, "steps")
    accountant = _check_accountant(accountant)
    relation = _relation(neighbouring)
    rel_tol = _check_rel(rel_tol, "rel_tol")
    rel_accuracy = _check_rel(rel_accuracy, "rel_accuracy")
    fixed = _check_interval(value_discretization_interval)
    tol = -math.log1p(-rel_tol)  # hi - lo <= tol  <=>  lo >= hi + log(1 - rel_tol)
    log_target = math.log(target)

    def key_at(x: float) -> _EventKey:
        return _key(SelfComposedDpEvent(
            PoissonSampledDpEvent(q, GaussianDpEvent(math.exp(x))), steps))

    def make_g(interval: float | None) -> _LogEps:
        def eps(x: float) -> float:
            try:
                if interval is None:
                    return _rdp_value(key_at(x), relation, "epsilon", delta)
                return _pld_value(key_at(x), relation, interval, "epsilon", delta)
            except UnsupportedEventError:
                raise _unsupported(key_at(x).event, accountant, neighbouring) from None
        return _LogEps(eps, log_target)

    def solve(g: _LogEps, x: float, gx: float | None, slope: float, tol: float = tol) -> tuple:
        try:
            return _solve_log(g, x, gx, slope, tol)
        except _Unreachable as err:
            raise InvalidInputError(
                f"target_epsilon={target:g} is unreachable: even noise_multiplier="
                f"{err.sigma:.3g} gives epsilon={err.epsilon:.4g}; raise target_epsilon or "
                "delta, or lower steps or sample_rate"
            ) from None

    def done(x: float, g: float, interval: float | None, calls: int) -> NoiseCalibration:
        return NoiseCalibration(
            math.exp(x), math.exp(g + log_target), target, delta, q, steps, accountant,
            interval, rel_tol, calls, time.perf_counter() - started,
        )

    if accountant == "rdp" or fixed is not None:
        interval = None if accountant == "rdp" else fixed
        g = make_g(interval)
        _, _, hi, ghi = solve(g, 0.0, None, -1.5)
        return done(hi, ghi, interval, g.calls)

    # (a) seed: the CLT (mu-GDP) approximation, then a solve on a coarse grid
    x0 = _gdp_guess(target, delta, q, steps)
    coarse_rung = max(_start_rung(key_at(x0).event) - 1, 0)
    coarse = make_g(_RUNGS[coarse_rung])
    lo, glo, hi, ghi = solve(coarse, x0, None, -1.5, 8 * tol)  # a seed: 0.8% is plenty
    slope = (ghi - glo) / (hi - lo) if hi > lo and math.isfinite(glo) else -1.5
    calls = coarse.calls
    # (b) pick the grid at this sigma exactly as the adaptive epsilon does
    before = _pld_value.cache_info().misses
    estimate = _adaptive_pld(key_at(hi), relation, "epsilon", delta, rel_accuracy)
    calls += _pld_value.cache_info().misses - before
    # (c) solve on that grid, starting from the coarse root
    fine = make_g(estimate.interval)
    g0 = math.log(estimate.value) - log_target if 0 < estimate.value < math.inf else None
    lo, glo, hi, ghi = solve(fine, hi, g0, slope if slope < 0 else -1.5)
    calls += fine.calls
    # (d) the default epsilon at the answer must meet the target
    sigma = math.exp(hi)
    before = _pld_value.cache_info().misses
    check = _adaptive_pld(key_at(hi), relation, "epsilon", delta, rel_accuracy)
    while check.value > target:
        sigma *= 1 + rel_tol / 4
        check = _adaptive_pld(key_at(math.log(sigma)), relation, "epsilon", delta, rel_accuracy)
    calls += _pld_value.cache_info().misses - before
    return NoiseCalibration(
        sigma, check.value, target, delta, q, steps, "pld", check.interval, rel_tol,
        calls, time.perf_counter() - started, check.converged,
    )


def calibrate_noise_multiplier(target_epsilon: float, delta: float, sample_rate: float,
                               steps: int, accountant: str = "pld", **options: Any) -> float:
    """Smallest DP-SGD noise multiplier (to rel_tol, default 0.1%) with epsilon <= target;
    `options`: `calibrate_dpsgd`'s (neighbouring, rel_tol, ...), declared there once."""
    return calibrate_dpsgd(target_epsilon, delta, sample_rate, steps, accountant,
                           **options).noise_multiplier


def guarantee_for_dpsgd(
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    delta: float,
    accountant: str = "pld",
    *,
    neighbouring: str = "add_remove_record",
    mechanism: str = "DP-SGD (Poisson-subsampled Gaussian)",
    rel_accuracy: float = DEFAULT_REL_ACCURACY,
) -> PrivacyGuarantee:
    """The PrivacyGuarantee of a DP-SGD run, naming the accountant and its resolution."""
    delta = _gaussian_delta(delta)
    event = dpsgd_event(noise_multiplier, sample_rate, steps)
    est = _estimate(event, "epsilon", delta, accountant, neighbouring, None, rel_accuracy)
    if not math.isfinite(est.value):
        raise InvalidInputError(
            f"delta={delta:g} is too small for any finite epsilon; raise delta"
        )
    label = pld_label(est.interval, est.converged)
    notes = [
        f"{steps} steps, Poisson sampling rate {sample_rate:g}, noise multiplier "
        f"{noise_multiplier:g} (noise std = noise_multiplier x clipping norm)",
        "assumes per-example (or per-user) L2 clipping and Poisson sampling as analysed; "
        "fixed-size shuffled batches are not covered by this accountant",
    ]
    if neighbouring == "user":
        notes.append("user-level: clipping and sampling must be per user")
    return PrivacyGuarantee(
        epsilon=est.value,
        delta=delta,
        neighbouring=neighbouring,
        model="central",
        mechanism=mechanism,
        accountant=label,
        notes=tuple(notes),
    )
