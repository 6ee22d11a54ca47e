"""The one place privlab reads dp-accounting's private names, for speed, with public fallbacks.

Why it exists: building the PLD of a Poisson-subsampled Gaussian (DP-SGD) with dp-accounting's
public `from_gaussian_mechanism(...).self_compose(T)` costs 3-5x more per evaluation than the
path below (docs/accounting.md, "PLD grid trade-off"), and sigma calibration evaluates it 8-9
times. The fast path reuses dp-accounting's own connect-the-dots construction
(`_create_pld_pmf_from_monotone_privacy_loss`) and reads the dense PMF's fields (`_probs`,
`_lower_loss`, `_discretization`, `_infinity_mass`, `_pessimistic_estimate`) to vectorise
three hot spots. Private names change without notice, so:

* the fast path runs only on the dp-accounting versions in `TESTED_VERSIONS` (the range
  pinned in pyproject.toml) and only when the names are present; anything else takes the
  public path (same PLD, slower), never a silently different one;
* tests/core/test_pld_adapter.py fails loudly on any other installed version and checks
  that both paths give the same PMFs and epsilons.

Nothing outside this module may use a private name of dp-accounting (a test greps for it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import numpy as np
from dp_accounting.pld import pld_pmf as _pld_pmf
from dp_accounting.pld import privacy_loss_distribution as _pld_lib
from dp_accounting.pld import privacy_loss_mechanism as _plm
from scipy import fft as scipy_fft

__all__ = ["TESTED_VERSIONS", "GaussianPLD", "dp_accounting_version", "fast_path_available",
           "poisson_gaussian_pld"]

#: dp-accounting releases whose private names tests/core/test_pld_adapter.py was run against.
TESTED_VERSIONS = ("0.6.0",)

#: The private module-level helper the fast path calls.
_MAKE_PMF = "_create_pld_pmf_from_monotone_privacy_loss"
#: The private fields of DensePLDPmf the fast path reads.
_DENSE_FIELDS = ("_probs", "_lower_loss", "_discretization", "_infinity_mass",
                 "_pessimistic_estimate")


def dp_accounting_version() -> str:
    """The installed dp-accounting version (for labels and the version check)."""
    try:
        return metadata.version("dp-accounting")
    except metadata.PackageNotFoundError:  # pragma: no cover - installed as a dependency
        return "unknown"


def fast_path_available() -> bool:
    """True on a tested dp-accounting release that still has the private helper."""
    return dp_accounting_version() in TESTED_VERSIONS and hasattr(_pld_lib, _MAKE_PMF)


class VectorisedGaussianPrivacyLoss(_plm.GaussianPrivacyLoss):
    """dp-accounting's Gaussian privacy loss with a vectorised hockey-stick divergence.

    The parent evaluates `inverse_privacy_loss` once per grid point in a Python loop, which is
    ~90% of the cost of building a Poisson-subsampled Gaussian PLD. The formulas below are the
    parent's (same operations, numpy instead of math), for ADD and REMOVE adjacency; REPLACE
    and scalars go to the parent. tests/core/test_pld_adapter.py checks they agree.
    """

    def __init__(self, standard_deviation: float, **kwargs: Any) -> None:
        super().__init__(standard_deviation, **kwargs)
        self._privlab_sigma = float(standard_deviation)  # ours: no read of the parent's field

    def get_delta_for_epsilon(self, epsilon: Any) -> Any:
        if self.adjacency_type == _plm.AdjacencyType.REPLACE or np.ndim(epsilon) == 0:
            return super().get_delta_for_epsilon(epsilon)
        eps = np.asarray(epsilon, dtype=float)
        q, s = self.sampling_prob, self.sensitivity
        var = self._privlab_sigma**2
        deltas = np.zeros_like(eps)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if self.adjacency_type == _plm.AdjacencyType.ADD:
                inside = eps < -math.log1p(-q) if q < 1 else np.ones(eps.shape, dtype=bool)
                loss = eps[inside]
                if q < 1:
                    # loss without subsampling: -log(exp(-loss)/q + 1 - 1/q)
                    d = -loss - math.log(q)
                    plain = -(d + np.log1p(-np.exp(math.log(1 / q - 1) - d)))
                    plain[np.isclose(loss, -math.log1p(-q), rtol=1e-9, atol=0)] = math.inf
                else:
                    plain = loss
                x = s + (-0.5 * s - plain * var / s)
            elif self.adjacency_type == _plm.AdjacencyType.REMOVE:
                inside = eps > math.log1p(-q) if q < 1 else np.ones(eps.shape, dtype=bool)
                deltas[~inside] = -np.expm1(eps[~inside])
                loss = eps[inside]
                if q < 1:
                    # loss without subsampling: log(exp(loss)/q + 1 - 1/q)
                    d = loss - math.log(q)
                    plain = d + np.log1p(-np.exp(math.log(1 / q - 1) - d))
                    plain[np.isclose(loss, math.log1p(-q), rtol=1e-9, atol=0)] = -math.inf
                else:
                    plain = loss
                x = -0.5 * s - plain * var / s
            else:  # pragma: no cover - dp-accounting has no other adjacency type
                return super().get_delta_for_epsilon(epsilon)
            deltas[inside] = self.mu_upper_cdf(x) - np.exp(eps[inside] + self.mu_lower_log_cdf(x))
        return np.clip(deltas, 0, 1)


def _chernoff_bounds(probs: np.ndarray, count: int, tail: float) -> tuple[int, int]:
    """dp-accounting's `common.compute_self_convolve_bounds`, one numpy pass per order.

    (The library calls scipy's logsumexp 40 times per PMF, ~40% of a PLD evaluation.)
    """
    n = len(probs)
    upper, lower = (n - 1) * count, 0
    if tail == 0:
        return lower, upper
    index = np.arange(n, dtype=float)
    positive = probs > 0
    index_p, probs_p = index[positive], probs[positive]
    for order in np.concatenate((np.arange(-20, 0), np.arange(1, 21))) / n:
        exponent = index_p * order
        top = exponent.max()
        log_mgf = top + math.log(float(np.sum(probs_p * np.exp(exponent - top))))
        bound = (count * log_mgf + math.log(2 / tail)) / order
        if not math.isfinite(bound):
            continue
        if order > 0:
            upper = min(upper, math.ceil(bound))
        else:
            lower = max(lower, math.floor(bound))
    return lower, upper


def self_compose_dense(pmf: Any, count: int, tail: float = 1e-15) -> Any:
    """`DensePLDPmf.self_compose` (FFT power, Chernoff-truncated) with the faster bounds."""
    probs = pmf._probs
    lower, upper = _chernoff_bounds(probs, count, tail)
    out_len = upper - lower + 1
    fast_len = scipy_fft.next_fast_len(max(out_len, len(probs)))
    full = np.real(scipy_fft.ifft(scipy_fft.fft(probs, fast_len) ** count))
    out = np.roll(full, -lower)[:out_len]
    infinity = tail - math.expm1(count * math.log1p(-pmf._infinity_mass))
    return _pld_pmf.DensePLDPmf(pmf._discretization, pmf._lower_loss * count + lower,
                                np.array(out), infinity, pmf._pessimistic_estimate)


def dense_epsilon(pmf: Any, delta: float) -> float:
    """`DensePLDPmf.get_epsilon_for_delta` with cumulative sums instead of a Python loop."""
    infinity = pmf._infinity_mass
    if infinity > delta:
        return math.inf
    step = pmf._discretization
    probs = pmf._probs[::-1]
    losses = (pmf._lower_loss + len(pmf._probs) - 1 - np.arange(len(probs))) * step
    if losses.size and losses[0] > 700:  # exp(-loss) underflows: keep the library's path
        return float(pmf.get_epsilon_for_delta(delta))
    # masses accumulated before each loss is added (same summation order as the library)
    upper = np.concatenate(([infinity], infinity + np.cumsum(probs)))
    lower = np.concatenate(([0.0], np.cumsum(np.exp(-losses) * probs)))
    with np.errstate(divide="ignore", invalid="ignore"):
        stop = (upper[:-1] > delta) & (lower[:-1] > 0) & (
            np.log((upper[:-1] - delta) / lower[:-1]) >= losses)
    hits = np.flatnonzero(stop)
    i = int(hits[0]) if hits.size else len(probs)
    # the library returns max(0, loss) as soon as mass_upper >= delta with no lower mass yet
    # (exp(-loss) underflow); that check runs after adding a loss, the stop check before
    empty = np.flatnonzero((upper[1:] >= delta) & (lower[1:] == 0))
    if empty.size and int(empty[0]) < i:
        return max(0.0, float(losses[int(empty[0])]))
    mass_upper, mass_lower = float(upper[i]), float(lower[i])
    if mass_upper <= mass_lower + delta:
        return 0.0
    return math.log((mass_upper - delta) / mass_lower)


@dataclass(frozen=True)
class GaussianPLD:
    """PLD of a (self-composed) Poisson-subsampled Gaussian under add/remove-one.

    `pmfs` are the REMOVE and (when q < 1) ADD PMFs built by the fast path; `pld` is the
    public object. epsilon is the max over the two PMFs, as dp-accounting computes it.
    """

    pld: Any  # dp_accounting.pld.privacy_loss_distribution.PrivacyLossDistribution
    pmfs: tuple[Any, ...] = ()  # empty on the public path

    def epsilon(self, delta: float) -> float:
        if self.pmfs and all(_is_dense(p) for p in self.pmfs):
            return max(dense_epsilon(p, delta) for p in self.pmfs)
        return float(self.pld.get_epsilon_for_delta(delta))

    def delta(self, epsilon: float) -> float:
        return float(self.pld.get_delta_for_epsilon(epsilon))


def _is_dense(pmf: Any) -> bool:
    return isinstance(pmf, _pld_pmf.DensePLDPmf) and all(hasattr(pmf, f) for f in _DENSE_FIELDS)


def poisson_gaussian_pld(sigma: float, q: float, count: int, interval: float,
                         fast: bool | None = None) -> GaussianPLD:
    """The PLD dp-accounting's PLDAccountant builds for `count` x PoissonSampled(q, Gaussian).

    fast=None picks the fast path when `fast_path_available()`; False forces the public one
    (tests and benchmarks compare the two).
    """
    if fast is None:
        fast = fast_path_available()
    if not fast:
        pld = _pld_lib.from_gaussian_mechanism(
            sigma, sensitivity=1, pessimistic_estimate=True,
            value_discretization_interval=interval, sampling_prob=q, use_connect_dots=True)
        return GaussianPLD(pld.self_compose(count) if count > 1 else pld)
    make = getattr(_pld_lib, _MAKE_PMF)

    def one(adjacency: Any) -> Any:
        loss = VectorisedGaussianPrivacyLoss(
            sigma, sensitivity=1, pessimistic_estimate=True, sampling_prob=q,
            adjacency_type=adjacency,
        )
        return make(loss, pessimistic_estimate=True, value_discretization_interval=interval,
                    use_connect_dots=True)

    def composed(pmf: Any) -> Any:
        if count == 1:
            return pmf
        if _is_dense(pmf):
            return self_compose_dense(pmf, count)
        return pmf.self_compose(count)

    pmf_remove = composed(one(_plm.AdjacencyType.REMOVE))
    if q == 1.0:
        return GaussianPLD(_pld_lib.PrivacyLossDistribution(pmf_remove), (pmf_remove,))
    pmf_add = composed(one(_plm.AdjacencyType.ADD))
    return GaussianPLD(_pld_lib.PrivacyLossDistribution(pmf_remove, pmf_add),
                       (pmf_remove, pmf_add))
