"""Privacy accounting: composition of guarantees, and RDP / PLD accounting of `DpEvent`s.

Three layers:

* closed-form composition of `PrivacyGuarantee`s: `sequential`, `parallel`,
  `advanced_composition` (Dwork-Rothblum-Vadhan 2010) and `optimal_homogeneous_composition`
  (Kairouz-Oh-Viswanath 2015, exact for k-fold (eps, delta)-DP);
* Google's `dp_accounting` event algebra (`GaussianDpEvent`, `PoissonSampledDpEvent`,
  `SelfComposedDpEvent`, `ComposedDpEvent`, `LaplaceDpEvent`, ...) re-exported here, with
  `epsilon_for` / `delta_for` that run the RDP or PLD accountant on an event;
* DP-SGD helpers: `dpsgd_event`, `dpsgd_epsilon`, `calibrate_noise_multiplier`,
  `guarantee_for_dpsgd`.

Why the PLD resolution is chosen here and not left at dp-accounting's default (1e-4): the
pessimistic PLD is an upper bound at every resolution, so a coarse grid is always *valid*,
only looser. We refine the grid (halving it) until two consecutive estimates agree to
`rel_accuracy`; calibration brackets sigma on coarse grids first and solves on the fine one
last. For Poisson-subsampled Gaussians the PLD comes from `pld_adapter` (a vectorised build,
the only code that reads dp-accounting's private names, with a public fallback); everything
else uses dp-accounting's public API. docs/accounting.md has the measured trade-off.
"""

from __future__ import annotations

import functools
import math
import numbers
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from dp_accounting import (
    ComposedDpEvent,
    DpEvent,
    GaussianDpEvent,
    LaplaceDpEvent,
    NonPrivateDpEvent,
    PoissonSampledDpEvent,
    SelfComposedDpEvent,
)
from dp_accounting import NeighboringRelation as _NeighborRel
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
from dp_accounting.privacy_accountant import UnsupportedEventError
from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant
from scipy.optimize import brentq
from scipy.special import gammaln, log_ndtr, logsumexp

from privlab.core import pld_adapter
from privlab.core.guarantee import PrivacyGuarantee, check_delta, check_epsilon
from privlab.errors import InvalidInputError

__all__ = [
    "ComposedDpEvent", "DpEvent", "GaussianDpEvent", "LaplaceDpEvent", "NonPrivateDpEvent",
    "PoissonSampledDpEvent", "SelfComposedDpEvent",
    "sequential", "parallel", "advanced_composition", "optimal_homogeneous_composition",
    "epsilon_for", "delta_for", "dpsgd_event", "dpsgd_epsilon", "calibrate_noise_multiplier",
    "calibrate_dpsgd", "NoiseCalibration", "guarantee_for_dpsgd", "pld_label",
    "DEFAULT_REL_ACCURACY", "DEFAULT_SIGMA_TOL",
]

#: Stop refining the PLD grid when two consecutive estimates differ by less than this (relative).
DEFAULT_REL_ACCURACY = 1e-3
#: Relative tolerance of `calibrate_noise_multiplier`: sigma*(1-tol) no longer meets the target.
DEFAULT_SIGMA_TOL = 1e-3
#: Coarsest PLD grid (value_discretization_interval) of the refinement ladder.
_COARSEST_INTERVAL = 1e-2
#: Sigma search range of the calibration.
_SIGMA_MIN, _SIGMA_MAX = 1e-3, 1e6

_NEIGHBOURING_TO_RELATION = {
    "add_remove_record": _NeighborRel.ADD_OR_REMOVE_ONE,
    "user": _NeighborRel.ADD_OR_REMOVE_ONE,  # the unit added or removed is one user's data
    "replace_record": _NeighborRel.REPLACE_ONE,
}
_ACCOUNTANTS = ("pld", "rdp")


# --------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------


def _check_accountant(accountant: str) -> str:
    if accountant not in _ACCOUNTANTS:
        raise InvalidInputError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")
    return accountant


def _relation(neighbouring: str) -> _NeighborRel:
    try:
        return _NEIGHBOURING_TO_RELATION[neighbouring]
    except KeyError:
        raise InvalidInputError(
            f"neighbouring must be one of {sorted(_NEIGHBOURING_TO_RELATION)} for event "
            f"accounting, got {neighbouring!r}"
        ) from None


def _check_positive(value: Any, name: str, hint: str = "") -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a number > 0, got {value!r}{hint}") from None
    if not math.isfinite(out) or out <= 0:
        raise InvalidInputError(f"{name} must be a finite number > 0, got {value!r}{hint}")
    return out


def _check_sample_rate(sample_rate: Any) -> float:
    try:
        q = float(sample_rate)
    except (TypeError, ValueError):
        raise InvalidInputError(f"sample_rate must be in (0, 1], got {sample_rate!r}") from None
    if not (math.isfinite(q) and 0 < q <= 1):
        raise InvalidInputError(
            f"sample_rate must be in (0, 1] (batch size / dataset size), got {sample_rate!r}"
        )
    return q


def _check_count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        else:
            raise InvalidInputError(f"{name} must be a whole number >= 1, got {value!r}")
    if int(value) < 1:
        raise InvalidInputError(f"{name} must be a whole number >= 1, got {value!r}")
    return int(value)


def _check_rel(value: Any, name: str) -> float:
    out = _check_positive(value, name)
    if out >= 0.5:
        raise InvalidInputError(
            f"{name} must be a small relative tolerance in (0, 0.5), got {value!r}"
        )
    return out


def _check_interval(value: Any) -> float | None:
    if value is None:
        return None
    out = _check_positive(value, "value_discretization_interval")
    if out > 1:
        raise InvalidInputError(
            f"value_discretization_interval must be in (0, 1] (e.g. 1e-3), got {value!r}"
        )
    return out


def _check_event(event: Any) -> DpEvent:
    if not isinstance(event, DpEvent):
        raise InvalidInputError(
            "event must be a dp_accounting DpEvent (e.g. dpsgd_event(...)), got "
            f"{type(event).__name__}"
        )
    return event


# --------------------------------------------------------------------------------------------
# 1. composition of PrivacyGuarantees
# --------------------------------------------------------------------------------------------


def _as_list(guarantees: Iterable[PrivacyGuarantee], what: str) -> list[PrivacyGuarantee]:
    items = list(guarantees)
    if not items:
        raise InvalidInputError(f"{what}: pass at least one PrivacyGuarantee")
    for g in items:
        if not isinstance(g, PrivacyGuarantee):
            raise InvalidInputError(
                f"{what}: every item must be a PrivacyGuarantee, got {type(g).__name__}"
            )
    models = {g.model for g in items}
    if len(models) > 1:
        raise InvalidInputError(
            f"{what}: cannot compose central and local guarantees together; account them apart"
        )
    dp = [g for g in items if g.is_dp]
    relations = {g.neighbouring for g in dp}
    if len(relations) > 1:
        raise InvalidInputError(
            f"{what}: guarantees use different neighbouring relations {sorted(relations)}; "
            "convert them to one relation first"
        )
    return items


def _composed_name(kind: str, items: Sequence[PrivacyGuarantee]) -> str:
    names = [g.mechanism or "?" for g in items]
    shown = ", ".join(names[:4]) + (f", ... ({len(names)} in all)" if len(names) > 4 else "")
    return f"{kind}({shown})"


def _merged_notes(items: Sequence[PrivacyGuarantee], extra: str) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for g in items:
        for note in g.notes:
            seen.setdefault(note, None)
    seen.setdefault(extra, None)
    return tuple(seen)


def _non_private_result(kind: str, items: Sequence[PrivacyGuarantee]) -> PrivacyGuarantee | None:
    bad = [g for g in items if not g.is_dp]
    if not bad:
        return None
    out = PrivacyGuarantee.not_private(
        _composed_name(kind, items),
        f"{len(bad)} of the {len(items)} composed parts are not differentially private",
        model=items[0].model,
    )
    inherited = dict.fromkeys(note for g in bad for note in g.notes)
    return out.with_notes(*inherited)


def sequential(guarantees: Iterable[PrivacyGuarantee]) -> PrivacyGuarantee:
    """Basic sequential composition: releases on the same data cost sum(eps), sum(delta).

    Valid for any mechanisms, adaptively chosen; loose for many similar steps (use
    `optimal_homogeneous_composition` or event accounting then).
    """
    items = _as_list(guarantees, "sequential")
    bad = _non_private_result("sequential", items)
    if bad is not None:
        return bad
    eps = math.fsum(g.epsilon for g in items)
    delta = math.fsum(g.delta for g in items)
    if delta >= 1:
        raise InvalidInputError(
            f"sequential: total delta {delta:.3g} >= 1 means no guarantee; use fewer releases"
        )
    return PrivacyGuarantee(
        epsilon=eps,
        delta=delta,
        neighbouring=items[0].neighbouring,
        model=items[0].model,
        mechanism=_composed_name("sequential", items),
        accountant="sequential composition (sum of epsilons and deltas)",
        notes=_merged_notes(items, f"sequential composition of {len(items)} releases"),
    )


def parallel(guarantees: Iterable[PrivacyGuarantee]) -> PrivacyGuarantee:
    """Parallel composition over DISJOINT parts of the data (partition by a public key).

    Under add/remove (or user-level) neighbouring one individual touches one part, so the
    cost is max(eps), max(delta). Under replace-one neighbouring the replaced record may
    leave one part and enter another, so the cost is the sum of the two largest.
    """
    items = _as_list(guarantees, "parallel")
    bad = _non_private_result("parallel", items)
    if bad is not None:
        return bad
    relation = items[0].neighbouring
    eps_sorted = sorted((g.epsilon for g in items), reverse=True)
    delta_sorted = sorted((g.delta for g in items), reverse=True)
    if relation == "replace_record" and len(items) > 1:
        eps, delta = eps_sorted[0] + eps_sorted[1], delta_sorted[0] + delta_sorted[1]
        how = "replace-one neighbours touch two parts: sum of the two largest"
    else:
        eps, delta = eps_sorted[0], delta_sorted[0]
        how = "max over disjoint parts"
    return PrivacyGuarantee(
        epsilon=eps,
        delta=delta,
        neighbouring=relation,
        model=items[0].model,
        mechanism=_composed_name("parallel", items),
        accountant=f"parallel composition ({how})",
        notes=_merged_notes(
            items,
            f"parallel composition of {len(items)} releases on disjoint parts of the data "
            "(the partition must not depend on the data's private values)",
        ),
    )


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


# --------------------------------------------------------------------------------------------
# 2. event accounting (dp-accounting)
# --------------------------------------------------------------------------------------------


def _poisson_gaussian_shape(event: DpEvent) -> tuple[float, float, int] | None:
    """(sigma, q, count) when the event is (self-composed) Poisson-subsampled Gaussian."""
    count = 1
    while isinstance(event, SelfComposedDpEvent):
        count *= int(event.count)
        event = event.event
    if (
        isinstance(event, PoissonSampledDpEvent)
        and isinstance(event.event, GaussianDpEvent)
        and 0 < event.sampling_probability <= 1
        and event.event.noise_multiplier > 0
    ):
        return float(event.event.noise_multiplier), float(event.sampling_probability), count
    return None


@dataclass(frozen=True)
class _EventKey:
    """Hashable handle on a DpEvent (ComposedDpEvent holds a list, so events are not)."""

    text: str
    event: DpEvent = field(compare=False, hash=False)


def _key(event: DpEvent) -> _EventKey:
    return _EventKey(repr(event), event)


def _unsupported(event: DpEvent, accountant: str, neighbouring: str) -> InvalidInputError:
    return InvalidInputError(
        f"event: the {accountant.upper()} accountant cannot account {type(event).__name__} "
        f"under neighbouring={neighbouring!r}; use the other accountant or another relation"
    )


@functools.lru_cache(maxsize=512)
def _pld_value(key: _EventKey, relation: _NeighborRel, interval: float, what: str,
               x: float) -> float:
    """epsilon (what="epsilon", x=delta) or delta (x=epsilon) on one grid. Cached (values only,
    PLDs can be large): calibration and the adaptive grid revisit the same points.

    DP-SGD's event (self-composed Poisson-subsampled Gaussian) goes to `pld_adapter`, which
    builds the same PLD as PLDAccountant faster; every other event to PLDAccountant's public
    API (UnsupportedEventError is handled by the caller).
    """
    shape = _poisson_gaussian_shape(key.event)
    if shape is not None and relation == _NeighborRel.ADD_OR_REMOVE_ONE:
        pld = pld_adapter.poisson_gaussian_pld(*shape, interval)
        return pld.epsilon(x) if what == "epsilon" else pld.delta(x)
    acc = PLDAccountant(neighboring_relation=relation, value_discretization_interval=interval)
    acc.compose(key.event)
    return float(acc.get_epsilon(x) if what == "epsilon" else acc.get_delta(x))


#: Rungs of the grid ladder: 1e-2 / 2**j, down to about 1e-6.
_RUNGS = tuple(_COARSEST_INTERVAL / 2**j for j in range(14))
#: At most this many halvings past the first rung (64x finer): bounds time and memory; the
#: result stays a valid upper bound and its label says when the accuracy was not reached.
_MAX_REFINEMENTS = 6


def _per_step_loss_scale(sigma: float, q: float) -> float:
    """Std of one step's privacy loss for small q: q sqrt(e^(1/sigma^2) - 1).

    The grid must resolve this scale (not the final epsilon): composing 10,000 steps whose
    loss is ~1e-3 on a 1e-2 grid overstates epsilon several-fold.
    """
    return q * math.sqrt(math.expm1(min(1 / sigma**2, 700.0)))


def _start_rung(event: DpEvent) -> int:
    """Index of the first rung: 1/8 of the per-step loss scale for DP-SGD, else the coarsest."""
    shape = _poisson_gaussian_shape(event)
    if shape is None:
        return 0
    scale = _per_step_loss_scale(shape[0], shape[1]) / 8
    return next((i for i, v in enumerate(_RUNGS) if v <= scale), len(_RUNGS) - 1)


@dataclass(frozen=True)
class _Estimate:
    value: float
    interval: float | None  # PLD grid used (None for RDP)
    converged: bool


def _adaptive_pld(key: _EventKey, relation: _NeighborRel, what: str, x: float,
                  rel_accuracy: float) -> _Estimate:
    """Halve the grid until the estimated discretisation error is below rel_accuracy.

    Every rung gives a valid (pessimistic) bound; the error of the last one is estimated
    from the differences between rungs: the difference itself after two rungs (as if the
    error shrank only linearly with the grid), the geometric tail d r / (1 - r) once the
    ratio r of successive differences is known.
    """
    value = math.inf
    previous = previous_diff = None
    interval = _RUNGS[0]
    start = _start_rung(key.event)
    for interval in _RUNGS[start:start + _MAX_REFINEMENTS + 1]:
        value = _pld_value(key, relation, interval, what, x)
        if not math.isfinite(value):
            return _Estimate(value, interval, True)
        if previous is not None:
            diff = abs(previous - value)
            error = diff
            if previous_diff is not None and previous_diff > 0:
                ratio = diff / previous_diff
                error = diff * ratio / (1 - ratio) if ratio < 1 else math.inf
            if error <= rel_accuracy * abs(value):
                return _Estimate(value, interval, True)
            previous_diff = diff
        previous = value
    return _Estimate(value, interval, False)


@functools.lru_cache(maxsize=64)
def _rdp_value(key: _EventKey, relation: _NeighborRel, what: str, x: float) -> float:
    acc = RdpAccountant(neighboring_relation=relation)
    acc.compose(key.event)
    return float(acc.get_epsilon(x) if what == "epsilon" else acc.get_delta(x))


def _estimate(event: DpEvent, what: str, x: float, accountant: str, neighbouring: str,
              value_discretization_interval: float | None, rel_accuracy: float) -> _Estimate:
    event = _check_event(event)
    accountant = _check_accountant(accountant)
    relation = _relation(neighbouring)
    interval = _check_interval(value_discretization_interval)
    rel_accuracy = _check_rel(rel_accuracy, "rel_accuracy")
    key = _key(event)
    try:
        if accountant == "rdp":
            return _Estimate(_rdp_value(key, relation, what, x), None, True)
        if interval is not None:
            return _Estimate(_pld_value(key, relation, interval, what, x), interval, True)
        return _adaptive_pld(key, relation, what, x, rel_accuracy)
    except UnsupportedEventError:
        raise _unsupported(event, accountant, neighbouring) from None


def epsilon_for(
    event: DpEvent,
    delta: float,
    accountant: str = "pld",
    *,
    neighbouring: str = "add_remove_record",
    value_discretization_interval: float | None = None,
    rel_accuracy: float = DEFAULT_REL_ACCURACY,
) -> float:
    """Smallest epsilon such that `event` is (epsilon, delta)-DP, per the chosen accountant.

    "pld": pessimistic privacy-loss distribution (an upper bound at any grid; with
    value_discretization_interval=None the grid is refined until it is stable to
    rel_accuracy). "rdp": Renyi DP, an upper bound that is looser for many steps.
    Returns math.inf when the event contains a non-private part.
    """
    delta = check_delta(delta)
    return _estimate(event, "epsilon", delta, accountant, neighbouring,
                     value_discretization_interval, rel_accuracy).value


def delta_for(
    event: DpEvent,
    epsilon: float,
    accountant: str = "pld",
    *,
    neighbouring: str = "add_remove_record",
    value_discretization_interval: float | None = None,
    rel_accuracy: float = DEFAULT_REL_ACCURACY,
) -> float:
    """Smallest delta such that `event` is (epsilon, delta)-DP, per the chosen accountant."""
    epsilon = check_epsilon(epsilon)
    return _estimate(event, "delta", epsilon, accountant, neighbouring,
                     value_discretization_interval, rel_accuracy).value


# --------------------------------------------------------------------------------------------
# 3. DP-SGD
# --------------------------------------------------------------------------------------------


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


def pld_label(interval: float | None, converged: bool = True) -> str:
    """Accountant name for a PrivacyGuarantee, naming the library, version and grid."""
    if interval is None:
        return f"RDP (dp-accounting {pld_adapter.dp_accounting_version()}, default orders)"
    extra = "" if converged else ", finest grid reached before the requested accuracy"
    return (
        f"PLD (dp-accounting {pld_adapter.dp_accounting_version()}, pessimistic connect-the-dots, "
        f"value_discretization_interval={interval:.3g}{extra})"
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
    delta = check_delta(delta)
    if delta == 0:
        raise InvalidInputError("delta must be > 0: the Gaussian mechanism is never (eps, 0)-DP")
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


def calibrate_noise_multiplier(
    target_epsilon: float,
    delta: float,
    sample_rate: float,
    steps: int,
    accountant: str = "pld",
    *,
    neighbouring: str = "add_remove_record",
    rel_tol: float = DEFAULT_SIGMA_TOL,
) -> float:
    """Smallest DP-SGD noise multiplier (to rel_tol, default 0.1%) with epsilon <= target."""
    return calibrate_dpsgd(target_epsilon, delta, sample_rate, steps, accountant,
                           neighbouring=neighbouring, rel_tol=rel_tol).noise_multiplier


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
    delta = check_delta(delta)
    if delta == 0:
        raise InvalidInputError("delta must be > 0: the Gaussian mechanism is never (eps, 0)-DP")
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
