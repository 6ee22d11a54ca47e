"""`BudgetLedger`: persistent per-principal privacy budgets, charged before anything is released.

A principal (a person, a team, an API key) has a total budget (epsilon, delta). Every DP
release is first *charged*: in ONE serialized database transaction the ledger reads what the
principal has spent, refuses the charge if it would go past the budget, appends an entry and
updates the running total. Only after that transaction committed may the value be computed
and shown (`reserve` packages this order). A crash at any point therefore either leaves no
trace (nothing committed, nothing released) or leaves a charge for a value that may never
have been shown: the ledger can over-count, never under-count.

Storage (`privlab.core.store`): SQLite (a path) or PostgreSQL (a URL). Serialization: SQLite
takes the database write lock at the start of the transaction (`BEGIN IMMEDIATE`, WAL journal,
`synchronous = FULL`, 30 s busy timeout); PostgreSQL locks the principal's row
(`SELECT ... FOR UPDATE`, bounded by `lock_timeout`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL
from sqlalchemy.exc import IntegrityError

from privlab.core.ledger.amounts import (
    _add,
    _check_principal,
    _dec,
    _now,
    _sub,
    _text,
    check_budget,
    check_charge,
)
from privlab.core.ledger.checks import verify_ledger
from privlab.core.ledger.records import (
    BudgetChange,
    BudgetStatus,
    ChargeRequest,
    CheckedCharge,
    LedgerCheck,
    LedgerEntry,
    _entry,
    _status,
)
from privlab.core.ledger.tables import (
    SCHEMA_VERSION,
    _budget_changes,
    _charge_sql,
    _ChargeSQL,
    _entries,
    _PrincipalRow,
    _principals,
    create_schema,
    schema_version,
)
from privlab.core.store import SqlStore, StoreOptions, database_url
from privlab.errors import BudgetExceededError, InvalidInputError, PrivlabError

__all__ = ["BudgetLedger"]

_BUSY_TIMEOUT_S = 30.0


def _db_error(exc: Exception, where: str) -> PrivlabError:
    """Translate a database failure into one line (no traceback for a locked or foreign file)."""
    orig = getattr(exc, "orig", None) or exc
    message = str(orig).splitlines()[0] if str(orig) else type(orig).__name__
    if "locked" in message or "busy" in message or "lock timeout" in message:
        return PrivlabError(f"ledger {where} is busy (timed out waiting for the write lock); "
                            "nothing was charged, try again")
    if "not a database" in message or "file is encrypted" in message:
        return InvalidInputError(f"--ledger {where} is not a SQLite database; give a new or "
                                 "existing ledger file")
    return PrivlabError(f"ledger {where}: database error: {message}")



class BudgetLedger(SqlStore):
    """Persistent privacy budgets with charge-before-release, safe across processes.

    `BudgetLedger("budget.db")` (a SQLite file, created on first use) or
    `BudgetLedger("postgresql+psycopg://user@host/db")`. One instance per process is the
    intended use; an instance that crosses a `fork` reconnects in the child. With
    `create=False` a missing SQLite file is an error instead of a new, empty ledger.
    `close()` (or `with BudgetLedger(...) as book:`) releases its connections; one dropped
    unclosed warns (`ResourceWarning`).
    """

    #: Fault-injection point for tests: called inside the charge transaction after the entry
    #: was inserted and the total updated, before COMMIT.
    _in_transaction_hook: Callable[[], None] | None = None

    #: `set_budget` retries a concurrent first-time creation (a unique-key race)
    _raised_as_is = (IntegrityError,)

    def __init__(self, url_or_path: str | os.PathLike[str] | URL,
                 *, busy_timeout_s: float = _BUSY_TIMEOUT_S, create: bool = True) -> None:
        url = database_url(url_or_path, setting="--ledger", example="budget.db")
        self._where = url.render_as_string(hide_password=True)
        if url.get_backend_name() == "sqlite" and url.database:
            self._where = str(url.database)
            if not create and not str(url.database).startswith("file:") and \
                    url.database != ":memory:" and not Path(url.database).exists():
                raise InvalidInputError(f"--ledger {self._where} does not exist; create it "
                                        "with `privlab budget set`")
        self._busy_timeout_s = float(busy_timeout_s)
        self._open_store(url, StoreOptions(
            synchronous="FULL", busy_timeout_s=self._busy_timeout_s, foreign_keys=True,
            lock_timeout=True), f"BudgetLedger({self._where!r})")
        try:
            self._ensure_schema()
        except BaseException:
            self.close()  # a refused ledger holds nothing open
            raise

    @property
    def location(self) -> str:
        """Where the ledger lives, fit to print: a file path, or the URL without password."""
        return self._where

    def _store_error(self, exc: Exception) -> PrivlabError:
        return _db_error(exc, self._where)

    def _driver_error(self, exc: Exception, who: str) -> PrivlabError:
        if isinstance(exc, self._engine.dialect.dbapi.IntegrityError):
            return PrivlabError(f"ledger {self._where}: concurrent charge of "
                                f"{who or 'a principal'} detected; nothing was charged, "
                                "try again")
        return _db_error(exc, self._where)

    def close(self) -> None:
        """Release pooled connections (the ledger stays usable; it reconnects on demand)."""
        super().close()

    def _ensure_schema(self) -> None:
        with self._transaction(read_only=True) as conn:
            version = schema_version(conn)
        if version is None:
            with self._transaction() as conn:
                version = create_schema(conn)
        if version != SCHEMA_VERSION:
            raise PrivlabError(f"ledger {self._where} has schema version {version}; this "
                               f"privlab reads version {SCHEMA_VERSION}")

    # -- budgets ---------------------------------------------------------------------------

    def set_budget(self, principal: str, epsilon: Any, delta: Any = 0.0) -> BudgetStatus:
        """Create a principal with a total budget, or change its total (audited).

        A new total below what the principal already spent is refused: spending is history.
        """
        name, eps, dlt = check_budget(principal, epsilon, delta)
        for attempt in range(2):
            try:
                return self._set_budget_once(name, eps, dlt)
            except IntegrityError as exc:  # a concurrent first-time creation won the race
                if attempt:
                    raise _db_error(exc, self._where) from exc
        raise AssertionError("unreachable")

    def _set_budget_once(self, name: str, eps: Decimal, dlt: Decimal) -> BudgetStatus:
        now = _now()
        with self._transaction() as conn:
            row = conn.execute(sa.select(_principals).where(_principals.c.name == name)
                               .with_for_update()).one_or_none()
            if row is None:
                conn.execute(sa.insert(_principals).values(
                    name=name, budget_epsilon=_text(eps), budget_delta=_text(dlt),
                    spent_epsilon="0", spent_delta="0", n_charges=0, created_at=now,
                    updated_at=now))
                previous = (None, None)
            else:
                spent_e, spent_d = _dec(row.spent_epsilon), _dec(row.spent_delta)
                if eps < spent_e or dlt < spent_d:
                    raise InvalidInputError(
                        f"--epsilon/--delta ({_text(eps)}, {_text(dlt)}) is below what "
                        f"{name!r} already spent ({_text(spent_e)}, {_text(spent_d)}); a budget "
                        "can be lowered to the spent amount at most")
                conn.execute(sa.update(_principals).where(_principals.c.name == name).values(
                    budget_epsilon=_text(eps), budget_delta=_text(dlt), updated_at=now))
                previous = (row.budget_epsilon, row.budget_delta)
            conn.execute(sa.insert(_budget_changes).values(
                principal=name, budget_epsilon=_text(eps), budget_delta=_text(dlt),
                previous_epsilon=previous[0], previous_delta=previous[1], created_at=now))
            row = conn.execute(sa.select(_principals).where(_principals.c.name == name)).one()
        return _status(row)

    def status(self, principal: str) -> BudgetStatus:
        """Budget, spent and remaining of one principal (InvalidInputError if unknown)."""
        name = _check_principal(principal)
        with self._transaction(read_only=True) as conn:
            row = conn.execute(sa.select(_principals).where(_principals.c.name == name)
                               ).one_or_none()
        if row is None:
            raise self._unknown(name)
        return _status(row)

    def statuses(self) -> list[BudgetStatus]:
        with self._transaction(read_only=True) as conn:
            rows = conn.execute(sa.select(_principals).order_by(_principals.c.name)).all()
        return [_status(r) for r in rows]

    def remaining(self, principal: str) -> tuple[float, float]:
        """(epsilon, delta) the principal can still spend."""
        st = self.status(principal)
        return float(st.remaining_epsilon_exact), float(st.remaining_delta_exact)

    def spent(self, principal: str) -> tuple[float, float]:
        """(epsilon, delta) the principal has spent: the sum of its charges."""
        st = self.status(principal)
        return float(st.spent_epsilon_exact), float(st.spent_delta_exact)

    def budget(self, principal: str) -> tuple[float, float]:
        st = self.status(principal)
        return float(st.budget_epsilon_exact), float(st.budget_delta_exact)

    def principals(self) -> list[str]:
        with self._transaction(read_only=True) as conn:
            return list(conn.execute(sa.select(_principals.c.name)
                                     .order_by(_principals.c.name)).scalars())

    def _unknown(self, name: str) -> InvalidInputError:
        return InvalidInputError(
            f"principal {name!r} has no budget in ledger {self._where}; create one with "
            f"`privlab budget set --ledger {self._where} --principal {name} --epsilon E`")

    # -- charges -----------------------------------------------------------------------------

    def charge(self, principal: str, epsilon: Any, delta: Any = 0.0, description: str = "",
               guarantee: Any = None) -> LedgerEntry:
        """Charge (epsilon, delta) to `principal` BEFORE releasing anything.

        One serialized transaction reads the spent total, refuses past the budget
        (`BudgetExceededError`, nothing written), appends the entry and updates the total.
        When this returns, the charge is durable; only then compute and show the value.
        """
        request = ChargeRequest(principal, epsilon, delta, description, guarantee)
        result = self.charge_many([request])[0]
        if isinstance(result, Exception):
            raise result
        return result

    def charge_many(self, requests: list[ChargeRequest]
                    ) -> list[LedgerEntry | BudgetExceededError | InvalidInputError]:
        """Several charges in ONE transaction and one commit (group commit).

        Each request is checked and applied in order, exactly as `charge` would, against the
        totals left by the ones before it; a request that is invalid or would pass its budget
        gets its error in the result list and writes nothing, the others still apply. When
        this returns, every entry in the list is durable. Any other failure (the database,
        a broken serialization) rolls back the whole batch and raises: nothing was charged,
        so nothing may be released. One fsync for the batch is what lets a busy gateway
        answer many queries per disk flush.
        """
        prepared, results = self._prepared(requests)
        if not prepared:  # every request refused up front: no transaction, no flush
            return results
        names = ", ".join(repr(n) for n in sorted({args[0] for _, args in prepared}))
        with self.write_transaction(names) as cur:
            self._charge_prepared(cur, prepared, results)
        return results

    @staticmethod
    def _prepared(requests: list[ChargeRequest]) -> tuple[list[tuple[int, Any]], list[Any]]:
        """(index, prepared arguments) of the valid requests in lock order, and the result
        list with each invalid request's error in place."""
        results: list[Any] = [None] * len(requests)
        prepared: list[tuple[int, Any]] = []
        for i, req in enumerate(requests):
            if isinstance(req, CheckedCharge):
                prepared.append((i, req.args))
                continue
            try:
                prepared.append((i, BudgetLedger._prepare(req)))
            except InvalidInputError as exc:
                results[i] = exc
        # PostgreSQL locks principals' rows: take them in one global order (no deadlock
        # between two batches); stable, so one principal's charges keep their order.
        prepared.sort(key=lambda item: item[1][0])
        return prepared, results

    def write_transaction(self, names: str = "") -> AbstractContextManager[Any]:
        """A DBAPI cursor in one write transaction on the ledger's database (its writer lock,
        its `synchronous = FULL`, PostgreSQL's lock timeout), committed when the body
        returns; driver errors become one-line `PrivlabError`s and nothing is committed.
        For `charge_in`, alone or with other rows in the same commit (the gateway's audit
        row: `privlab.query.commit`)."""
        return self._write_cursor(who=names)

    def charge_in(self, cur: Any, requests: list[ChargeRequest]
                  ) -> list[LedgerEntry | BudgetExceededError | InvalidInputError]:
        """`charge_many`'s charges inside an open `write_transaction` (not committed yet:
        nothing may be released before the caller's COMMIT returns)."""
        prepared, results = self._prepared(requests)
        if prepared:
            self._charge_prepared(cur, prepared, results)
        return results

    def _charge_prepared(self, cur: Any, prepared: list[tuple[int, Any]],
                         results: list[Any]) -> None:
        now = _now()
        stamp = (now, datetime.fromisoformat(now))  # one time for the batch, parsed once
        sql = _charge_sql(self.dialect)
        for i, args in prepared:
            try:
                results[i] = self._charge_in(cur, sql, stamp, *args)
            except (BudgetExceededError, InvalidInputError) as exc:
                results[i] = exc  # checked before any write: nothing to undo
        if self._in_transaction_hook is not None:
            self._in_transaction_hook()

    @staticmethod
    def checked(req: ChargeRequest) -> CheckedCharge:
        """`req` checked and converted now, outside any transaction (`InvalidInputError`
        naming the first bad argument): a batch charging it does no check of its own."""
        return CheckedCharge(req.principal, req.epsilon, req.delta, req.description,
                             req.guarantee, BudgetLedger._prepare(req))

    @staticmethod
    def _prepare(req: ChargeRequest) -> tuple[str, Decimal, Decimal, str, str | None]:
        return check_charge(req.principal, req.epsilon, req.delta, req.description,
                            req.guarantee)

    def _charge_in(self, cur: Any, sql: _ChargeSQL, stamp: tuple[str, datetime], name: str,
                   eps: Decimal, dlt: Decimal, description: str,
                   guarantee_text: str | None) -> LedgerEntry:
        """One charge inside an open write transaction (`cur`: a DBAPI cursor, see
        `privlab.core.store.dbapi`); raises before writing if refused. `stamp`: the batch's
        time as stored and as a datetime. The amounts come canonical (`check_charge`,
        `_add`), so their stored text is their plain format, each formatted once."""
        now = stamp[0]
        cur.execute(sql.select, {"name": name})
        found = cur.fetchall()
        if not found:
            raise self._unknown(name)
        row = _PrincipalRow(*found[0])
        budget_e, budget_d = _dec(row.budget_epsilon), _dec(row.budget_delta)
        spent_e, spent_d = _dec(row.spent_epsilon), _dec(row.spent_delta)
        new_e, new_d = _add(spent_e, eps), _add(spent_d, dlt)
        if new_e > budget_e:
            raise BudgetExceededError(
                f"charging epsilon={_text(eps)} to {name!r} would exceed its budget: "
                f"spent {_text(spent_e)} of {_text(budget_e)}, remaining "
                f"{_text(_sub(budget_e, spent_e))}; nothing was charged or released")
        if new_d > budget_d:
            raise BudgetExceededError(
                f"charging delta={_text(dlt)} to {name!r} would exceed its delta budget: "
                f"spent {_text(spent_d)} of {_text(budget_d)}; nothing was charged or "
                "released")
        seq = int(row.n_charges) + 1
        new_e_text, new_d_text = format(new_e, "f"), format(new_d, "f")
        values = dict(principal=name, seq=seq, epsilon=format(eps, "f"),
                      delta=format(dlt, "f"), spent_epsilon=new_e_text,
                      spent_delta=new_d_text, budget_epsilon=row.budget_epsilon,
                      budget_delta=row.budget_delta, description=description,
                      guarantee=guarantee_text, created_at=now)
        cur.execute(sql.insert, values)
        (entry_id,) = cur.fetchone()
        # Compare-and-set on n_charges: if serialization were ever broken, this update would
        # match no row and the whole transaction would roll back.
        cur.execute(sql.update, {
            "name": name, "old_n": row.n_charges, "old_e": row.spent_epsilon,
            "old_d": row.spent_delta, "new_e": new_e_text, "new_d": new_d_text,
            "seq": seq, "now": now})
        updated = cur.rowcount
        if updated != 1:
            raise PrivlabError(f"ledger {self._where}: concurrent update of {name!r} "
                               "detected; nothing was charged, try again")
        return LedgerEntry(
            entry_id=int(entry_id), principal=name, seq=seq, epsilon_exact=eps,
            delta_exact=dlt, spent_epsilon_exact=new_e, spent_delta_exact=new_d,
            budget_epsilon_exact=budget_e, budget_delta_exact=budget_d, description=description,
            guarantee_text=guarantee_text, created_at=stamp[1])

    @contextmanager
    def reserve(self, principal: str, epsilon: Any, delta: Any = 0.0, description: str = "",
                guarantee: Any = None) -> Iterator[LedgerEntry]:
        """`with book.reserve(p, eps) as entry: value = mechanism(...)`.

        The charge is committed BEFORE the body runs. If the body fails the charge stays:
        the mechanism may already have drawn noise, or partly run and leaked through a log,
        a timing or an exception message; refunding would let a retry loop spend the same
        budget twice. Over-counting is safe, under-counting is not.
        """
        yield self.charge(principal, epsilon, delta, description=description,
                          guarantee=guarantee)

    # -- history and checks -------------------------------------------------------------------

    def history(self, principal: str | None = None) -> list[LedgerEntry]:
        """All charges in commit order (of one principal, or of everyone)."""
        query = sa.select(_entries).order_by(_entries.c.entry_id)
        if principal is not None:
            name = _check_principal(principal)
            query = query.where(_entries.c.principal == name)
        with self._transaction(read_only=True) as conn:
            if principal is not None and conn.execute(
                    sa.select(_principals.c.name).where(_principals.c.name == name)
            ).one_or_none() is None:
                raise self._unknown(name)
            rows = conn.execute(query).all()
        return [_entry(r) for r in rows]

    def budget_changes(self, principal: str | None = None) -> list[BudgetChange]:
        """Every creation or change of a total budget, oldest first."""
        query = sa.select(_budget_changes).order_by(_budget_changes.c.change_id)
        if principal is not None:
            query = query.where(_budget_changes.c.principal == _check_principal(principal))
        with self._transaction(read_only=True) as conn:
            rows = conn.execute(query).all()
        return [BudgetChange(
            change_id=int(r.change_id), principal=r.principal,
            budget_epsilon_exact=_dec(r.budget_epsilon), budget_delta_exact=_dec(r.budget_delta),
            previous_epsilon_exact=None if r.previous_epsilon is None else _dec(r.previous_epsilon),
            previous_delta_exact=None if r.previous_delta is None else _dec(r.previous_delta),
            created_at=datetime.fromisoformat(r.created_at)) for r in rows]

    def verify(self) -> LedgerCheck:
        """Recompute every total from the entries and check the database's own integrity
        (`privlab.core.ledger.checks`)."""
        with self._transaction(read_only=True) as conn:
            return verify_ledger(conn)

    def __repr__(self) -> str:
        return f"BudgetLedger({self._where!r})"
