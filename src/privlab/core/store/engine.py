"""`SqlStore`: how the ledger and the audit log open, lock, use and let go of their database.

SQLite: WAL journal, a busy timeout, `synchronous` as the store needs it (the ledger FULL: a
committed charge survives a power cut; the audit log NORMAL: the ledger's charges are the
record that must not be lost), the driver in autocommit mode so that the store itself emits
`BEGIN IMMEDIATE` for writers (the write lock at once: a read-then-write cannot interleave
with another writer) and a plain `BEGIN` for readers (a WAL snapshot, no lock); writers of
several threads and processes queue on `WriterLock` first. PostgreSQL: pooled connections
with pre-ping; the store serializes with row or advisory locks of its own.

An instance that crosses a `fork` drops the parent's pooled connections in the child; one used
after `close()` reconnects (and must be closed again); one dropped open warns
(`privlab.utils.closing`).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from privlab.core.store.dbapi import HeldConnection, write_transaction
from privlab.core.store.writer_lock import WriterLock, sqlite_file
from privlab.errors import PrivlabError
from privlab.utils.closing import Closing

__all__ = ["SqlStore", "StoreOptions"]


@dataclass(frozen=True)
class StoreOptions:
    """How a store's connections are set up."""

    #: SQLite `PRAGMA synchronous`: "FULL" (survives a power cut) or "NORMAL" (a process crash)
    synchronous: str = "FULL"
    #: how long a writer waits for SQLite's write lock (and the writer lock)
    busy_timeout_s: float = 30.0
    #: SQLite `PRAGMA foreign_keys = ON`
    foreign_keys: bool = False
    #: PostgreSQL: `SET LOCAL lock_timeout` to the busy timeout in every write transaction
    lock_timeout: bool = False
    #: extra `create_engine` arguments (pool sizes) for SQLite and for PostgreSQL
    sqlite_pool: dict[str, int] = field(default_factory=dict)
    postgresql_pool: dict[str, int] = field(default_factory=dict)


def _release(engine: Engine, writer_lock: WriterLock | None, side_file: list[int],
             held: HeldConnection | None = None) -> None:
    """Close a store's side file ([fd, pid], if this process opened it), held and pooled
    connections and writer lock file. Takes no store: a finalizer must not keep its store
    alive."""
    if side_file and side_file[1] == os.getpid():
        with contextlib.suppress(OSError):
            os.close(side_file[0])
    side_file.clear()
    if held is not None:
        held.drop()
    engine.dispose()
    if writer_lock is not None:
        writer_lock.close()


def _sqlite_engine(url: URL, options: StoreOptions) -> Engine:
    engine = sa.create_engine(url, connect_args={"timeout": options.busy_timeout_s},
                              **options.sqlite_pool)
    pragmas = (f"PRAGMA busy_timeout = {int(options.busy_timeout_s * 1000)}",
               "PRAGMA journal_mode = WAL", f"PRAGMA synchronous = {options.synchronous}",
               *(("PRAGMA foreign_keys = ON",) if options.foreign_keys else ()))

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # sqlite3 must not issue its own (deferred) BEGIN: `_on_begin` emits ours
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        try:
            for pragma in pragmas:
                cur.execute(pragma)
        finally:
            cur.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        read_only = conn.get_execution_options().get("privlab_read_only", False)
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

    return engine


class SqlStore(Closing):
    """Base of a store kept in SQLite or PostgreSQL. A subclass calls `_open_store` first in
    its `__init__`, then uses `_transaction` (SQLAlchemy) and `_write_cursor` (the driver's
    cursor, hot paths); it says how errors read with `_store_error` / `_driver_error`."""

    #: SQLAlchemy errors `_transaction` lets through unchanged (the caller handles them)
    _raised_as_is: tuple[type[BaseException], ...] = ()

    url: URL
    dialect: str
    _engine: Engine
    _writer_lock: WriterLock | None
    _options: StoreOptions
    #: [fd, pid] of a file the store holds open beside the database (empty: none)
    _side_file: list[int]

    def _open_store(self, url: URL, options: StoreOptions, what: str) -> None:
        """Create the engine and writer lock of `url`; `what` names the store in warnings."""
        self.url = url
        #: "sqlite" or "postgresql" (an attribute: read on every append and charge)
        self.dialect = url.get_backend_name()
        self._options = options
        self._what = what
        self._pid = os.getpid()
        self._side_file = []
        db_file = sqlite_file(url.database) if self.dialect == "sqlite" else None
        self._writer_lock = None if db_file is None else \
            WriterLock(db_file, timeout_s=options.busy_timeout_s)
        self._engine = _sqlite_engine(url, options) if self.dialect == "sqlite" else \
            sa.create_engine(url, pool_pre_ping=True, **options.postgresql_pool)
        #: the connection this store's writes use, one at a time under the writer lock
        self._held = None if self._writer_lock is None else HeldConnection()
        self._arm()

    def _arm(self) -> None:
        """Connections may be open from now until `close()` (or a warning if dropped)."""
        self._hold(functools.partial(_release, self._engine, self._writer_lock, self._side_file,
                                     self._held), self._what)

    def _engine_now(self) -> Engine:
        """The engine, with the parent's pooled connections dropped after a fork."""
        if os.getpid() != self._pid:  # forked: never share the parent's pooled connections
            self._engine.dispose(close=False)
            self._pid = os.getpid()
        if self.closed:  # used again after close(): it reconnects, so close it again later
            self._arm()
        return self._engine

    def _write_setup(self) -> tuple[str, ...]:
        """Statements that open every write transaction (PostgreSQL: bound the wait for a
        row lock like SQLite's busy timeout)."""
        if self.dialect == "postgresql" and self._options.lock_timeout:
            return (f"SET LOCAL lock_timeout = {int(self._options.busy_timeout_s * 1000)}",)
        return ()

    @contextmanager
    def _transaction(self, *, read_only: bool = False) -> Iterator[Connection]:
        """One database transaction (a writer holds the writer lock and SQLite's write lock
        from its start); database errors become one-line `PrivlabError`s."""
        writer = contextlib.nullcontext() if read_only or self._writer_lock is None \
            else self._writer_lock.held()
        try:
            with writer, self._engine_now().connect() as conn:
                if read_only:
                    conn = conn.execution_options(privlab_read_only=True)
                with conn.begin():
                    if not read_only:
                        for statement in self._write_setup():
                            conn.exec_driver_sql(statement)
                    yield conn
        except SQLAlchemyError as exc:
            if isinstance(exc, self._raised_as_is):
                raise
            raise self._store_error(exc) from exc

    def _write_cursor(self, setup: tuple[str, ...] = (),
                      who: str = "") -> AbstractContextManager[Any]:
        """A DBAPI cursor in one write transaction (`privlab.core.store.dbapi`), committed
        when the body returns; `setup` runs after the store's own; driver errors become
        `_driver_error(exc, who)` and nothing is committed. (No wrapper of its own: this is
        on the hot path of every query.)"""
        return write_transaction(self._engine_now(), writer=self._writer_lock,
                                 setup=self._write_setup() + setup,
                                 errors=lambda exc: self._driver_error(exc, who),
                                 held=self._held)

    def _store_error(self, exc: Exception) -> PrivlabError:
        """One line for a failed SQLAlchemy transaction."""
        return PrivlabError(f"{self._what}: database error ({type(exc).__name__})")

    def _driver_error(self, exc: Exception, who: str) -> PrivlabError:
        """One line for a failed driver write (`who`: what the write was for)."""
        return self._store_error(exc)
