"""The Renyi-DP accountant: dp-accounting's `RdpAccountant` on one `DpEvent` (default orders),
an upper bound that is looser than the PLD for many steps."""

from __future__ import annotations

import functools

from dp_accounting import NeighboringRelation as _NeighborRel
from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant

from privlab.core.accounting.base import _EventKey


@functools.lru_cache(maxsize=64)
def _rdp_value(key: _EventKey, relation: _NeighborRel, what: str, x: float) -> float:
    acc = RdpAccountant(neighboring_relation=relation)
    acc.compose(key.event)
    return float(acc.get_epsilon(x) if what == "epsilon" else acc.get_delta(x))
