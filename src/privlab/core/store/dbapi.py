"""`write_transaction`: one write transaction on a pooled driver connection (hot paths only).

The gateway writes two small transactions per query (the ledger charge, the audit row). Run
through SQLAlchemy's `Connection` each costs ~0.3 ms of CPU in its execution-context, result
and event machinery, about as much as the DuckDB query it guards. Here the statements go to
the driver's cursor (sqlite3 or psycopg) directly; the connection still comes from the
SQLAlchemy pool, so its connect-time settings (WAL, `synchronous`, busy timeout) and its
fork handling are the ones every other path uses. Everything else stays on SQLAlchemy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy.engine import Engine

from privlab.core.store.writer_lock import WriterLock

__all__ = ["write_transaction"]


@contextlib.contextmanager
def write_transaction(engine: Engine, *, writer: WriterLock | None = None,
                      setup: tuple[str, ...] = (),
                      errors: Callable[[Exception], Exception] | None = None) -> Iterator[Any]:
    """Yield a DBAPI cursor inside a write transaction, committed if the body returns and
    rolled back if it raises. SQLite: `BEGIN IMMEDIATE` (the write lock now, after `writer`
    if given; the connection runs in the driver's autocommit mode, so nothing else begins
    for us); PostgreSQL: the driver's implicit transaction. `setup`: statements run first
    (e.g. `SET LOCAL lock_timeout`). A driver exception (`engine.dialect.dbapi.Error`, from
    the body or the COMMIT) is raised as `errors(exc)`, or unchanged without `errors`."""
    try:
        holding = writer.held() if writer is not None else contextlib.nullcontext()
        with holding:
            raw = engine.raw_connection()
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
            finally:
                raw.close()  # back to the pool (which rolls back anything left open)
    except engine.dialect.dbapi.Error as exc:
        if errors is None:
            raise
        raise errors(exc) from exc
