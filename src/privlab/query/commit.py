"""`ChargeAndAudit`: a query's budget charge and its audit row in ONE durable commit.

The gateway used to commit twice per answered query: the charge (before computing), then
the audit row with the noisy answer. When the ledger and the audit log live in the same
database (one SQLite file, or one PostgreSQL database: the default for PostgreSQL), both
rows go into one transaction of the ledger's connection (`synchronous = FULL` on SQLite),
group-committed with the other queries arriving at the same time (`GroupCommit`): one
fsync per batch instead of two per query.

The guarantees stay those of the two-commit path: the caller releases the answer only after
`commit` returned, so nothing is answered without both rows; the charge is checked inside
the same serialized transaction, so nothing overspends; a crash or fault before COMMIT
leaves neither row (and nothing was shown); a charge the budget refuses writes its
`budget_exceeded` audit row in the same commit instead of the release.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from privlab.core.group_commit import GroupCommit
from privlab.core.ledger import (
    BudgetLedger,
    ChargeRequest,
    CheckedCharge,
    LedgerEntry,
    _add_exact,
    _sub_exact,
)
from privlab.core.store import same_database
from privlab.errors import BudgetExceededError, InvalidInputError, PrivlabError
from privlab.query.audit import AuditLog, row_values

__all__ = ["BudgetView", "ChargeAndAudit", "Commit", "shared_database"]


def _now_text() -> str:
    """An audit row's `created_at` (as `row_values` writes it)."""
    return datetime.now(UTC).isoformat()


def shared_database(ledger: Any, audit: AuditLog) -> bool:
    """Whether the ledger and the audit log are one database (one transaction can hold
    both rows): the same SQLite file, or the same PostgreSQL URL."""
    return isinstance(ledger, BudgetLedger) and same_database(ledger.url, audit.url)


@dataclass
class Commit:
    """One query's charge and the audit row to write with it. `released` holds the row's
    fields for a granted charge (its `ledger_entry_id` is filled in inside the
    transaction); a refused charge writes `budget_exceeded` with the ledger's reason."""

    charge: ChargeRequest
    query_id: str
    common: dict[str, Any]
    released: dict[str, Any] = field(default_factory=dict)
    #: the release's audit row, built by `ChargeAndAudit.commit` before the batch
    row: dict[str, Any] | None = None


class ChargeAndAudit:
    """`ChargeAndAudit(ledger, audit).commit(c)` -> the `LedgerEntry`, durable together with
    its audit row; raises `BudgetExceededError` (its refusal audited in the same commit) or
    `PrivlabError` (nothing written: nothing may be released)."""

    #: Fault-injection point for tests: called inside the transaction after the charges and
    #: the audit rows were written, before COMMIT.
    _in_transaction_hook: Any = None

    def __init__(self, ledger: BudgetLedger, audit: AuditLog, max_batch: int = 256) -> None:
        self.ledger = ledger
        self.audit = audit
        self._group = GroupCommit(self._write_many, max_batch)

    @property
    def batches(self) -> int:
        return self._group.batches

    def commit(self, item: Commit) -> LedgerEntry:
        # What needs no lock is done here, in the caller's thread, so that the batch's
        # serialized transaction holds only the reads and writes: the charge checked and
        # converted, and the release's audit row (its entry id and time are filled in
        # inside). An invalid charge is left to the batch (which refuses it and audits the
        # refusal in the same commit, as always); a bad row raises here, for this query
        # alone, with nothing written.
        if not isinstance(item.charge, CheckedCharge):
            with contextlib.suppress(InvalidInputError):
                item.charge = BudgetLedger.checked(item.charge)
        if item.released:  # stamped in the batch (`_row`)
            item.row = row_values(item.query_id, **{**item.common, **item.released},
                                  created_at="")
        result: LedgerEntry = self._group.submit(item)
        return result

    def _write_many(self, items: list[Commit]) -> list[Any]:
        """The group-commit leader's batch: every charge in order, then one audit row per
        item (the release with its entry id, or the refusal), one transaction, one COMMIT."""
        rows: list[dict[str, Any]] = []
        with self.ledger.write_transaction() as cur:
            if self.audit.dialect == "postgresql":
                cur.execute(self.audit.pg_lock_sql())
            results = self.ledger.charge_in(cur, [item.charge for item in items])
            for item, result in zip(items, results, strict=True):
                rows.append(self._row(item, result))
            seqs, head = self.audit.append_in(cur, rows)
            if self._in_transaction_hook is not None:
                self._in_transaction_hook()
        self.audit.appended(seqs[-1], head)
        return results

    @staticmethod
    def _row(item: Commit, result: Any) -> dict[str, Any]:
        if isinstance(result, LedgerEntry) and item.row is not None:
            return {**item.row, "created_at": _now_text(), "ledger_entry_id": result.entry_id}
        if isinstance(result, LedgerEntry):
            return row_values(item.query_id, **{**item.common, **item.released,
                                                 "ledger_entry_id": result.entry_id})
        decision = "budget_exceeded" if isinstance(result, BudgetExceededError) else "error"
        reason = str(result) if isinstance(result, PrivlabError) else type(result).__name__
        return row_values(item.query_id, decision, reason=reason, **item.common)


class BudgetView:
    """What this process knows of each principal's budget and spending, plus the charges
    its own queries have in flight: whether a query may compute BEFORE its charge.

    The joint commit computes first and charges after (the audit row holds the answer). A
    query is only sent down that path when this view says its charge will fit, so a
    refusal is answered before anything runs on the data, as on the charge-first path
    (which takes every query the view cannot vouch for, and refuses it there). The view is
    exact for charges of this process; another process spending the same principal can
    make it optimistic, and then the charge is refused after the computation (nothing is
    released; the refusal's latency includes the engine's: docs/gateway.md says so).
    """

    def __init__(self, ledger: BudgetLedger) -> None:
        self.ledger = ledger
        self._lock = threading.Lock()
        #: name -> (seq of the newest charge seen, spent eps, spent delta, budget eps, delta)
        self._known: dict[str, tuple[int, Decimal, Decimal, Decimal, Decimal]] = {}
        self._pending: dict[str, tuple[Decimal, Decimal]] = {}

    def reserve(self, request: ChargeRequest) -> tuple[str, Decimal, Decimal] | None:
        """A token when the charge will fit (held until `release`), else None."""
        try:
            # the amounts as the charge rounds them (checked already: `BudgetLedger.checked`)
            name, eps, dlt, _, _ = request.args if isinstance(request, CheckedCharge) else \
                BudgetLedger._prepare(
                    ChargeRequest(request.principal, request.epsilon, request.delta))
        except PrivlabError:
            return None
        with self._lock:
            known = self._known.get(name)
        if known is None:
            try:
                st = self.ledger.status(name)
            except PrivlabError:
                return None
            self._learn(name, st.n_charges, st.spent_epsilon_exact, st.spent_delta_exact,
                        st.budget_epsilon_exact, st.budget_delta_exact)
        with self._lock:
            _, spent_e, spent_d, budget_e, budget_d = self._known[name]
            pend_e, pend_d = self._pending.get(name, (Decimal(0), Decimal(0)))
            # exact sums, compared and kept here only (never stored): no canonical form
            new_e, new_d = _add_exact(pend_e, eps), _add_exact(pend_d, dlt)
            if _add_exact(spent_e, new_e) > budget_e or _add_exact(spent_d, new_d) > budget_d:
                return None
            self._pending[name] = (new_e, new_d)
        return name, eps, dlt

    def release(self, token: tuple[str, Decimal, Decimal]) -> None:
        name, eps, dlt = token
        with self._lock:
            pend_e, pend_d = self._pending[name]
            self._pending[name] = (_sub_exact(pend_e, eps), _sub_exact(pend_d, dlt))

    def learn(self, entry: LedgerEntry) -> None:
        """A committed charge: the principal's totals as of that charge."""
        self._learn(entry.principal, entry.seq, entry.spent_epsilon_exact,
                    entry.spent_delta_exact, entry.budget_epsilon_exact,
                    entry.budget_delta_exact)

    def forget(self, name: str) -> None:
        """Read the ledger again next time (a charge was refused: the view was stale)."""
        with self._lock:
            self._known.pop(name, None)

    def _learn(self, name: str, seq: int, spent_e: Decimal, spent_d: Decimal,
               budget_e: Decimal, budget_d: Decimal) -> None:
        with self._lock:
            known = self._known.get(name)
            if known is None or seq > known[0]:
                self._known[name] = (seq, spent_e, spent_d, budget_e, budget_d)
