"""Schema pieces both stores create the same way: append-only triggers, a meta table's value,
the advisory lock that serializes PostgreSQL's first-time creation.

Append-only is enforced by the database, not by privlab's code paths: an UPDATE or DELETE (and
on PostgreSQL a TRUNCATE) of a protected table raises inside the database, whoever sends it.
The trigger statements are written in the form the catalog shows them, so a store can compare
what it finds against what it created (the audit log does: a trigger kept by name but
rewritten protects nothing).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

__all__ = ["append_only_function", "append_only_triggers", "create_append_only", "has_table",
           "meta_value", "pg_advisory_lock"]


def append_only_triggers(dialect: str, table: str, *, function: str,
                         message: str) -> dict[str, str]:
    """name -> CREATE TRIGGER statement of `table`'s append-only triggers. SQLite: one per
    operation, aborting with `message`; PostgreSQL: row and TRUNCATE triggers calling
    `function` (`append_only_function`)."""
    if dialect == "sqlite":
        return {f"{table}_no_{op.lower()}":
                f"CREATE TRIGGER {table}_no_{op.lower()} BEFORE {op} ON {table} BEGIN SELECT "
                f"RAISE(ABORT, '{message}'); END" for op in ("UPDATE", "DELETE")}
    return {
        f"{table}_append_only": f"CREATE TRIGGER {table}_append_only BEFORE DELETE OR "
        f"UPDATE ON {table} FOR EACH ROW EXECUTE FUNCTION {function}()",
        f"{table}_no_truncate": f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON "
        f"{table} FOR EACH STATEMENT EXECUTE FUNCTION {function}()"}


def append_only_function(function: str, body: str) -> str:
    """PostgreSQL: the trigger function every append-only trigger of a store calls."""
    return (f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger AS $${body}$$ "
            "LANGUAGE plpgsql")


def create_append_only(conn: Connection, tables: dict[str, str], *, function: str,
                       body: str) -> None:
    """Make each table of `tables` (name -> SQLite abort message) append-only; `body`: the
    PostgreSQL function's body (it raises)."""
    dialect = conn.dialect.name
    if dialect == "postgresql":
        conn.exec_driver_sql(append_only_function(function, body))
    for table, message in tables.items():
        for sql in append_only_triggers(dialect, table, function=function,
                                        message=message).values():
            conn.exec_driver_sql(sql)


def pg_advisory_lock(conn: Connection, lock_id: int) -> None:
    """PostgreSQL: hold advisory lock `lock_id` until the transaction ends (no-op on SQLite,
    whose writers hold the database's write lock already)."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text(f"SELECT pg_advisory_xact_lock({int(lock_id)})"))


def has_table(conn: Connection, name: str) -> bool:
    return bool(sa.inspect(conn).has_table(name))


def meta_value(conn: Connection, table: sa.Table, key_column: str, key: str) -> Any:
    """`table`'s value for `key` (None when the table or the key is missing)."""
    if not has_table(conn, table.name):
        return None
    return conn.execute(sa.select(table.c.value).where(table.c[key_column] == key)
                        ).scalar_one_or_none()
