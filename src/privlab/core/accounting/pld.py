"""The privacy-loss-distribution (PLD) accountant: one `DpEvent` on one grid (`_pld_value`,
cached), the grid ladder refined until two estimates agree to `rel_accuracy`
(`_adaptive_pld`), and the accountant's label naming library, version and grid.

Why the resolution is chosen here and not left at dp-accounting's default (1e-4): the
pessimistic PLD is an upper bound at every resolution, so a coarse grid is always valid, only
looser; DP-SGD's event goes to `pld_adapter` (a vectorised build, the one module reading
dp-accounting's private names, with a public fallback)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

from dp_accounting import DpEvent
from dp_accounting import NeighboringRelation as _NeighborRel
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant

from privlab.core import pld_adapter
from privlab.core.accounting.base import (
    _COARSEST_INTERVAL,
    _Estimate,
    _EventKey,
    _poisson_gaussian_shape,
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


def _adaptive_pld(key: _EventKey, relation: _NeighborRel, what: str, x: float,
                  rel_accuracy: float) -> _Estimate:
    """Halve the grid until the estimated discretisation error is below rel_accuracy."""
    return _refine(lambda interval: _pld_value(key, relation, interval, what, x),
                   _start_rung(key.event), rel_accuracy)


def _refine(value_at: Callable[[float], float], start: int, rel_accuracy: float) -> _Estimate:
    """Walk down the grid ladder from rung `start` until two estimates agree.

    Every rung gives a valid (pessimistic) bound; the error of the last one is estimated
    from the differences between rungs: the difference itself after two rungs (as if the
    error shrank only linearly with the grid), the geometric tail d r / (1 - r) once the
    ratio r of successive differences is known.
    """
    value = math.inf
    previous = previous_diff = None
    interval = _RUNGS[0]
    for interval in _RUNGS[start:start + _MAX_REFINEMENTS + 1]:
        value = value_at(interval)
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


#: One additive draw for `additive_pld_epsilon`: ("discrete_laplace", parameter, integer
#: sensitivity), ("discrete_gaussian", sigma, integer sensitivity) (both in grid steps) or
#: ("pure", epsilon, 0) for any other epsilon-DP mechanism (its dominating pair).
Draw = tuple[str, float, int]


@functools.lru_cache(maxsize=128)
def _composed_draws_epsilon(draws: tuple[Draw, ...], delta: float, interval: float) -> float:
    """epsilon at `delta` of the composition of `draws` (add/remove one row) on one grid,
    by dp-accounting's public PLD constructors (pessimistic estimates: an upper bound)."""
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pldlib

    total = None
    for kind, param, sensitivity in draws:
        if kind == "discrete_laplace":
            pld = pldlib.from_discrete_laplace_mechanism(
                param, sensitivity=sensitivity, value_discretization_interval=interval,
                use_connect_dots=True)
        elif kind == "discrete_gaussian":
            pld = pldlib.from_discrete_gaussian_mechanism(
                param, sensitivity=sensitivity, truncation_bound=None,
                value_discretization_interval=interval, use_connect_dots=True)
        elif kind == "pure":
            pld = pldlib.from_privacy_parameters(
                common.DifferentialPrivacyParameters(param, 0.0),
                value_discretization_interval=interval)
        else:
            raise ValueError(f"unknown draw {kind!r}")
        total = pld if total is None else total.compose(pld)
    if total is None:
        return 0.0
    return float(total.get_epsilon_for_delta(delta))


def additive_pld_epsilon(draws: list[Draw], delta: float,
                         rel_accuracy: float = 1e-3) -> _Estimate:
    """The PLD epsilon at `delta` of several independent draws under add/remove one row
    (discrete Laplace and discrete Gaussian draws exactly, any other pure-epsilon mechanism
    by its dominating pair), on the grid ladder refined until two grids agree."""
    key = tuple(sorted(draws))
    return _refine(lambda interval: _composed_draws_epsilon(key, float(delta), interval), 0,
                   rel_accuracy)


def pld_label(interval: float | None, converged: bool = True) -> str:
    """Accountant name for a PrivacyGuarantee, naming the library, version and grid."""
    if interval is None:
        return f"RDP (dp-accounting {pld_adapter.dp_accounting_version()}, default orders)"
    extra = "" if converged else ", finest grid reached before the requested accuracy"
    return (
        f"PLD (dp-accounting {pld_adapter.dp_accounting_version()}, pessimistic connect-the-dots, "
        f"value_discretization_interval={interval:.3g}{extra})"
    )
