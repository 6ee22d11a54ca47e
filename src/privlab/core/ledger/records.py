"""What a ledger returns: committed charges, budget statuses, budget changes, check results,
and the request a charge is made of. Exact amounts are `Decimal`; floats are for display."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from privlab.core.ledger.amounts import _dec, _sub, _text

ACCOUNTANT = "sequential composition (basic): spent = sum of charged epsilons and deltas"


@dataclass(frozen=True)
class ChargeRequest:
    """One charge for `BudgetLedger.charge_many` (the arguments of `charge`)."""

    principal: str
    epsilon: Any
    delta: Any = 0.0
    description: str = ""
    guarantee: Any = None


@dataclass(frozen=True)
class CheckedCharge(ChargeRequest):
    """A `ChargeRequest` already checked and converted (`BudgetLedger.checked`): `args` is
    what the ledger stores (name, exact epsilon and delta, description, guarantee JSON), so
    a batch does not check it again inside its transaction (the gateway's group commit)."""

    args: tuple[Any, ...] = ()


@dataclass(frozen=True)
class LedgerEntry:
    """One committed charge. Exact amounts are `Decimal`; the float properties are for display."""

    entry_id: int
    principal: str
    seq: int
    epsilon_exact: Decimal
    delta_exact: Decimal
    spent_epsilon_exact: Decimal  # the principal's running total after this charge
    spent_delta_exact: Decimal
    budget_epsilon_exact: Decimal  # the principal's budget when this charge was made
    budget_delta_exact: Decimal
    description: str
    #: the guarantee as the ledger stores it (canonical JSON); `guarantee` parses it
    guarantee_text: str | None
    created_at: datetime

    @property
    def guarantee(self) -> dict[str, Any] | None:
        """The charge's guarantee (a fresh dict per call), parsed only when read: the
        gateway's hot path commits a charge per query and never reads it back (issue 32)."""
        return None if self.guarantee_text is None else json.loads(self.guarantee_text)

    @property
    def epsilon(self) -> float:
        return float(self.epsilon_exact)

    @property
    def delta(self) -> float:
        return float(self.delta_exact)

    @property
    def remaining_epsilon(self) -> float:
        """Epsilon left right after this charge (budget at that time minus running total)."""
        return float(_sub(self.budget_epsilon_exact, self.spent_epsilon_exact))

    @property
    def remaining_delta(self) -> float:
        return float(_sub(self.budget_delta_exact, self.spent_delta_exact))

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id, "principal": self.principal, "seq": self.seq,
            "epsilon": self.epsilon, "delta": self.delta,
            "epsilon_exact": _text(self.epsilon_exact), "delta_exact": _text(self.delta_exact),
            "spent_epsilon": float(self.spent_epsilon_exact),
            "spent_delta": float(self.spent_delta_exact),
            "remaining_epsilon": self.remaining_epsilon, "remaining_delta": self.remaining_delta,
            "description": self.description, "guarantee": self.guarantee,
            "created_at": self.created_at.isoformat(),
        }


@dataclass(frozen=True)
class BudgetStatus:
    """A principal's budget, what it has spent and what remains (exact and as floats)."""

    principal: str
    budget_epsilon_exact: Decimal
    budget_delta_exact: Decimal
    spent_epsilon_exact: Decimal
    spent_delta_exact: Decimal
    n_charges: int
    created_at: datetime
    updated_at: datetime

    @property
    def remaining_epsilon_exact(self) -> Decimal:
        return _sub(self.budget_epsilon_exact, self.spent_epsilon_exact)

    @property
    def remaining_delta_exact(self) -> Decimal:
        return _sub(self.budget_delta_exact, self.spent_delta_exact)

    def to_dict(self) -> dict[str, Any]:
        return {
            "principal": self.principal,
            "budget_epsilon": float(self.budget_epsilon_exact),
            "budget_delta": float(self.budget_delta_exact),
            "spent_epsilon": float(self.spent_epsilon_exact),
            "spent_delta": float(self.spent_delta_exact),
            "remaining_epsilon": float(self.remaining_epsilon_exact),
            "remaining_delta": float(self.remaining_delta_exact),
            "exact": {k: _text(v) for k, v in (
                ("budget_epsilon", self.budget_epsilon_exact),
                ("budget_delta", self.budget_delta_exact),
                ("spent_epsilon", self.spent_epsilon_exact),
                ("spent_delta", self.spent_delta_exact),
                ("remaining_epsilon", self.remaining_epsilon_exact),
                ("remaining_delta", self.remaining_delta_exact))},
            "n_charges": self.n_charges,
            "accountant": ACCOUNTANT,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


@dataclass(frozen=True)
class BudgetChange:
    """An audited creation or change of a principal's total budget."""

    change_id: int
    principal: str
    budget_epsilon_exact: Decimal
    budget_delta_exact: Decimal
    previous_epsilon_exact: Decimal | None
    previous_delta_exact: Decimal | None
    created_at: datetime

    def to_dict(self) -> dict[str, Any]:
        prev_e, prev_d = self.previous_epsilon_exact, self.previous_delta_exact
        return {
            "change_id": self.change_id, "principal": self.principal,
            "budget_epsilon": float(self.budget_epsilon_exact),
            "budget_delta": float(self.budget_delta_exact),
            "previous_epsilon": None if prev_e is None else float(prev_e),
            "previous_delta": None if prev_d is None else float(prev_d),
            "created_at": self.created_at.isoformat(),
        }


@dataclass(frozen=True)
class LedgerCheck:
    """Result of `BudgetLedger.verify()`: empty `problems` means consistent."""

    integrity: str | None  # SQLite `PRAGMA integrity_check` ("ok"), None on other databases
    principals: int
    entries: int
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems and self.integrity in (None, "ok")

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "integrity": self.integrity, "principals": self.principals,
                "entries": self.entries, "problems": list(self.problems)}


def _entry(row: Any) -> LedgerEntry:
    return LedgerEntry(
        entry_id=int(row.entry_id), principal=row.principal, seq=int(row.seq),
        epsilon_exact=_dec(row.epsilon), delta_exact=_dec(row.delta),
        spent_epsilon_exact=_dec(row.spent_epsilon), spent_delta_exact=_dec(row.spent_delta),
        budget_epsilon_exact=_dec(row.budget_epsilon), budget_delta_exact=_dec(row.budget_delta),
        description=row.description,
        guarantee_text=row.guarantee, created_at=datetime.fromisoformat(row.created_at),
    )


def _status(row: Any) -> BudgetStatus:
    return BudgetStatus(
        principal=row.name,
        budget_epsilon_exact=_dec(row.budget_epsilon), budget_delta_exact=_dec(row.budget_delta),
        spent_epsilon_exact=_dec(row.spent_epsilon), spent_delta_exact=_dec(row.spent_delta),
        n_charges=int(row.n_charges), created_at=datetime.fromisoformat(row.created_at),
        updated_at=datetime.fromisoformat(row.updated_at),
    )

