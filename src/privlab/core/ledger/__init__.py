"""The budget ledger: persistent per-principal privacy budgets, charged before release.

`BudgetLedger` (`book`) charges each release in one serialized transaction before anything is
computed (docs/ledger.md). The package is split by idea:

* `amounts`: exact decimal arithmetic and the checks of a charge's and a budget's values;
* `records`: what the ledger returns (`LedgerEntry`, `BudgetStatus`, `BudgetChange`,
  `LedgerCheck`) and `ChargeRequest`;
* `tables`: the tables, their creation and the charge's driver SQL;
* `book`: `BudgetLedger` (budgets, charges, history) on `privlab.core.store.SqlStore`;
* `checks`: `verify_ledger`, every total recomputed from the entries;
* `fresh`: `replace_with_fresh_ledger` (`privlab demo`).

Accountant: sequential (basic) composition. Spent epsilon is the sum of the charged epsilons
and spent delta the sum of the charged deltas; that is a valid (if loose) bound for any
sequence of adaptively chosen (eps_i, delta_i)-DP releases on the same data. Tighter
accountants (RDP, PLD) live in `privlab.core.accounting`; charge their converted total here.
Every name keeps the path `privlab.core.ledger` it had when this was one module.
"""

from __future__ import annotations

# `as` marks a re-export kept for the old import path (not in __all__)
from privlab.core.ledger.amounts import MAX_EPSILON as MAX_EPSILON
from privlab.core.ledger.amounts import QUANTUM as QUANTUM
from privlab.core.ledger.amounts import _add as _add
from privlab.core.ledger.amounts import _add_exact as _add_exact
from privlab.core.ledger.amounts import _sub as _sub
from privlab.core.ledger.amounts import _sub_exact as _sub_exact
from privlab.core.ledger.amounts import check_budget as check_budget
from privlab.core.ledger.book import BudgetLedger
from privlab.core.ledger.fresh import replace_with_fresh_ledger as replace_with_fresh_ledger
from privlab.core.ledger.records import (
    ACCOUNTANT,
    BudgetChange,
    BudgetStatus,
    ChargeRequest,
    CheckedCharge,
    LedgerCheck,
    LedgerEntry,
)
from privlab.core.ledger.tables import SCHEMA_VERSION
from privlab.core.store import SQLITE_SIDECARS as SQLITE_SIDECARS

__all__ = [
    "BudgetLedger", "ChargeRequest", "CheckedCharge", "LedgerEntry", "BudgetStatus",
    "BudgetChange", "LedgerCheck",
    "SCHEMA_VERSION", "ACCOUNTANT",
]
