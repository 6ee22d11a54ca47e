"""The database handling the budget ledger and the gateway's audit log share, in one place.

Both keep append-only tables in SQLite (a file path) or PostgreSQL (a URL), often in the same
database (the audit log defaults into the ledger's), and `privlab.query.commit` writes a charge
and its audit row in one transaction of the ledger's connection. So they must open, lock and
protect a database the same way:

* `url`: a path or URL as a SQLAlchemy `URL` (one error line naming the setting), whether two
  stores are one database, SQLite's journal files beside a database;
* `engine`: `SqlStore`, the base of `BudgetLedger` and `AuditLog`: the engine and its
  connect-time settings (WAL, `synchronous`, busy timeout), `BEGIN IMMEDIATE` for writers, the
  writer lock (`privlab.core.store.writer_lock`), fork handling, transactions whose database errors
  become one line, the hot-path driver cursor (`privlab.core.store.dbapi`), and `close()` / the
  dropped-open warning (`privlab.utils.closing`);
* `schema`: append-only triggers (UPDATE / DELETE / TRUNCATE refused by the database), the
  advisory lock that serializes PostgreSQL's first-time creation, a meta table's value.
"""

from __future__ import annotations

from privlab.core.store.engine import SqlStore, StoreOptions
from privlab.core.store.schema import (
    append_only_function,
    append_only_triggers,
    create_append_only,
    has_table,
    meta_value,
    pg_advisory_lock,
)
from privlab.core.store.url import (
    SQLITE_SIDECARS,
    database_url,
    remove_sqlite_files,
    same_database,
)

__all__ = [
    "SQLITE_SIDECARS", "SqlStore", "StoreOptions", "append_only_function",
    "append_only_triggers", "create_append_only", "database_url", "has_table", "meta_value",
    "pg_advisory_lock", "remove_sqlite_files", "same_database",
]
