"""What every accountant module shares: the checks of its arguments (one-line errors naming
the parameter), the neighbouring relations dp-accounting knows, an event as a cache key, and
the shape of DP-SGD's event (a self-composed Poisson-subsampled Gaussian)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any

from dp_accounting import DpEvent, GaussianDpEvent, PoissonSampledDpEvent, SelfComposedDpEvent
from dp_accounting import NeighboringRelation as _NeighborRel

from privlab.errors import InvalidInputError

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


@dataclass(frozen=True)
class _Estimate:
    value: float
    interval: float | None  # PLD grid used (None for RDP)
    converged: bool


def _unsupported(event: DpEvent, accountant: str, neighbouring: str) -> InvalidInputError:
    return InvalidInputError(
        f"event: the {accountant.upper()} accountant cannot account {type(event).__name__} "
        f"under neighbouring={neighbouring!r}; use the other accountant or another relation"
    )
