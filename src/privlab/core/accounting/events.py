"""`epsilon_for` / `delta_for`: run the PLD or RDP accountant on a dp-accounting `DpEvent`
(arguments checked once here, before either accountant sees them)."""

from __future__ import annotations

from dp_accounting import DpEvent
from dp_accounting.privacy_accountant import UnsupportedEventError

from privlab.core.accounting.base import (
    DEFAULT_REL_ACCURACY,
    _check_accountant,
    _check_event,
    _check_interval,
    _check_rel,
    _Estimate,
    _key,
    _relation,
    _unsupported,
)
from privlab.core.accounting.pld import _adaptive_pld, _pld_value
from privlab.core.accounting.rdp import _rdp_value
from privlab.core.guarantee import check_delta, check_epsilon


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
