"""`write_transaction`: one write transaction on a pooled driver connection (hot paths only).

The gateway writes two small transactions per query (the ledger charge, the audit row). Run
through SQLAlchemy's `Connection` each costs ~0.3 ms of CPU in its execution-context, result
and event machinery, about as much as the DuckDB query it guards. Here the statements go to
the driver's cursor (sqlite3 or psycopg) directly; the connection still comes from the
SQLAlchemy pool, so its connect-time settings (WAL, `synchronous`, busy timeout) are the ones
every other path uses. A SQLite store keeps one such connection for its writes
(`HeldConnection`): its writer lock lets one write in at a time, so the connection is never
shared, and the pool's check-out and reset-on-return (a ROLLBACK) are not paid inside the
lock on every commit. Everything else stays on SQLAlchemy.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy.engine import Engine

from privlab.core.store.writer_lock import WriterLock

__all__ = ["HeldConnection", "write_transaction"]

#: connections taken over a fork from the parent: never used, closed or returned to a pool
_INHERITED: list[Any] = []


class HeldConnection:
    """One pooled driver connection kept between write transactions, for a store whose
    writer lock admits one writer at a time (SQLite). Taken from the pool on first use,
    dropped after a failed transaction (the next write takes a fresh one), left alone in a
    forked child (the parent's), closed with the store."""

    def __init__(self) -> None:
        self._raw: Any = None
        self._pid = 0

    def take(self, engine: Engine) -> Any:
        if self._raw is not None and self._pid != os.getpid():
            _INHERITED.append(self._raw)  # the parent's: not ours to close or roll back
            self._raw = None
        if self._raw is None:
            self._raw = engine.raw_connection()
            self._pid = os.getpid()
        return self._raw

    def drop(self) -> None:
        """Give the connection back to its pool (closed there if the pool was disposed)."""
        raw, self._raw = self._raw, None
        if raw is not None and self._pid == os.getpid():
            with contextlib.suppress(Exception):
                raw.close()


@contextlib.contextmanager
def write_transaction(engine: Engine, *, writer: WriterLock | None = None,
                      setup: tuple[str, ...] = (),
                      errors: Callable[[Exception], Exception] | None = None,
                      held: HeldConnection | None = None) -> Iterator[Any]:
    """Yield a DBAPI cursor inside a write transaction, committed if the body returns and
    rolled back if it raises. SQLite: `BEGIN IMMEDIATE` (the write lock now, after `writer`
    if given; the connection runs in the driver's autocommit mode, so nothing else begins
    for us); PostgreSQL: the driver's implicit transaction. `setup`: statements run first
    (e.g. `SET LOCAL lock_timeout`). A driver exception (`engine.dialect.dbapi.Error`, from
    the body or the COMMIT) is raised as `errors(exc)`, or unchanged without `errors`.
    `held` (only with a `writer`, which keeps it to one thread): its connection instead of
    one checked out of the pool for this transaction alone."""
    try:
        holding = writer.held() if writer is not None else contextlib.nullcontext()
        with holding:
            raw = held.take(engine) if held is not None else engine.raw_connection()
            committed = False
            try:
                cur = raw.cursor()
                try:
                    if engine.dialect.name == "sqlite":
                        cur.execute("BEGIN IMMEDIATE")
                    for statement in setup:
                        cur.execute(statement)
                    yield cur
                except BaseException:
                    with contextlib.suppress(Exception):
                        raw.rollback()
                    raise
                raw.commit()
                committed = True
            finally:
                if held is None:
                    raw.close()  # back to the pool (which rolls back anything left open)
                elif not committed:
                    held.drop()  # whatever state it is in, the next write takes a fresh one
    except engine.dialect.dbapi.Error as exc:
        if errors is None:
            raise
        raise errors(exc) from exc
