"""`BudgetLedger`: persistent per-principal privacy budgets, charged before anything is released.

A principal (a person, a team, an API key) has a total budget (epsilon, delta). Every DP
release is first *charged*: in ONE serialized database transaction the ledger reads what the
principal has spent, refuses the charge if it would go past the budget, appends an entry and
updates the running total. Only after that transaction committed may the value be computed
and shown (`reserve` packages this order). A crash at any point therefore either leaves no
trace (nothing committed, nothing released) or leaves a charge for a value that may never
have been shown: the ledger can over-count, never under-count.

Accountant: sequential (basic) composition. Spent epsilon is the sum of the charged epsilons
and spent delta the sum of the charged deltas; that is a valid (if loose) bound for any
sequence of adaptively chosen (eps_i, delta_i)-DP releases on the same data. Tighter
accountants (RDP, PLD) live in `privlab.core.accounting`; charge their converted total here.

Arithmetic is exact: amounts are decimals (a float is read through its shortest repr, so
0.1 is exactly 1/10), stored as canonical decimal text and added with `decimal` under a
context that traps any rounding. Ten charges of 0.1 exhaust a budget of 1.0 exactly; an
eleventh is refused; no float drift accumulates over thousands of charges.

Storage: SQLAlchemy, SQLite (default; a plain path) or PostgreSQL (a URL). Serialization:
SQLite takes the database write lock at the start of the transaction (`BEGIN IMMEDIATE`, WAL
journal, 30 s busy timeout); PostgreSQL locks the principal's row (`SELECT ... FOR UPDATE`).
Entries and budget changes are append-only, enforced by database triggers.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import numbers
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import (
    ROUND_CEILING,
    ROUND_FLOOR,
    Context,
    Decimal,
    DivisionByZero,
    Inexact,
    InvalidOperation,
    Overflow,
    Rounded,
)
from pathlib import Path
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, SQLAlchemyError

from privlab.core.dbapi import write_transaction
from privlab.core.writer_lock import WriterLock, sqlite_file
from privlab.errors import BudgetExceededError, InvalidInputError, PrivlabError
from privlab.utils.closing import Closing
from privlab.utils.text import escape_nul

__all__ = [
    "BudgetLedger", "ChargeRequest", "LedgerEntry", "BudgetStatus", "BudgetChange", "LedgerCheck",
    "SCHEMA_VERSION", "ACCOUNTANT",
]

SCHEMA_VERSION = "1"
ACCOUNTANT = "sequential composition (basic): spent = sum of charged epsilons and deltas"

#: Largest epsilon a budget or a charge may carry (larger is not a privacy budget).
MAX_EPSILON = Decimal(10) ** 9
#: Amounts finer than this are rounded: charges up, budgets down (conservative both ways).
QUANTUM = Decimal("1e-30")
#: Every sum fits in 9 + 30 digits; 80 digits of precision and trapped rounding mean any
#: inexact operation is a loud bug, not silent drift.
_EXACT = Context(prec=80, traps=[Inexact, Rounded, InvalidOperation, Overflow, DivisionByZero])
_BUSY_TIMEOUT_S = 30.0
_NAME_RE = re.compile(r"^[^\x00-\x1f\x7f]{1,200}$")

_metadata = sa.MetaData()
_meta = sa.Table(
    "privlab_ledger_meta", _metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(200), nullable=False),
)
_principals = sa.Table(
    "privlab_principals", _metadata,
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("budget_epsilon", sa.String(64), nullable=False),
    sa.Column("budget_delta", sa.String(64), nullable=False),
    sa.Column("spent_epsilon", sa.String(64), nullable=False),
    sa.Column("spent_delta", sa.String(64), nullable=False),
    sa.Column("n_charges", sa.Integer, nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("updated_at", sa.String(40), nullable=False),
)
_entries = sa.Table(
    "privlab_entries", _metadata,
    sa.Column("entry_id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True,
              autoincrement=True),
    sa.Column("principal", sa.String(200), sa.ForeignKey("privlab_principals.name"),
              nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("epsilon", sa.String(64), nullable=False),
    sa.Column("delta", sa.String(64), nullable=False),
    sa.Column("spent_epsilon", sa.String(64), nullable=False),  # running total after this one
    sa.Column("spent_delta", sa.String(64), nullable=False),
    sa.Column("budget_epsilon", sa.String(64), nullable=False),  # budget when charged
    sa.Column("budget_delta", sa.String(64), nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("guarantee", sa.Text, nullable=True),
    sa.Column("created_at", sa.String(40), nullable=False),
    # Second line of defence: two charges can never claim the same slot of one principal.
    sa.UniqueConstraint("principal", "seq", name="uq_privlab_entries_principal_seq"),
)
_budget_changes = sa.Table(
    "privlab_budget_changes", _metadata,
    sa.Column("change_id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True,
              autoincrement=True),
    sa.Column("principal", sa.String(200), sa.ForeignKey("privlab_principals.name"),
              nullable=False),
    sa.Column("budget_epsilon", sa.String(64), nullable=False),
    sa.Column("budget_delta", sa.String(64), nullable=False),
    sa.Column("previous_epsilon", sa.String(64), nullable=True),
    sa.Column("previous_delta", sa.String(64), nullable=True),
    sa.Column("created_at", sa.String(40), nullable=False),
)
_APPEND_ONLY = ("privlab_entries", "privlab_budget_changes")


# --------------------------------------------------------------------------- amounts

def _amount(value: Any, field: str, *, rounding: str, upper: Decimal,
            upper_inclusive: bool, allow_zero: bool) -> Decimal:
    """Read a user amount as an exact decimal (floats through their shortest repr)."""
    if isinstance(value, bool):
        raise InvalidInputError(f"{field} must be a number, got {value!r}")
    try:
        if isinstance(value, Decimal):
            dec = value
        elif isinstance(value, numbers.Integral):
            dec = Decimal(int(value))
        elif isinstance(value, numbers.Real):
            as_float = float(value)
            if not math.isfinite(as_float):
                raise InvalidInputError(f"{field} must be a finite number, got {value!r}")
            dec = Decimal(repr(as_float))
        elif isinstance(value, str):
            dec = Decimal(value.strip())
        else:
            raise InvalidInputError(f"{field} must be a number, got {value!r}")
    except InvalidOperation:
        raise InvalidInputError(f"{field} must be a number, got {value!r}") from None
    if not dec.is_finite():
        raise InvalidInputError(f"{field} must be a finite number, got {value!r}")
    lower_ok = dec >= 0 if allow_zero else dec > 0
    upper_ok = dec <= upper if upper_inclusive else dec < upper
    if not (lower_ok and upper_ok):
        low = "[0" if allow_zero else "(0"
        high = f"{upper}]" if upper_inclusive else f"{upper})"
        raise InvalidInputError(f"{field} must be in {low}, {high}, got {value!r}")
    if dec.as_tuple().exponent < QUANTUM.as_tuple().exponent:  # finer than 1e-30
        dec = dec.quantize(QUANTUM, rounding=rounding)
    return _canon(dec)


def _canon(dec: Decimal) -> Decimal:
    """Canonical form (no trailing zeros, no exponent) so stored text compares and sums."""
    return Decimal(format(dec.normalize(), "f")) if dec else Decimal(0)


def _text(dec: Decimal) -> str:
    return format(_canon(dec), "f")


def _dec(text: str) -> Decimal:
    return Decimal(text)


def _add(a: Decimal, b: Decimal) -> Decimal:
    return _canon(_EXACT.add(a, b))


def _sub(a: Decimal, b: Decimal) -> Decimal:
    return _canon(_EXACT.subtract(a, b))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _check_principal(name: Any, field: str = "principal") -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name.strip() or ""):
        raise InvalidInputError(f"{field} must be a non-empty name of at most 200 printable "
                                f"characters, got {name!r}")
    return name.strip()


def _guarantee_json(guarantee: Any, epsilon: Decimal, delta: Decimal) -> str | None:
    """Serialise the guarantee stored with a charge and check it does not claim more than paid."""
    if guarantee is None:
        return None
    if hasattr(guarantee, "to_dict"):
        guarantee = guarantee.to_dict()
    if not isinstance(guarantee, dict):
        raise InvalidInputError(f"guarantee must be a dict or a PrivacyGuarantee, got "
                                f"{type(guarantee).__name__}")
    if guarantee.get("is_dp") is False:
        raise InvalidInputError("guarantee: a release that is not differentially private cannot "
                                "be charged to a privacy budget; do not charge it")
    for key, paid in (("epsilon", epsilon), ("delta", delta)):
        claimed = guarantee.get(key)
        if not isinstance(claimed, numbers.Real) or isinstance(claimed, bool):
            continue
        if not math.isfinite(float(claimed)) or Decimal(repr(float(claimed))) > paid:
            raise InvalidInputError(f"guarantee {key}={claimed} is larger than the charged "
                                    f"{key}={_text(paid)}; charge what the release spends")
    try:
        return json.dumps(guarantee, sort_keys=True, allow_nan=False, default=str)
    except ValueError as exc:
        raise InvalidInputError(f"guarantee must be JSON serialisable: {exc}") from None


# --------------------------------------------------------------------------- records

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
    guarantee: dict[str, Any] | None
    created_at: datetime

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
        guarantee=None if row.guarantee is None else json.loads(row.guarantee),
        created_at=datetime.fromisoformat(row.created_at),
    )


def _status(row: Any) -> BudgetStatus:
    return BudgetStatus(
        principal=row.name,
        budget_epsilon_exact=_dec(row.budget_epsilon), budget_delta_exact=_dec(row.budget_delta),
        spent_epsilon_exact=_dec(row.spent_epsilon), spent_delta_exact=_dec(row.spent_delta),
        n_charges=int(row.n_charges), created_at=datetime.fromisoformat(row.created_at),
        updated_at=datetime.fromisoformat(row.updated_at),
    )


# --------------------------------------------------------------------------- the ledger

def _ledger_url(target: str | os.PathLike[str] | URL) -> URL:
    """A path becomes `sqlite:///<absolute path>`; a SQLAlchemy URL is used as is."""
    if isinstance(target, URL):
        url = target
    else:
        text = os.fspath(target)
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError(f"--ledger must be a file path or a database URL, "
                                    f"got {target!r}")
        if "://" in text:
            try:
                url = make_url(text)
            except ArgumentError:
                raise InvalidInputError(f"--ledger {text!r} is not a valid database URL "
                                        "(e.g. sqlite:///budget.db)") from None
        else:
            path = Path(text).expanduser()
            url = URL.create("sqlite", database=str(path.resolve()))
    backend = url.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise InvalidInputError(f"--ledger database {backend!r} is not supported; use a SQLite "
                                "path or a postgresql+psycopg:// URL")
    if backend == "sqlite" and url.database not in (None, "", ":memory:") and \
            not str(url.database).startswith("file:"):
        path = Path(url.database)
        if path.is_dir():
            raise InvalidInputError(f"--ledger {path} is a directory; give a file path")
        if not path.parent.is_dir():
            raise InvalidInputError(f"--ledger directory {path.parent} does not exist; "
                                    "create it first")
    return url


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


@dataclass(frozen=True)
class ChargeRequest:
    """One charge for `BudgetLedger.charge_many` (the arguments of `charge`)."""

    principal: str
    epsilon: Any
    delta: Any = 0.0
    description: str = ""
    guarantee: Any = None


@dataclass(frozen=True)
class _ChargeSQL:
    select: str
    insert: str
    update: str


class _PrincipalRow(NamedTuple):
    """The columns `_ChargeSQL.select` reads, in its order."""

    budget_epsilon: str
    budget_delta: str
    spent_epsilon: str
    spent_delta: str
    n_charges: int


@functools.cache
def _charge_sql(dialect: str) -> _ChargeSQL:
    """The charge's three statements as driver SQL, written once per dialect.

    A charge is on the hot path of every gateway query; building and compiling SQLAlchemy
    Core statements per call cost about 1.5 ms of CPU, the database work about 0.1 ms.
    Named parameters: sqlite3 takes `:name`, psycopg `%(name)s`.
    """
    def p(name: str) -> str:
        return f"%({name})s" if dialect == "postgresql" else f":{name}"

    cols = ("principal", "seq", "epsilon", "delta", "spent_epsilon", "spent_delta",
            "budget_epsilon", "budget_delta", "description", "guarantee", "created_at")
    lock = " FOR UPDATE" if dialect == "postgresql" else ""  # SQLite: BEGIN IMMEDIATE
    return _ChargeSQL(
        select=("SELECT budget_epsilon, budget_delta, spent_epsilon, spent_delta, n_charges "
                f"FROM privlab_principals WHERE name = {p('name')}{lock}"),
        insert=(f"INSERT INTO privlab_entries ({', '.join(cols)}) VALUES "
                f"({', '.join(p(c) for c in cols)}) RETURNING entry_id"),
        update=(f"UPDATE privlab_principals SET spent_epsilon = {p('new_e')}, spent_delta = "
                f"{p('new_d')}, n_charges = {p('seq')}, updated_at = {p('now')} WHERE name = "
                f"{p('name')} AND n_charges = {p('old_n')} AND spent_epsilon = {p('old_e')} "
                f"AND spent_delta = {p('old_d')}"),
    )


def check_budget(principal: str, epsilon: Any, delta: Any = 0.0) -> tuple[str, Decimal, Decimal]:
    """Validate a budget before any ledger is opened (a refused `budget set` creates no file)."""
    name = _check_principal(principal)
    eps = _amount(epsilon, "epsilon", rounding=ROUND_FLOOR, upper=MAX_EPSILON,
                  upper_inclusive=True, allow_zero=False)
    dlt = _amount(delta, "delta", rounding=ROUND_FLOOR, upper=Decimal(1),
                  upper_inclusive=False, allow_zero=True)
    return name, eps, dlt


def _release_pool(engine: Engine, writer_lock: WriterLock | None) -> None:
    """Close a ledger's (or audit log's) pooled connections and its writer lock file."""
    engine.dispose()
    if writer_lock is not None:
        writer_lock.close()


class BudgetLedger(Closing):
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

    def __init__(self, url_or_path: str | os.PathLike[str] | URL,
                 *, busy_timeout_s: float = _BUSY_TIMEOUT_S, create: bool = True) -> None:
        self.url = _ledger_url(url_or_path)
        self._where = self.url.render_as_string(hide_password=True)
        if self.url.get_backend_name() == "sqlite" and self.url.database:
            self._where = str(self.url.database)
            if not create and not str(self.url.database).startswith("file:") and \
                    self.url.database != ":memory:" and not Path(self.url.database).exists():
                raise InvalidInputError(f"--ledger {self._where} does not exist; create it "
                                        "with `privlab budget set`")
        self._busy_timeout_s = float(busy_timeout_s)
        self._pid = os.getpid()
        db_file = sqlite_file(self.url.database) if self.dialect == "sqlite" else None
        self._writer_lock = None if db_file is None else \
            WriterLock(db_file, timeout_s=self._busy_timeout_s)
        self._engine = self._make_engine()
        self._arm()
        try:
            self._ensure_schema()
        except BaseException:
            self.close()  # a refused ledger holds nothing open
            raise

    # -- engine and transactions --------------------------------------------------------

    @property
    def location(self) -> str:
        """Where the ledger lives, fit to print: a file path, or the URL without password."""
        return self._where

    @property
    def dialect(self) -> str:
        return self.url.get_backend_name()

    def _make_engine(self) -> Engine:
        if self.dialect == "sqlite":
            engine = sa.create_engine(self.url, connect_args={"timeout": self._busy_timeout_s})
            busy_ms = int(self._busy_timeout_s * 1000)

            @sa.event.listens_for(engine, "connect")
            def _on_connect(dbapi_conn: Any, _record: Any) -> None:
                # sqlite3 must not issue its own (deferred) BEGIN: we emit BEGIN IMMEDIATE.
                dbapi_conn.isolation_level = None
                cur = dbapi_conn.cursor()
                try:
                    cur.execute(f"PRAGMA busy_timeout = {busy_ms}")
                    cur.execute("PRAGMA journal_mode = WAL")
                    # FULL: a committed charge survives power loss, not only a process crash.
                    cur.execute("PRAGMA synchronous = FULL")
                    cur.execute("PRAGMA foreign_keys = ON")
                finally:
                    cur.close()

            @sa.event.listens_for(engine, "begin")
            def _on_begin(conn: Connection) -> None:
                # IMMEDIATE takes the write lock now, so read-spent/insert/update of a charge
                # cannot interleave with another writer; readers use a deferred BEGIN (WAL
                # snapshot, no lock).
                read_only = conn.get_execution_options().get("privlab_read_only", False)
                conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

            return engine
        return sa.create_engine(self.url, pool_pre_ping=True)

    def _arm(self) -> None:
        """Pooled connections may be open from now until `close()` (or a warning if the
        ledger is dropped before)."""
        self._hold(functools.partial(_release_pool, self._engine, self._writer_lock),
                   f"BudgetLedger({self._where!r})")

    def _engine_now(self) -> Engine:
        if os.getpid() != self._pid:  # forked: never share the parent's pooled connections
            self._engine.dispose(close=False)
            self._pid = os.getpid()
        if self.closed:  # used again after close(): it reconnects, so close it again later
            self._arm()
        return self._engine

    @contextmanager
    def _transaction(self, *, read_only: bool = False) -> Iterator[Connection]:
        """One database transaction; database errors become one-line `PrivlabError`s."""
        writer = contextlib.nullcontext() if read_only or self._writer_lock is None \
            else self._writer_lock.held()
        try:
            with writer, self._engine_now().connect() as conn:
                if read_only:
                    conn = conn.execution_options(privlab_read_only=True)
                with conn.begin():
                    if self.dialect == "postgresql" and not read_only:
                        # Bound the wait for a principal's row lock like SQLite's busy timeout.
                        conn.exec_driver_sql(
                            f"SET LOCAL lock_timeout = {int(self._busy_timeout_s * 1000)}")
                    yield conn
        except SQLAlchemyError as exc:
            if isinstance(exc, IntegrityError):
                raise
            raise _db_error(exc, self._where) from exc

    def close(self) -> None:
        """Release pooled connections (the ledger stays usable; it reconnects on demand)."""
        super().close()

    # -- schema ---------------------------------------------------------------------------

    def _schema_version(self, conn: Connection) -> str | None:
        if not sa.inspect(conn).has_table(_meta.name):
            return None
        return conn.execute(sa.select(_meta.c.value).where(_meta.c.key == "schema_version")
                            ).scalar_one_or_none()

    def _ensure_schema(self) -> None:
        with self._transaction(read_only=True) as conn:
            version = self._schema_version(conn)
        if version is None:
            with self._transaction() as conn:
                if self.dialect == "postgresql":  # serialise concurrent first-time creation
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(7275829131)"))
                version = self._schema_version(conn)
                if version is None:
                    _metadata.create_all(conn, checkfirst=True)
                    self._create_append_only_triggers(conn)
                    conn.execute(sa.insert(_meta).values(key="schema_version",
                                                         value=SCHEMA_VERSION))
                    conn.execute(sa.insert(_meta).values(key="accountant", value="sequential"))
                    version = SCHEMA_VERSION
        if version != SCHEMA_VERSION:
            raise PrivlabError(f"ledger {self._where} has schema version {version}; this "
                               f"privlab reads version {SCHEMA_VERSION}")

    def _create_append_only_triggers(self, conn: Connection) -> None:
        if self.dialect == "sqlite":
            for table in _APPEND_ONLY:
                for op in ("UPDATE", "DELETE"):
                    conn.exec_driver_sql(
                        f"CREATE TRIGGER IF NOT EXISTS {table}_no_{op.lower()} BEFORE {op} ON "
                        f"{table} BEGIN SELECT RAISE(ABORT, 'privlab ledger: {table} is "
                        "append-only'); END")
            return
        conn.exec_driver_sql(
            "CREATE OR REPLACE FUNCTION privlab_ledger_append_only() RETURNS trigger AS $$ "
            "BEGIN RAISE EXCEPTION USING MESSAGE = 'privlab ledger: ' || TG_TABLE_NAME || "
            "' is append-only (' || TG_OP || ' refused)'; END; $$ LANGUAGE plpgsql")
        for table in _APPEND_ONLY:
            conn.exec_driver_sql(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION privlab_ledger_append_only()")
            conn.exec_driver_sql(
                f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION privlab_ledger_append_only()")

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
            try:
                prepared.append((i, BudgetLedger._prepare(req)))
            except InvalidInputError as exc:
                results[i] = exc
        # PostgreSQL locks principals' rows: take them in one global order (no deadlock
        # between two batches); stable, so one principal's charges keep their order.
        prepared.sort(key=lambda item: item[1][0])
        return prepared, results

    @contextmanager
    def write_transaction(self, names: str = "") -> Iterator[Any]:
        """A DBAPI cursor in one write transaction on the ledger's database (its writer lock,
        its `synchronous = FULL`, PostgreSQL's lock timeout), committed when the body
        returns; driver errors become one-line `PrivlabError`s and nothing is committed.
        For `charge_in`, alone or with other rows in the same commit (the gateway's audit
        row: `privlab.query.commit`)."""
        engine = self._engine_now()
        dbapi = engine.dialect.dbapi
        # PostgreSQL: bound the wait for a principal's row lock like SQLite's busy timeout
        setup = (f"SET LOCAL lock_timeout = {int(self._busy_timeout_s * 1000)}",) \
            if self.dialect == "postgresql" else ()
        try:
            with write_transaction(engine, writer=self._writer_lock, setup=setup) as cur:
                yield cur
        except dbapi.IntegrityError as exc:
            who = names or "a principal"
            raise PrivlabError(f"ledger {self._where}: concurrent charge of {who} detected; "
                               "nothing was charged, try again") from exc
        except dbapi.Error as exc:
            raise _db_error(exc, self._where) from exc

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
        sql = _charge_sql(self.dialect)
        for i, args in prepared:
            try:
                results[i] = self._charge_in(cur, sql, now, *args)
            except (BudgetExceededError, InvalidInputError) as exc:
                results[i] = exc  # checked before any write: nothing to undo
        if self._in_transaction_hook is not None:
            self._in_transaction_hook()

    @staticmethod
    def _prepare(req: ChargeRequest) -> tuple[str, Decimal, Decimal, str, str | None]:
        name = _check_principal(req.principal)
        eps = _amount(req.epsilon, "epsilon", rounding=ROUND_CEILING, upper=MAX_EPSILON,
                      upper_inclusive=True, allow_zero=False)
        dlt = _amount(req.delta, "delta", rounding=ROUND_CEILING, upper=Decimal(1),
                      upper_inclusive=False, allow_zero=True)
        if not isinstance(req.description, str):
            raise InvalidInputError(
                f"description must be text, got {type(req.description).__name__}")
        return (name, eps, dlt, escape_nul(req.description),
                _guarantee_json(req.guarantee, eps, dlt))

    def _charge_in(self, cur: Any, sql: _ChargeSQL, now: str, name: str, eps: Decimal,
                   dlt: Decimal, description: str, guarantee_text: str | None) -> LedgerEntry:
        """One charge inside an open write transaction (`cur`: a DBAPI cursor, see
        `privlab.core.dbapi`); raises before writing if refused."""
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
        values = dict(principal=name, seq=seq, epsilon=_text(eps), delta=_text(dlt),
                      spent_epsilon=_text(new_e), spent_delta=_text(new_d),
                      budget_epsilon=row.budget_epsilon, budget_delta=row.budget_delta,
                      description=description, guarantee=guarantee_text, created_at=now)
        cur.execute(sql.insert, values)
        (entry_id,) = cur.fetchone()
        # Compare-and-set on n_charges: if serialization were ever broken, this update would
        # match no row and the whole transaction would roll back.
        cur.execute(sql.update, {
            "name": name, "old_n": row.n_charges, "old_e": row.spent_epsilon,
            "old_d": row.spent_delta, "new_e": _text(new_e), "new_d": _text(new_d),
            "seq": seq, "now": now})
        updated = cur.rowcount
        if updated != 1:
            raise PrivlabError(f"ledger {self._where}: concurrent update of {name!r} "
                               "detected; nothing was charged, try again")
        return LedgerEntry(
            entry_id=int(entry_id), principal=name, seq=seq, epsilon_exact=eps,
            delta_exact=dlt, spent_epsilon_exact=new_e, spent_delta_exact=new_d,
            budget_epsilon_exact=budget_e, budget_delta_exact=budget_d, description=description,
            guarantee=None if guarantee_text is None else json.loads(guarantee_text),
            created_at=datetime.fromisoformat(now))

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
        """Recompute every total from the entries and check the database's own integrity.

        Checks per principal: entries numbered 1..n without gaps, each running total equals
        the previous plus the charge, the stored total equals the sum of the entries, and no
        running total ever passed the budget in force when it was charged.
        """
        problems: list[str] = []
        integrity = None
        with self._transaction(read_only=True) as conn:
            if self.dialect == "sqlite":
                integrity = "; ".join(str(r[0]) for r in
                                      conn.exec_driver_sql("PRAGMA integrity_check"))
            principal_rows = conn.execute(sa.select(_principals)
                                          .order_by(_principals.c.name)).all()
            entry_rows = conn.execute(sa.select(_entries).order_by(_entries.c.principal,
                                                                   _entries.c.seq)).all()
        by_principal: dict[str, list[Any]] = {}
        for r in entry_rows:
            by_principal.setdefault(r.principal, []).append(r)
        known = {r.name for r in principal_rows}
        for name in sorted(set(by_principal) - known):
            problems.append(f"{name!r}: entries without a principal row")
        for p in principal_rows:
            rows = by_principal.get(p.name, [])
            total_e = total_d = Decimal(0)
            for i, r in enumerate(rows, start=1):
                if int(r.seq) != i:
                    problems.append(f"{p.name!r}: entry {r.entry_id} has seq {r.seq}, expected {i}")
                    break
                total_e, total_d = _add(total_e, _dec(r.epsilon)), _add(total_d, _dec(r.delta))
                if (total_e, total_d) != (_dec(r.spent_epsilon), _dec(r.spent_delta)):
                    problems.append(f"{p.name!r}: running total broken at entry {r.entry_id}")
                    break
                if total_e > _dec(r.budget_epsilon) or total_d > _dec(r.budget_delta):
                    problems.append(f"{p.name!r}: entry {r.entry_id} went past the budget")
            if len(rows) != int(p.n_charges):
                problems.append(f"{p.name!r}: {len(rows)} entries but n_charges={p.n_charges}")
            if (total_e, total_d) != (_dec(p.spent_epsilon), _dec(p.spent_delta)):
                problems.append(f"{p.name!r}: stored spent ({p.spent_epsilon}, {p.spent_delta}) "
                                f"!= sum of entries ({_text(total_e)}, {_text(total_d)})")
            if _dec(p.spent_epsilon) > _dec(p.budget_epsilon) or \
                    _dec(p.spent_delta) > _dec(p.budget_delta):
                problems.append(f"{p.name!r}: spent exceeds budget")
        return LedgerCheck(integrity=integrity, principals=len(principal_rows),
                           entries=len(entry_rows), problems=tuple(problems))

    def __repr__(self) -> str:
        return f"BudgetLedger({self._where!r})"


#: SQLite's own files beside a database `<db>` (rollback journal, WAL and its index).
SQLITE_SIDECARS = ("-wal", "-shm", "-journal")


def replace_with_fresh_ledger(path: Path, budgets: dict[str, float]) -> bool:
    """Replace the SQLite ledger at `path` by a new one holding only `budgets`, in one rename:
    built beside it, the old database's journal files removed first so that they are never
    read as the new one's. Returns whether a ledger was replaced. (`privlab demo`: each run
    starts from its full budget.)"""
    from privlab.core.writer_lock import LOCK_SUFFIX

    def unlink(base: Path, suffixes: tuple[str, ...]) -> None:
        for suffix in suffixes:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{base}{suffix}")

    tmp = path.with_name(f".{path.name}.fresh-{os.getpid()}")
    every = ("", *SQLITE_SIDECARS, LOCK_SUFFIX)
    unlink(tmp, every)  # leftovers of a crashed earlier attempt
    try:
        with BudgetLedger(str(tmp)) as fresh:
            for principal, epsilon in budgets.items():
                fresh.set_budget(principal, epsilon)
        replaced = path.exists()
        unlink(path, SQLITE_SIDECARS)
        os.replace(tmp, path)
    finally:
        unlink(tmp, every)
    return replaced
